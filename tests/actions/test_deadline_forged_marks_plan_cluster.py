"""A forged ``gpuaas.io/deadline-hold`` mark does not take a Workload out of the deadline plan: the flow, end to end.

The deadline fleet (``tests/flows/deadline_scenario.py``), a cluster of its own: in cohort fc the plan holds
``fc-wide`` (Kueue would admit it first and miss two deadlines) until 80 min from now, and the two late ones
until 20 min from now. Before any run, the team writes a mark of its own on ``fc-wide``: "held" until next
month, its prior state ``spec.active: false``. The ``deadlines`` flow in apply mode (official client, real
Prometheus, Prefect harness) holds ``fc-wide`` all the same, over that mark: the new mark names the hold's audit
row and the live prior state (``active: true``), the reason says the old mark was not gpuaas's, and the audit
row keeps it. The next run counts that hold as held (no second hold, no release), and the hold's release puts
back ``active: true``, not the forged ``false``. Each run reads the rows that prove the marks in one query.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import event
from sqlalchemy.engine import Engine

from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.policies.deadlines import HOLD_ANNOTATION, UNRECORDED
from gpuaas.settings import load_settings
from gpuaas.store import open_store
from tasks.deadlines import release_due_holds
from tests.flows.deadline_scenario import deadline_cluster
from tests.scenarios import point_at

pytestmark = [pytest.mark.integration, pytest.mark.flow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with deadline_cluster(tmp_path_factory.mktemp("forged-mark-plan")) as running:
        yield running


@pytest.fixture()
def pointed_at(cluster: EmbeddedCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> EmbeddedCluster:
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({"deadlines": {"max_holds_per_run": 5, "release_margin_minutes": 30,
                                                 "runtime_estimate_error": 1}}))
    return point_at(cluster, monkeypatch, data_dir=tmp_path / "data", policy_file=policy)


@pytest.fixture()
def proofs() -> Iterator[list[str]]:
    """The statements, on any engine of this process, that read the rows proving hold marks (``HoldRecords``)."""
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "audit_log.refers_to IN" in statement:
            seen.append(statement)

    event.listen(Engine, "before_cursor_execute", record)
    yield seen
    event.remove(Engine, "before_cursor_execute", record)


def _run(**params: Any) -> dict[str, Any]:
    from flows.deadlines import deadlines

    state = deadlines(**params, return_state=True)
    assert state.is_completed(), state.message
    return state.result()  # type: ignore[no-any-return]


def _wide(cluster: EmbeddedCluster) -> dict[str, Any]:
    [wide] = [o for o in cluster.store.list("Workload")
              if o["metadata"]["namespace"] == "forecast" and "-fc-wide-" in o["metadata"]["name"]]
    return wide


def _mark(obj: dict[str, Any]) -> dict[str, Any]:
    return json.loads(obj["metadata"]["annotations"][HOLD_ANNOTATION])  # type: ignore[no-any-return]


def test_a_forged_mark_is_held_over_with_the_true_prior_state_and_a_real_hold_is_not_held_twice(
        pointed_at: EmbeddedCluster, prefect_harness: None, proofs: list[str]) -> None:
    now = pointed_at.clock.now()
    name = _wide(pointed_at)["metadata"]["name"]
    forged = json.dumps({"audit_id": 1, "release_at": (now + timedelta(days=30)).isoformat(),
                         "before": {"active": False}})
    pointed_at.store.patch("Workload", "forecast", name, {"metadata": {"annotations": {HOLD_ANNOTATION: forged}}})

    first = _run(apply=True, at=now)
    [hold] = [n for n in first["nudges"] if n["workload"] == f"forecast/{name}"]
    assert (hold["action"], hold["result"]) == ("hold", "applied"), hold
    assert len(proofs) == 1  # the run's marks proven in one query, before the plan
    assert hold["reason"].endswith(f"; {UNRECORDED}")
    [fc] = [p for p in first["pools"] if p["cohort"] == "fc"]
    assert f"forecast/{name}: {UNRECORDED}" in fc["notes"]
    wide = _wide(pointed_at)
    mark = _mark(wide)
    assert wide["spec"]["active"] is False
    assert mark["audit_id"] == hold["audit_id"] and mark["before"] == {"active": True}  # the live state, not the mark's
    store = open_store(load_settings())
    try:
        intent = store.get_audit(hold["audit_id"])
        assert intent is not None and intent.action == "deadline-hold" and intent.before == {"active": True}
        assert intent.evidence["unrecorded_mark"] == forged  # what was written over, on record
    finally:
        store.close()

    proofs.clear()
    again = _run(apply=True, at=now)
    assert len(proofs) == 1
    assert [n for n in again["nudges"] if n["workload"] == f"forecast/{name}"] == []  # held: no second hold
    assert not [n for n in again["nudges"] if n["action"] in ("hold", "release")]
    assert _mark(_wide(pointed_at)) == mark

    released = release_due_holds.fn(load_settings(), datetime.fromisoformat(mark["release_at"])).nudges
    assert {r.nudge.name: r.result for r in released}[name] == "released"
    wide = _wide(pointed_at)
    assert wide["spec"]["active"] is True and HOLD_ANNOTATION not in (wide["metadata"].get("annotations") or {})
