"""The hold's guards against a live Workload, with a stand-in writer (no cluster) and a SQLite store.

Covers: a Workload that is Admitted, QuotaReserved or Finished by the time the hold is written is
refused (the plan is decided again next run) and nothing is patched; one already held or
deactivated by someone else is left alone; one that is not the object the snapshot read (recreated
under the same name, or edited since: another uid or resourceVersion) is refused as ``changed``, and
a nudge that names no snapshot version is refused too; a 409 on the patch is never overwritten and
audited as skipped; a hold applied carries the audit id and release time in its annotation. A
demotion: the same guards, the prior ``spec.priority`` recorded, one lower written, and put back by
its release.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuaas.actions.deadline_holds import apply_nudges, undo_hold, undo_holds
from gpuaas.actions.undo import UNDOERS
from gpuaas.errors import Conflict
from gpuaas.models import Outcome
from gpuaas.policies.deadlines import HOLD_ANNOTATION, Nudge
from gpuaas.policy import Mode
from gpuaas.store import Store

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
HOLD = Nudge("hold", "ns", "wl", "planned start in 60 min", release_at=NOW + timedelta(minutes=30), uid="u1",
             resource_version="7")
DEMOTE = Nudge("demote", "ns", "wl", "deadline lost", release_at=NOW + timedelta(minutes=60), uid="u1",
               resource_version="7")


class FakeWriter:
    """GET returns the object given; PATCH records the body, or raises ``Conflict`` when told to."""

    def __init__(self, obj: dict[str, Any], *, conflict: bool = False) -> None:
        self.obj = obj
        self.conflict = conflict
        self.patches: list[dict[str, Any]] = []
        self.events: list[tuple[str, str]] = []

    def get(self, kind: str, namespace: str, name: str, *, version: str | None = None) -> dict[str, Any]:
        return self.obj

    def patch(self, kind: str, namespace: str, name: str, body: dict[str, Any], *,
              version: str | None = None) -> dict[str, Any]:
        if self.conflict:
            raise Conflict("the object has been modified", status=409, reason="Conflict", kind=kind,
                           namespace=namespace, name=name)
        self.patches.append(body)
        return {"metadata": {"resourceVersion": "8"}}

    def record_event(self, obj: dict[str, Any], reason: Any, note: str) -> bool:
        self.events.append((str(reason), note))
        return True


def workload(conditions: dict[str, str] | None = None, *, active: bool | None = None,
             annotations: dict[str, str] | None = None, priority: int | None = None, uid: str = "u1",
             version: str = "7") -> dict[str, Any]:
    spec: dict[str, Any] = {} if active is None else {"active": active}
    if priority is not None:
        spec["priority"] = priority
    return {"metadata": {"namespace": "ns", "name": "wl", "uid": uid, "resourceVersion": version,
                         "annotations": annotations or {}},
            "spec": spec, "status": {"conditions": [{"type": t, "status": s} for t, s in (conditions or {}).items()]}}


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(f"sqlite:///{tmp_path}/gpuaas.db")
    yield opened
    opened.close()


@pytest.mark.parametrize(("obj", "words"), [
    (workload({"Admitted": "True", "QuotaReserved": "True"}), "no longer pending (Admitted)"),
    (workload({"QuotaReserved": "True"}), "no longer pending (QuotaReserved)"),
    (workload({"Finished": "True"}), "no longer pending (Finished)"),
    (workload(active=False), "deactivated by someone else"),
    (workload(annotations={HOLD_ANNOTATION: json.dumps({"audit_id": 3})}), "already held by gpuaas"),
], ids=["admitted", "quota-reserved", "finished", "deactivated", "already-held"])
@pytest.mark.parametrize("nudge", [HOLD, DEMOTE], ids=["hold", "demote"])
def test_a_workload_that_is_no_longer_a_free_pending_one_is_not_held(
        obj: dict[str, Any], words: str, nudge: Nudge, store: Store) -> None:
    writer = FakeWriter(obj)
    [result] = apply_nudges([nudge], store, writer, mode=Mode.apply, flow_run_id=None)  # type: ignore[arg-type]
    assert result.result == "skipped" and words in result.reason
    assert writer.patches == []


@pytest.mark.parametrize(("obj", "words"), [
    (workload({"QuotaReserved": "False"}, version="9"),
     "changed since the snapshot (resourceVersion 7 -> 9): decided again next run"),
    (workload({"QuotaReserved": "False"}, uid="u2"),
     "a different object now has this name (uid u1 in the snapshot, u2 now): deleted and recreated, never touched"),
], ids=["edited-since", "recreated"])
@pytest.mark.parametrize("nudge", [HOLD, DEMOTE], ids=["hold", "demote"])
@pytest.mark.parametrize("mode", [Mode.apply, Mode.dry_run], ids=["apply", "dry-run"])
def test_a_workload_that_is_not_the_one_the_plan_was_made_on_is_not_nudged(
        obj: dict[str, Any], words: str, nudge: Nudge, mode: Mode, store: Store) -> None:
    writer = FakeWriter(obj)
    [result] = apply_nudges([nudge], store, writer, mode=mode, flow_run_id=None)  # type: ignore[arg-type]
    assert result.result == Outcome.changed and result.reason == words
    assert writer.patches == [] and writer.events == []
    [row] = store.audit(limit=None)  # the refusal alone: no intent, nothing to undo
    assert (row.id, row.action, row.outcome, row.reason, row.uid) == (
        result.audit_id, f"deadline-{nudge.action}", "changed", words, "u1")


@pytest.mark.parametrize("nudge", [replace(HOLD, uid=None), replace(DEMOTE, resource_version=None)],
                         ids=["hold-without-uid", "demote-without-version"])
def test_a_nudge_that_names_no_snapshot_version_writes_nothing(nudge: Nudge, store: Store) -> None:
    writer = FakeWriter(workload({"QuotaReserved": "False"}))
    [result] = apply_nudges([nudge], store, writer, mode=Mode.apply, flow_run_id=None)  # type: ignore[arg-type]
    assert result.result == Outcome.skipped and "no uid and resourceVersion" in result.reason
    assert writer.patches == [] and [r.outcome for r in store.audit(limit=None)] == ["skipped"]


def test_a_409_on_the_hold_is_never_overwritten(store: Store) -> None:
    writer = FakeWriter(workload({"QuotaReserved": "False"}), conflict=True)
    [result] = apply_nudges([HOLD], store, writer, mode=Mode.apply, flow_run_id=None)  # type: ignore[arg-type]
    assert result.result == "skipped" and "409 Conflict" in result.reason and "decided again next run" in result.reason
    assert writer.patches == []


def test_a_hold_applied_names_its_audit_row_and_release_time(store: Store) -> None:
    writer = FakeWriter(workload({"QuotaReserved": "False"}))
    [result] = apply_nudges([HOLD], store, writer, mode=Mode.apply, flow_run_id=None)  # type: ignore[arg-type]
    assert result.result == "applied"
    [patch] = writer.patches
    assert patch["spec"] == {"active": False} and patch["metadata"]["resourceVersion"] == "7"
    mark = json.loads(patch["metadata"]["annotations"][HOLD_ANNOTATION])
    assert mark == {"audit_id": result.audit_id, "release_at": (NOW + timedelta(minutes=30)).isoformat(),
                    "before": {"active": None}}
    [(reason, note)] = writer.events  # what the Workload's team reads in kubectl describe
    assert reason == "HeldForDeadline" and note.startswith(f"Held by gpuaas until {mark['release_at']}: ")
    assert note.endswith(f"Audit #{result.audit_id}; to release it now: gpuaas undo {result.audit_id}")


def test_a_demotion_records_the_priority_writes_one_lower_and_its_release_puts_it_back(store: Store) -> None:
    writer = FakeWriter(workload({"QuotaReserved": "False"}, priority=100))
    [dry] = apply_nudges([DEMOTE], store, writer, mode=Mode.dry_run, flow_run_id=None)  # type: ignore[arg-type]
    assert dry.result == "planned" and writer.patches == []
    [result] = apply_nudges([DEMOTE], store, writer, mode=Mode.apply, flow_run_id=None)  # type: ignore[arg-type]
    assert result.result == "applied"
    [patch] = writer.patches
    assert patch["spec"] == {"priority": 99} and patch["metadata"]["resourceVersion"] == "7"
    mark = json.loads(patch["metadata"]["annotations"][HOLD_ANNOTATION])
    assert mark == {"audit_id": result.audit_id, "release_at": (NOW + timedelta(minutes=60)).isoformat(),
                    "before": {"priority": 100}}
    [intent] = [r for r in store.audit(limit=None) if r.id == result.audit_id]
    assert intent.action == "deadline-demote" and intent.before == {"priority": 100}
    assert [(r, n.split(":")[0]) for r, n in writer.events] == [("DemotedForDeadline", "Demoted one priority by gpuaas")]
    writer.obj = workload({"Admitted": "True"}, priority=99, annotations={HOLD_ANNOTATION: json.dumps(mark)})
    [released] = apply_nudges([Nudge("release", "ns", "wl", "admitted")], store, writer, mode=Mode.dry_run,
                              flow_run_id=None)  # type: ignore[arg-type]
    assert released.result == "released"  # an undo of gpuaas's own change: in dry-run too, admitted or not
    assert writer.patches[-1]["spec"] == {"priority": 100}
    assert writer.patches[-1]["metadata"]["annotations"] == {HOLD_ANNOTATION: None}


def test_a_workload_at_the_lowest_priority_is_not_demoted(store: Store) -> None:
    writer = FakeWriter(workload({"QuotaReserved": "False"}, priority=-(2**31)))
    [result] = apply_nudges([DEMOTE], store, writer, mode=Mode.apply, flow_run_id=None)  # type: ignore[arg-type]
    assert result.result == "skipped" and "lowest priority" in result.reason and writer.patches == []


def test_undo_of_a_demotion_puts_the_priority_back_once(store: Store) -> None:
    writer = FakeWriter(workload({"QuotaReserved": "False"}, priority=5))
    [result] = apply_nudges([DEMOTE], store, writer, mode=Mode.apply, flow_run_id=None)  # type: ignore[arg-type]
    mark = json.loads(writer.patches[-1]["metadata"]["annotations"][HOLD_ANNOTATION])
    writer.obj = workload(priority=4, annotations={HOLD_ANNOTATION: json.dumps(mark)})
    assert UNDOERS["deadline-demote"] is undo_hold
    [undone] = undo_holds(store, writer, [result.audit_id])  # type: ignore[arg-type]
    assert undone.result == "released" and writer.patches[-1]["spec"] == {"priority": 5}
    writer.obj = workload(priority=5)
    [again] = undo_holds(store, writer, [result.audit_id])  # type: ignore[arg-type]
    assert again.result == "no-op" and len(writer.patches) == 2


def test_a_priority_changed_by_someone_else_is_kept_by_the_release(store: Store) -> None:
    writer = FakeWriter(workload({"QuotaReserved": "False"}, priority=100))
    apply_nudges([DEMOTE], store, writer, mode=Mode.apply, flow_run_id=None)  # type: ignore[arg-type]
    mark = json.loads(writer.patches.pop()["metadata"]["annotations"][HOLD_ANNOTATION])
    writer.obj = workload(priority=1000, annotations={HOLD_ANNOTATION: json.dumps(mark)})  # raised by hand since
    [released] = apply_nudges([Nudge("release", "ns", "wl", "due")], store, writer, mode=Mode.apply,
                              flow_run_id=None)  # type: ignore[arg-type]
    assert released.result == "released"
    assert writer.patches == [{"metadata": {"resourceVersion": "7", "annotations": {HOLD_ANNOTATION: None}}}]
