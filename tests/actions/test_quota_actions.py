"""Quota plans against the embedded cluster: apply, undo, the 409 and changed-since-plan paths,
crash recovery, degraded snapshots; every ClusterQueue written is checked against the real CRD.

Covers: patches land decreases first and the cohort's total never exceeds its capacity between
them; one audit id for the plan; ``undo_entries([plan_id])`` restores all queues or none and names
the queue someone changed; a quota edited after the plan is never overwritten (outcome
``changed``); a 409 from a status-only change is retried, one from a quota change stops and
rolls back; a crash between patches is rolled back by ``recover_quota_plans``; a degraded
snapshot's plan is recorded and not applied; a 403 (no rebalancer role bound) closes the plan ``failed`` at once,
naming the role to bind, so the recovery has nothing to close; a refused undo leaves a ``restore`` row and does
not block a later one.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuaas.actions import KubeWriter, undo_entries
from gpuaas.actions._quota_patches import gpu_nominal
from gpuaas.actions.quotas import apply_quota_plan, quota_moved_since, recent_quota_changes, recover_quota_plans
from gpuaas.cluster.apiserver import RBACRules
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.errors import Forbidden, GpuaasError, NotFound, TransientError
from gpuaas.policies.quotas import QueueDemand, QuotaLimits, QuotaPlan, plan_quotas
from gpuaas.policy import Mode
from gpuaas.settings import GpuaasSettings
from gpuaas.store import Store
from tests.actions.rebalance_scenario import NOMINAL, QUEUES, cluster, settings, writer  # noqa: F401  (the fixtures)
from tests.cluster.test_crd_schemas import crd_errors, crd_validators  # noqa: F401  (the fixture)

GPU = ["nvidia.com/gpu"]
LIMITS = QuotaLimits(max_step_gpus=8, max_step_percent=100, max_total_moved_gpus=32, hysteresis_gpus=1)
KIND = "ClusterQueue"
MANIFEST = Path(__file__).resolve().parents[2] / "deployments" / "kubernetes" / "rbac.yaml"
BIND = "bind gpuaas-rebalancer (kubectl apply -f deployments/kubernetes/rbac-apply-rebalance.yaml)"


def set_quota(w: KubeWriter, queue: str, value: int) -> None:
    """Someone else (an operator) edits a quota."""
    obj = w.get_cluster_scoped(KIND, queue)
    groups = obj["spec"]["resourceGroups"]
    groups[0]["flavors"][0]["resources"][0]["nominalQuota"] = value
    w.patch_cluster_scoped(KIND, queue, {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
                                         "spec": {"resourceGroups": groups}})


def live(w: KubeWriter) -> dict[str, int]:
    return {q: gpu_nominal(w.get_cluster_scoped(KIND, q), GPU)["h100"] for q in QUEUES}


def the_plan(demand: dict[str, float]) -> QuotaPlan:
    return plan_quotas([QueueDemand(q, {"h100": NOMINAL[q]}, {"h100": demand[q]}) for q in QUEUES], LIMITS)


# team-b needs 8: +4 from team-c, the only queue above its demand.
DEMAND = {"team-a-cq": 12.0, "team-b-cq": 8.0, "team-c-cq": 4.0}


def apply(store: Store, w: KubeWriter, plan: QuotaPlan, *, degraded: str | None = None, **kw: Any) -> Any:
    return apply_quota_plan(store, w, "c", plan, mode=Mode.apply, degraded=degraded, flow_run_id=None,
                            evidence={}, gpu_resources=GPU, **kw)


def test_apply_moves_decreases_first_under_one_audit_id_and_every_queue_stays_crd_valid(
        store: Store, writer: KubeWriter, crd_validators: Any) -> None:
    plan = the_plan(DEMAND)
    assert plan.moved_gpus == 4
    result = apply(store, writer, plan)
    assert result.outcome == "applied", result.message
    after = {c.queue: c.after for c in plan.changes}
    assert live(writer) == after and sum(after.values()) == sum(NOMINAL.values())
    rows = store.audit(refers_to=[result.plan_id], limit=None)
    changes = [r for r in rows if r.action == "quota-change"]
    assert [r.outcome for r in changes] == ["applied"] * len(changes)
    deltas = [r.after["h100"] - r.before["h100"] for r in changes]
    assert deltas == sorted(deltas) and deltas[0] < 0 < deltas[-1]  # decreases first
    running = sum(NOMINAL.values())
    for delta in deltas:  # the cohort's total after each patch never exceeds its capacity
        running += delta
        assert running <= sum(NOMINAL.values())
    assert rows[-1].action == "quota-plan" and rows[-1].outcome == "applied"
    intent = store.get_audit(result.plan_id)
    assert intent is not None and intent.before == {q: {"h100": NOMINAL[q]} for q in QUEUES}
    for queue in QUEUES:
        obj = writer.get_cluster_scoped(KIND, queue)
        assert crd_errors(crd_validators, obj) == set(), queue
    c = writer.get_cluster_scoped(KIND, "team-c-cq")["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert c["nominalQuota"] == 4 and c["lendingLimit"] == 4  # limits not managed: lowered to the quota only
    assert recent_quota_changes(store, intent.created_at) == {("team-c-cq", "h100"): -4, ("team-b-cq", "h100"): 4}


def test_undo_restores_the_whole_plan_once(store: Store, writer: KubeWriter) -> None:
    result = apply(store, writer, the_plan(DEMAND))
    [undone] = undo_entries(store, writer, [result.plan_id])
    assert undone.result == "restored", undone.message
    assert live(writer) == NOMINAL
    [again] = undo_entries(store, writer, [result.plan_id])
    assert again.result == "no-op" and "already restored" in again.message
    # The day's step stays spent: the plan's 4 GPUs still count, although undone (it is not made again today).
    assert quota_moved_since(store, datetime.now(UTC) - timedelta(hours=24)) == {
        ("team-c-cq", "h100"): (0, 4), ("team-b-cq", "h100"): (4, 0)}


def test_undo_refuses_naming_the_queue_someone_changed_since(store: Store, writer: KubeWriter) -> None:
    result = apply(store, writer, the_plan(DEMAND))
    set_quota(writer, "team-c-cq", 5)
    [undone] = undo_entries(store, writer, [result.plan_id])
    assert undone.result == "skipped" and "team-c-cq" in undone.message and "someone changed" in undone.message
    assert live(writer) == {"team-a-cq": 12, "team-b-cq": 8, "team-c-cq": 5}  # nothing restored


def test_a_quota_changed_since_the_plan_is_never_overwritten(store: Store, writer: KubeWriter) -> None:
    plan = the_plan(DEMAND)
    set_quota(writer, "team-a-cq", 11)
    result = apply(store, writer, plan)
    assert result.outcome == "changed" and "team-a-cq" in result.message and "recompute" in result.message
    assert live(writer) == {**NOMINAL, "team-a-cq": 11}
    assert not [r for r in store.audit(refers_to=[result.plan_id], limit=None) if r.action == "quota-change"]


class RacingWriter(KubeWriter):
    """Someone writes to ``queue`` right after gpuaas reads it before patching: the PATCH meets a real 409."""

    def __init__(self, settings: GpuaasSettings, other: KubeWriter, queue: str, quota: int | None) -> None:
        super().__init__(settings)
        self.other, self.queue, self.quota = other, queue, quota
        self.reads, self.raced = 0, False

    def get_cluster_scoped(self, kind: str, name: str, *, version: str | None = None) -> dict[str, Any]:
        obj = super().get_cluster_scoped(kind, name, version=version)
        if name == self.queue:
            self.reads += 1
            if self.reads == 2:  # 1: the changed-since-plan check, 2: the read before its patch
                self.raced = True
                if self.quota is None:  # only the metadata moves (as Kueue's status writes do)
                    self.other.patch_cluster_scoped(kind, name, {"metadata": {
                        "resourceVersion": obj["metadata"]["resourceVersion"], "labels": {"touched": "yes"}}})
                else:
                    set_quota(self.other, name, self.quota)
        return obj


def test_a_409_from_a_status_only_change_is_retried(settings: GpuaasSettings, store: Store,
                                                    writer: KubeWriter) -> None:
    with RacingWriter(settings, writer, "team-c-cq", None) as racing:
        result = apply(store, racing, the_plan(DEMAND))
    assert racing.raced and result.outcome == "applied", result.message
    assert live(writer) == {"team-a-cq": 12, "team-b-cq": 8, "team-c-cq": 4}


def test_a_409_from_a_quota_change_stops_and_rolls_back(settings: GpuaasSettings, store: Store,
                                                       writer: KubeWriter) -> None:
    # team-c's decrease lands first; then someone sets team-b to 6 between gpuaas's read and its patch.
    with RacingWriter(settings, writer, "team-b-cq", 6) as racing:
        result = apply(store, racing, the_plan(DEMAND))
    assert racing.raced and result.outcome == "failed", result.message
    assert "team-b-cq: quota changed by someone else (h100 is 6, expected 4)" in result.message
    assert "stopped after 1 patch" in result.message and "rolled back 1" in result.message
    assert live(writer) == {"team-a-cq": 12, "team-b-cq": 6, "team-c-cq": 8}  # the other's edit stays


class Crash(BaseException):
    """The process dies (not an error gpuaas handles)."""


class CrashingWriter(KubeWriter):
    def __init__(self, settings: GpuaasSettings, after_patches: int) -> None:
        super().__init__(settings)
        self.left = after_patches

    def patch_cluster_scoped(self, kind: str, name: str, body: dict[str, Any], *,
                             version: str | None = None) -> dict[str, Any]:
        if self.left == 0:
            raise Crash()
        self.left -= 1
        return super().patch_cluster_scoped(kind, name, body, version=version)


def test_a_crash_between_patches_is_rolled_back_by_the_next_run(settings: GpuaasSettings, store: Store,
                                                               writer: KubeWriter) -> None:
    plan = the_plan(DEMAND)
    with CrashingWriter(settings, after_patches=1) as crashing, pytest.raises(Crash):
        apply(store, crashing, plan)
    half = live(writer)
    assert sum(half.values()) < sum(NOMINAL.values())  # one decrease landed, its increase did not
    intent = store.audit(flow="rebalance", limit=None)[-2]
    assert intent.action == "quota-plan" and intent.outcome == "planned"
    [closed] = recover_quota_plans(store, writer, flow_run_id=None, now=datetime.now(UTC), gpu_resources=GPU)
    assert closed.outcome == "failed" and "rolled back 1 of 1" in closed.reason
    assert live(writer) == NOMINAL
    assert recover_quota_plans(store, writer, flow_run_id=None, now=datetime.now(UTC), gpu_resources=GPU) == []
    [undone] = undo_entries(store, writer, [int(intent.id or 0)])
    assert undone.result == "no-op"  # rolled back: nothing to undo
    # A plan a crash cut off and gpuaas rolled back moved nothing: it spends none of the day's steps.
    assert quota_moved_since(store, datetime.now(UTC) - timedelta(hours=24)) == {}


def test_a_degraded_snapshot_is_recorded_and_never_applied(store: Store, writer: KubeWriter) -> None:
    result = apply(store, writer, the_plan(DEMAND), degraded="prometheus did not answer")
    assert result.outcome == "skipped" and "degraded" in result.message
    assert live(writer) == NOMINAL


def test_dry_run_writes_nothing(store: Store, writer: KubeWriter) -> None:
    result = apply_quota_plan(store, writer, "c", the_plan(DEMAND), mode=Mode.dry_run, degraded=None,
                              flow_run_id=None, evidence={}, gpu_resources=GPU)
    assert result.outcome == "planned" and live(writer) == NOMINAL
    [undone] = undo_entries(store, writer, [result.plan_id])
    assert undone.result == "no-op"


def test_manage_limits_moves_lending_and_borrowing_by_the_rule(store: Store, writer: KubeWriter) -> None:
    result = apply(store, writer, the_plan(DEMAND), manage_limits=True)
    assert result.outcome == "applied"
    b = writer.get_cluster_scoped(KIND, "team-b-cq")["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    c = writer.get_cluster_scoped(KIND, "team-c-cq")["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert (c["nominalQuota"], c["lendingLimit"]) == (4, 2)  # the part never lent, 8 - 6 = 2, stays
    assert (b["nominalQuota"], b["borrowingLimit"]) == (8, 0)  # 2 - 4 (against the quota), clamped at 0


def test_demand_comes_from_kueues_per_queue_history_in_one_query(settings: GpuaasSettings) -> None:
    from gpuaas.operations.collect import read_snapshot
    from gpuaas.policies.quotas import cohort_demands
    from gpuaas.sources.queue_history import read_queue_history

    snapshot = read_snapshot(settings)
    history = read_queue_history(settings, snapshot.collected_at, window_s=7 * 86400, percentile=90,
                                 gpu_resources=GPU)
    stat = {(r.cluster_queue, r.stat): r.value for r in history.itertuples()}
    assert stat[("team-b-cq", "usage_p")] == 4 and stat[("team-a-cq", "usage_p")] == 2
    assert stat[("team-b-cq", "pending_median")] == 8  # b-big waited the whole 90 minutes
    assert stat[("team-b-cq", "pending_max")] >= 8
    assert 80 * 60 <= stat[("team-a-cq", "history_seconds")] <= 95 * 60
    [cohort] = cohort_demands(snapshot, history, settings.policy)
    demand = {q.name: q.demand["h100"] for q in cohort.queues}
    assert demand == {"team-a-cq": 2.0, "team-b-cq": 12.0, "team-c-cq": 0.0}
    assert all(q.reclaims for q in cohort.queues)  # the scenario's queues preempt borrowers (reclaimWithinCohort: Any)
    assert all(q.busiest["h100"] >= q.demand["h100"] for q in cohort.queues)
    assert cohort.little_history and cohort.limits.max_total_moved_gpus == settings.policy.rebalance.max_step_gpus
    assert "of history" in cohort.notes[0]
    evidence = next(q.evidence["h100"] for q in cohort.queues if q.name == "team-b-cq")
    assert evidence.startswith("p90 use 4 of 4, 8 GPUs pending, oldest waited 1.")


def test_an_undo_cut_off_by_a_crash_is_finished_by_the_next_undo(settings: GpuaasSettings, store: Store,
                                                                 writer: KubeWriter) -> None:
    result = apply(store, writer, the_plan(DEMAND))
    with CrashingWriter(settings, after_patches=1) as crashing, pytest.raises(Crash):
        undo_entries(store, crashing, [result.plan_id])
    assert live(writer) == {"team-a-cq": 12, "team-b-cq": 4, "team-c-cq": 4}  # team-b's decrease landed first
    [undone] = undo_entries(store, writer, [result.plan_id])
    assert undone.result == "restored", undone.message
    assert live(writer) == NOMINAL


def test_a_403_on_the_re_read_closes_the_plan_at_once_naming_the_role_to_bind(
        cluster: EmbeddedCluster, store: Store, writer: KubeWriter) -> None:
    # apply without the rebalancer role bound: the reader role lists ClusterQueues but may not get one.
    cluster.api.rbac = RBACRules.from_manifest(MANIFEST, ["gpuaas-reader"])
    try:
        result = apply(store, writer, the_plan(DEMAND))
    finally:
        cluster.api.rbac = None
    assert result.outcome == "failed" and result.patched == [], result.message
    assert result.message.startswith("nothing written: reading ClusterQueue ") and "403 Forbidden" in result.message
    assert result.message.endswith(BIND)
    [closed] = store.audit(refers_to=[result.plan_id], limit=None)  # no quota-change row: nothing was patched
    assert (closed.action, closed.outcome, closed.reason) == ("quota-plan", "failed", result.message)
    assert live(writer) == NOMINAL
    # Nothing was interrupted: the next run's recovery has nothing to close, and there is nothing to undo.
    assert recover_quota_plans(store, writer, flow_run_id=None, now=datetime.now(UTC), gpu_resources=GPU) == []
    [undone] = undo_entries(store, writer, [result.plan_id])
    assert undone.result == "no-op"


class RefusingWriter(KubeWriter):
    """The API refuses the ``refuse_at``-th read of ``queue`` with a 403 (from then on, or that once)."""

    def __init__(self, settings: GpuaasSettings, queue: str, refuse_at: int) -> None:
        super().__init__(settings)
        self.queue, self.refuse_at, self.reads = queue, refuse_at, 0

    def get_cluster_scoped(self, kind: str, name: str, *, version: str | None = None) -> dict[str, Any]:
        if name == self.queue:
            self.reads += 1
            if self.reads == self.refuse_at:
                raise Forbidden(f'clusterqueues.kueue.x-k8s.io "{name}" is forbidden', status=403,
                                reason="Forbidden", kind=kind, name=name, verb="reading")
        return super().get_cluster_scoped(kind, name, version=version)


def test_a_403_after_a_patch_landed_rolls_it_back_and_closes_the_plan(settings: GpuaasSettings, store: Store,
                                                                      writer: KubeWriter) -> None:
    # team-c's decrease lands; the read before team-b's increase (its 2nd read) is refused.
    with RefusingWriter(settings, "team-b-cq", refuse_at=2) as refusing:
        result = apply(store, refusing, the_plan(DEMAND))
    assert result.outcome == "failed" and result.patched == ["team-c-cq"], result.message
    assert "stopped after 1 patch: team-b-cq: reading ClusterQueue team-b-cq: 403 Forbidden" in result.message
    assert BIND in result.message and result.message.endswith("rolled back 1")
    assert live(writer) == NOMINAL
    rows = store.audit(refers_to=[result.plan_id], limit=None)
    assert [(r.action, r.outcome) for r in rows] == [("quota-change", "applied"), ("quota-change", "restored"),
                                                      ("quota-plan", "failed")]
    assert recover_quota_plans(store, writer, flow_run_id=None, now=datetime.now(UTC), gpu_resources=GPU) == []


def test_a_refused_undo_is_audited_and_a_later_undo_still_restores(store: Store, writer: KubeWriter) -> None:
    result = apply(store, writer, the_plan(DEMAND))
    set_quota(writer, "team-c-cq", 5)
    [refused] = undo_entries(store, writer, [result.plan_id])
    assert refused.result == "skipped" and "someone changed" in refused.message
    assert refused.restore_audit_id is not None
    row = store.get_audit(refused.restore_audit_id)
    assert row is not None
    assert (row.action, row.kind, row.name, row.outcome, row.refers_to) == (
        "restore", "Cohort", "c", "skipped", result.plan_id)
    assert row.reason == f"undo of plan #{result.plan_id} refused: {refused.message}" and "team-c-cq" in row.reason
    assert row in store.audit(flow="rebalance", limit=None)
    # The operator puts the plan's quota back by hand: the refusal does not block the next undo.
    set_quota(writer, "team-c-cq", 4)
    [undone] = undo_entries(store, writer, [result.plan_id])
    assert undone.result == "restored", undone.message
    assert undone.restore_audit_id not in (None, refused.restore_audit_id)
    assert live(writer) == NOMINAL
    [again] = undo_entries(store, writer, [result.plan_id])
    assert again.result == "no-op" and "already restored" in again.message


class UnreadableWriter(KubeWriter):
    """Reading ``queue`` raises ``error``: it has been deleted (``NotFound``), or the API fails for it (a 503)."""

    def __init__(self, settings: GpuaasSettings, queue: str, error: GpuaasError) -> None:
        super().__init__(settings)
        self.queue, self.error = queue, error

    def get_cluster_scoped(self, kind: str, name: str, *, version: str | None = None) -> dict[str, Any]:
        if name == self.queue:
            raise self.error
        return super().get_cluster_scoped(kind, name, version=version)


@pytest.mark.parametrize(("error", "outcome", "said"), [
    (NotFound("not found", status=404, reason="Not Found", kind="ClusterQueue", name="team-b-cq", verb="reading"),
     "skipped", "team-b-cq: ClusterQueue deleted"),
    (TransientError("reading ClusterQueue team-b-cq: 503 Service Unavailable"), "failed", "team-b-cq: 503"),
], ids=["deleted", "unreadable"])
def test_an_undo_that_cannot_read_a_queue_is_audited_restores_nothing_and_blocks_no_later_undo(
        settings: GpuaasSettings, store: Store, writer: KubeWriter, error: GpuaasError, outcome: str, said: str) -> None:
    result = apply(store, writer, the_plan(DEMAND))
    with UnreadableWriter(settings, "team-b-cq", error) as blind:
        [refused] = undo_entries(store, blind, [result.plan_id])
    assert refused.result == outcome and said in refused.message, refused.message
    row = store.get_audit(int(refused.restore_audit_id or 0))
    assert row is not None and (row.action, row.outcome, row.refers_to) == ("restore", outcome, result.plan_id)
    assert live(writer) == {"team-a-cq": 12, "team-b-cq": 8, "team-c-cq": 4}  # nothing restored
    [undone] = undo_entries(store, writer, [result.plan_id])
    assert undone.result == "restored", undone.message
    assert live(writer) == NOMINAL
