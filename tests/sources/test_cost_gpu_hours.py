"""The cost report's GPU-hour queries on a real Prometheus, GPU by GPU, worked out by hand.

Window: the 2 h before NOW, one period, 60 s samples at ``S + 60 s * k`` (k = 1..120), threshold
0.05 (strictly above is busy). Each GPU below states its observed and busy hours. The signal is
chosen per GPU and period (the activity metric where the GPU has it in the period, else
GPU_UTIL): a GPU that switches signal inside a period keeps only its activity metric's steps, and
the rest of its hours are unknown, never idle. That is the one difference from choosing per
sample step, and its bound: the steps where that GPU had GPU_UTIL and no activity sample. A step whose reading
is below 0 is unknown too, and one past the scale is busy and fully active, never more.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuaas.cluster.prometheus import PrometheusServer
from gpuaas.settings import MetricNames, load_settings
from gpuaas.sources.cost_window import read_cost_inputs
from tests.sources.helpers import NOW

pytestmark = pytest.mark.integration
ACT, UTIL = "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL"
S = (NOW - timedelta(hours=2)).timestamp()
EXPORTER = {"pod": "nvidia-dcgm-exporter-x1", "namespace": "gpu-operator", "container": "nvidia-dcgm-exporter"}
OPENCOST = {"namespace": "team", "pod": "p7", "container": "main", "node": "node-p7"}


def _gpu(pod: str, gpu: int, **extra: str) -> dict[str, str]:
    return {"namespace": "team", "pod": pod, "container": "main", "Hostname": f"node-{pod}", "gpu": str(gpu),
            "UUID": f"GPU-{pod}-{gpu}", **extra}


def _samples(metric: str, labels: dict[str, str], value: Callable[[int], float | None], every_s: int = 60
             ) -> list[tuple[str, dict[str, str], float, float]]:
    out = []
    for i in range(1, 7200 // every_s + 1):
        v = value(i * every_s // 60)  # the minute the sample falls in (1..120)
        if v is not None:
            out.append((metric, labels, v, S + i * every_s))
    return out


@pytest.fixture(scope="module")
def prometheus(prometheus_factory: Callable[[Any], PrometheusServer]) -> PrometheusServer:
    history = [
        # p1/g0: 0.5 for the first hour, 0 after -> observed 2 h, busy 1 h
        *_samples(ACT, _gpu("p1", 0), lambda k: 0.5 if k <= 60 else 0.0),
        # p1/g1: exactly the threshold all along -> observed 2 h, busy 0 (busy is strictly above)
        *_samples(ACT, _gpu("p1", 1), lambda k: 0.05),
        # p1/g2 through a dcgm-exporter scraped without honorLabels: the workload is in exported_* ->
        # still p1's: observed 2 h, busy 2 h
        *_samples(ACT, {**EXPORTER, "exported_pod": "p1", "exported_namespace": "team", "exported_container": "main",
                        "Hostname": "node-p1", "gpu": "2", "UUID": "GPU-p1-2"}, lambda k: 0.5),
        # p2: GPU_UTIL only (percent): 80 % for 30 min, then 5 % (= the threshold) -> observed 2 h, busy 0.5 h
        *_samples(UTIL, _gpu("p2", 0), lambda k: 80.0 if k <= 30 else 5.0),
        # p3: both signals: the activity metric wins -> busy 2 h although GPU_UTIL reads 0
        *_samples(ACT, _gpu("p3", 0), lambda k: 0.9),
        *_samples(UTIL, _gpu("p3", 0), lambda k: 0.0),
        # p4: activity for the first hour, only GPU_UTIL after: the period's signal is the activity
        # metric -> observed 1 h, busy 1 h; the second hour is unknown (per-step choice would say 2 h, 2 h)
        *_samples(ACT, _gpu("p4", 0), lambda k: 0.9 if k <= 60 else None),
        *_samples(UTIL, _gpu("p4", 0), lambda k: 90.0 if k > 60 else None),
        # p6: the activity metric idle, GPU_UTIL busy: GPU_UTIL is not read where the activity metric
        # exists, even where it has no busy step -> observed 2 h, busy 0
        *_samples(ACT, _gpu("p6", 0), lambda k: 0.0),
        *_samples(UTIL, _gpu("p6", 0), lambda k: 90.0),
        # p5: scraped every 15 s: steps are counted, not samples -> observed 2 h, busy 2 h (not 8 h)
        *_samples(ACT, _gpu("p5", 0), lambda k: 0.5, every_s=15),
        # p7: one GPU, two series: backfilled (minutes 1-80) and live (60-120), other instance and job, and the
        # live exporter writes ``hostname`` -> one sample a step: observed 2 h, busy 2 h (not 2 h 21 min)
        *_samples(ACT, {**_gpu("p7", 0), "instance": "backfill", "job": "dcgm-backfill"},
                  lambda k: 0.5 if k <= 80 else None),
        *_samples(ACT, {**{k: v for k, v in _gpu("p7", 0).items() if k != "Hostname"}, "hostname": "node-p7",
                        "instance": "10.0.0.7:9400", "job": "dcgm"}, lambda k: 0.5 if k >= 60 else None),
        # p8: GPU_UTIL only, scraped twice (two jobs) -> observed 2 h, busy 2 h (not 4 h)
        *_samples(UTIL, {**_gpu("p8", 0), "job": "a"}, lambda k: 50.0),
        *_samples(UTIL, {**_gpu("p8", 0), "job": "b"}, lambda k: 50.0),
        # p9: -1 for the first hour (no duty cycle reads below 0), then 0: the first hour is unknown, not idle ->
        # observed 1 h, busy 0
        *_samples(ACT, _gpu("p9", 0), lambda k: -1.0 if k <= 60 else 0.0),
        # p10: 1e308, past the scale: busy -> observed 2 h, busy 2 h, active 2 h (fully active, not 1e308 x 2 h)
        *_samples(ACT, _gpu("p10", 0), lambda k: 1e308),
        # OpenCost's metrics for p7, scraped twice too: 1 GPU x 2 h at $2 -> 2 GPU-h, $4 (not 4 GPU-h, $8)
        *_samples("container_gpu_allocation", {**OPENCOST, "instance": "a"}, lambda k: 1.0),
        *_samples("container_gpu_allocation", {**OPENCOST, "instance": "b"}, lambda k: 1.0),
        *_samples("node_gpu_hourly_cost", {"node": "node-p7", "instance": "a"}, lambda k: 2.0),
    ]
    return prometheus_factory(history)


def test_gpu_hours_per_pod(prometheus: PrometheusServer, tmp_path: Path) -> None:
    settings = load_settings(prometheus_url=prometheus.url, nvml="off", data_dir=tmp_path,
                             metrics=MetricNames(sample_interval_seconds=60))
    inputs = read_cost_inputs(settings, NOW, 7200)
    got = {r.pod: (round(r.observed_h, 6), round(r.busy_h, 6)) for r in inputs.gpu.itertuples() if r.namespace == "team"}
    assert got == {"p1": (6.0, 3.0), "p2": (2.0, 0.5), "p3": (2.0, 2.0), "p4": (1.0, 1.0), "p5": (2.0, 2.0),
                   "p6": (2.0, 0.0), "p7": (2.0, 2.0), "p8": (2.0, 2.0), "p9": (1.0, 0.0), "p10": (2.0, 2.0)}
    active = {r.pod: round(r.active_h, 6) for r in inputs.gpu.itertuples() if r.pod in ("p7", "p8", "p9", "p10")}
    assert active == {"p7": 1.0, "p8": 1.0, "p9": 0.0, "p10": 2.0}
    assert inputs.costs is not None
    p7 = inputs.costs[inputs.costs["pod"] == "p7"]
    assert (round(float(p7["gpu_hours"].sum()), 6), round(float(p7["gpu_cost"].sum()), 6)) == (2.0, 4.0)
    # the fallback probe, GPU hours observed + busy, serving, Kueue, OpenCost's metrics (no allocation API)
    assert inputs.queries == 1 + 4 + 1
    assert any(n.startswith(f"GPU hours: a GPU is read from {ACT} in each period") and "at most those steps" in n
               for n in inputs.notes)  # the bound of p4's case, in the report's notes


def test_gpu_hours_split_across_days_and_chunks(prometheus: PrometheusServer, tmp_path: Path) -> None:
    """A 2-day window whose first day ends at minute 60 of the history: each day is its own range query
    (chunks), and each hour falls in one day. p1/g0 is busy in day 0 only; p4 has the activity metric in
    day 0 and only GPU_UTIL in day 1, so day 1 reads GPU_UTIL (90 % -> busy): 1 h + 1 h. Queries: 2 chunks
    x (fallback probe, observed, busy) + serving + Kueue + OpenCost's metrics = 9."""
    settings = load_settings(prometheus_url=prometheus.url, nvml="off", data_dir=tmp_path,
                             metrics=MetricNames(sample_interval_seconds=60))
    inputs = read_cost_inputs(settings, NOW - timedelta(hours=1) + timedelta(days=1), 2 * 86400)
    got = {(r.pod, r.day): (round(r.observed_h, 6), round(r.busy_h, 6)) for r in inputs.gpu.itertuples()
           if r.namespace == "team"}
    assert got[("p1", 0)] == (3.0, 2.0) and got[("p1", 1)] == (3.0, 1.0)  # g0 1/1 + g1 1/0 + g2 1/1; then 1/0+1/0+1/1
    assert got[("p4", 0)] == (1.0, 1.0) and got[("p4", 1)] == (1.0, 1.0)
    assert got[("p2", 0)] == (1.0, 0.5) and got[("p2", 1)] == (1.0, 0.0)
    assert inputs.queries == 9


def test_the_fallback_probe_finds_the_gpus_that_only_have_gpu_util(prometheus: PrometheusServer,
                                                                     tmp_path: Path) -> None:
    """The GPU-hour queries leave GPU_UTIL out when the probe finds no GPU without the activity
    metric in a period; here p2 has only GPU_UTIL, so the probe counts it (p3, p4 and p6 have the
    activity metric in the period) and a query without the fallback would lose it."""
    from gpuaas.sources import PromClient
    from gpuaas.sources._promql_cost import fallback_probe_query, gpu_observed_query

    settings = load_settings(prometheus_url=prometheus.url, nvml="off", data_dir=tmp_path,
                             metrics=MetricNames(sample_interval_seconds=60))
    m, offset = settings.metrics, NOW.timestamp() % 60
    prom = PromClient(settings)
    try:
        [probe] = prom.query_range(fallback_probe_query(m, 7200, offset), NOW, NOW, 7200)
        pods = {fallback: {r["metric"].get("gpuaas_pod") for r in prom.query_range(
            gpu_observed_query(m, 7200, 60, offset, fallback=fallback), NOW, NOW, 7200)} for fallback in (True, False)}
    finally:
        prom.close()
    assert float(probe["values"][0][1]) == 2  # p2, and p8 once although it has two series
    assert pods[True] - pods[False] == {"p2", "p8"}


def test_the_data_span_of_a_window_longer_than_the_history(prometheus: PrometheusServer, tmp_path: Path) -> None:
    """A 24 h window over the 2 h of history: the reader records 2 h of telemetry from S, and the report says
    so; the window ending 2 minutes into the history (a previous period) spans 2 minutes, which is too
    little to compare with."""
    from gpuaas.policies.cost import build_cost_report, period_complete
    from gpuaas.policy import Policy

    settings = load_settings(prometheus_url=prometheus.url, nvml="off", data_dir=tmp_path,
                             metrics=MetricNames(sample_interval_seconds=60))
    inputs = read_cost_inputs(settings, NOW, 86400)
    details = dict(inputs.sources["prometheus"].details)
    assert (details["data_from"], details["covered_s:0"]) == ((NOW - timedelta(hours=2)).isoformat(), "7200")
    report = build_cost_report(inputs, Policy())
    assert report.covered_s == 7200 and not period_complete(report)
    assert "data covers 2.0 h of the 24.0 h window, from 2026-03-10 10:00 UTC" in " ".join(report.notes)
    assert inputs.queries == 1 + 4 + 1  # the span rides in the Kueue query: no request more
    start = read_cost_inputs(settings, NOW - timedelta(hours=2) + timedelta(minutes=2), 7200)
    assert dict(start.sources["prometheus"].details)["covered_s:0"] == "120"
    whole = build_cost_report(read_cost_inputs(settings, NOW, 7200), Policy())
    assert whole.covered_s == 7200 and period_complete(whole)
    assert not any(n.startswith("data covers") for n in whole.notes)


def test_no_gpu_telemetry_under_the_metric_names_is_unknown_and_named(prometheus: PrometheusServer,
                                                                      tmp_path: Path) -> None:
    """The GPU metrics configured under names the exporter does not write: Prometheus answers with no GPU
    sample. OpenCost's metrics still say p7 held 1 GPU for the 2 h at $2 (2 GPU-h, $4); busy, idle and
    waste are unknown, not 0, and the report says where it looked for telemetry."""
    from gpuaas.policies.cost import build_cost_report
    from gpuaas.policy import Policy
    from reports.cost_report import cost_first_line

    settings = load_settings(prometheus_url=prometheus.url, nvml="off", data_dir=tmp_path,
                             metrics=MetricNames(sample_interval_seconds=60, gpu_activity="FOO_METRIC",
                                                 gpu_activity_scale=1, gpu_util_fallback="BAR_METRIC",
                                                 gpu_util_fallback_scale=100))
    inputs = read_cost_inputs(settings, NOW, 7200)
    assert inputs.gpu.empty
    details = dict(inputs.sources["prometheus"].details)
    assert "data_from" not in details and details["gpu_metrics"] == "FOO_METRIC or BAR_METRIC"
    report = build_cost_report(inputs, Policy())
    [team] = report.tenants
    assert (team["allocated_gpu_hours"], team["unknown_gpu_hours"], team["gpu_cost"]) == (2.0, 2.0, 4.0)
    assert (team["busy_gpu_hours"], team["idle_gpu_hours"], team["waste_cost"]) == (None, None, None)
    assert (report.cluster["busy_gpu_hours"], report.cluster["waste_cost"]) == (None, None)
    assert report.telemetry_missing == "no GPU telemetry in Prometheus (FOO_METRIC or BAR_METRIC) in the window"
    assert cost_first_line(report).endswith("2 h of GPUs: $4.00 allocated to workloads (all of it on GPUs), idle-GPU "
                                            "waste unknown (no GPU telemetry in Prometheus); 0 verified requests and 0 "
                                            "batch jobs done in time.")
