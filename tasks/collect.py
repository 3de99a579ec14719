"""Steps of the collect flow: one per source (retried when transient), store, publish.

They are ``tasks._steps`` steps: Prefect tasks in a Prefect flow run, plain calls elsewhere (this module
imports no Prefect, so the command line can run the collect without it)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from gpuaas.fleet_history import queue_aggregates, tenant_aggregates
from gpuaas.models import Snapshot, SourceStatus
from gpuaas.policies.reclaim import find_idle
from gpuaas.pushgateway import push_metrics
from gpuaas.settings import GpuaasSettings
from gpuaas.snapshot import read_source
from reports.collect import backlog_rows, collect_metrics, quality_rows, summary_markdown
from tasks._artifacts import summary_artifact, table_artifact
from tasks._options import IO_TASK_OPTIONS
from tasks._steps import step

__all__ = ["count_idle_candidates", "publish_artifacts", "push_summary", "read_one_source", "store_snapshot"]


@step(name="read-source", task_run_name="read-{name}", **IO_TASK_OPTIONS)
def read_one_source(
    name: str, settings: GpuaasSettings, now: datetime, windows: list[float]
) -> tuple[Any, SourceStatus]:
    return read_source(name, settings, now, windows)


@step(name="store-snapshot", retries=2, retry_delay_seconds=2)
def store_snapshot(settings: GpuaasSettings, snapshot: Snapshot, summary: dict[str, Any]) -> int:
    """Persist the cycle's per-queue and per-tenant history and its snapshot row, the full
    snapshot only as ``store.full_snapshot_every_minutes`` says (and when degraded: the cycle an
    incident review asks about), then prune (history past retention, full documents past the
    newest ``store.keep_full_snapshots``); returns the snapshot id, whose snapshot this process
    keeps in memory for the reclaim flow (``gpuaas.store.load_snapshot``)."""
    from gpuaas.store import open_store, remember_snapshot  # here: SQLAlchemy is paid by the step that writes

    policy = settings.policy
    queues = queue_aggregates(snapshot).to_dict(orient="records")
    tenants = tenant_aggregates(snapshot, policy).to_dict(orient="records")
    retention = timedelta(days=policy.collect.retention_days)
    with open_store(settings) as store:
        store.save_history(snapshot.collected_at, queues, tenants)
        full = snapshot.degraded or store.wants_full_snapshot(
            snapshot.collected_at, timedelta(minutes=policy.store.full_snapshot_every_minutes))
        record = store.save_snapshot(snapshot.collected_at, summary, {"snapshot": snapshot.to_json()} if full else {})
        remember_snapshot(store, int(record.id or 0), snapshot)
        store.prune_snapshots(retention, now=snapshot.collected_at, keep_latest=policy.store.keep_full_snapshots)
        store.prune_history(retention, now=snapshot.collected_at)
        return int(record.id or 0)


@step(name="count-idle-candidates")
def count_idle_candidates(settings: GpuaasSettings, snapshot: Snapshot) -> int:
    idle = find_idle(snapshot.workloads, settings.policy, snapshot.collected_at)
    return int((idle["verdict"] == "idle").sum())


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
    assert settings.pushgateway_url
    return push_metrics(settings.pushgateway_url, "gpuaas_collect", collect_metrics(snapshot, summary, idle_candidates),
                        timeout=settings.request_timeout_seconds)
