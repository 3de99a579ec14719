"""A hold Kueue's preemption would undo, end to end on the embedded cluster (its ClusterQueues preempt
``withinClusterQueue: LowerPriority``, as the scenario writes them). Scenario: ``tests/flows/deadline_scenario.py``.

The nudges flow holds cohort fc's wide Workload until its planned start, when the two running ones end. Once the
held Workload's priority is raised above theirs, releasing it would preempt them at once: the plan, which has them
run to their end, proves nothing any more, and the next run releases the hold, naming a pair.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.policies.deadlines import HOLD_ANNOTATION
from tests.scenarios import point_at

pytestmark = [pytest.mark.integration, pytest.mark.flow]


@pytest.fixture()
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EmbeddedCluster]:
    from tests.flows.deadline_scenario import deadline_cluster

    with deadline_cluster(tmp_path / "cluster") as running:  # its own: a release here lets Kueue preempt
        policy = tmp_path / "policy.yaml"
        policy.write_text(yaml.safe_dump({"deadlines": {"mode": "apply", "max_holds_per_run": 1,
                                                        "release_margin_minutes": 30, "runtime_estimate_error": 1}}))
        yield point_at(running, monkeypatch, data_dir=tmp_path / "data", policy_file=policy)


def _run(cluster: EmbeddedCluster) -> dict[str, Any]:
    from flows.deadlines import deadlines

    state = deadlines(at=cluster.clock.now(), return_state=True)
    assert state.is_completed(), state.message
    return state.result()  # type: ignore[no-any-return]


def test_a_held_workload_that_would_preempt_what_the_plan_counts_on_is_released(
        cluster: EmbeddedCluster, prefect_harness: None) -> None:
    _run(cluster)
    [held] = [o for o in cluster.store.list("Workload") if HOLD_ANNOTATION in (o["metadata"].get("annotations") or {})]
    name = held["metadata"]["name"]
    assert "-fc-wide-" in name and held["spec"]["active"] is False
    running = sorted(f"forecast/{o['metadata']['name']}" for o in cluster.store.list("Workload")
                     if o["metadata"]["namespace"] == "forecast" and o.get("status", {}).get("admission"))
    assert len(running) == 2
    cluster.store.patch("Workload", "forecast", name, {"spec": {"priority": 100}})  # raised by its team
    result = _run(cluster)
    [release] = [n for n in result["nudges"] if n["action"] == "release"]
    assert release["workload"] == f"forecast/{name}" and release["result"] == "released"
    assert f"a pending Workload evict one the plan runs (forecast/{name} may preempt " in release["reason"]
    assert any(f"may preempt {r})" in release["reason"] for r in running)  # a running one, named
    assert [n for n in result["nudges"] if n["action"] == "hold"] == []
    obj = cluster.store.get("Workload", "forecast", name)
    assert obj["spec"]["active"] is True and HOLD_ANNOTATION not in (obj["metadata"].get("annotations") or {})
