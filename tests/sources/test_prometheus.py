"""The Prometheus source against a real Prometheus holding the real dcgm-exporter and vLLM captures.

Covers: per-GPU and per-pod activity with the GPU_UTIL fallback and the preferred
GR_ENGINE_ACTIVE; ``Hostname``/``hostname``; ``pod`` vs ``exported_pod`` (both honorLabels
settings); partial telemetry showing as coverage < 1; vLLM request counts and latency
buckets; Kueue gauges; staleness; and a query count that does not grow with the fleet.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pandas as pd
import pytest

from gpuaas.cluster.prometheus import PrometheusServer
from gpuaas.settings import GpuaasSettings
from gpuaas.sources.prometheus import fraction_under, pod_activity, queries_per_cycle, read_prometheus
from tests.sources.helpers import NOW, Capture, Sample, fixture_path, parse_exposition, relabel, series

Factory = Callable[[list[Sample]], PrometheusServer]
VLLM_POD = "vllm-agg-0-vllmdecodeworker-s65j5"
H100 = ("telemetry", "dcgm", "metrics-h100x8-k8s-podmapped.aicr.prom")


def _read(server: PrometheusServer, windows: list[float]):  # noqa: ANN202 - PrometheusReading
    return read_prometheus(GpuaasSettings(prometheus_url=server.url), NOW, windows)


def _check_h100(reading) -> None:  # noqa: ANN001
    gpus = reading.gpus[reading.gpus["window_minutes"] == 30.0]
    assert len(gpus) == 8
    assert set(gpus["host"]) == {"gpu-node-1"}
    assert set(gpus["model"]) == {"NVIDIA H100 80GB HBM3"}
    assert set(gpus["signal"]) == {"DCGM_FI_DEV_GPU_UTIL"}  # the capture has no PROF metrics
    mapped = gpus[gpus["pod"] != ""]
    assert mapped[["namespace", "pod", "container", "gpu"]].values.tolist() == [
        ["dynamo-workload", VLLM_POD, "main", "0"]
    ]
    assert mapped["power_w"].item() == pytest.approx(113.611)
    assert mapped["temperature_c"].item() == 30
    assert gpus["coverage"].min() == pytest.approx(1.0)
    pods = pod_activity(reading.gpus)
    assert pods[["namespace", "pod", "activity_avg", "activity_max", "gpus_observed"]].values.tolist() == [
        ["dynamo-workload", VLLM_POD, 0.0, 0.0, 1]
    ]


def test_h100_capture_pod_labels_and_hostname(prometheus_factory: Factory) -> None:
    capture = parse_exposition(fixture_path(*H100))
    reading = _read(prometheus_factory(series(capture, minutes=40)), [30])
    _check_h100(reading)
    assert reading.queries == queries_per_cycle([30]) == 6
    assert reading.staleness["dcgm"] == pytest.approx(0.0)


def test_h100_capture_relabelled_hostname_and_exported_pod(prometheus_factory: Factory) -> None:
    """The same capture as a 2026 exporter scraped with ``honorLabels: false`` would store it."""
    capture = relabel(
        parse_exposition(fixture_path(*H100)),
        {"Hostname": "hostname", "pod": "exported_pod", "namespace": "exported_namespace",
         "container": "exported_container"},
    )
    target = {"pod": "nvidia-dcgm-exporter-wqqqn", "namespace": "gpu-operator", "container": "nvidia-dcgm-exporter"}
    scraped: Capture = [(n, {**labels, **target}, v) for n, labels, v in capture]
    _check_h100(_read(prometheus_factory(series(scraped, minutes=40)), [30]))


def test_honor_labels_true_query_results_do_not_attribute_exporter_pod(prometheus_factory: Factory) -> None:
    """Real /api/v1/query answers (16 GPUs, 2 nodes): unallocated GPUs carry the exporter's own pod."""
    capture: Capture = []
    for metric in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE"):
        doc = json.loads(fixture_path("telemetry", "dcgm", f"prometheus-api-query.{metric}.aicr.json").read_text())
        for row in doc["data"]["result"]:
            labels = {k: v for k, v in row["metric"].items() if k != "__name__"}
            capture.append((metric, labels, float(row["value"][1])))
    reading = _read(prometheus_factory(series(capture, minutes=35)), [30])
    gpus = reading.gpus
    assert len(gpus) == 16 and set(gpus["host"]) == {"gpu-node-1", "gpu-node-2"}
    mapped = gpus[gpus["pod"] != ""]
    assert mapped["pod"].tolist() == [VLLM_POD]
    assert mapped["fb_used_mib"].item() == 74166
    assert (gpus.loc[gpus["pod"] == "", "namespace"] == "").all()
    assert reading.queries == queries_per_cycle([30])  # twice the GPUs, same number of queries


def test_l4_capture_prefers_gr_engine_active_and_reports_partial_coverage(prometheus_factory: Factory) -> None:
    capture = relabel(parse_exposition(fixture_path("telemetry", "dcgm", "metrics-l4-idle.kops-conformance.prom")),
                      {})
    pod = {"pod": "train-0", "namespace": "team-a", "container": "main"}
    capture = [(n, {**labels, **pod}, v) for n, labels, v in capture]
    busy = series(
        capture, minutes=30,
        value=lambda n, _l, v, i: (0.6 if i % 2 else 0.2) if n == "DCGM_FI_PROF_GR_ENGINE_ACTIVE" else v,
        keep=lambda _n, _l, i: i >= 60,  # only the last 15 of 30 minutes
    )
    reading = _read(prometheus_factory(busy), [30, 10])
    assert reading.queries == queries_per_cycle([30, 10]) == 8
    gpus = reading.gpus.set_index("window_minutes")
    assert set(gpus["signal"]) == {"DCGM_FI_PROF_GR_ENGINE_ACTIVE"}
    assert gpus.loc[30.0, "host"] == "i-030791dc5a37cd257"
    assert gpus.loc[30.0, "activity_max"] == pytest.approx(0.6)
    assert gpus.loc[30.0, "activity_avg"] == pytest.approx(0.4, abs=0.01)
    assert gpus.loc[30.0, "coverage"] == pytest.approx(61 / 120, abs=0.01)
    assert gpus.loc[10.0, "coverage"] == pytest.approx(1.0)


def test_vllm_capture_requests_latency_and_kueue_gauges(prometheus_factory: Factory) -> None:
    capture = parse_exposition(
        fixture_path("telemetry", "vllm", "vllm-metrics.qwen2.5-0.5b-instruct.kops-conformance.prom"))
    target = {"pod": "qwen-0", "namespace": "serving"}  # added by the scrape, as vLLM has no pod labels
    capture = [(n, {**labels, **target}, v) for n, labels, v in capture if not n.endswith("_created")]

    def grow(name: str, labels: dict[str, str], value: float, i: int) -> float:
        if name == "vllm:request_success_total" and labels["finished_reason"] == "stop":
            return value + i  # one request finished per 15 s step
        if name == "vllm:e2e_request_latency_seconds_bucket":
            return value + (i if float(labels["le"]) >= 1.0 else 0)  # every request took 0.8-1.0 s
        return value

    kueue = [("kueue_pending_workloads", {"cluster_queue": "cq-a", "status": "active"}, 3.0),
             ("kueue_pending_workloads", {"cluster_queue": "cq-a", "status": "inadmissible"}, 1.0),
             ("kueue_cluster_queue_resource_usage",
              {"cohort": "all", "cluster_queue": "cq-a", "flavor": "h100", "resource": "nvidia.com/gpu"}, 6.0),
             ("kueue_cluster_queue_nominal_quota",
              {"cohort": "all", "cluster_queue": "cq-a", "flavor": "h100", "resource": "nvidia.com/gpu"}, 8.0)]
    reading = _read(prometheus_factory(series(capture, minutes=40, value=grow) + series(kueue, minutes=40)), [30])
    requests = reading.serving[reading.serving["stat"] == "requests"].set_index("finished_reason")
    assert set(requests.index) == {"stop", "length", "abort", "error", "repetition"}
    assert requests.loc["stop", "value"] == pytest.approx(120, rel=0.02)
    assert requests.loc["stop", "model_name"] == "Qwen/Qwen2.5-0.5B-Instruct"
    assert requests.loc["stop", ["namespace", "pod"]].tolist() == ["serving", "qwen-0"]
    assert requests.drop(index="stop")["value"].sum() == 0
    slo = fraction_under(reading.serving, 1.2).iloc[0]
    assert slo["fraction"] == pytest.approx(1.0)
    assert fraction_under(reading.serving, 0.9).iloc[0]["fraction"] == pytest.approx(0.0)
    kq = reading.kueue.set_index("stat")
    assert kq.loc["pending_workloads", "value"] == 4
    assert kq.loc["usage", ["flavor", "value"]].tolist() == ["h100", 6.0]
    assert kq.loc["nominal", "value"] == 8
    assert set(reading.staleness) == {"kueue", "vllm"}
    assert isinstance(reading.gpus, pd.DataFrame) and reading.gpus.empty


def test_gpu_util_is_left_out_only_when_no_gpu_needs_it(prometheus_factory: Factory) -> None:
    """The probe counts the GPUs with GPU_UTIL and no GR_ENGINE_ACTIVE in the window; when there are
    none the cycle's queries leave GPU_UTIL out (half of their Prometheus time at 16,000 GPUs) and
    every GPU reads the same as with it in."""
    from gpuaas.settings import MetricNames
    from gpuaas.sources import PromClient
    from gpuaas.sources._promql import fallback_probe_query

    capture = parse_exposition(fixture_path(*H100))
    util = [(n, labels, v) for n, labels, v in capture if n == "DCGM_FI_DEV_GPU_UTIL"]
    some = [("DCGM_FI_PROF_GR_ENGINE_ACTIVE", labels, 0.4) for _n, labels, _v in util if labels["gpu"] == "1"]
    every = [("DCGM_FI_PROF_GR_ENGINE_ACTIVE", labels, 0.4) for _n, labels, _v in util]
    probe = fallback_probe_query(MetricNames(), [1800, 2100])
    for extra, needing in ((some, 7.0), (every, None)):
        server = prometheus_factory(series(capture + extra, minutes=40))
        prom = PromClient(GpuaasSettings(prometheus_url=server.url))
        try:
            answer = prom.query(probe, NOW)
        finally:
            prom.close()
        assert [float(r["value"][1]) for r in answer] == ([needing] if needing else [])
    gpus = _read(server, [30]).gpus
    assert len(gpus) == 8 and set(gpus["signal"]) == {"DCGM_FI_PROF_GR_ENGINE_ACTIVE"}
    assert gpus["activity_avg"].tolist() == pytest.approx([0.4] * 8) and set(gpus["coverage"]) == {1.0}


def test_gpu_util_fallback_is_scaled_and_chosen_per_gpu(prometheus_factory: Factory) -> None:
    """GPU_UTIL (0-100) stands in, scaled to 0-1, only on GPUs that lack GR_ENGINE_ACTIVE (0-1):
    on a mixed fleet (a MIG or older node next to a profiling-capable one) each GPU keeps its
    own best signal, and a GPU that has both never reads the coarse one."""
    capture = parse_exposition(fixture_path(*H100))
    util = [(n, labels, v) for n, labels, v in capture if n == "DCGM_FI_DEV_GPU_UTIL"]
    prof = [("DCGM_FI_PROF_GR_ENGINE_ACTIVE", labels, 0.0) for _n, labels, _v in util if labels["gpu"] == "1"]

    def level(name: str, labels: dict[str, str], value: float, i: int) -> float:
        if name == "DCGM_FI_PROF_GR_ENGINE_ACTIVE":
            return 0.8
        return {"0": 45.0, "1": 10.0}.get(labels["gpu"], value)  # GPU 1's coarse 10 % must be ignored

    reading = _read(prometheus_factory(series(capture + prof, minutes=40, value=level)), [30])
    gpus = reading.gpus[reading.gpus["window_minutes"] == 30.0].set_index("gpu")
    assert len(gpus) == 8
    assert gpus.loc["0", "signal"] == "DCGM_FI_DEV_GPU_UTIL"
    assert gpus.loc["0", ["activity_avg", "activity_max", "coverage"]].tolist() == pytest.approx([0.45, 0.45, 1.0])
    assert gpus.loc["1", "signal"] == "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
    assert gpus.loc["1", ["activity_avg", "activity_max", "coverage"]].tolist() == pytest.approx([0.8, 0.8, 1.0])
    assert set(gpus.drop(index=["0", "1"])["activity_avg"]) == {0.0}
    pods = pod_activity(reading.gpus)
    assert pods[["pod", "activity_avg"]].values.tolist() == [[VLLM_POD, pytest.approx(0.45)]]


def test_mig_instances_of_one_gpu_are_each_an_observed_gpu(prometheus_factory: Factory) -> None:
    """dcgm-exporter labels a MIG instance with its parent GPU's ``UUID`` and ``gpu`` plus ``GPU_I_ID`` and
    ``GPU_I_PROFILE`` (and reports GR_ENGINE_ACTIVE, not GPU_UTIL, for it): a pod given two instances of
    GPU 0 has two GPUs observed. The parent's own series (the capture's GPU_UTIL, mapped to the same pod)
    does not stand in for an instance that sent nothing."""
    capture = parse_exposition(fixture_path(*H100))
    parent = next(labels for n, labels, _v in capture if n == "DCGM_FI_DEV_GPU_UTIL" and labels.get("pod"))
    mig = [("DCGM_FI_PROF_GR_ENGINE_ACTIVE", {**parent, "GPU_I_PROFILE": "3g.40gb", "GPU_I_ID": i}, 0.0)
           for i in ("1", "2")]
    reading = _read(prometheus_factory(series(capture + mig, minutes=40)), [30])
    assert reading.queries == queries_per_cycle([30])
    mapped = reading.gpus[reading.gpus["pod"] == VLLM_POD]
    assert sorted(mapped["gpu_instance"]) == ["", "1", "2"] and set(mapped["uuid"]) == {parent["UUID"]}
    assert pod_activity(reading.gpus)[["pod", "gpus_observed"]].values.tolist() == [[VLLM_POD, 2]]

    one_left = _read(prometheus_factory(series(capture + mig[:1], minutes=40)), [30])
    assert pod_activity(one_left.gpus)[["pod", "gpus_observed"]].values.tolist() == [[VLLM_POD, 1]]
