"""Fixtures the policy and report tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from matplotlib.figure import Figure

from reports import _cost_plots
from reports._plots import plt


@pytest.fixture()
def figures(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Figure]]:
    """The figures the cost report's plots draw, kept open to be looked at (a plot is otherwise only its PNG)."""
    kept: list[Figure] = []

    def keep(fig: Figure) -> str:
        kept.append(fig)
        return ""

    monkeypatch.setattr(_cost_plots, "_png", keep)
    yield kept
    for fig in kept:
        plt.close(fig)
