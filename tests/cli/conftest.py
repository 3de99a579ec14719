"""Fixtures the command-line tests share."""

from __future__ import annotations

import pytest


@pytest.fixture()
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """A terminal wide enough for every sentence to print on one line, for tests that read whole sentences."""
    monkeypatch.setenv("COLUMNS", "400")
