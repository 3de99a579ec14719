"""Tasks of the deadline plan: build and solve it per cohort and flavor, publish the signal, nudge Kueue.

``plan_deadlines`` is the one the rebalance flow composes (its per-queue deadline demand) and the
``deadlines`` flow runs alone; it reads the snapshot only and writes nothing. The nudge tasks hold
and release Workloads (``gpuaas.actions.deadline_holds``).
"""

from __future__ import annotations

from datetime import datetime

from gpuaas.actions.deadline_holds import NudgeResult, apply_nudges, release_due, undo_holds
from gpuaas.models import Snapshot
from gpuaas.policies.deadlines import Nudge, PoolPlan, deadline_problems, plan_nudges, plan_pools
from gpuaas.policy import Mode
from gpuaas.pushgateway import push_metrics
from gpuaas.settings import GpuaasSettings
from gpuaas.sources import KubeLister, make_api_client
from gpuaas.sources.kube import KUEUE_GROUP
from reports.deadlines import deadline_metrics, pool_dicts
from tasks._artifacts import table_artifact
from tasks._options import current_run_id, gpuaas_task
from tasks.writes import store_and_writer

__all__ = ["decide_nudges", "nudge_kueue", "plan_deadlines", "publish_deadline_artifacts", "push_deadline_metrics",
           "release_due_holds", "undo_deadline_holds"]


@gpuaas_task("plan-deadlines", timeout_seconds=300)
def plan_deadlines(snapshot: Snapshot) -> list[PoolPlan]:
    """Pure work in a task: bounded by the planner's own MILP limits, and by a timeout here."""
    return plan_pools(deadline_problems(snapshot))


@gpuaas_task("publish-deadline-artifacts")
def publish_deadline_artifacts(pools: list[PoolPlan]) -> None:
    rows = [{"cohort": p["cohort"], "flavor": p["flavor"], "GPUs": p["capacity_gpus"],
             "extra GPUs": p["extra_gpus"].get(p["flavor"], 0), "at risk": ", ".join(p["at_risk"]) or "-",
             "missed": ", ".join(p["missed"]) or "-", "exact": p["exact"]} for p in pool_dicts(pools)]
    table_artifact(key="gpuaas-deadline-plan", table=rows or [{"cohort": "-"}],
                          description="Deadline plan per cohort and flavor: extra GPUs that make every deadline hold")


@gpuaas_task("push-deadline-metrics", io=True)
def push_deadline_metrics(settings: GpuaasSettings, pools: list[PoolPlan]) -> int:
    assert settings.pushgateway_url
    return push_metrics(settings.pushgateway_url, "gpuaas_deadlines", deadline_metrics(pools),
                        timeout=settings.request_timeout_seconds)


@gpuaas_task("release-due-holds", io=True)
def release_due_holds(settings: GpuaasSettings, now: datetime) -> list[NudgeResult]:
    """From the API alone (no snapshot, no plan): a run that fails later has already released.

    Listed and patched at the Kueue version the cluster serves (v1beta2, else v1beta1), the one
    the writer negotiates: a cluster on v1beta1 only must get its holds released too.
    """
    api = make_api_client(settings)
    try:
        with store_and_writer(settings, api_client=api) as (store, writer):
            workloads = KubeLister(api, settings).custom_objects(KUEUE_GROUP, writer.kueue_version(), "workloads")
            return release_due(workloads, store, writer, now, flow_run_id=current_run_id())
    finally:
        api.close()


@gpuaas_task("decide-nudges")
def decide_nudges(settings: GpuaasSettings, pools: list[PoolPlan], snapshot: Snapshot,
                  now: datetime) -> list[Nudge]:
    return plan_nudges(pools, snapshot.workloads, now, settings.policy.deadlines)


@gpuaas_task("nudge-kueue", timeout_seconds=600)
def nudge_kueue(settings: GpuaasSettings, nudges: list[Nudge], mode: Mode) -> list[NudgeResult]:
    """Not retried: a half-done nudge is re-decided from the objects next run."""
    with store_and_writer(settings) as (store, writer):
        return apply_nudges(nudges, store, writer, mode=mode, flow_run_id=current_run_id())


@gpuaas_task("undo-holds", timeout_seconds=600)
def undo_deadline_holds(settings: GpuaasSettings, audit_ids: list[int]) -> list[NudgeResult]:
    with store_and_writer(settings) as (store, writer):
        return undo_holds(store, writer, audit_ids, flow_run_id=current_run_id())
