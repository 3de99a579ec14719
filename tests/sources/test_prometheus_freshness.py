"""Per-series freshness and the gap-based coverage rule, against a real Prometheus (promtool backfill).

Freshness: three GPUs whose newest sample is 60 s, 4 min and 20 min old. Each GPU's own age
must be measured (``time() - max(timestamp(A or B))`` answered 0 for all of them: ``or``
stamps its result with the evaluation time), and a stale GPU makes its workload ``unknown``,
never idle, through the snapshot and the idle policy. The source's staleness is the age of
its newest sample (60 s), not 0.

Coverage (1-minute samples, a 30-minute window): isolated missed scrapes (28 of 30 samples, 0.933)
keep the telemetry complete; a real 5-minute hole in the middle of the window, or a series
that only starts 4 minutes into it, make it incomplete although most samples are there.
The number of queries stays fixed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

import pandas as pd
import pytest

from gpuaas.cluster.prometheus import PrometheusServer
from gpuaas.models import Owner, PodGpus, SourceStatus, Workload, WorkloadState
from gpuaas.policies.reclaim import find_idle, max_gap_seconds
from gpuaas.policy import Policy
from gpuaas.settings import GpuaasSettings, MetricNames
from gpuaas.snapshot import build_snapshot
from gpuaas.sources.kube import KubeState
from gpuaas.sources.prometheus import PrometheusReading, queries_per_cycle, read_prometheus
from tests.sources.helpers import NOW, Sample

Factory = Callable[[list[Sample]], PrometheusServer]
ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
UTIL = "DCGM_FI_DEV_GPU_UTIL"


def _gpu(pod: str, gpu: str) -> dict[str, str]:
    return {"gpu": gpu, "UUID": f"GPU-{pod}", "Hostname": "node-1", "modelName": "NVIDIA H100 80GB HBM3",
            "namespace": "team-a", "pod": pod, "container": "main"}


def _samples(metric: str, labels: dict[str, str], value: float, *, interval_s: float, newest_age_s: float,
             span_s: float = 45 * 60, drop: Callable[[float], bool] | None = None) -> list[Sample]:
    """One sample every ``interval_s`` from ``span_s`` ago up to ``newest_age_s`` ago; ``drop(age)`` removes some."""
    out = []
    age = span_s
    while age >= newest_age_s - 1e-9:
        if drop is None or not drop(age):
            out.append((metric, labels, value, NOW.timestamp() - age))
        age -= interval_s
    return out


def _settings(server: PrometheusServer, interval_s: float) -> GpuaasSettings:
    return GpuaasSettings(prometheus_url=server.url, metrics=MetricNames(sample_interval_seconds=interval_s))


def _verdicts(reading: PrometheusReading, pods: list[str]) -> dict[str, tuple[str, str]]:
    """Each pod as the only pod of an idle-looking RayCluster of the same name: verdict and reason."""
    workloads = tuple(
        Workload("RayCluster", "team-a", f"wl-{p}", f"uid-{p}", "lq", "cq", 0, None, WorkloadState.admitted, True,
                 1.0, "h100", NOW - timedelta(hours=2), NOW - timedelta(hours=2), "RayCluster", p)
        for p in pods)
    owners = tuple(Owner("RayCluster", "team-a", p, f"uid-rc-{p}", "1", 1.0, 1, False) for p in pods)
    links = tuple(PodGpus("team-a", p, "node-1", 1.0, "RayCluster", p, "RayCluster", p) for p in pods)
    kube = KubeState("v1beta2", (), (), workloads, (), (), owners, links, (), 0)
    sources = {"kube": SourceStatus("kube", True), "prometheus": SourceStatus("prometheus", True)}
    snap = build_snapshot(NOW, [30], sources, kube=kube, prom=reading, policy=Policy())
    idle = find_idle(snap.workloads, Policy(), NOW).set_index("owner_name")
    return {p: (str(idle.loc[p, "verdict"]), str(idle.loc[p, "reason"])) for p in pods}


@pytest.fixture(scope="module")
def freshness(prometheus_factory: Factory) -> PrometheusReading:
    """Idle GPUs (activity 0) on 30 s scrapes; GPU_UTIL only on ``util-*`` (the fallback path)."""
    samples: list[Sample] = []
    for pod, age in (("fresh", 60.0), ("late", 240.0), ("gone", 1200.0)):
        samples += _samples(ACTIVE, _gpu(pod, "0"), 0.0, interval_s=30, newest_age_s=age)
    samples += _samples(UTIL, _gpu("util-late", "1"), 0.0, interval_s=30, newest_age_s=240.0)
    server = prometheus_factory(samples)
    return read_prometheus(_settings(server, 30), NOW, [30])


def test_each_gpu_has_its_own_age(freshness: PrometheusReading) -> None:
    ages = freshness.gpus.drop_duplicates("pod").set_index("pod")["age_s"]
    assert ages.to_dict() == pytest.approx({"fresh": 60.0, "late": 240.0, "gone": 1200.0, "util-late": 240.0})
    assert freshness.queries == queries_per_cycle([30])


def test_the_source_staleness_is_the_newest_samples_age(freshness: PrometheusReading) -> None:
    assert freshness.staleness["dcgm"] == pytest.approx(60.0)


def test_stale_gpu_telemetry_makes_the_workload_unknown_never_idle(freshness: PrometheusReading) -> None:
    verdicts = _verdicts(freshness, ["fresh", "late", "gone", "util-late"])
    assert verdicts["fresh"][0] == "idle"
    for pod in ("late", "gone", "util-late"):
        assert verdicts[pod][0] == "unknown", (pod, verdicts[pod])
        assert "telemetry" in verdicts[pod][1]


@pytest.fixture(scope="module")
def busy_scrape(prometheus_factory: Factory) -> PrometheusReading:
    """1-minute samples. ``missed``: 3 isolated scrapes lost (28 of the 30 expected in the window). ``hole``: 5 minutes
    lost in the middle (25 of 30). ``late-start``: the series only begins 4 minutes into the window.
    ``jitter``: every sample up to 40 s late, two missed. ``handover``: history and live series of one GPU
    (different labels) back to back; ``handover-hole``: 5 minutes between them."""
    every = {"interval_s": 60.0, "newest_age_s": 0.0}
    samples: list[Sample] = []
    samples += _samples(ACTIVE, _gpu("missed", "0"), 0.0, **every, drop=lambda a: a in (600.0, 1020.0, 1320.0))
    samples += _samples(ACTIVE, _gpu("hole", "1"), 0.0, **every, drop=lambda a: 840.0 <= a <= 1080.0)
    samples += _samples(ACTIVE, _gpu("late-start", "2"), 0.0, **every, span_s=26 * 60)
    jittered = _samples(ACTIVE, _gpu("jitter", "3"), 0.0, **every, drop=lambda a: a in (300.0, 1500.0))
    samples += [(n, labels, v, ts + 40.0 if int(ts) % 120 == 0 and ts < NOW.timestamp() - 60 else ts)
                for n, labels, v, ts in jittered]
    # One GPU, two series: backfilled history without the scrape's labels, then live ones with them.
    scraped = {"job": "dcgm-exporter", "instance": "10.0.0.7:9400"}
    for pod, live_from in (("handover", 600.0), ("handover-hole", 300.0)):
        samples += _samples(ACTIVE, _gpu(pod, "4"), 0.0, interval_s=60.0, newest_age_s=660.0)
        samples += _samples(ACTIVE, {**_gpu(pod, "4"), **scraped}, 0.0, interval_s=60.0, newest_age_s=0.0,
                            span_s=live_from)
    server = prometheus_factory(samples)
    return read_prometheus(_settings(server, 60), NOW, [30])


def test_a_gpu_whose_series_change_labels_counts_all_its_samples(busy_scrape: PrometheusReading) -> None:
    gpus = busy_scrape.gpus.set_index("pod")
    # Their union leaves no gap over the rule's limit; each series alone would (its start, its end).
    assert gpus.loc["handover", "longest_gap_s"] <= max_gap_seconds(60.0)
    assert gpus.loc["handover-hole", "longest_gap_s"] >= 360.0
    verdicts = _verdicts(busy_scrape, ["handover", "handover-hole"])
    assert {p: v[0] for p, v in verdicts.items()} == {"handover": "idle", "handover-hole": "unknown"}


def test_isolated_missed_scrapes_do_not_blind_the_fleet(busy_scrape: PrometheusReading) -> None:
    verdicts = _verdicts(busy_scrape, ["missed", "jitter"])
    assert {p: v[0] for p, v in verdicts.items()} == {"missed": "idle", "jitter": "idle"}, verdicts
    gpus = busy_scrape.gpus.set_index("pod")
    assert gpus.loc["missed", "coverage"] == pytest.approx(28 / 30)  # the 0.933 a 0.95 rule called blind
    assert gpus.loc["missed", "longest_gap_s"] == pytest.approx(120.0)


def test_a_real_gap_in_the_window_still_blinds(busy_scrape: PrometheusReading) -> None:
    gpus = busy_scrape.gpus.set_index("pod")
    assert gpus.loc["hole", "coverage"] >= 0.8 and gpus.loc["late-start", "coverage"] >= 0.8  # the count alone passes
    assert gpus.loc["hole", "longest_gap_s"] >= 300.0
    assert gpus.loc["late-start", "longest_gap_s"] >= 240.0
    verdicts = _verdicts(busy_scrape, ["hole", "late-start"])
    assert {p: v[0] for p, v in verdicts.items()} == {"hole": "unknown", "late-start": "unknown"}
    assert "gap" in verdicts["hole"][1]


def test_the_rule_needs_no_extra_queries(busy_scrape: PrometheusReading) -> None:
    assert busy_scrape.queries == queries_per_cycle([30]) == 6
    assert isinstance(busy_scrape.gpus, pd.DataFrame)


def _longest_gaps(times: list[float], start: float, end: float) -> tuple[float, float]:
    """``(in_window, around)`` of ascending sample ``times``: the longest stretch without a sample from ``start`` to ``end``, and the same
    counted from the newest sample before ``start`` instead (what a rung's first range can see)."""
    inside = [t for t in times if start <= t <= end]
    before = [t for t in times if t < start]
    points = [start, *inside, end]
    in_window = max(b - a for a, b in zip(points, points[1:]))
    if before:
        points = [max(before), *inside, end]
    return in_window, max(b - a for a, b in zip(points, points[1:]))


@pytest.fixture(scope="module")
def random_scrapes(prometheus_factory: Factory) -> tuple[PrometheusReading, dict[str, tuple[float, float]]]:
    """24 GPUs on 1-minute scrapes, each losing scrapes at its own rate (0-50 %), some up to 50 s late."""
    import random

    rng = random.Random(14)
    samples: list[Sample] = []
    truth: dict[str, tuple[float, float]] = {}
    end = NOW.timestamp()
    for n in range(24):
        pod, lose, late = f"r{n}", rng.choice([0.0, 0.05, 0.15, 0.3, 0.5]), rng.choice([0.0, 50.0])
        times = sorted(end - age + rng.uniform(0.0, late) for age in range(60, 45 * 60 + 1, 60) if rng.random() >= lose)
        samples += [(ACTIVE, _gpu(pod, str(n)), 0.0, t) for t in times]
        truth[pod] = _longest_gaps(times, end - 30 * 60, end)
    return read_prometheus(_settings(prometheus_factory(samples), 60), NOW, [30]), truth


def test_the_gap_is_an_upper_bound_that_is_tight_up_to_the_rules_limit(
        random_scrapes: tuple[PrometheusReading, dict[str, tuple[float, float]]]) -> None:
    reading, truth = random_scrapes
    reported = reading.gpus.set_index("pod")["longest_gap_s"]
    limit = max_gap_seconds(60.0)
    passed = 0
    for pod, (in_window, around) in truth.items():
        assert reported[pod] >= in_window, (pod, reported[pod], in_window)  # never reads a hole as smaller
        if around <= limit - 60.0:  # within two intervals: the rule must let it through
            assert reported[pod] <= limit, (pod, reported[pod], around)
            passed += 1
        if around > limit:
            assert reported[pod] > limit, (pod, reported[pod], around)
    assert 0 < passed < len(truth)  # the draw has GPUs on both sides of the limit


def test_kueue_metrics_are_aged_past_the_lookback_and_missing_ones_are_not_fresh(prometheus_factory: Factory) -> None:
    """Kueue's gauge last scraped 8 minutes ago is 480 s old (Prometheus' 5-minute lookback alone would call it absent,
    which read as fresh); with one whose newest sample is after the instant asked about the snapshot has a failed
    ``kueue_metrics`` source naming why, so the reclaim acts on nothing; with no Kueue gauge at all (a cluster that
    does not scrape Kueue) none."""
    from gpuaas.models import Snapshot
    from gpuaas.policies.reclaim import snapshot_problem
    from gpuaas.snapshot import assemble_snapshot

    kueue = {"cluster_queue": "cq", "status": "active"}
    gpu = _samples(ACTIVE, _gpu("fresh", "0"), 0.0, interval_s=30, newest_age_s=30.0)
    stopped = prometheus_factory([*gpu, *_samples("kueue_pending_workloads", kueue, 1.0, interval_s=30,
                                                  newest_age_s=480.0)])
    unscraped = prometheus_factory(gpu)
    settings = {name: GpuaasSettings(prometheus_url=server.url, nvml="off",
                                     metrics=MetricNames(sample_interval_seconds=30))
                for name, server in (("stopped", stopped), ("unscraped", unscraped))}
    aged = read_prometheus(settings["stopped"], NOW, [30])
    assert aged.staleness["kueue"] == pytest.approx(480.0)

    def snapshot(name: str, reading: PrometheusReading) -> Snapshot:
        readings = {"prometheus": (reading, SourceStatus("prometheus", True, staleness_s=30.0)),
                    "kube": (KubeState("v1beta2", (), (), (), (), (), (), (), (), 0), SourceStatus("kube", True))}
        return assemble_snapshot(settings[name], NOW, [30], readings)

    assert "kueue_metrics" not in snapshot("stopped", aged).sources  # an age: judged against the staleness limit
    missing = read_prometheus(settings["unscraped"], NOW, [30])
    future = PrometheusReading(gpus=aged.gpus, kueue=aged.kueue, serving=aged.serving,
                               staleness={**aged.staleness, "kueue": -3600.0})
    assert "kueue_metrics" not in snapshot("unscraped", missing).sources  # a cluster that does not scrape Kueue
    for name, reading, says in (("stopped", future, "3600 s after the instant asked about"),):
        snap = snapshot(name, reading)
        status = snap.sources["kueue_metrics"]
        assert snap.degraded and not status.ok and status.error is not None
        assert status.error.startswith(f"Kueue metrics in Prometheus at {settings[name].prometheus_url}: ")
        assert says in status.error
        assert snapshot_problem(snap, 600) is not None  # nothing is acted on


def test_a_stopped_kueue_scrape_does_not_age_the_telemetry_decisions_read() -> None:
    """No decision reads Kueue's gauges: their age (a scrape stopped an hour ago) is reported, and a Prometheus whose
    GPU telemetry is 30 s old is 30 s old for the freshness an action needs, not an hour."""
    from gpuaas.snapshot import _staleness

    reading = PrometheusReading(gpus=pd.DataFrame(), kueue=pd.DataFrame(), serving=pd.DataFrame(),
                                staleness={"dcgm": 30.0, "kueue": 3600.0})
    assert _staleness("prometheus", reading) == 30.0
    assert _staleness("prometheus", replace(reading, staleness={"kueue": 3600.0})) is None
