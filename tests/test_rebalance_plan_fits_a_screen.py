"""The rebalance plan fits a 1600-pixel screen in the Prefect UI: short table cells, the reasons as a list.

The UI never wraps a table cell (seen in headless Chromium at 1600 px: one reason in a cell made the
plan table 2085 px wide in a 1044 px box), while a markdown list item wraps. So no table cell of
the plan or of the summary's per-cohort table holds a sentence, and each queue's whole reason is a
bullet under its cohort's table.
"""

from __future__ import annotations

import re

from gpuaas.operations.rebalance import CohortOutcome
from gpuaas.policies.quotas import CohortDemand, QueueDemand, QuotaLimits, plan_quotas

CELL_MAX = 24
"""Characters of the longest cell that keeps a seven-column table inside the artifact's ~1040 px box."""


def _outcomes() -> list[CohortOutcome]:
    limits = QuotaLimits(8, 100, 32, 1)
    queues = [QueueDemand("team-a-cq", {"h100": 12}, {"h100": 2}), QueueDemand("team-b-cq", {"h100": 4}, {"h100": 12}),
              QueueDemand("team-c-cq", {"h100": 8}, {"h100": 0})]
    return [CohortOutcome("c", CohortDemand("c", queues, limits, 86400.0, False), plan_quotas(queues, limits))]


def test_the_plan_table_holds_short_cells_only() -> None:
    from reports.rebalance import change_rows, plan_rows

    outcomes = _outcomes()
    rows = plan_rows(outcomes)
    assert [r["queue"] for r in rows] == ["team-a-cq", "team-b-cq", "team-c-cq"]
    assert {r["queue"]: r["quota"] for r in rows}["team-b-cq"] == "4 -> 8"
    long = [str(v) for r in rows for v in r.values() if len(str(v)) > CELL_MAX]
    assert not long, long
    assert len(change_rows(outcomes)[0]["reason"]) > CELL_MAX  # the reasons are still sentences, elsewhere


def test_the_summary_lists_each_reason_under_a_table_of_short_cells() -> None:
    from reports.rebalance import change_rows, rebalance_markdown

    outcomes = _outcomes()
    markdown = rebalance_markdown(outcomes, "dry-run", {}, None)
    lines = markdown.splitlines()
    table = [line for line in lines if line.startswith("|")]
    assert len(table) == 2 + 3, table
    cells = [c.strip() for line in table for c in line.strip("|").split("|")]
    long = [c for c in cells if len(c) > CELL_MAX]
    assert not long, long
    below = lines[lines.index(table[-1]) + 1:]
    for reason in (r["reason"] for r in change_rows(outcomes)):
        head, why = reason.split(": ", 1)
        assert f"- **{head}**: {why}" in below, reason
    assert not any(re.fullmatch(r"\|.*\|", line) for line in below)
