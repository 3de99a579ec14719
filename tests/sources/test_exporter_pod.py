"""The dcgm-exporter's own pod is never a workload, however it was installed, against a real Prometheus.

The upstream Helm chart (NVIDIA/dcgm-exporter ``deployment/templates/daemonset.yaml``) names its container
``exporter`` and its pods after the release (``dcgm-exporter-7xk2p``); the GPU Operator names both
``nvidia-dcgm-exporter``. A series carries the exporter's own pod where the exporter mapped no pod to the GPU
and the scrape honours its labels (``honorLabels: true``), and on every series where it does not (the
workload then is in ``exported_pod``). Matching only ``.*dcgm-exporter.*`` against the container made the
chart's free GPUs a workload, ``Pod gpu-monitoring/dcgm-exporter-7xk2p``, that the replay reclaimed. The
exporter is known by its container or by its pod's name, in the live reading and in the history alike.

Idle samples every 15 s for the 40 minutes before NOW, each GPU on its own:

* ``chart-free``: the chart, no pod on the GPU: the exporter's pod, container ``exporter`` (with ``honorLabels``
  or without: the same labels)
* ``override-free``: the chart with ``fullnameOverride: gpu-telemetry``: only the container tells
* ``renamed-free``: a container renamed ``metrics``: only the pod's name tells
* ``chart-train``: the chart without ``honorLabels``, the GPU given to ``team/train-0``: ``exported_pod``
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pandas as pd
import pytest

from gpuaas.cluster.prometheus import PrometheusServer
from gpuaas.idle_history import read_activity_history
from gpuaas.settings import GpuaasSettings
from gpuaas.snapshot import workload_pods
from gpuaas.sources.history import pod_history
from gpuaas.sources.kube import KubeState
from gpuaas.sources.prometheus import read_prometheus
from tests.sources.helpers import NOW

pytestmark = pytest.mark.integration
ACT = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
CHART = {"pod": "dcgm-exporter-7xk2p", "namespace": "gpu-monitoring", "container": "exporter",
         "job": "dcgm-exporter", "instance": "10.0.9.9:9400", "service": "dcgm-exporter", "endpoint": "metrics"}
GPUS = {
    "chart-free": CHART,
    "override-free": {**CHART, "pod": "gpu-telemetry-x9z8q"},
    "renamed-free": {**CHART, "container": "metrics"},
    "chart-train": {**CHART, "exported_pod": "train-0", "exported_namespace": "team", "exported_container": "main"},
}


@pytest.fixture(scope="module")
def prometheus(prometheus_factory: Callable[[Any], PrometheusServer]) -> PrometheusServer:
    samples = []
    for i, (name, labels) in enumerate(GPUS.items()):
        gpu = {**labels, "gpu": str(i), "UUID": f"GPU-{name}", "Hostname": "node-9", "modelName": "NVIDIA H100"}
        samples += [(ACT, gpu, 0.0, NOW.timestamp() - 15 * k) for k in range(160, -1, -1)]
    return prometheus_factory(samples)


def test_the_live_reading_gives_the_exporters_gpus_no_pod(prometheus: PrometheusServer) -> None:
    gpus = read_prometheus(GpuaasSettings(prometheus_url=prometheus.url), NOW, [30]).gpus
    by_uuid = gpus.set_index("uuid")[["namespace", "pod", "container"]]
    assert by_uuid.to_dict("index") == {f"GPU-{name}": {"namespace": "", "pod": "", "container": ""}
                                        for name in GPUS if name != "chart-train"} | {
        "GPU-chart-train": {"namespace": "team", "pod": "train-0", "container": "main"}}


def test_the_replay_never_reclaims_the_exporter(prometheus: PrometheusServer) -> None:
    settings = GpuaasSettings(prometheus_url=prometheus.url)
    start, end = NOW - timedelta(minutes=35), NOW
    pods = pd.concat([c.samples for c in pod_history(settings, start, end, chunk_s=1800)])
    assert set(zip(pods["namespace"], pods["pod"], strict=True)) == {("team", "train-0")}
    links = workload_pods(KubeState("v1beta2", (), (), (), (), (), (), (), (), 0))
    reading = read_activity_history(settings, start, end, links=links, thresholds_pct=[5.0], chunk_s=1800)
    assert set(reading.stream.runs()["pod"]) == {"Pod team/train-0"}
