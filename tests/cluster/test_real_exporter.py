"""The real backend's loopback exporter, checked without starting the control plane: for the pods the
stand-in reports, OpenCost's series at the scenario's prices and a serving pod's vLLM series, whose request
counter grows with the time between two scrapes at the scenario's rate. Covers: GPUs per pod in
``container_gpu_allocation``, every node's ``node_gpu_hourly_cost``, the pod's labels in ``kube_pod_labels``,
vLLM series for the serving pod only, none before the first interval."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from gpuaas.cluster.real._gpu_exporter import GpuExporter
from gpuaas.cluster.real._standin import BoundPod
from gpuaas.cluster.scenario import parse_scenario
from gpuaas.cluster.telemetry import Sample

SCENARIO = parse_scenario({
    "name": "exporter",
    "flavors": [{"name": "h100"}],
    "pools": [{"name": "h100", "count": 2, "gpus_per_node": 8, "flavor": "h100", "gpu_hourly_price": 3.0}],
    "tenants": [{"name": "t", "quotas": [{"flavor": "h100", "gpus": 16}]}],
    "workloads": [
        {"name": "svc", "kind": "Deployment", "tenant": "t",
         "serving": {"model_name": "m", "requests_per_second": {"profile": "constant", "value": 10}}},
        {"name": "job", "kind": "Workload", "tenant": "t", "gpus_per_pod": 2},
    ],
})
STARTED = datetime.now(UTC) - timedelta(minutes=5)
PODS = [BoundPod("t", "svc-5f9c7-abcde", "Deployment", "svc", "h100-node-001", (3,), "main", STARTED),
        BoundPod("t", "job-x1y2z", "Job", "job", "h100-node-000", (0, 1), "main", STARTED)]


@pytest.fixture()
def exporter() -> Iterator[GpuExporter]:
    made = GpuExporter(SCENARIO, lambda: list(PODS))
    yield made
    made.stop()


def _values(samples: list[Sample], metric: str, **labels: str) -> list[float]:
    return [v for name, lab, v, _ in samples if name == metric and all(lab.get(k) == x for k, x in labels.items())]


def test_opencost_series_price_each_pods_gpus_at_its_nodes_price(exporter: GpuExporter) -> None:
    samples = exporter.samples()
    assert _values(samples, "container_gpu_allocation", pod="job-x1y2z", node="h100-node-000") == [2.0]
    assert _values(samples, "container_gpu_allocation", pod="svc-5f9c7-abcde", node="h100-node-001") == [1.0]
    assert sorted(_values(samples, "node_gpu_hourly_cost")) == [3.0, 3.0]  # both nodes, idle one included
    [labels] = [lab for name, lab, _, _ in samples if name == "kube_pod_labels" and lab["pod"] == "svc-5f9c7-abcde"]
    assert labels["label_app"] == "svc"


def test_a_serving_pods_request_counter_grows_between_scrapes(exporter: GpuExporter) -> None:
    first = exporter.samples()
    assert sum(_values(first, "vllm:request_success_total", pod="svc-5f9c7-abcde")) == 0  # no interval yet
    assert not _values(first, "vllm:num_requests_running", pod="job-x1y2z")  # not a serving workload
    started = time.monotonic()
    time.sleep(0.5)
    second = exporter.samples()
    elapsed = time.monotonic() - started
    served = sum(_values(second, "vllm:request_success_total", pod="svc-5f9c7-abcde", model_name="m"))
    assert int(10 * elapsed) - 1 <= served <= 10 * elapsed + 1, (served, elapsed)
