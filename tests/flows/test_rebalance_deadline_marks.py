"""A hand-written ``gpuaas.io/deadline-hold`` mark does not raise a team's quota demand in the nightly rebalance.

The deadline fleet (``tests/flows/deadline_scenario.py``): cohort ``rush`` runs two 2-GPU jobs and has two more
pending that must start within 20 minutes to meet their deadlines, so its deadlines need 8 GPUs where its quota
is 4. Deactivated by the team (``spec.active: false``), those two are no queued work: its deadlines then need
what runs. A team that also writes a hold mark of its own on them ("held by gpuaas") must not make the rebalance
count them again: only a mark the audit log proves gpuaas wrote is a hold, as in the deadlines flow, read in one
query before the plan.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.policies.deadlines import HOLD_ANNOTATION
from tests.flows.deadline_scenario import deadline_cluster
from tests.scenarios import point_at

pytestmark = [pytest.mark.integration, pytest.mark.flow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with deadline_cluster(tmp_path_factory.mktemp("rebalance-marks")) as running:
        yield running


@pytest.fixture()
def pointed_at(cluster: EmbeddedCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> EmbeddedCluster:
    return point_at(cluster, monkeypatch, data_dir=tmp_path / "data")


def _rush_reason(at: Any) -> str:
    from flows.rebalance import rebalance

    state = rebalance(at=at, return_state=True)
    assert state.is_completed(), state.message
    [rush] = [c for c in state.result()["cohorts"] if c["cohort"] == "rush"]
    [change] = rush["changes"]
    return str(change["reason"])


def _pending_rush(cluster: EmbeddedCluster) -> list[str]:
    return [o["metadata"]["name"] for o in cluster.store.list("Workload") if o["metadata"]["namespace"] == "rush"
            and not any(c.get("status") == "True" for c in (o.get("status") or {}).get("conditions") or [])]


def test_a_forged_hold_mark_on_a_deactivated_workload_adds_no_deadline_demand(pointed_at: EmbeddedCluster,
                                                                             prefect_harness: None) -> None:
    now = pointed_at.clock.now()
    assert "deadlines need 8" in _rush_reason(now)  # both pending jobs count: 4 running + 4 more to start now

    pending = _pending_rush(pointed_at)
    assert len(pending) == 2
    for name in pending:
        pointed_at.store.patch("Workload", "rush", name, {"spec": {"active": False}})
    deactivated = _rush_reason(now)
    assert "deadlines need 8" not in deactivated

    forged = json.dumps({"audit_id": 1, "release_at": (now + timedelta(days=30)).isoformat(),
                         "before": {"active": True}})
    for name in pending:
        pointed_at.store.patch("Workload", "rush", name, {"metadata": {"annotations": {HOLD_ANNOTATION: forged}}})
    proofs: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "audit_log.refers_to IN" in statement:
            proofs.append(statement)

    event.listen(Engine, "before_cursor_execute", record)
    try:
        marked = _rush_reason(now)
    finally:
        event.remove(Engine, "before_cursor_execute", record)
    assert marked == deactivated  # the forged marks change nothing in the plan
    assert len(proofs) == 1  # the marks proven (here: disproven) in one query
