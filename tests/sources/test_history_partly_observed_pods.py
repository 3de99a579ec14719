"""A pod whose GPUs do not all report in a step, read from a real Prometheus history.

Twenty 60 s samples per GPU series at ``S + 60 s * k`` (k = 1..20), read back in two chunks of ten steps.
The history query says per pod and step how many of its GPUs reported; a step in which a workload's pod
reported fewer GPUs than it holds is no evidence of idleness (the GPUs that did not report may be busy): it
is a gap, as a missing sample is, unless what did report is already busy.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from gpuaas.cluster.prometheus import PrometheusServer
from gpuaas.idle_history import read_activity_history
from gpuaas.models import PodGpus, Workload, WorkloadState
from gpuaas.settings import GpuaasSettings
from gpuaas.snapshot import workload_pods
from gpuaas.sources.history import pod_history
from gpuaas.sources.kube import KubeState
from tests.sources.helpers import NOW

pytestmark = pytest.mark.integration
ACT = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
S = (NOW - timedelta(minutes=20)).timestamp()
START, END = datetime.fromtimestamp(S + 60, NOW.tzinfo), datetime.fromtimestamp(S + 1200, NOW.tzinfo)
LOST = range(6, 15)
"""The minutes in which two of rc-big-0's four GPUs send nothing (across the two chunks)."""


def _gpu(pod: str, gpu: int) -> dict[str, str]:
    return {"namespace": "team", "pod": pod, "container": "main", "Hostname": "node-1", "gpu": str(gpu),
            "UUID": f"GPU-{pod}-{gpu}"}


def _samples(labels: dict[str, str], value: Callable[[int], float | None]) -> list[tuple[str, dict[str, str],
                                                                                         float, float]]:
    return [(ACT, labels, v, S + 60 * k) for k in range(1, 21) if (v := value(k)) is not None]


@pytest.fixture(scope="module")
def prometheus(prometheus_factory: Callable[[Any], PrometheusServer]) -> PrometheusServer:
    return prometheus_factory([
        # rc-big-0: four idle GPUs, two of which send nothing in the LOST minutes
        *_samples(_gpu("rc-big-0", 0), lambda k: 0.0),
        *_samples(_gpu("rc-big-0", 1), lambda k: 0.0),
        *_samples(_gpu("rc-big-0", 2), lambda k: None if k in LOST else 0.0),
        *_samples(_gpu("rc-big-0", 3), lambda k: None if k in LOST else 0.0),
        # rc-spiky-0: busy on GPU 0 at minute 10, when GPU 1 sends nothing: busy, not a gap
        *_samples(_gpu("rc-spiky-0", 0), lambda k: 0.9 if k == 10 else 0.0),
        *_samples(_gpu("rc-spiky-0", 1), lambda k: None if k == 10 else 0.0),
        # rc-split-0: two GPUs under its own labels, one through the exporter's (exported_pod): three reporting
        *_samples(_gpu("rc-split-0", 0), lambda k: 0.0),
        *_samples(_gpu("rc-split-0", 1), lambda k: 0.0),
        *_samples({"namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-x1", "container": "nvidia-dcgm-exporter",
                   "exported_pod": "rc-split-0", "exported_namespace": "team", "exported_container": "main",
                   "Hostname": "node-1", "gpu": "2", "UUID": "GPU-rc-split-0-2"}, lambda k: 0.0),
    ])


def _links() -> Any:
    names = {"rc-big": 4, "rc-spiky": 2, "rc-split": 3}
    workloads = tuple(Workload("RayCluster", "team", f"raycluster-{rc}", f"uid-{rc}", "lq", "cq", 0, None,
                               WorkloadState.admitted, True, gpus, None, NOW, NOW, "RayCluster", rc)
                      for rc, gpus in names.items())
    pods = tuple(PodGpus("team", f"{rc}-0", "node-1", gpus, "RayCluster", rc, "RayCluster", rc)
                 for rc, gpus in names.items())
    return workload_pods(KubeState("v1beta2", (), (), workloads, (), (), (), pods, (), 0))


def test_the_history_counts_the_gpus_of_each_pod_that_reported_in_each_step(prometheus: PrometheusServer) -> None:
    settings = GpuaasSettings(prometheus_url=prometheus.url)
    got: dict[str, dict[int, float]] = {}
    for chunk in pod_history(settings, START, END, chunk_s=600):
        for row in chunk.samples.itertuples():
            got.setdefault(str(row.pod), {})[round((float(row.t) - S) / 60)] = float(row.gpus_observed)
    assert got == {
        "rc-big-0": {k: 2.0 if k in LOST else 4.0 for k in range(1, 21)},
        "rc-spiky-0": {k: 1.0 if k == 10 else 2.0 for k in range(1, 21)},
        "rc-split-0": dict.fromkeys(range(1, 21), 3.0),
    }


def test_a_step_a_pod_reports_part_of_its_gpus_idle_is_a_gap_and_busy_stays_busy(prometheus: PrometheusServer) -> None:
    reading = read_activity_history(GpuaasSettings(prometheus_url=prometheus.url), START, END, links=_links(),
                                    thresholds_pct=[5.0], chunk_s=600)
    runs = reading.stream.runs()
    got = {(str(r.pod), round((r.start - S) / 60), round((r.end - S) / 60), str(r.ended_by))
           for r in runs.itertuples()}
    assert got == {
        # idle before and after, but nothing is known of two of its GPUs in between
        ("RayCluster team/rc-big", 1, 5, "gap"), ("RayCluster team/rc-big", 15, 20, "end"),
        # the GPU that reported at minute 10 was busy: that is activity, whatever the other did
        ("RayCluster team/rc-spiky", 1, 10, "active"), ("RayCluster team/rc-spiky", 11, 20, "end"),
        ("RayCluster team/rc-split", 1, 20, "end"),
    }
    # The lost minutes are not covered time either, as missing samples are not.
    assert reading.stream.observed_s == pytest.approx((4 * 60 + 5 * 60) + 19 * 60 + 19 * 60)
