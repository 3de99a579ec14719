"""The deadline plan's artifact as the Prefect UI shows it, without a cluster or a Prefect API.

The UI renders each table cell as markdown: a bare "-" becomes a list bullet (a dot in the "at risk"
and "missed" columns of a plan where every deadline holds). And an empty plan is a sentence, not a
one-row table of placeholders (docs/prefect.md: "An empty decision list or quota plan is a sentence").
"""

from __future__ import annotations

from typing import Any

import pytest

import tasks.deadlines as module
from reports.deadlines import kueue_alone_sentence

POOL = {"cohort": "research", "flavor": "h100", "capacity_gpus": 48, "extra_gpus": {}, "at_risk": [], "missed": [],
        "exact": False, "schedule": [], "unscheduled": []}


def _published(pools: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(module, "pool_dicts", lambda _: pools)
    monkeypatch.setattr(module, "table_artifact", lambda **kw: calls.append(("table", kw)))
    monkeypatch.setattr(module, "markdown_artifact", lambda **kw: calls.append(("markdown", kw)), raising=False)
    module.publish_deadline_artifacts.fn([])
    return calls


def test_no_cell_of_the_deadline_plan_is_a_bare_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    [(kind, published)] = _published([POOL], monkeypatch)
    assert kind == "table" and published["key"] == "gpuaas-deadline-plan"
    cells = [v for row in published["table"] for v in row.values() if isinstance(v, str)]
    assert cells and not [c for c in cells if c.strip() in {"-", "*", "+"}], published["table"]


def test_each_pool_says_how_many_deadlines_kueue_alone_would_meet(monkeypatch: pytest.MonkeyPatch) -> None:
    schedule = [{"deadline": 600.0}, {"deadline": 900.0}, {"deadline": None}]
    played = POOL | {"plan_on_time": 2, "kueue_order_on_time": 1, "schedule": schedule}
    unknown = POOL | {"plan_on_time": 2, "kueue_order_on_time": None, "schedule": schedule}
    none = POOL | {"plan_on_time": 0, "kueue_order_on_time": 0, "schedule": [{"deadline": None}]}
    [(_, published)] = _published([played, unknown, none], monkeypatch)
    assert [row["deadlines Kueue alone meets"] for row in published["table"]] == [
        "1 of 2", "not played (a pending Workload's place in the queue is unknown)", "no deadline in the pool"]
    # The line under each pool's table in `gpuaas plan deadlines --from-cluster`.
    assert [kueue_alone_sentence(p) for p in (played, unknown, none)] == [
        "Kueue's own order, on the same GPUs and estimates, would meet 1 of 2 deadlines.",
        "Kueue's own order could not be played: a pending Workload's place in the queue is unknown.", None]


def test_an_empty_deadline_plan_is_a_sentence_not_a_table_of_placeholders(monkeypatch: pytest.MonkeyPatch) -> None:
    [(kind, published)] = _published([], monkeypatch)
    assert kind == "markdown" and published["key"] == "gpuaas-deadline-plan", published
    assert published["description"] and published["markdown"].strip()
