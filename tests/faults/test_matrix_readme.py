"""The fault list in ``tests/faults/README.md`` is the one the tests inject (``tests.faults.matrix``)."""

from __future__ import annotations

from pathlib import Path

from tests.faults.matrix import table


def test_the_readme_lists_every_fault_the_tests_inject() -> None:
    readme = (Path(__file__).parent / "README.md").read_text()
    assert table() in readme, "tests/faults/README.md is stale: paste `python -m tests.faults.matrix` into it"
