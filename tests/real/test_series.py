"""OpenCost's and vLLM's series for the real backend's pods, read through gpuaas's own sources.

Scenario (``conftest.CONFORMANCE``, node pool price 3.0 per GPU-hour): Job ``wl`` (one pod, 2 GPUs) of
team-a and Deployment ``dep`` (one pod, 1 GPU, serving 2 requests/s of model ``dep-m``) of team-c run on
pods made by the real controllers. Covers: collect's OpenCost source (no ``opencost_url``: OpenCost's metrics in the
real Prometheus) prices each running pod's GPUs at its node's price, on the node the pod is bound to;
collect's Prometheus source reads the serving pod's vLLM requests and counts them to the Deployment's
Workload; the request counter grows at the scenario's rate between scrapes.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from gpuaas.cluster.real import KubeHTTP
from gpuaas.models import Snapshot
from gpuaas.operations.collect import read_snapshot
from gpuaas.settings import GpuaasSettings
from tests.real.conftest import wait_until
from tests.real.test_pods import all_running, pods_of
from tests.real.test_replicas import pods_of as replica_pods
from tests.real.test_replicas import runs

pytestmark = [pytest.mark.real]

PRICE = 3.0  # CONFORMANCE's gpu_hourly_price


def _rows(frame: Any, column: str, value: str) -> Any:
    return frame[frame[column] == value] if not frame.empty else frame


def test_collect_reads_opencost_and_vllm_series_of_the_running_pods(settings: GpuaasSettings, api: KubeHTTP) -> None:
    wait_until("wl's and dep's pods Running", lambda: all_running(api, "Job", "wl", "team-a")
               and runs(api, "Deployment", "dep"), timeout=90)
    [wl_pod] = pods_of(api, "Job", "wl", "team-a")
    [dep_pod] = replica_pods(api, "Deployment", "dep")
    wl_name, dep_name = wl_pod["metadata"]["name"], dep_pod["metadata"]["name"]
    found: list[Snapshot] = []

    def seen() -> bool:
        snapshot = read_snapshot(settings)
        found[:] = [snapshot]
        pods = set(snapshot.costs["pod"]) if not snapshot.costs.empty else set()
        served = _rows(_rows(snapshot.serving, "pod", dep_name), "stat", "requests")
        return {wl_name, dep_name} <= pods and not served.empty and float(served["value"].sum()) > 0

    wait_until("collect reads the pods' OpenCost allocation and dep's vLLM requests", seen, timeout=90)
    snapshot = found[0]
    assert snapshot.sources["opencost"].ok and snapshot.sources["prometheus"].ok, snapshot.sources
    costs = snapshot.costs.set_index("pod")
    for pod, gpus in ((wl_pod, 2), (dep_pod, 1)):
        row = costs.loc[pod["metadata"]["name"]]
        assert row["gpu_count"] == gpus and row["node"] == pod["spec"]["nodeName"], row
        assert row["gpu_cost"] / row["gpu_hours"] == pytest.approx(PRICE), row  # requested GPUs x hours x price
    assert set(_rows(snapshot.serving, "pod", dep_name)["model_name"]) == {"dep-m"}
    # The Deployment's Workload (owned by its pod) is credited with the pod's requests.
    dep = snapshot.workloads[snapshot.workloads["owner_name"] == "dep"]
    requests = [c for c in dep.columns if c.startswith("requests_")]
    assert len(dep) == 1 and requests and (dep[requests].fillna(0) > 0).any(axis=1).all(), dep[requests]


def test_the_vllm_request_counter_grows_at_the_scenarios_rate(settings: GpuaasSettings, api: KubeHTTP) -> None:
    wait_until("dep's pod Running", lambda: runs(api, "Deployment", "dep"), timeout=90)
    [dep_pod] = replica_pods(api, "Deployment", "dep")
    query = f'sum(rate(vllm:request_success_total{{pod="{dep_pod["metadata"]["name"]}"}}[30s]))'

    def rate() -> float | None:
        result = httpx.get(f"{settings.prometheus_url}/api/v1/query", params={"query": query},
                           timeout=5).json()["data"]["result"]
        return float(result[0]["value"][1]) if result else None

    wait_until("Prometheus has 30 s of dep's requests", lambda: rate() is not None, timeout=60)
    wait_until("dep serves 2 requests/s", lambda: (rate() or 0.0) == pytest.approx(2.0, rel=0.25), timeout=45)
