"""Tasks of the deadline plan: one per phase of ``gpuaas.operations.deadlines``, plus publishing the signal.

``plan_deadlines`` (the pools alone) is the one the rebalance flow composes for its per-queue
deadline demand; ``plan_deadline_run`` is the ``deadlines`` flow's whole decision; both on the hold marks
``read_recorded_holds`` found gpuaas recorded (read from the audit log before, so that the plan stays
pure). Both read the snapshot only and write nothing. The sweep, apply and undo tasks open the store
and the cluster writer and hand them to the operation.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from gpuaas.models import Snapshot
from gpuaas.operations import deadlines as op
from gpuaas.policies.deadlines import PoolPlan, RecordedHolds
from gpuaas.policy import Mode, WritingFlow
from gpuaas.pushgateway import push_metrics
from gpuaas.settings import GpuaasSettings
from gpuaas.sources import KubeLister, make_api_client
from gpuaas.sources.kube import KUEUE_GROUP
from gpuaas.store import open_store
from reports.deadlines import deadline_metrics, deadlines_headline, kueue_alone, pool_dicts
from tasks._artifacts import markdown_artifact, table_artifact
from tasks._options import current_run_id, gpuaas_task
from tasks.writes import store_and_writer

__all__ = ["apply_deadline_nudges", "plan_deadline_run", "plan_deadlines", "publish_deadline_artifacts",
           "push_deadline_metrics", "read_recorded_holds", "release_due_holds", "undo_deadline_holds"]


@gpuaas_task("plan-deadlines", timeout_seconds=300)
def plan_deadlines(snapshot: Snapshot, recorded: RecordedHolds) -> list[PoolPlan]:
    """Pure work in a task: bounded by the planner's own MILP limits, and by a timeout here. ``recorded``:
    ``read_recorded_holds``'s answer, the only marks counted as holds (a deactivated Workload under any other
    mark is no queued work, and no deadline demand)."""
    return list(op.pool_plans(snapshot, recorded=recorded))


@gpuaas_task("recorded-deadline-holds")
def read_recorded_holds(settings: GpuaasSettings, snapshot: Snapshot) -> RecordedHolds:
    """Read before planning, so that the plan itself stays pure: the hold marks on the snapshot's Workloads that
    gpuaas recorded (one query of the audit log); any other mark is planned as not held."""
    with open_store(settings) as store:
        return op.recorded_holds(snapshot, store)


@gpuaas_task("plan-deadline-run", timeout_seconds=300)
def plan_deadline_run(settings: GpuaasSettings, snapshot: Snapshot, now: datetime, nudge: bool,
                      recorded: RecordedHolds) -> op.DeadlinesPlan:
    """The pools' plans and, with ``nudge``, the holds and releases: pure, bounded like ``plan_deadlines``; with the
    tenants a change freeze holds back now, and those of them that name a ClusterQueue the snapshot lacks.
    ``recorded``: ``read_recorded_holds``'s answer, the only marks counted as holds."""
    held = settings.policy.frozen_tenants(WritingFlow.deadlines, datetime.now(UTC))
    file = settings.policy_file_name
    return op.plan(snapshot, settings.policy.deadlines, now, nudge=nudge, held=held,
                   misnamed=op.frozen_misnamed(snapshot, settings.policy, held, file), recorded=recorded)


@gpuaas_task("publish-deadline-artifacts")
def publish_deadline_artifacts(pools: Sequence[PoolPlan]) -> None:
    """No cell is a bare "-" (the UI renders that as a bullet); an empty plan is a sentence, not a placeholder row."""
    rows = [{"cohort": p["cohort"], "flavor": p["flavor"], "GPUs": p["capacity_gpus"],
             "extra GPUs": p["extra_gpus"].get(p["flavor"], 0), "at risk": ", ".join(p["at_risk"]) or "none",
             "missed": ", ".join(p["missed"]) or "none", "exact": p["exact"],
             "deadlines Kueue alone meets": kueue_alone(p)} for p in pool_dicts(pools)]
    if not rows:
        markdown_artifact(key="gpuaas-deadline-plan", markdown=deadlines_headline([]) + "\n",
                          description="Deadline plan per cohort and flavor")
        return
    table_artifact(key="gpuaas-deadline-plan", table=rows,
                   description="Deadline plan per cohort and flavor: extra GPUs that make every deadline hold")


@gpuaas_task("push-deadline-metrics", io=True)
def push_deadline_metrics(settings: GpuaasSettings, pools: Sequence[PoolPlan]) -> int:
    return push_metrics(settings, "gpuaas_deadlines", deadline_metrics(pools))


@gpuaas_task("release-due-holds", io=True)
def release_due_holds(settings: GpuaasSettings, now: datetime) -> op.DeadlinesResult:
    """From the API alone (no snapshot, no plan): a run that fails later has already released.

    Listed and patched at the Kueue version the cluster serves (v1beta2, else v1beta1), the one
    the writer negotiates: a cluster on v1beta1 only must get its holds released too.
    """
    api = make_api_client(settings)
    try:
        with store_and_writer(settings, api_client=api) as (store, writer):
            workloads = KubeLister(api, settings).custom_objects(KUEUE_GROUP, writer.kueue_version(), "workloads")
            return op.release_sweep(workloads, store, writer, now=now, flow_run_id=current_run_id())
    finally:
        api.close()


@gpuaas_task("apply-deadline-nudges", timeout_seconds=600)
def apply_deadline_nudges(settings: GpuaasSettings, plan: op.DeadlinesPlan, mode: Mode,
                          now: datetime) -> op.DeadlinesResult:
    """Not retried: a half-done nudge is re-decided from the objects next run."""
    with store_and_writer(settings, deciding=True) as (store, writer):
        return op.apply(plan, store, writer, mode=mode, flow_run_id=current_run_id(), now=now)


@gpuaas_task("undo-holds", timeout_seconds=600)
def undo_deadline_holds(settings: GpuaasSettings, audit_ids: list[int]) -> op.DeadlinesResult:
    with store_and_writer(settings) as (store, writer):
        return op.undo(store, writer, audit_ids, flow_run_id=current_run_id())
