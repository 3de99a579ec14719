"""The activity history per pod on a real Prometheus, minute by minute, worked out by hand.

Twenty 60 s samples per GPU series at ``S + 60 s * k`` (k = 1..20), read back in two chunks of ten
steps. Per pod and step the reading is the maximum over the pod's GPUs, each GPU taking the
activity metric where it has it and GPU_UTIL / 100 where it does not; a GPU scraped through a
dcgm-exporter without ``honorLabels`` belongs to its ``exported_pod``; a GPU no pod holds is left
out, and so is a step without a sample.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from gpuaas.cluster.prometheus import PrometheusServer
from gpuaas.settings import GpuaasSettings
from gpuaas.sources.history import pod_history
from tests.sources.helpers import NOW

pytestmark = pytest.mark.integration
ACT, UTIL = "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL"
S = (NOW - timedelta(minutes=20)).timestamp()
EXPORTER = {"pod": "nvidia-dcgm-exporter-x1", "namespace": "gpu-operator", "container": "nvidia-dcgm-exporter"}


def _gpu(pod: str, gpu: int, namespace: str = "team") -> dict[str, str]:
    return {"namespace": namespace, "pod": pod, "container": "main", "Hostname": "node-1", "gpu": str(gpu),
            "UUID": f"GPU-{pod}-{gpu}"}


def _samples(metric: str, labels: dict[str, str], value: Callable[[int], float | None]
             ) -> list[tuple[str, dict[str, str], float, float]]:
    return [(metric, labels, v, S + 60 * k) for k in range(1, 21) if (v := value(k)) is not None]


@pytest.fixture(scope="module")
def prometheus(prometheus_factory: Callable[[Any], PrometheusServer]) -> PrometheusServer:
    return prometheus_factory([
        # p1: three GPUs, one of them through the exporter's own labels (exported_pod)
        *_samples(ACT, _gpu("p1", 0), lambda k: 0.5 if k <= 10 else 0.0),
        *_samples(ACT, _gpu("p1", 1), lambda k: 0.2),
        *_samples(ACT, {**EXPORTER, "exported_pod": "p1", "exported_namespace": "team",
                        "exported_container": "main", "Hostname": "node-1", "gpu": "2", "UUID": "GPU-p1-2"},
                  lambda k: 0.7 if k in (15, 16) else 0.0),
        # p2: GPU_UTIL only, in percent
        *_samples(UTIL, _gpu("p2", 0), lambda k: 80.0),
        # p3: both on one GPU: the activity metric wins, though GPU_UTIL reads higher
        *_samples(ACT, _gpu("p3", 0), lambda k: 0.1),
        *_samples(UTIL, _gpu("p3", 0), lambda k: 90.0),
        # p4: one GPU with the activity metric, one with GPU_UTIL only: each GPU its own signal,
        # then the maximum (choosing the signal per pod would read 30 and drop the busier GPU)
        *_samples(ACT, _gpu("p4", 0), lambda k: 0.3),
        *_samples(UTIL, _gpu("p4", 1), lambda k: 60.0),
        # p5: no sample at minutes 5 to 7
        *_samples(ACT, _gpu("p5", 0), lambda k: None if 5 <= k <= 7 else 0.0),
        # free GPUs: the exporter's own pod (honorLabels true), and no pod label at all
        *_samples(ACT, {**EXPORTER, "Hostname": "node-1", "gpu": "3", "UUID": "GPU-free-3"}, lambda k: 0.9),
        *_samples(ACT, {"Hostname": "node-1", "gpu": "4", "UUID": "GPU-free-4"}, lambda k: 0.9),
        # a namespace the reading does not ask for
        *_samples(ACT, _gpu("q1", 0, namespace="other"), lambda k: 0.4),
    ])


def _expected() -> dict[str, dict[int, float]]:
    return {
        "p1": {k: 50.0 if k <= 10 else 70.0 if k in (15, 16) else 20.0 for k in range(1, 21)},
        "p2": dict.fromkeys(range(1, 21), 80.0),
        "p3": dict.fromkeys(range(1, 21), 10.0),
        "p4": dict.fromkeys(range(1, 21), 60.0),
        "p5": {k: 0.0 for k in range(1, 21) if not 5 <= k <= 7},
    }


def test_activity_per_pod_and_step(prometheus: PrometheusServer) -> None:
    settings = GpuaasSettings(prometheus_url=prometheus.url)
    start, end = datetime.fromtimestamp(S + 60, NOW.tzinfo), datetime.fromtimestamp(S + 1200, NOW.tzinfo)
    chunks = list(pod_history(settings, start, end, namespaces=("team",), chunk_s=600))
    assert [(c.index, c.count, c.queries) for c in chunks] == [(1, 2, 1), (2, 2, 2)]
    got: dict[str, dict[int, float]] = {}
    for chunk in chunks:
        assert set(chunk.samples["namespace"]) == {"team"}
        for row in chunk.samples.itertuples():
            got.setdefault(str(row.pod), {})[round((float(row.t) - S) / 60)] = float(row.value)
    assert got == _expected()
