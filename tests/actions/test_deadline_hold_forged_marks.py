"""A ``gpuaas.io/deadline-hold`` mark gpuaas did not record is never released: the release writes what the mark says.

A stand-in writer (Workloads by name, merge patches; no cluster) and a SQLite store holding the hold of ``wl``
(audit #1, applied as #2). Covers, for the sweep, a release the plan makes and ``gpuaas undo``: a mark that is
unreadable (``x``), names no audit id (a ``before`` a tenant wrote to raise its own priority), names an id that
is no deadline hold, names the hold of another object, a dry-run decision, a hold whose write was refused, or a
hold released already (a mark copied back), or carries another ``before`` than the one recorded: no patch, a
``skipped`` result saying the mark is not one gpuaas recorded, and one audit row per object and mark however many
runs find it. The legitimate paths still release: a hold applied, one whose run was killed after the patch (no
completion row), one whose answer was lost (``unknown``), an undo. The marks of a sweep are proven in one query.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event

from gpuaas.actions.deadline_holds import RELEASE_ACTION, apply_nudges, release_due, undo_holds
from gpuaas.models import Outcome
from gpuaas.policies.deadlines import HOLD_ANNOTATION, Nudge
from gpuaas.policy import Mode
from gpuaas.store import AuditEntry, Store
from tests.actions.test_deadline_release_audit import (
    MARK,
    NOW,
    Cluster,
    held,
    record_hold,
    store,  # noqa: F401 - the store holding gpuaas's hold
)

UNRECORDED = "its gpuaas.io/deadline-hold mark is not one gpuaas recorded"




def _append(store: Store, **fields: Any) -> AuditEntry:
    row: dict[str, Any] = {"flow": "deadlines", "action": "deadline-hold", "kind": "Workload", "namespace": "ns",
                           "name": "wl", "uid": "uid-wl", "mode": "apply", "outcome": "planned", "reason": "hold",
                           "before": {"active": None}} | fields
    return store.append(AuditEntry(**row))


def _dry_run(store: Store) -> dict[str, Any]:
    return {**MARK, "audit_id": _append(store, mode="dry-run").id}


def _refused(store: Store) -> dict[str, Any]:
    intent = _append(store)
    _append(store, outcome="skipped", reason="409 Conflict", refers_to=intent.id)
    return {**MARK, "audit_id": intent.id}


def _released(store: Store) -> dict[str, Any]:
    release = _append(store, action=RELEASE_ACTION, refers_to=MARK["audit_id"])
    _append(store, action=RELEASE_ACTION, outcome="released", refers_to=release.id)
    return MARK


def _reclaim_row(store: Store) -> dict[str, Any]:
    return {**MARK, "audit_id": _append(store, flow="reclaim", action="reclaim").id}


FORGED: dict[str, tuple[Callable[[Store], object], str]] = {
    "unreadable": (lambda s: "x", "unnamed"),
    "priority-raise": (lambda s: {"before": {"priority": 101}}, "unnamed"),
    "id-true": (lambda s: {**MARK, "audit_id": True}, "unnamed"),
    "unknown-id": (lambda s: {**MARK, "audit_id": 999}, "unrecorded"),
    "reclaim-row": (_reclaim_row, "unrecorded"),
    "other-object": (lambda s: {**record_hold(s, "other")}, "other-object"),
    "other-before": (lambda s: {**MARK, "before": {"priority": 101}}, "other-before"),
    "dry-run": (_dry_run, "dry-run"),
    "refused-write": (_refused, "not-written"),
    "copied-back": (_released, "released"),
}


def _forged(store: Store, case: str, **spec: Any) -> Cluster:
    make, _ = FORGED[case]
    mark = make(store)
    obj = held(**spec)
    obj["metadata"]["annotations"][HOLD_ANNOTATION] = mark if isinstance(mark, str) else json.dumps(mark)
    return Cluster(obj)


def _skip_rows(store: Store) -> list[AuditEntry]:
    return [r for r in store.audit(flow="deadlines", limit=None) if r.reason.startswith(UNRECORDED)]


@pytest.mark.parametrize("case", list(FORGED))
def test_the_sweep_never_writes_a_mark_gpuaas_did_not_record(store: Store, case: str) -> None:
    cluster = _forged(store, case, priority=100)  # deactivated by someone else (held() is spec.active: false)
    [result] = release_due([copy.deepcopy(cluster.objs["wl"])], store, cluster, NOW,  # type: ignore[arg-type]
                           flow_run_id=None)
    assert result.result == Outcome.skipped and result.reason.startswith(UNRECORDED)
    assert result.reason.endswith("not released, nothing written")
    assert cluster.patches == [] and cluster.events == []
    assert cluster.objs["wl"]["spec"] == {"active": False, "priority": 100}
    [row] = _skip_rows(store)
    assert (row.id, row.action, row.outcome, row.uid, row.evidence["cause"]) == (
        result.audit_id, RELEASE_ACTION, "skipped", "uid-wl", FORGED[case][1])


@pytest.mark.parametrize("case", ["unreadable", "priority-raise", "other-before", "copied-back"])
def test_a_release_the_plan_makes_or_an_undo_never_writes_one_either(store: Store, case: str) -> None:
    cluster = _forged(store, case, priority=100)
    [planned] = apply_nudges([Nudge("release", "ns", "wl", "in no deadline plan any more")], store,
                             cluster, mode=Mode.dry_run, flow_run_id=None)  # type: ignore[arg-type]
    [undone] = undo_holds(store, cluster, [MARK["audit_id"]])  # type: ignore[arg-type]
    assert planned.result == Outcome.skipped and planned.reason.startswith(UNRECORDED)
    assert undone.result in (Outcome.skipped, Outcome.no_op) and cluster.patches == []


def test_a_forged_mark_is_recorded_once_however_many_runs_find_it(store: Store) -> None:
    cluster = _forged(store, "priority-raise", priority=100)
    listed = [copy.deepcopy(cluster.objs["wl"])]
    first, *again = [release_due(listed, store, cluster, NOW + timedelta(minutes=15 * i),  # type: ignore[arg-type]
                                 flow_run_id=f"run-{i}")[0] for i in range(4)]
    assert {r.audit_id for r in again} == {first.audit_id} and len(_skip_rows(store)) == 1
    cluster.objs["wl"]["metadata"]["annotations"][HOLD_ANNOTATION] = json.dumps({"before": {"priority": 500}})
    [other] = release_due([copy.deepcopy(cluster.objs["wl"])], store, cluster, NOW,  # type: ignore[arg-type]
                          flow_run_id=None)
    assert other.audit_id != first.audit_id and len(_skip_rows(store)) == 2  # another mark: on record at once
    assert cluster.patches == []


def _killed_after_the_patch(store: Store) -> dict[str, Any]:
    return {**MARK, "audit_id": _append(store, uid="uid-wl").id}  # the intent alone: no completion row


def _answer_lost(store: Store) -> dict[str, Any]:
    intent = _append(store)
    _append(store, outcome="unknown", refers_to=intent.id)
    return {**MARK, "audit_id": intent.id}


@pytest.mark.parametrize("make", [lambda s: MARK, _killed_after_the_patch, _answer_lost],
                         ids=["applied", "killed-after-the-patch", "answer-lost"])
def test_a_hold_gpuaas_made_is_released_at_its_time(store: Store, make: Callable[[Store], dict[str, Any]]) -> None:
    cluster = Cluster(held(mark=make(store)))
    [result] = release_due([copy.deepcopy(cluster.objs["wl"])], store, cluster, NOW,  # type: ignore[arg-type]
                           flow_run_id=None)
    assert result.result == Outcome.released and cluster.objs["wl"]["spec"]["active"] is True
    assert not cluster.held() and _skip_rows(store) == []


def test_the_marks_of_a_sweep_are_proven_in_one_query(store: Store) -> None:
    names = [f"wl-{i}" for i in range(30)]
    cluster = Cluster(*(held(n, record_hold(store, n)) for n in names))
    statements: list[str] = []
    event.listen(store.engine, "before_cursor_execute",
                 lambda conn, cursor, sql, *args: statements.append(sql))
    results = release_due([copy.deepcopy(o) for o in cluster.objs.values()], store, cluster,  # type: ignore[arg-type]
                          datetime.now(UTC), flow_run_id=None)
    assert [r.result for r in results] == [Outcome.released] * len(names)
    assert sum("audit_log.refers_to IN" in sql for sql in statements) == 1
