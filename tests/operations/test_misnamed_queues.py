"""A tenant whose ``cluster_queues`` names a ClusterQueue the cluster lacks (``visoin-cq`` for ``vision-cq``).

Covers, without a cluster: the sentence that names the tenant, the queue and what to fix, and only where the
ClusterQueues were read (a failed read is the degraded path's, not a typo); the rebalance's ``apply`` in apply
mode writes nothing over such a plan (no patch, the plans recorded as a dry-run's) and says why, and a
dry-run is untouched; the deadlines flow's freeze depends on ``cluster_queues`` for Workloads outside the
tenant's namespaces, so a frozen tenant with such a name keeps every hold and demotion from being written
in apply mode (releases still are), while a tenant no freeze holds back stops nothing.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
import pytest

from gpuaas.misnamed_queues import REBALANCE_MEANING, misnamed_queues
from gpuaas.models import Outcome, Snapshot, SourceStatus
from gpuaas.operations import deadlines, rebalance
from gpuaas.policies.quotas import QueueDemand, QuotaLimits, plan_quotas
from gpuaas.policy import DeadlinesPolicy, FreezeOn, Mode, Policy
from tests.operations.test_deadlines_operation import snapshot as deadline_snapshot

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
VISION_TYPO = ("tenant vision names ClusterQueue visoin-cq, which the cluster lacks: its change freeze and guarantee "
               "would hold no queue; fix tenants[vision].cluster_queues in policy.yaml")
POLICY = Policy.model_validate({"tenants": [
    {"name": "vision", "cluster_queues": ["visoin-cq"], "guaranteed_gpus": 4},
    {"name": "text", "cluster_queues": ["text-cq"]}]})


def snapshot(kube_ok: bool = True, queues: tuple[str, ...] = ("vision-cq", "text-cq")) -> Snapshot:
    quotas = pd.DataFrame([{"cluster_queue": q, "cohort": "visco", "flavor": "h100", "resource": "nvidia.com/gpu",
                            "nominal": 4.0, "borrowing_limit": None, "lending_limit": None, "reserved": 0.0,
                            "usage": 0.0, "borrowed": 0.0} for q in queues])
    return Snapshot(collected_at=NOW, windows_minutes=(30.0,), quotas=quotas,
                    queues=pd.DataFrame({"name": list(queues) + ["empty-cq"]}),
                    sources={"kube": SourceStatus("kube", ok=kube_ok, error=None if kube_ok else "refused")})


def test_a_tenant_naming_a_missing_queue_is_named_with_the_queue_and_the_fix() -> None:
    assert misnamed_queues(snapshot(), POLICY, REBALANCE_MEANING) == (VISION_TYPO,)
    two = Policy.model_validate({"tenants": [{"name": "vision", "cluster_queues": ["visoin-cq", "empty-cq", "vison"]}]})
    assert misnamed_queues(snapshot(), two, "M", file="prod.yaml") == (
        "tenant vision names ClusterQueues visoin-cq and vison, which the cluster lacks: M; "
        "fix tenants[vision].cluster_queues in prod.yaml",)  # a queue without GPU quota is still a queue
    assert misnamed_queues(snapshot(), POLICY, REBALANCE_MEANING, tenants=["text"]) == ()


def test_a_clusterqueue_list_that_could_not_be_read_names_nothing() -> None:
    assert misnamed_queues(snapshot(kube_ok=False), POLICY, REBALANCE_MEANING) == ()
    assert misnamed_queues(replace(snapshot(), sources={}), POLICY, REBALANCE_MEANING) == ()


class Store:
    """Keeps the audit rows; a rebalance in dry-run reads nothing from it."""

    def __init__(self) -> None:
        self.rows: list[Any] = []

    def append(self, row: Any) -> Any:
        row.id = len(self.rows) + 1
        self.rows.append(row)
        return row

    def audit(self, **_: Any) -> list[Any]:
        return []


class NoWriter:
    """Any use of the cluster writer is a write (or the read before one) that must not happen."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the cluster writer was used: {name}")


def rebalance_plan(misnamed: tuple[str, ...]) -> rebalance.RebalancePlan:
    queues = [QueueDemand("vision-cq", {"h100": 4}, {"h100": 0.0}), QueueDemand("text-cq", {"h100": 2}, {"h100": 6.0})]
    quota_plan = plan_quotas(queues, QuotaLimits(max_step_gpus=8, max_step_percent=100, max_total_moved_gpus=8,
                                                 hysteresis_gpus=0))
    assert quota_plan.moved_gpus > 0
    demand = rebalance.CohortDemand("visco", queues, QuotaLimits(8, 100, 8, 0), 0.0, False)
    return rebalance.RebalancePlan([rebalance.CohortOutcome("visco", demand, quota_plan)], None, misnamed=misnamed)


@pytest.mark.parametrize("mode", [Mode.apply, Mode.dry_run], ids=["apply", "dry-run"])
def test_rebalance_applies_nothing_while_a_tenant_names_a_missing_queue(mode: Mode) -> None:
    store = Store()
    done = rebalance.apply(rebalance_plan((VISION_TYPO,)), store, NoWriter(), mode=mode,  # type: ignore[arg-type]
                           flow_run_id=None, now=NOW)
    assert done.refused == ((VISION_TYPO,) if mode is Mode.apply else ())
    [cohort] = done.cohorts
    assert cohort.result == Outcome.planned and [r.mode for r in store.rows] == [Mode.dry_run.value]


def test_the_rebalance_plan_carries_the_sentence_the_apply_refuses_on() -> None:
    history = pd.DataFrame(columns=["cluster_queue", "flavor", "stat", "value"])
    assert rebalance.plan(snapshot(), history, POLICY).misnamed == (VISION_TYPO,)
    assert rebalance.plan(snapshot(queues=("visoin-cq", "text-cq")), history, POLICY).misnamed == ()


def frozen_deadline_snapshot() -> Snapshot:
    base = deadline_snapshot()
    return replace(base, sources={"kube": SourceStatus("kube", ok=True)}, queues=pd.DataFrame({"name": ["cq-a", "cq-solo"]}))


def test_a_frozen_tenant_naming_a_missing_queue_keeps_every_hold_from_being_written_in_apply_mode() -> None:
    # Tenant vision's Workloads run in cq-a but its policy says visoin-cq: the freeze finds none of them (their
    # tenant column is empty), so the plan holds ``slack`` as if vision had no freeze.
    policy = Policy.model_validate({"tenants": [{"name": "vision", "cluster_queues": ["visoin-cq"]}]})
    held = {"vision": FreezeOn("launch", NOW + timedelta(hours=1), "vision")}
    snap = frozen_deadline_snapshot()
    misnamed = deadlines.frozen_misnamed(snap, policy, held)
    assert misnamed == ("tenant vision names ClusterQueue visoin-cq, which the cluster lacks: its change freeze would "
                        "hold back no Workload queued there; fix tenants[vision].cluster_queues in policy.yaml",)
    knobs = DeadlinesPolicy(max_holds_per_run=1, release_margin_minutes=30, runtime_estimate_error=1.0)
    planned = deadlines.plan(snap, knobs, NOW, held=held, misnamed=misnamed)
    assert [(n.ref, n.outcome) for n in planned.holds] == [("ns/slack", Outcome.planned)]  # what a dry-run shows
    store = Store()
    done = deadlines.apply(planned, store, NoWriter(), mode=Mode.apply, flow_run_id=None,  # type: ignore[arg-type]
                           now=NOW)
    assert [(r.nudge.ref, r.result) for r in done.nudges] == [("ns/slack", Outcome.skipped),
                                                               ("ns/urgent", Outcome.deferred)]
    assert done.nudges[0].reason.endswith("; not written: " + misnamed[0])
    assert [n.outcome for n in deadlines.would_write(planned, snap)] == [Outcome.skipped, Outcome.deferred]


def test_a_tenant_no_freeze_holds_back_stops_no_hold() -> None:
    policy = Policy.model_validate({"tenants": [{"name": "vision", "cluster_queues": ["visoin-cq"]}]})
    assert deadlines.frozen_misnamed(frozen_deadline_snapshot(), policy, {}) == ()
    other = {"text": FreezeOn("launch", NOW + timedelta(hours=1), "text")}
    assert deadlines.frozen_misnamed(frozen_deadline_snapshot(), policy, other) == ()


def _target(name: str, tenant: str | None) -> Any:
    from gpuaas.policies.reclaim import Decision

    return Decision(kind="Workload", namespace="shared", name=name, uid=name, tenant=tenant, gpus=1,
                    idle_seconds=3600, free="quota", outcome=Outcome.planned, reason="idle", resource_version="1",
                    idempotency_key=name, mode="apply", evidence={})


def test_a_frozen_tenant_naming_a_missing_queue_keeps_the_reclaim_off_the_workloads_of_no_tenant() -> None:
    """A Workload queued in the ClusterQueue the typo meant belongs to no tenant: the freeze would not hold it back,
    so while that tenant is frozen the targets of no tenant are skipped, saying why; a tenant's own stay its own."""
    from gpuaas.misnamed_queues import RECLAIM_MEANING
    from gpuaas.operations import reclaim

    held = {"vision": FreezeOn("launch", NOW + timedelta(days=1), "vision")}
    misnamed = misnamed_queues(snapshot(), POLICY, RECLAIM_MEANING, tenants=held)
    assert misnamed == ("tenant vision names ClusterQueue visoin-cq, which the cluster lacks: its change freeze would "
                        "not hold back a workload queued there, which belongs to no tenant; fix "
                        "tenants[vision].cluster_queues in policy.yaml",)
    targets = [_target("orphan", None), _target("texts", "text"), _target("visions", "vision")]
    planned = reclaim.plan(targets, reclaim.AuditView(), POLICY, Mode.apply, NOW, held, misnamed)
    got = {d.name: d for d in planned.decisions}
    assert got["orphan"].outcome == Outcome.skipped and got["orphan"].reason == f"not stopped: {misnamed[0]}"
    assert got["texts"].outcome == Outcome.planned  # another tenant's: no freeze of vision's could hold it
    assert got["visions"].outcome == Outcome.skipped and "launch" in got["visions"].reason  # the freeze itself
    # no freeze on: the same typo stops nothing (the rebalance and the preflight still name it)
    assert misnamed_queues(snapshot(), POLICY, RECLAIM_MEANING, tenants={}) == ()
    assert [d.outcome for d in reclaim.plan(targets, reclaim.AuditView(), POLICY, Mode.apply, NOW).decisions] == [
        Outcome.planned] * 3


def test_a_stale_name_while_every_queue_there_is_a_tenants_stops_nothing() -> None:
    """A name left after its ClusterQueue was deleted, or a policy shared by several clusters: where every queue the
    cluster has is named by a tenant, no queue can have lost its tenant to the missing name, so nothing is held."""
    named = Policy.model_validate({"tenants": [
        {"name": "vision", "cluster_queues": ["vision-cq", "vision-old-cq"]},
        {"name": "text", "cluster_queues": ["text-cq", "empty-cq"]}]})
    assert misnamed_queues(snapshot(), named, REBALANCE_MEANING) == ()
    orphan = snapshot(queues=("vision-cq", "text-cq", "speech-cq"))  # a queue of no tenant: the typo may mean it
    assert misnamed_queues(orphan, named, REBALANCE_MEANING) == (
        "tenant vision names ClusterQueue vision-old-cq, which the cluster lacks: its change freeze and guarantee "
        "would hold no queue; fix tenants[vision].cluster_queues in policy.yaml",)


def test_the_line_names_the_policy_file_in_use(tmp_path: Any) -> None:
    """The fix is in the file the flows read, whatever its name: the settings name it for all three flows."""
    from gpuaas.settings import GpuaasSettings

    prod = tmp_path / "prod-policy.yaml"
    prod.write_text("version: 1\n")
    assert GpuaasSettings(policy_file=prod).policy_file_name == "prod-policy.yaml"
    assert GpuaasSettings().policy_file_name == "policy.yaml"
    assert misnamed_queues(snapshot(), POLICY, REBALANCE_MEANING, file="prod-policy.yaml")[0].endswith(
        "fix tenants[vision].cluster_queues in prod-policy.yaml")
