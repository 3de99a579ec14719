"""Per-queue demand history from Prometheus: Kueue's own gauges over the rebalance window.

One instant query (subqueries over ``[window:step]``) per run, whatever the number of queues
and Workloads: Kueue already aggregates per ClusterQueue and flavor
(``kueue_cluster_queue_resource_usage`` / ``_reservation`` / ``_nominal_quota``, and
``kueue_cluster_queue_resource_pending`` per queue and resource), so the cost grows with the
number of queue cells, never with the number of Workloads. The answer is a long frame:
``cluster_queue, flavor, stat, value`` with ``stat`` one of

* ``usage_p``, ``reservation_p``: the policy's percentile of admitted / quota-reserved GPUs;
* ``borrowed_p``: the same percentile of ``max(0, reservation - nominal)``;
* ``pending_median``: the median of pending GPU requests (per queue; ``flavor`` empty: Kueue has
  not assigned pending work a flavor);
* ``pending_max``: the most GPUs pending at once (per queue, ``flavor`` empty): with ``usage_p``,
  the queue's demand at its busiest, which says whether the cohort was full within the window;
* ``history_seconds``: how much of the window has samples (a fresh install has little).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import pandas as pd

from gpuaas.settings import GpuaasSettings
from gpuaas.sources._prom_client import PromClient, sample_value
from gpuaas.sources._promql import any_of, duration, kueue_once, tag, union

__all__ = ["HISTORY_COLUMNS", "history_query", "read_queue_history"]

HISTORY_COLUMNS = ["cluster_queue", "flavor", "stat", "value"]
_USAGE = "kueue_cluster_queue_resource_usage"
_RESERVATION = "kueue_cluster_queue_resource_reservation"
_NOMINAL = "kueue_cluster_queue_nominal_quota"
_PENDING = "kueue_cluster_queue_resource_pending"


def history_query(window_s: float, step_s: float, percentile: float, gpu_resources: Sequence[str]) -> str:
    """The one query of a rebalance run (see the module docstring for its stats)."""
    sel = f"{{{any_of('resource', gpu_resources)}}}"
    rng = f"[{duration(window_s)}:{duration(step_s)}]"
    q = percentile / 100.0
    cells = "cluster_queue, flavor"

    def per_cell(expr: str) -> str:
        return f"(sum by ({cells}) ({expr}))"

    def once(metric: str, keys: str = f"{cells}, resource") -> str:  # one series per cell, whatever the replicas
        return kueue_once(metric + sel, keys)

    borrowed = f"clamp_min({once(_RESERVATION)} - {once(_NOMINAL)}, 0)"
    pending = f"(sum by (cluster_queue) ({once(_PENDING, 'cluster_queue, resource')}))"
    return union([
        tag(f"quantile_over_time({q:g}, {per_cell(once(_USAGE))}{rng})", "gpuaas_stat", "usage_p"),
        tag(f"quantile_over_time({q:g}, {per_cell(once(_RESERVATION))}{rng})", "gpuaas_stat", "reservation_p"),
        tag(f"quantile_over_time({q:g}, {per_cell(borrowed)}{rng})", "gpuaas_stat", "borrowed_p"),
        tag(f"quantile_over_time(0.5, {pending}{rng})", "gpuaas_stat", "pending_median"),
        tag(f"max_over_time({pending}{rng})", "gpuaas_stat", "pending_max"),
        tag(f"count_over_time({per_cell(once(_NOMINAL))}{rng}) * {step_s:g}", "gpuaas_stat", "history_seconds"),
    ])


def read_queue_history(settings: GpuaasSettings, now: datetime, *, window_s: float, percentile: float,
                       gpu_resources: Sequence[str], step_s: float = 300.0) -> pd.DataFrame:
    """The history frame at ``now``; raises ``SourceError`` subclasses when Prometheus fails."""
    prom = PromClient(settings)
    try:
        results = prom.query(history_query(window_s, step_s, percentile, gpu_resources), now)
    finally:
        prom.close()
    rows = [{"cluster_queue": r["metric"].get("cluster_queue", ""), "flavor": r["metric"].get("flavor", ""),
             "stat": r["metric"].get("gpuaas_stat", ""), "value": sample_value(r)} for r in results]
    return pd.DataFrame(rows, columns=HISTORY_COLUMNS)
