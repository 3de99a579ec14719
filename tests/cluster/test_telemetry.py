"""Generated metrics match the real exporters' names and labels, and the scenario's numbers.

Cases: dcgm label sets equal the real pod-mapped H100 capture (held and free GPUs); the
``hostname`` and ``exported_`` switches; dropped telemetry leaves no series; jitter averages
out to the profile; vLLM buckets and finish reasons equal a real vLLM capture and the
histogram is consistent; Kueue metrics carry the documented labels; the step loop is
deterministic (same seed: same objects, same samples).
"""

from __future__ import annotations

import itertools
import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuaas.cluster.apiserver import ObjectStore
from gpuaas.cluster.clock import ManualClock
from gpuaas.cluster.kueue import KueueController
from gpuaas.cluster.scenario import Serving, default_scenario, instances, parse_scenario
from gpuaas.cluster.simulation import Simulation
from gpuaas.cluster.telemetry import E2E_BUCKETS, HeldGpu, ServingCounters, TelemetryGenerator, kueue_samples

EPOCH = datetime(2026, 11, 1, tzinfo=UTC)
_LINE = re.compile(r"^([A-Za-z_:][\w:]*)\{(.*)\}\s+(\S+)")


def _labels(text: str) -> dict[str, str]:
    return dict(re.findall(r'(\w+)="([^"]*)"', text))


def _fixture_series(path: Path, metric: str) -> list[dict[str, str]]:
    out = []
    for line in path.read_text().splitlines():
        m = _LINE.match(line)
        if m and m.group(1) == metric:
            out.append(_labels(m.group(2)))
    return out


SMALL = {
    "flavors": [{"name": "h100"}],
    "pools": [{"name": "h100", "count": 1, "gpus_per_node": 4, "flavor": "h100", "gpu_hourly_price": 3.0}],
    "tenants": [{"name": "team-a", "quotas": [{"flavor": "h100", "gpus": 4}]}],
    "workloads": [
        {"name": "busy", "kind": "RayCluster", "tenant": "team-a", "gpus_per_pod": 2,
         "utilisation": {"profile": "constant", "value": 0.6}},
        {"name": "dark", "kind": "StatefulSet", "tenant": "team-a", "gpus_per_pod": 1, "drop_telemetry": True},
    ],
}


def _held(scenario_data: dict[str, Any]) -> tuple[TelemetryGenerator, dict[tuple[str, int], HeldGpu]]:
    s = parse_scenario(scenario_data)
    gen = TelemetryGenerator(s, seed=3)
    by = {i.name: i for i in instances(s)}
    held = {("h100-node-000", 0): HeldGpu("team-a", "busy-w-0", "ray-worker", by["busy"], EPOCH),
            ("h100-node-000", 1): HeldGpu("team-a", "busy-w-0", "ray-worker", by["busy"], EPOCH),
            ("h100-node-000", 2): HeldGpu("team-a", "dark-0", "main", by["dark"], EPOCH)}
    return gen, held


def test_dcgm_labels_equal_the_real_capture(shared_dir: Path) -> None:
    real = _fixture_series(shared_dir / "fixtures/telemetry/dcgm/metrics-h100x8-k8s-podmapped.aicr.prom",
                           "DCGM_FI_DEV_GPU_TEMP")
    real_held = {k for k, v in real[0].items() if v != ""}  # pod_uid="" is no label to Prometheus
    real_free = set(real[1])
    gen, held = _held(SMALL)
    samples = [s for s in gen.gpu_samples(EPOCH, held) if s[0] == "DCGM_FI_DEV_GPU_TEMP"]
    by_gpu = {s[1]["gpu"]: set(s[1]) for s in samples}
    assert by_gpu["0"] == real_held
    assert by_gpu["3"] == real_free
    assert "2" not in by_gpu  # dropped telemetry: no series at all, not a zero


def test_metric_names_and_ranges() -> None:
    gen, held = _held(SMALL)
    samples = gen.gpu_samples(EPOCH, held)
    names = {s[0] for s in samples}
    assert names == {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_FB_USED",
                     "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP",
                     "DCGM_FI_DEV_XID_ERRORS"}
    for name, labels, value, _ in samples:
        if name == "DCGM_FI_PROF_GR_ENGINE_ACTIVE":
            assert 0.0 <= value <= 1.0
        if name == "DCGM_FI_DEV_GPU_UTIL":
            assert 0 <= value <= 100 and value == int(value)
        if name == "DCGM_FI_DEV_XID_ERRORS":
            assert labels["err_code"] == "0"


def test_label_switches() -> None:
    data = {**SMALL, "telemetry": {"hostname_label": "hostname", "pod_label_prefix": "exported_"}}
    gen, held = _held(data)
    labels = next(s[1] for s in gen.gpu_samples(EPOCH, held) if s[1]["gpu"] == "0")
    assert {"hostname", "exported_pod", "exported_namespace", "exported_container"} <= set(labels)
    assert not {"Hostname", "pod", "namespace"} & set(labels)


def test_jitter_averages_to_the_profile() -> None:
    """Uniform jitter of half-width 0.02 over 360 samples: the mean is within 0.005 (>4 sigma)."""
    gen, held = _held(SMALL)
    values = [s[2] for i in range(360) for s in gen.gpu_samples(EPOCH + timedelta(minutes=i), held)
              if s[0] == "DCGM_FI_PROF_GR_ENGINE_ACTIVE" and s[1].get("pod") == "busy-w-0"]
    assert len(values) == 720
    assert abs(sum(values) / len(values) - 0.6) < 0.005


def test_vllm_series_match_the_real_capture(shared_dir: Path) -> None:
    path = shared_dir / "fixtures/telemetry/vllm/vllm-metrics.qwen2.5-0.5b-instruct.kops-conformance.prom"
    real_bounds = [s["le"] for s in _fixture_series(path, "vllm:e2e_request_latency_seconds_bucket")]
    real_reasons = {s["finished_reason"] for s in _fixture_series(path, "vllm:request_success_total")}
    assert [repr(b) for b in E2E_BUCKETS] + ["+Inf"] == real_bounds
    serving = Serving.model_validate({"model_name": "m", "requests_per_second": {"profile": "constant", "value": 10},
                                      "error_ratio": 0.1})
    counters = ServingCounters(serving, "ns", "pod-0")
    for i in range(1, 11):
        counters.advance(EPOCH + timedelta(minutes=i), timedelta(minutes=1), timedelta(minutes=i), pods=2)
    samples = counters.samples(0.0)
    success = {s[1]["finished_reason"]: s[2] for s in samples if s[0] == "vllm:request_success_total"}
    assert set(success) == real_reasons
    assert sum(success.values()) == 5 * 600 and success["error"] == 300
    buckets = [s[2] for s in samples if s[0] == "vllm:e2e_request_latency_seconds_bucket"]
    assert buckets == sorted(buckets) and buckets[-1] == 3000
    count = next(s[2] for s in samples if s[0] == "vllm:e2e_request_latency_seconds_count")
    assert count == 3000
    assert all({"model_name", "engine", "namespace", "pod"} <= set(s[1]) for s in samples)


def test_kueue_metric_labels() -> None:
    cq = {"metadata": {"name": "a-cq"},
          "spec": {"cohortName": "c", "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
              {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8, "borrowingLimit": 2}]}]}]},
          "status": {"pendingWorkloads": 3, "admittedWorkloads": 1,
                     "flavorsUsage": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "4"}]}]}}
    samples = {(s[0], s[1].get("status", "")): s for s in kueue_samples([cq], 0.0, {("a-cq", "nvidia.com/gpu"): 6})}
    usage = samples[("kueue_cluster_queue_resource_usage", "")]
    assert set(usage[1]) == {"cohort", "cluster_queue", "flavor", "resource", "replica_role"} and usage[2] == 4
    assert samples[("kueue_pending_workloads", "active")][2] == 3
    assert samples[("kueue_cluster_queue_borrowing_limit", "")][2] == 2
    assert samples[("kueue_cluster_queue_lending_limit", "")][2] == float("inf")
    assert samples[("kueue_cluster_queue_resource_pending", "")][2] == 6


def _run(seed: int, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], list[Any]]:
    """The store's uids are uuid4; pin them so two runs can be compared byte for byte."""
    counter = itertools.count()
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(int=next(counter)))
    clock = ManualClock(EPOCH)
    store = ObjectStore(clock.now)
    kueue = KueueController(store, clock.now)
    kueue.attach()
    sim = Simulation(default_scenario(), store, kueue, clock, seed)
    samples = [sim.tick()] + [sim.step(timedelta(minutes=1)) for _ in range(90)]
    kinds = ("Workload", "Pod", "ClusterQueue", "RayCluster", "InferenceService", "Notebook", "StatefulSet")
    objects = [store.list(kind) for kind in kinds]
    return objects, samples


def test_same_seed_same_objects_and_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    objects_a, samples_a = _run(7, monkeypatch)
    objects_b, samples_b = _run(7, monkeypatch)
    assert objects_a == objects_b
    assert samples_a == samples_b
    _, samples_c = _run(8, monkeypatch)
    assert samples_c != samples_a
    admitted = [w for w in objects_a[0] if any(c["type"] == "Admitted" and c["status"] == "True"
                                               for c in (w.get("status") or {}).get("conditions", []))]
    assert admitted, "the default scenario admits workloads"
