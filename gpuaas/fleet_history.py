"""What every collect keeps for later: per-queue and per-tenant aggregates of one snapshot.

A full snapshot holds a row per Workload and per GPU (about 1 KB a row: tens of MB a cycle at
16,000 GPUs), yet what later runs and the incident review ask of the past is per queue and
per tenant: how much quota a queue had, used, borrowed and waited for; how many of a team's
GPUs were allocated, idle or unobserved. These rows are that, a few hundred per cycle at any
fleet size; the workload-level evidence behind a decision lives in its audit row, and full
snapshots are kept only as the policy's ``store`` section says. Pure: a snapshot in, frames out.

Queue rows are per ClusterQueue and GPU flavor. Pending work has no flavor until Kueue admits
it, so a queue's pending figures sit on its first GPU flavor (the one Kueue tries first) and
are zero on the others: summing a column over rows never counts a Workload twice. A queue with
no GPU quota cell still gets one row (flavor ``""``) so its backlog is not lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import pandas as pd

from gpuaas.models import Snapshot, WorkloadState
from gpuaas.policies.reclaim import find_idle
from gpuaas.policy import Policy
from gpuaas.sources.kube import DEFAULT_GPU_RESOURCES

__all__ = ["NO_TENANT", "QUEUE_HISTORY_COLUMNS", "TENANT_HISTORY_COLUMNS", "queue_aggregates", "tenant_aggregates"]

QUEUE_HISTORY_COLUMNS = [
    "cluster_queue", "flavor", "cohort", "tenant", "nominal_gpus", "usage_gpus", "reserved_gpus", "borrowed_gpus",
    "borrowing_limit_gpus", "pending_workloads", "pending_gpus", "oldest_pending_seconds", "admitted_workloads",
]
TENANT_HISTORY_COLUMNS = ["tenant", "workloads", "allocated_gpus", "idle_gpus", "unknown_gpus", "pending_gpus"]
NO_TENANT = "(no tenant)"
"""Workloads in no tenant of the policy are summed under this name, so fleet totals add up."""

_QUEUE_LEVEL = ["pending_workloads", "pending_gpus", "oldest_pending_seconds", "admitted_workloads"]


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def queue_aggregates(snapshot: Snapshot, gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES) -> pd.DataFrame:
    """One row per (ClusterQueue, GPU flavor) with QUEUE_HISTORY_COLUMNS."""
    queues = snapshot.queues
    if queues.empty or "name" not in queues:
        return pd.DataFrame(columns=QUEUE_HISTORY_COLUMNS)
    quotas = snapshot.quotas
    if quotas.empty or "resource" not in quotas:
        quotas = pd.DataFrame(columns=["cluster_queue", "flavor", "resource", "nominal", "usage", "reserved",
                                       "borrowed", "borrowing_limit"])
    gpu = quotas[quotas["resource"].isin(list(gpu_resources))]
    cells = gpu.groupby(["cluster_queue", "flavor"], sort=False, as_index=False).agg(
        nominal_gpus=("nominal", "sum"), usage_gpus=("usage", "sum"), reserved_gpus=("reserved", "sum"),
        borrowed_gpus=("borrowed", "sum"), borrowing_limit_gpus=("borrowing_limit", lambda s: s.sum(min_count=1)))
    base = queues[["name", "cohort", "tenant", *_QUEUE_LEVEL]].rename(columns={"name": "cluster_queue"})
    rows = base.merge(cells, on="cluster_queue", how="left")
    rows["flavor"] = rows["flavor"].fillna("")
    first = ~rows.duplicated("cluster_queue", keep="first")
    for col in _QUEUE_LEVEL:
        rows[col] = rows[col].where(first, 0 if col != "oldest_pending_seconds" else float("nan"))
    for col in ("nominal_gpus", "usage_gpus", "reserved_gpus", "borrowed_gpus", "pending_gpus"):
        rows[col] = rows[col].astype(float).fillna(0.0)
    for col in ("pending_workloads", "admitted_workloads"):
        rows[col] = rows[col].fillna(0).astype(int)
    rows["cohort"] = rows["cohort"].map(_text).astype(object)
    rows["tenant"] = rows["tenant"].map(_text).astype(object)
    return rows.reindex(columns=QUEUE_HISTORY_COLUMNS).reset_index(drop=True)


def tenant_aggregates(snapshot: Snapshot, policy: Policy, now: datetime | None = None) -> pd.DataFrame:
    """One row per tenant with TENANT_HISTORY_COLUMNS; ``idle`` and ``unknown`` are the idle verdicts' GPUs.

    ``idle`` uses the same rule as the reclaim flow (``find_idle``), so the history of idle GPUs
    is what reclaim saw, not a second definition that could disagree with it.
    """
    workloads = snapshot.workloads
    if workloads.empty or "state" not in workloads:
        return pd.DataFrame(columns=TENANT_HISTORY_COLUMNS)
    frame = workloads.assign(tenant=workloads["tenant"].map(_text).fillna(NO_TENANT),
                             gpus=workloads["gpus"].astype(float).fillna(0.0))
    holding = frame["state"].isin([WorkloadState.admitted.value, WorkloadState.quota_reserved.value]) & (frame["gpus"] > 0)
    queued = (frame["state"] == WorkloadState.pending.value) & frame["active"].astype(bool)
    out = pd.DataFrame({
        "workloads": frame.groupby("tenant").size(),
        "allocated_gpus": frame[holding].groupby("tenant")["gpus"].sum(),
        "pending_gpus": frame[queued].groupby("tenant")["gpus"].sum(),
    })
    idle = find_idle(workloads, policy, now or snapshot.collected_at)
    if not idle.empty:
        idle = idle.assign(tenant=idle["tenant"].map(_text).fillna(NO_TENANT), gpus=idle["gpus"].astype(float))
        for verdict in ("idle", "unknown"):
            out[f"{verdict}_gpus"] = idle[idle["verdict"] == verdict].groupby("tenant")["gpus"].sum()
    out = out.reindex(columns=TENANT_HISTORY_COLUMNS[1:]).fillna(0)
    out["workloads"] = out["workloads"].astype(int)
    return out.rename_axis("tenant").reset_index().reindex(columns=TENANT_HISTORY_COLUMNS)
