"""Tasks of the rebalance flow: read the history and the audit log, plan (pure), apply under the lock, publish.

Each phase is one call of ``gpuaas.operations.rebalance``; the tasks add the store, the writer,
the retries and the timeouts, and the artifacts.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd

from gpuaas.models import Snapshot
from gpuaas.operations import rebalance as op
from gpuaas.policies.deadlines import PoolPlan
from gpuaas.policy import FreezeOn, Mode, WritingFlow
from gpuaas.pushgateway import push_metrics
from gpuaas.settings import GpuaasSettings
from gpuaas.sources.queue_history import read_queue_history
from gpuaas.store import open_store
from reports.rebalance import first_line, plan_rows, rebalance_markdown, rebalance_metrics
from tasks._artifacts import markdown_artifact, summary_artifact, table_artifact
from tasks._options import current_run_id, gpuaas_task
from tasks.writes import store_and_writer

__all__ = ["apply_rebalance", "plan_rebalance", "publish_rebalance_artifacts", "push_rebalance_metrics",
           "read_audit_view", "read_history"]


@gpuaas_task("read-queue-history", io=True)
def read_history(settings: GpuaasSettings, now: datetime, window_days: float) -> pd.DataFrame:
    """One Prometheus query over Kueue's per-queue series (its cost does not grow with Workloads)."""
    return read_queue_history(settings, now, window_s=window_days * 86400,
                              percentile=settings.policy.rebalance.usage_percentile,
                              gpu_resources=list(op.GPU_RESOURCES))


@gpuaas_task("recent-quota-changes")
def read_audit_view(settings: GpuaasSettings, now: datetime) -> op.RebalanceAuditView:
    """Read before planning, so that the plan itself stays pure."""
    with open_store(settings) as store:
        return op.read_audit_view(store, settings.policy, now)


@gpuaas_task("plan-quotas", timeout_seconds=300)
def plan_rebalance(settings: GpuaasSettings, snapshot: Snapshot, history: pd.DataFrame, pools: list[PoolPlan],
                   audit: op.RebalanceAuditView, cohort: str | None, history_error: str | None,
                   snapshot_id: int, window_days: float | None = None) -> op.RebalancePlan:
    """Demand, then the MILP, per cohort; a contradictory or infeasible cohort is explained, not raised.
    ``window_days``: the history window the run read (``--history-days``, else the policy's)."""
    return op.plan(snapshot, history, settings.policy, audit=audit, pools=pools, cohort=cohort,
                   history_error=history_error, snapshot_id=snapshot_id, window_days=window_days,
                   held=settings.policy.frozen_tenants(WritingFlow.rebalance, datetime.now(UTC)),
                   policy_file=settings.policy_file_name)


@gpuaas_task("apply-quota-plans", timeout_seconds=600)
def apply_rebalance(settings: GpuaasSettings, plan: op.RebalancePlan, mode: Mode,
                    now: datetime) -> op.RebalanceResult:
    """Not retried: a retry of a half-applied plan is exactly what the audit log and the recovery guard against."""
    with store_and_writer(settings, deciding=True) as (store, writer):
        return op.apply(plan, store, writer, mode=mode, flow_run_id=current_run_id(), now=now)


@gpuaas_task("publish-rebalance-artifacts")
def publish_rebalance_artifacts(outcomes: list[op.CohortOutcome], mode: Mode, pools: list[PoolPlan],
                                degraded: str | None, frozen: FreezeOn | None = None, misnamed: tuple[str, ...] = (),
                                refused: bool = False) -> None:
    """The summary (markdown) and the plan table; ``misnamed`` and ``refused``: as ``first_line`` takes them."""
    extra: dict[str, dict[str, int]] = {}
    for p in pools:
        n = p.plan.extra_gpus.get(p.problem.flavor, 0)
        if n:
            extra.setdefault(p.problem.cohort, {})[p.problem.flavor] = n
    summary_artifact(key="gpuaas-rebalance-summary", markdown=rebalance_markdown(
        outcomes, mode.value, extra, degraded, frozen, misnamed=misnamed, refused=refused))
    rows = plan_rows(outcomes)
    if rows:
        table_artifact(key="gpuaas-rebalance-plan", table=rows,
                       description=f"Quota plan ({mode.value}): before -> after per queue and flavor; why each, in "
                                   "gpuaas-rebalance-summary")
    else:  # not a one-row table of placeholders: say why there is no move
        markdown_artifact(key="gpuaas-rebalance-plan", markdown=first_line(outcomes, mode.value, degraded, frozen,
                                                                            misnamed=misnamed, refused=refused) + "\n",
                          description=f"Quota plan ({mode.value})")


@gpuaas_task("push-rebalance-metrics", io=True)
def push_rebalance_metrics(settings: GpuaasSettings, outcomes: list[op.CohortOutcome]) -> int:
    return push_metrics(settings, "gpuaas_rebalance", rebalance_metrics(outcomes))
