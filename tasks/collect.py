"""Steps of the collect flow around ``gpuaas.operations.collect``: one per source (retried when transient), plan,
store, publish.

They are ``tasks._steps`` steps: Prefect tasks in a Prefect flow run, plain calls elsewhere (this module
imports no Prefect, so the command line can run the collect without it)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from gpuaas.models import Snapshot
from gpuaas.operations import collect as operation
from gpuaas.pushgateway import push_metrics
from gpuaas.settings import GpuaasSettings
from reports.collect import backlog_rows, collect_metrics, policy_metrics, quality_rows, summary_markdown
from tasks._artifacts import summary_artifact, table_artifact
from tasks._options import IO_TASK_OPTIONS, retry_unless_misconfigured
from tasks._steps import step

__all__ = ["plan_collect", "publish_artifacts", "push_summary", "read_one_source", "store_snapshot"]


@step(name="read-source", task_run_name="read-{name}", **IO_TASK_OPTIONS)
def read_one_source(name: str, settings: GpuaasSettings, now: datetime, windows: list[float]) -> operation.Reading:
    return operation.read(name, settings, now, windows)


@step(name="plan-collect", retries=2, retry_delay_seconds=2, retry_condition_fn=retry_unless_misconfigured)
def plan_collect(settings: GpuaasSettings, snapshot: Snapshot) -> operation.CollectPlan:
    """The idle candidates, the history rows and whether the full document is due (the store's two reads); refused
    when the store holds another cluster's history."""
    from gpuaas.store import open_store  # here: SQLAlchemy is paid by the steps that touch the store

    with open_store(settings) as store:
        due = operation.full_due(store, snapshot.collected_at, settings.policy)
        stored = store.latest_cluster()
    return operation.plan(snapshot, settings.policy, full_due=due, stored_cluster=stored,
                          database_variable=settings.database_variable)


@step(name="store-snapshot", retries=2, retry_delay_seconds=2, retry_condition_fn=retry_unless_misconfigured)
def store_snapshot(settings: GpuaasSettings, plan: operation.CollectPlan) -> int:
    """History, the snapshot row, pruning; returns the snapshot id, whose snapshot this process keeps in memory
    for the deciding flows (``gpuaas.store.load_snapshot``)."""
    from gpuaas.store import open_store

    with open_store(settings) as store:
        return operation.apply(plan, store)


@step(name="publish-artifacts")
def publish_artifacts(snapshot: Snapshot, summary: dict[str, Any], idle_candidates: int) -> None:
    table_artifact(
        key="gpuaas-collect-backlog", table=backlog_rows(summary),
        description="Kueue backlog per ClusterQueue (GPUs summed over flavors)",
    )
    table_artifact(
        key="gpuaas-collect-data-quality", table=quality_rows(snapshot),
        description="Per source: answered, latency, staleness",
    )
    summary_artifact(key="gpuaas-collect-summary", markdown=summary_markdown(summary, idle_candidates, snapshot.degraded))


@step(name="push-metrics", **IO_TASK_OPTIONS)
def push_summary(settings: GpuaasSettings, snapshot: Snapshot, summary: dict[str, Any], idle_candidates: int) -> int:
    return push_metrics(settings, "gpuaas_collect", collect_metrics(snapshot, summary, idle_candidates)
                        + policy_metrics(settings.policy, snapshot.collected_at))
