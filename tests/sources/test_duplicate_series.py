"""One GPU under two series that differ only by the scrape is one GPU, against a real Prometheus.

An HA pair of Prometheus servers (``prometheus_replica``) behind one query endpoint, or two jobs scraping
one exporter, store each sample of a GPU twice. Added up, they made a feed at half the scrape rate read as
full coverage (the workload idle where one series alone reads ``unknown``), and made the replay's history
count a 1-GPU pod as 2 GPUs, so a 2-GPU pod with one GPU blind read as fully observed and was "reclaimed".
The series are merged per sample step before anything is counted: coverage counts a GPU's samples once,
and the history counts devices (``UUID`` and MIG instance), not series.

Live: samples every 30 s against a 15 s scrape interval, for 40 minutes, a 30-minute window: ``single``
(one series), ``pair`` (two replicas), ``jobs`` (two jobs and instances) all read half coverage.
History: 60 s samples; ``dup-2`` holds 2 GPUs, one scraped by an HA pair and the other silent; ``jobs-1``
holds 1 GPU scraped by two jobs; ``mig-2`` holds two MIG instances of one GPU, each its own device.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pandas as pd
import pytest

from gpuaas.cluster.prometheus import PrometheusServer
from gpuaas.idle_history import read_activity_history
from gpuaas.models import PodGpus, Workload, WorkloadState
from gpuaas.policies.reclaim.coverage import telemetry_complete
from gpuaas.settings import GpuaasSettings
from gpuaas.snapshot import workload_pods
from gpuaas.sources.history import pod_history
from gpuaas.sources.kube import KubeState
from gpuaas.sources.prometheus import read_prometheus
from tests.sources.helpers import NOW

pytestmark = pytest.mark.integration
ACT = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
REPLICAS = ({"prometheus_replica": "prometheus-k8s-0"}, {"prometheus_replica": "prometheus-k8s-1"})
JOBS = ({"job": "dcgm", "instance": "10.0.0.1:9400"}, {"job": "gpu-metrics", "instance": "10.0.0.1:9400"})
S = (NOW - timedelta(minutes=20)).timestamp()
HISTORY = ("dup-2", "jobs-1", "mig-2")


def _gpu(pod: str, gpu: int = 0, **extra: str) -> dict[str, str]:
    return {"namespace": "team", "pod": pod, "container": "main", "Hostname": "node-1", "gpu": str(gpu),
            "UUID": f"GPU-{pod}-{gpu}", "modelName": "NVIDIA H100 80GB HBM3", **extra}


def _every(metric: str, labels: dict[str, str], every_s: float, span_s: float, end: float
           ) -> list[tuple[str, dict[str, str], float, float]]:
    """Idle samples every ``every_s`` over ``span_s`` up to ``end``, oldest first."""
    steps = int(span_s // every_s)
    return [(metric, labels, 0.0, end - every_s * k) for k in range(steps, -1, -1)]


@pytest.fixture(scope="module")
def prometheus(prometheus_factory: Callable[[Any], PrometheusServer]) -> PrometheusServer:
    live = lambda labels: _every(ACT, labels, 30.0, 40 * 60, NOW.timestamp())  # noqa: E731
    history = lambda labels: _every(ACT, labels, 60.0, 19 * 60, S + 1200)  # noqa: E731
    return prometheus_factory([
        *live(_gpu("single")),
        *(s for extra in REPLICAS for s in live(_gpu("pair", **extra))),
        *(s for extra in JOBS for s in live(_gpu("jobs", **extra))),
        *(s for extra in REPLICAS for s in history(_gpu("dup-2", 0, **extra))),  # its GPU 1 sends nothing
        *(s for extra in JOBS for s in history(_gpu("jobs-1", 0, **extra))),
        *history(_gpu("mig-2", 0, GPU_I_ID="1", GPU_I_PROFILE="3g.40gb")),
        *history(_gpu("mig-2", 0, GPU_I_ID="2", GPU_I_PROFILE="3g.40gb")),
    ])


def test_an_ha_pair_or_a_double_scrape_does_not_double_coverage(prometheus: PrometheusServer) -> None:
    reading = read_prometheus(GpuaasSettings(prometheus_url=prometheus.url), NOW, [30])
    gpus = reading.gpus[reading.gpus["pod"].isin(["single", "pair", "jobs"])].set_index("pod")
    # 61 samples in the window's 120 scrape intervals (Prometheus 2 closes the window at both ends)
    assert gpus["coverage"].to_dict() == pytest.approx({"single": 61 / 120, "pair": 61 / 120, "jobs": 61 / 120})
    complete = telemetry_complete(gpus["coverage"], gpus["longest_gap_s"], reading.sample_interval_s)
    assert not complete.any(), gpus[["coverage", "longest_gap_s"]]  # unknown, never idle, as one series alone


def test_the_history_counts_devices_not_series(prometheus: PrometheusServer) -> None:
    settings = GpuaasSettings(prometheus_url=prometheus.url)
    start, end = datetime.fromtimestamp(S + 60, NOW.tzinfo), datetime.fromtimestamp(S + 1200, NOW.tzinfo)
    frames = [chunk.samples for chunk in pod_history(settings, start, end, chunk_s=600)]
    samples = pd.concat(frames)
    seen = samples[samples["pod"].isin(HISTORY)].groupby("pod")["gpus_observed"].agg(["min", "max", "count"])
    assert seen.to_dict("index") == {"dup-2": {"min": 1.0, "max": 1.0, "count": 20},
                                     "jobs-1": {"min": 1.0, "max": 1.0, "count": 20},
                                     "mig-2": {"min": 2.0, "max": 2.0, "count": 20}}


def test_a_pod_with_a_blind_gpu_is_not_reclaimed_for_its_duplicated_one(prometheus: PrometheusServer) -> None:
    held = {"dup": 2, "jobs": 1, "mig": 2}
    workloads = tuple(Workload("RayCluster", "team", f"raycluster-{rc}", f"uid-{rc}", "lq", "cq", 0, None,
                               WorkloadState.admitted, True, gpus, None, NOW, NOW, "RayCluster", rc)
                      for rc, gpus in held.items())
    pods = tuple(PodGpus("team", f"{rc}-{gpus}" if rc != "jobs" else "jobs-1", "node-1", gpus, "RayCluster", rc,
                         "RayCluster", rc) for rc, gpus in held.items())
    links = workload_pods(KubeState("v1beta2", (), (), workloads, (), (), (), pods, (), 0))
    start, end = datetime.fromtimestamp(S + 60, NOW.tzinfo), datetime.fromtimestamp(S + 1200, NOW.tzinfo)
    reading = read_activity_history(GpuaasSettings(prometheus_url=prometheus.url), start, end, links=links,
                                    thresholds_pct=[5.0], chunk_s=600)
    idle = {p for p in reading.stream.runs()["pod"] if p.startswith("RayCluster")}  # the live pods are unlinked
    assert idle == {"RayCluster team/jobs", "RayCluster team/mig"}  # not dup: half of it was never seen
