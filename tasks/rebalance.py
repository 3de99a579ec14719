"""Tasks of the rebalance flow: read the history, plan per cohort (pure), apply under the lock, publish."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pandas as pd

from gpuaas.actions.quotas import apply_quota_plan, recent_quota_changes, recover_quota_plans
from gpuaas.errors import ConfigError, PolicyError
from gpuaas.models import Outcome, Snapshot
from gpuaas.policies.deadlines import PoolPlan
from gpuaas.policies.quotas import binding_resources, cohort_demands, deadline_gpus_per_queue, plan_quotas
from gpuaas.policy import Mode
from gpuaas.pushgateway import push_metrics
from gpuaas.settings import GpuaasSettings
from gpuaas.sources.kube import DEFAULT_GPU_RESOURCES
from gpuaas.sources.queue_history import read_queue_history
from gpuaas.store import open_store
from reports.rebalance import (
    CohortOutcome,
    borrowing_flags,
    change_rows,
    first_line,
    rebalance_markdown,
    rebalance_metrics,
)
from tasks._artifacts import markdown_artifact, summary_artifact, table_artifact
from tasks._options import current_run_id, gpuaas_task
from tasks.writes import store_and_writer

__all__ = ["apply_plans", "plan_cohorts", "publish_rebalance_artifacts", "push_rebalance_metrics", "read_history",
           "recent_changes"]

GPU_RESOURCES = list(DEFAULT_GPU_RESOURCES)



@gpuaas_task("read-queue-history", io=True)
def read_history(settings: GpuaasSettings, now: datetime, window_days: float) -> pd.DataFrame:
    """One Prometheus query over Kueue's per-queue series (its cost does not grow with Workloads)."""
    return read_queue_history(settings, now, window_s=window_days * 86400,
                              percentile=settings.policy.rebalance.usage_percentile, gpu_resources=GPU_RESOURCES)


@gpuaas_task("recent-quota-changes")
def recent_changes(settings: GpuaasSettings, now: datetime) -> dict[tuple[str, str], int]:
    with open_store(settings) as store:
        return recent_quota_changes(store, now - timedelta(days=settings.policy.rebalance.no_reversal_days))


@gpuaas_task("plan-quotas", timeout_seconds=300)
def plan_cohorts(settings: GpuaasSettings, snapshot: Snapshot, history: pd.DataFrame, pools: list[PoolPlan],
                 recent: dict[tuple[str, str], int], cohort: str | None) -> list[CohortOutcome]:
    """Demand, then the MILP, per cohort; a contradictory or infeasible cohort is explained, not raised."""
    demands = cohort_demands(snapshot, history, settings.policy, deadline_gpus=deadline_gpus_per_queue(pools, snapshot),
                             recent_change=recent, gpu_resources=GPU_RESOURCES, cohorts=[cohort] if cohort else ())
    out = []
    for d in demands:
        try:
            plan = plan_quotas(d.queues, d.limits)
        except (ConfigError, PolicyError) as exc:
            out.append(CohortOutcome(d.cohort, d, None, error=str(exc), result=Outcome.no_plan))
            continue
        binding = binding_resources(snapshot.quotas, plan.changes, GPU_RESOURCES)
        if binding:
            out.append(CohortOutcome(d.cohort, d, None, error="; ".join(binding), result=Outcome.no_plan))
            continue
        out.append(CohortOutcome(d.cohort, d, plan, flags=borrowing_flags(d, plan) + plan.notes))
    return out


@gpuaas_task("apply-quota-plans", timeout_seconds=600)
def apply_plans(settings: GpuaasSettings, outcomes: list[CohortOutcome], mode: Mode, degraded: str | None,
                snapshot_id: int, now: datetime) -> list[CohortOutcome]:
    """Recover an interrupted plan (apply), then record every plan and, in apply mode, carry it out.

    Not retried: a retry of a half-applied plan is exactly what the audit log and the recovery guard against.
    """
    rb = settings.policy.rebalance
    with store_and_writer(settings) as (store, writer):
        if mode is Mode.apply:
            recover_quota_plans(store, writer, flow_run_id=current_run_id(), now=now, gpu_resources=GPU_RESOURCES,
                                manage_limits=rb.manage_limits)
        done = []
        for o in outcomes:
            if o.plan is None:
                done.append(o)
                continue
            evidence: dict[str, Any] = {"snapshot_id": snapshot_id, "notes": o.demand.notes, "flags": o.flags,
                                        "history_seconds": o.demand.history_seconds,
                                        "limits": o.demand.limits.__dict__}
            result = apply_quota_plan(store, writer, o.cohort, o.plan, mode=mode, degraded=degraded,
                                      flow_run_id=current_run_id(), evidence=evidence, gpu_resources=GPU_RESOURCES,
                                      manage_limits=rb.manage_limits)
            done.append(CohortOutcome(o.cohort, o.demand, o.plan, o.error, result.plan_id, result.outcome,
                                      result.message, o.flags))
        return done


@gpuaas_task("publish-rebalance-artifacts")
def publish_rebalance_artifacts(outcomes: list[CohortOutcome], mode: Mode, pools: list[PoolPlan],
                                degraded: str | None) -> None:
    extra: dict[str, dict[str, int]] = {}
    for p in pools:
        n = p.plan.extra_gpus.get(p.problem.flavor, 0)
        if n:
            extra.setdefault(p.problem.cohort, {})[p.problem.flavor] = n
    summary_artifact(key="gpuaas-rebalance-summary", markdown=rebalance_markdown(outcomes, mode.value, extra, degraded))
    rows = change_rows(outcomes)
    if rows:
        table_artifact(key="gpuaas-rebalance-plan", table=rows,
                              description=f"Quota plan ({mode.value}): before -> after per queue and flavor, with reasons")
    else:  # not a one-row table of placeholders: say why there is no move
        markdown_artifact(key="gpuaas-rebalance-plan", markdown=first_line(outcomes, mode.value, degraded) + "\n",
                                 description=f"Quota plan ({mode.value})")


@gpuaas_task("push-rebalance-metrics", io=True)
def push_rebalance_metrics(settings: GpuaasSettings, outcomes: list[CohortOutcome]) -> int:
    assert settings.pushgateway_url
    return push_metrics(settings.pushgateway_url, "gpuaas_rebalance", rebalance_metrics(outcomes),
                        timeout=settings.request_timeout_seconds)
