"""The preflight's census of GPU series counts what the collect reads: each GPU once, the selected series only.

When no GPU workload has a sample, the preflight asks how many series the activity metrics have and how many name a
pod. Behind an HA pair that nothing deduplicates every GPU's series comes twice (``prometheus_replica``), and a
tenant's own scrape can write series under the DCGM names: the census must count as the collect reads, one series a
GPU, and only those ``GPUAAS_METRICS__DCGM_SELECTOR`` selects. Against a real Prometheus.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gpuaas.cluster.prometheus import PrometheusServer
from gpuaas.settings import load_settings
from gpuaas.sources.prometheus import gpu_series_census
from tests.sources.helpers import NOW, series

pytestmark = pytest.mark.integration
ACT = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
EXPORTED = {"job": "nvidia-dcgm-exporter", "Hostname": "node-1", "modelName": "NVIDIA H100 80GB HBM3"}


def _gpu(i: int, replica: str, pod: str | None) -> dict[str, str]:
    labels = {**EXPORTED, "instance": "10.0.0.5:9400", "gpu": str(i), "UUID": f"GPU-{i}", "prometheus_replica": replica}
    return {**labels, "namespace": "team-a", "pod": pod} if pod else labels


@pytest.fixture(scope="module")
def prometheus(prometheus_factory: Callable[[Any], PrometheusServer]) -> PrometheusServer:
    """Three GPUs (two of them a pod's), each scraped by both replicas of an HA pair, and one forged series."""
    gpus = [(ACT, _gpu(i, replica, "train-0" if i < 2 else None), 0.0) for i in range(3) for replica in ("a", "b")]
    forged = (ACT, {"job": "team-b/app", "instance": "10.1.0.7:8080", "gpu": "0", "UUID": "GPU-x", "Hostname": "n",
                    "namespace": "team-b", "pod": "app-0", "exported_namespace": "team-a", "exported_pod": "train-0"},
              0.9)
    return prometheus_factory(series([*gpus, forged], minutes=5))


def test_each_gpu_counts_once_whatever_the_replicas(prometheus: PrometheusServer) -> None:
    found, labelled = gpu_series_census(load_settings(prometheus_url=prometheus.url, nvml="off"), NOW)
    assert found == {ACT: 4}  # three GPUs and the forged series, not seven copies
    assert labelled["pod"] == 3 and labelled["exported_pod"] == 1


def test_only_the_selected_series_are_counted(prometheus: PrometheusServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUAAS_METRICS__DCGM_SELECTOR", 'job="nvidia-dcgm-exporter"')
    found, labelled = gpu_series_census(load_settings(prometheus_url=prometheus.url, nvml="off"), NOW)
    assert found == {ACT: 3}
    assert labelled["pod"] == 2 and labelled["exported_pod"] == 0
