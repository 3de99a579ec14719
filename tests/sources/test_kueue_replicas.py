"""Kueue's gauges from a highly available Kueue, against a real Prometheus (promtool backfill).

With leader election and more than one replica, every Kueue replica exports the ClusterQueue gauges
(kubernetes-sigs/kueue#6772; since v0.16 each carries ``replica_role``, ``leader`` or ``follower``),
so Prometheus holds one series per replica for the same cell. A sum over them counts a queue's usage,
reservation and pending GPUs once per replica; the readers must count each cell once.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gpuaas.cluster.prometheus import PrometheusServer
from gpuaas.settings import GpuaasSettings
from gpuaas.sources._prom_client import PromClient, sample_value
from gpuaas.sources._promql import kueue_query
from gpuaas.sources._promql_cost import kueue_hours_query
from gpuaas.sources.queue_history import read_queue_history
from tests.sources.helpers import NOW, Sample

Factory = Callable[[list[Sample]], PrometheusServer]
GPU = "nvidia.com/gpu"
REPLICAS = (("leader", "10.0.0.1:8443"), ("follower", "10.0.0.2:8443"))


def _kueue_samples() -> list[Sample]:
    """ClusterQueue ``cq``: 4 GPUs in use, 6 reserved, 4 nominal, 3 pending, every minute for 3 hours, from both replicas."""
    out: list[Sample] = []
    cell = {"cohort": "all", "cluster_queue": "cq", "flavor": "h100", "resource": GPU}
    for role, instance in REPLICAS:
        scrape = {"job": "kueue", "instance": instance, "replica_role": role}
        for minute in range(180, -1, -1):
            ts = NOW.timestamp() - minute * 60
            out += [("kueue_cluster_queue_resource_usage", {**cell, **scrape}, 4.0, ts),
                    ("kueue_cluster_queue_resource_reservation", {**cell, **scrape}, 6.0, ts),
                    ("kueue_cluster_queue_nominal_quota", {**cell, **scrape}, 4.0, ts),
                    ("kueue_cluster_queue_resource_pending", {"cluster_queue": "cq", "resource": GPU, **scrape}, 3.0, ts),
                    ("kueue_pending_workloads", {"cluster_queue": "cq", "status": "active", **scrape}, 2.0, ts)]
    return out


@pytest.fixture(scope="module")
def ha_kueue(prometheus_factory: Factory) -> GpuaasSettings:
    return GpuaasSettings(prometheus_url=prometheus_factory(_kueue_samples()).url)


def test_queue_history_counts_each_cell_once_whatever_the_replicas(ha_kueue: GpuaasSettings) -> None:
    history = read_queue_history(ha_kueue, NOW, window_s=2 * 3600, percentile=90, gpu_resources=(GPU,))
    values = {stat: float(v) for stat, v in zip(history["stat"], history["value"], strict=True)}
    assert values["usage_p"] == 4.0
    assert values["reservation_p"] == 6.0
    assert values["borrowed_p"] == 2.0
    assert values["pending_median"] == 3.0
    assert values["pending_max"] == 3.0


def test_cost_report_kueue_hours_count_each_cell_once(ha_kueue: GpuaasSettings) -> None:
    prom = PromClient(ha_kueue)
    try:
        (row,) = prom.query(kueue_hours_query((GPU,), 3600.0, 60.0), NOW)
    finally:
        prom.close()
    assert row["metric"]["cluster_queue"] == "cq"
    assert sample_value(row) == pytest.approx(4.0)  # 4 GPUs for one hour


def test_collect_kueue_gauges_count_each_queue_once(ha_kueue: GpuaasSettings) -> None:
    prom = PromClient(ha_kueue)
    try:
        rows = prom.query(kueue_query(), NOW)
    finally:
        prom.close()
    pending = [sample_value(r) for r in rows if r["metric"].get("gpuaas_stat") == "pending_workloads"]
    assert pending == [2.0]
