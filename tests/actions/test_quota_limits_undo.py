"""A quota plan's undo and rollback put back each moved GPU resource's whole entry, limits included.

A plan's patch moves ``nominalQuota`` and, by the rule of ``manage_limits``, ``lendingLimit`` and
``borrowingLimit`` (lowered to the quota when off; moved with and against it, clamped, when on). The
clamps make that move irreversible by arithmetic, so the intent records each moved entry as read
before the first write (and the queue's ``gpuaas.io/quota-plan`` annotation), and every restore
writes exactly that. Covers, with ``manage_limits`` off and on: ``gpuaas undo``, the rollback after
an apply that stopped, the next run's rollback of a crashed apply; an undo refused because a limit
changed since (nothing overwritten); an apply stopped because a limit changed between gpuaas's read
and its patch; an intent written before the entries were recorded still undoes as it always did.

Entries as set for these tests (team-c gives 4 GPUs to team-b, ``DEMAND``):

=====  =========================  ===========================  ==========================
limits team-c before               team-c after the plan        team-b before -> after
=====  =========================  ===========================  ==========================
off    8, lendingLimit 8          4, lendingLimit 4 (lowered)  4/borrowing 2 -> 8/2
on     8, lending 2, borrowing 1  4, lending 0, borrowing 5    4/borrowing 2 -> 8/0
=====  =========================  ===========================  ==========================
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from gpuaas.actions import KubeWriter, undo_entries
from gpuaas.actions._events import EventReason
from gpuaas.actions._quota_patches import QUOTA_ANNOTATION
from gpuaas.actions.quotas import recover_quota_plans
from gpuaas.settings import GpuaasSettings
from gpuaas.store import AuditEntry, Store
from tests.actions.rebalance_scenario import QUEUES
from tests.actions.test_quota_actions import (  # noqa: F401  (cluster and settings are fixtures)
    DEMAND,
    GPU,
    KIND,
    Crash,
    apply,
    cluster,
    settings,
    the_plan,
)
from tests.cluster.test_crd_schemas import crd_errors, crd_validators  # noqa: F401  (the fixture)

C, B = "team-c-cq", "team-b-cq"
EARLIER_MARK = json.dumps({"before": {"h100": 9}, "plan_id": 1}, sort_keys=True)
"""team-c's annotation before each test: the mark of an earlier plan, which an undo must put back."""
BEFORE = {
    False: {C: {"nominalQuota": 8, "lendingLimit": 8}, B: {"nominalQuota": 4, "borrowingLimit": 2}},
    True: {C: {"nominalQuota": 8, "lendingLimit": 2, "borrowingLimit": 1}, B: {"nominalQuota": 4, "borrowingLimit": 2}},
}
APPLIED = {
    False: {C: {"nominalQuota": 4, "lendingLimit": 4}, B: {"nominalQuota": 8, "borrowingLimit": 2}},
    True: {C: {"nominalQuota": 4, "lendingLimit": 0, "borrowingLimit": 5}, B: {"nominalQuota": 8, "borrowingLimit": 0}},
}
LIMITS = pytest.mark.parametrize("manage", [False, True], ids=["limits-off", "limits-on"])


def entry(w: KubeWriter, queue: str) -> dict[str, Any]:
    """The queue's one GPU entry without its name."""
    res = w.get_cluster_scoped(KIND, queue)["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    return {k: v for k, v in res.items() if k != "name"}


def entries(w: KubeWriter) -> dict[str, dict[str, Any]]:
    return {q: entry(w, q) for q in (C, B)}


def set_entry(w: KubeWriter, queue: str, fields: dict[str, Any]) -> None:
    """Someone else (an operator) sets the queue's GPU entry to exactly ``fields``."""
    obj = w.get_cluster_scoped(KIND, queue)
    groups = obj["spec"]["resourceGroups"]
    res = groups[0]["flavors"][0]["resources"][0]
    groups[0]["flavors"][0]["resources"][0] = {"name": res["name"], **fields}
    w.patch_cluster_scoped(KIND, queue, {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
                                         "spec": {"resourceGroups": groups}})


def mark(w: KubeWriter, queue: str) -> str | None:
    return (w.get_cluster_scoped(KIND, queue)["metadata"].get("annotations") or {}).get(QUOTA_ANNOTATION)


def set_mark(w: KubeWriter, queue: str, value: str | None) -> None:
    obj = w.get_cluster_scoped(KIND, queue)
    w.patch_cluster_scoped(KIND, queue, {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"],
                                                      "annotations": {QUOTA_ANNOTATION: value}}})


@pytest.fixture()
def writer(settings: GpuaasSettings) -> Iterator[KubeWriter]:
    """A writer on queues whose entries are the table's ``before`` (set by the test) and team-c marked by an
    earlier plan; the scenario's quotas, limits and marks are put back after each test."""
    with KubeWriter(settings) as w:
        groups = {q: w.get_cluster_scoped(KIND, q)["spec"]["resourceGroups"] for q in QUEUES}
        marks = {q: mark(w, q) for q in QUEUES}
        set_mark(w, C, EARLIER_MARK)
        set_mark(w, B, None)
        yield w
        for queue in QUEUES:
            obj = w.get_cluster_scoped(KIND, queue)
            w.patch_cluster_scoped(KIND, queue, {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"],
                                                              "annotations": {QUOTA_ANNOTATION: marks[queue]}},
                                                 "spec": {"resourceGroups": groups[queue]}})


def prepare(w: KubeWriter, manage: bool) -> None:
    for queue, fields in BEFORE[manage].items():
        set_entry(w, queue, fields)


@LIMITS
def test_undo_restores_each_moved_entry_whole_and_the_earlier_plans_mark(
        store: Store, writer: KubeWriter, crd_validators: Any, manage: bool) -> None:
    prepare(writer, manage)
    result = apply(store, writer, the_plan(DEMAND), manage_limits=manage)
    assert result.outcome == "applied", result.message
    assert entries(writer) == APPLIED[manage]
    applied_mark = json.loads(mark(writer, C) or "{}")
    assert applied_mark["plan_id"] == result.plan_id
    assert applied_mark["entries"] == {"h100": {"nvidia.com/gpu": BEFORE[manage][C]}}
    intent = store.get_audit(result.plan_id)
    assert intent is not None and intent.evidence["manage_limits"] is manage
    [undone] = undo_entries(store, writer, [result.plan_id])
    assert undone.result == "restored", undone.message
    assert entries(writer) == BEFORE[manage]
    assert mark(writer, C) == EARLIER_MARK and mark(writer, B) is None
    for queue in (C, B):
        assert crd_errors(crd_validators, writer.get_cluster_scoped(KIND, queue)) == set(), queue
    changes = [r for r in store.audit(refers_to=[result.plan_id], limit=None) if r.action == "quota-change"]
    assert [r.outcome for r in changes] == ["applied", "applied", "restored", "restored"]
    restored_c = next(r for r in changes if r.outcome == "restored" and r.name == C)
    assert restored_c.evidence["entries"] == {"before": {"h100": {"nvidia.com/gpu": APPLIED[manage][C]}},
                                              "after": {"h100": {"nvidia.com/gpu": BEFORE[manage][C]}}}


class RacingWriter(KubeWriter):
    """Someone sets ``queue``'s entry to ``fields`` right after gpuaas reads it before patching (a real 409)."""

    def __init__(self, settings: GpuaasSettings, other: KubeWriter, queue: str, fields: dict[str, Any]) -> None:
        super().__init__(settings)
        self.other, self.queue, self.fields, self.reads = other, queue, fields, 0

    def get_cluster_scoped(self, kind: str, name: str, *, version: str | None = None) -> dict[str, Any]:
        obj = super().get_cluster_scoped(kind, name, version=version)
        if name == self.queue:
            self.reads += 1
            if self.reads == 2:  # 1: the changed-since-plan check, 2: the read before its patch
                set_entry(self.other, name, self.fields)
        return obj


@LIMITS
def test_a_rollback_after_a_stop_restores_each_landed_entry_whole(
        settings: GpuaasSettings, store: Store, writer: KubeWriter, manage: bool) -> None:
    prepare(writer, manage)
    # team-c's decrease lands; then someone sets team-b's quota to 6 between gpuaas's read and its patch.
    theirs = {**BEFORE[manage][B], "nominalQuota": 6}
    with RacingWriter(settings, writer, B, theirs) as racing:
        result = apply(store, racing, the_plan(DEMAND), manage_limits=manage)
    assert result.outcome == "failed" and "rolled back 1" in result.message, result.message
    assert entries(writer) == {C: BEFORE[manage][C], B: theirs}
    assert mark(writer, C) == EARLIER_MARK


@LIMITS
def test_a_limit_changed_between_the_read_and_the_patch_stops_the_apply(
        settings: GpuaasSettings, store: Store, writer: KubeWriter, manage: bool) -> None:
    prepare(writer, manage)
    theirs = {**BEFORE[manage][B], "borrowingLimit": 3}  # the quota is as planned; a limit is not
    with RacingWriter(settings, writer, B, theirs) as racing:
        result = apply(store, racing, the_plan(DEMAND), manage_limits=manage)
    assert result.outcome == "failed", result.message
    assert f"{B}: limits changed by someone else (h100 borrowingLimit is 3, expected 2); not overwritten" \
        in result.message and "rolled back 1" in result.message
    assert entries(writer) == {C: BEFORE[manage][C], B: theirs}


class CrashingWriter(KubeWriter):
    """The process dies right after the ``after``-th patch landed (its Event, its audit row never written)."""

    def __init__(self, settings: GpuaasSettings, after: int) -> None:
        super().__init__(settings)
        self.left = after

    def record_event(self, obj: dict[str, Any], reason: EventReason, note: str) -> bool:
        self.left -= 1
        if self.left == 0:
            raise Crash()
        return super().record_event(obj, reason, note)


@LIMITS
def test_the_next_runs_rollback_of_a_crashed_apply_restores_each_entry_whole(
        settings: GpuaasSettings, store: Store, writer: KubeWriter, manage: bool) -> None:
    prepare(writer, manage)
    with CrashingWriter(settings, after=2) as crashing, pytest.raises(Crash):
        apply(store, crashing, the_plan(DEMAND), manage_limits=manage)
    assert entries(writer) == APPLIED[manage]  # both patches landed, the plan was never closed
    # The next run's policy may say otherwise: what is put back is what was there, not the rule run backwards.
    [closed] = recover_quota_plans(store, writer, flow_run_id=None, now=datetime.now(UTC), gpu_resources=GPU,
                                   manage_limits=not manage)
    assert closed.outcome == "failed" and "rolled back 2 of 2" in closed.reason, closed.reason
    assert entries(writer) == BEFORE[manage]
    assert mark(writer, C) == EARLIER_MARK and mark(writer, B) is None


def test_undo_refuses_when_a_limit_changed_since_and_overwrites_nothing(store: Store, writer: KubeWriter) -> None:
    prepare(writer, False)
    result = apply(store, writer, the_plan(DEMAND))
    set_entry(writer, C, {"nominalQuota": 4, "lendingLimit": 3})
    [undone] = undo_entries(store, writer, [result.plan_id])
    assert undone.result == "skipped", undone.message
    assert undone.message == (f"{C}: h100 lendingLimit is 3, not the plan's 4: someone changed a limit since; "
                              "nothing restored")
    assert entries(writer) == {C: {"nominalQuota": 4, "lendingLimit": 3}, B: APPLIED[False][B]}
    # Put back as the plan left it, the undo goes through.
    set_entry(writer, C, APPLIED[False][C])
    [again] = undo_entries(store, writer, [result.plan_id])
    assert again.result == "restored", again.message
    assert entries(writer) == BEFORE[False]


def test_a_plan_recorded_without_its_entries_undoes_as_it_always_did(store: Store, writer: KubeWriter) -> None:
    """An intent from before the entries were recorded: the nominal quotas come back, the limits stay as the
    plan's rule left them (nothing says what they were), the mark is removed."""
    prepare(writer, False)
    for queue, fields in APPLIED[False].items():
        set_entry(writer, queue, fields)
    set_mark(writer, C, json.dumps({"before": {"h100": 8}, "plan_id": 99}))

    def row(action: str, kind: str, name: str, outcome: str, **kw: Any) -> AuditEntry:
        return store.append(AuditEntry(flow="rebalance", action=action, kind=kind, name=name, mode="apply",
                                       outcome=outcome, **kw))

    intent = row("quota-plan", "Cohort", "c", "planned", before={C: {"h100": 8}, B: {"h100": 4}},
                 after={C: {"h100": 4}, B: {"h100": 8}}, evidence={"plan": {}, "gpu_resources": GPU})
    row("quota-change", KIND, C, "applied", before={"h100": 8}, after={"h100": 4}, refers_to=intent.id)
    row("quota-change", KIND, B, "applied", before={"h100": 4}, after={"h100": 8}, refers_to=intent.id)
    row("quota-plan", "Cohort", "c", "applied", refers_to=intent.id)
    [undone] = undo_entries(store, writer, [int(intent.id or 0)])
    assert undone.result == "restored", undone.message
    assert entries(writer) == {C: {"nominalQuota": 8, "lendingLimit": 4}, B: BEFORE[False][B]}
    assert mark(writer, C) is None
