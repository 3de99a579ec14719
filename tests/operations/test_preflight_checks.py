"""The preflight's checks as pure functions of what was read: each case a setup an operator meets."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pandas as pd
import pytest

from gpuaas.models import SourceStatus
from gpuaas.operations.preflight import SeriesCensus, Verdict, kube_check, prometheus_check, telemetry_check
from gpuaas.settings import MetricNames
from gpuaas.sources.kube import KubeState

OK = SourceStatus("kube", ok=True, latency_s=0.1)


def _state(version: str | None, queues: int = 1, not_installed: tuple[str, ...] = ()) -> KubeState:
    cluster_queues = tuple(SimpleNamespace(name=f"cq{i}", cohort=None) for i in range(queues))  # what the checks read
    return KubeState(kueue_version=version, cluster_queues=cluster_queues, local_queues=(),  # type: ignore[arg-type]
                     workloads=(), cohorts=(), resource_flavors=(), owners=(), pods=(), not_installed=not_installed,
                     requests=1)


@pytest.mark.parametrize(("state", "verdict", "words"), [
    (_state(None), Verdict.failed, "Kueue is not served"),
    (_state("v1beta1"), Verdict.warning, "only v1beta1 is served, read as a fallback"),
    (_state("v1beta2", queues=0), Verdict.warning, "no ClusterQueue"),
    (_state("v1beta2", not_installed=("notebooks",)), Verdict.ok, "not installed: notebooks (not reclaimed)"),
], ids=["no-kueue", "old-kueue", "no-queues", "optional-kind-missing"])
def test_the_kueue_a_cluster_serves(state: KubeState, verdict: Verdict, words: str) -> None:
    check = kube_check(state, OK)
    assert check.verdict is verdict and words in check.detail


def test_a_failed_api_is_its_degraded_line() -> None:
    failed = SourceStatus("kube", ok=False, latency_s=0.1,
                          error="Kubernetes API at https://k:6443: name does not resolve")
    assert kube_check(None, failed).detail == failed.error


def _workloads(*rows: tuple[str, float]) -> pd.DataFrame:
    """(telemetry, GPUs observed) per workload; one that holds no GPU is ``n/a``."""
    return pd.DataFrame([{"kind": "Workload", "namespace": "ns", "name": f"w{i}", "owner_kind": "RayCluster",
                          "owner_name": f"ray{i}", "telemetry": t, "gpus_observed": seen}
                         for i, (t, seen) in enumerate(rows)])


M = MetricNames()


def test_every_workload_seen_is_ok_and_none_holding_gpus_is_skipped() -> None:
    assert telemetry_check(_workloads(("complete", 1), ("n/a", 0)), M, None).verdict is Verdict.ok
    assert telemetry_check(_workloads(("n/a", 0)), M, None).verdict is Verdict.skipped


def test_some_workloads_unseen_warn_naming_at_most_three() -> None:
    check = telemetry_check(_workloads(("complete", 1), *[("unknown", 0)] * 4, ("unknown", 1)), M, None)
    assert check.verdict is Verdict.warning
    assert check.detail.startswith("5 of 6 GPU workloads have incomplete telemetry in the window (RayCluster ns/ray1, "
                                   "RayCluster ns/ray2, RayCluster ns/ray3 and 2 more; 4 with no sample")


@pytest.mark.parametrize(("found", "words"), [
    (SeriesCensus({}, {}), "no series of DCGM_FI_PROF_GR_ENGINE_ACTIVE or DCGM_FI_DEV_GPU_UTIL in Prometheus"),
    (SeriesCensus({"DCGM_FI_DEV_GPU_UTIL": 8}, {"pod": 0, "exported_pod": 0}),
     "the 8 series of DCGM_FI_PROF_GR_ENGINE_ACTIVE or DCGM_FI_DEV_GPU_UTIL carry none of the pod labels pod, "
     "exported_pod"),
    (SeriesCensus({"DCGM_FI_DEV_GPU_UTIL": 8}, {"pod": 8, "exported_pod": 0}),
     "none of the 2 GPU workloads' pods is named by the 8 series"),
], ids=["no-metric", "no-pod-label", "pods-elsewhere"])
def test_no_workload_seen_fails_with_what_to_set(found: SeriesCensus, words: str) -> None:
    check = telemetry_check(_workloads(("unknown", 0), ("unknown", 0)), M, found)
    assert check.verdict is Verdict.failed and words in check.detail


def test_telemetry_older_than_the_policy_allows_fails_the_prometheus_check() -> None:
    fresh = SourceStatus("prometheus", ok=True, latency_s=0.2, staleness_s=30.0)
    assert prometheus_check(fresh, 600.0).verdict is Verdict.ok
    stale = prometheus_check(SourceStatus("prometheus", ok=True, latency_s=0.2, staleness_s=900.0), 600.0)
    assert stale.verdict is Verdict.failed
    assert stale.detail.startswith("answered in 0.20 s, its data 900 s old, over the 600 s "
                                   "collect.max_staleness_seconds allows")


def test_a_policy_with_nothing_to_match_or_no_kueue_is_skipped() -> None:
    from gpuaas.operations.preflight import policy_check
    from gpuaas.policy import Policy

    assert policy_check(Policy(), _state("v1beta2")).verdict is Verdict.skipped
    tenants = Policy.model_validate({"tenants": [{"name": "a", "namespaces": ["a"]}]})
    assert policy_check(tenants, None).verdict is Verdict.skipped
    assert policy_check(tenants, _state(None)).verdict is Verdict.skipped
    check = policy_check(tenants, _state("v1beta2"))  # no LocalQueue and no Workload in namespace a
    assert check.verdict is Verdict.warning and "tenant a's namespace a has no LocalQueue and no Workload" in check.detail
    two = Policy.model_validate({"tenants": [{"name": "b", "namespaces": ["b", "b-serving"]}]})
    assert "tenant b's namespaces b and b-serving have no LocalQueue and no Workload" in \
        policy_check(two, _state("v1beta2")).detail
    three = Policy.model_validate({"tenants": [{"name": "c", "namespaces": ["c", "c-serving", "c-batch"]}]})
    assert "tenant c's namespaces c, c-serving and c-batch have no LocalQueue and no Workload" in \
        policy_check(three, _state("v1beta2")).detail


def test_kueue_metrics_missing_from_prometheus_warn_and_from_the_future_fail() -> None:
    """Without Kueue's metrics the flows go on (a warning saying what goes without them); with a newest sample after
    the instant asked about no snapshot is fresh, so the flows act on nothing: a failed check."""
    from gpuaas.operations.preflight import kueue_metrics_check
    from gpuaas.sources.prometheus import PrometheusReading

    kueue = pd.DataFrame([{"cluster_queue": q, "flavor": "", "resource": "", "stat": "pending_workloads", "value": 0.0}
                          for q in ("a", "b", "b")])
    scraped = PrometheusReading(gpus=pd.DataFrame(), kueue=kueue, serving=pd.DataFrame(), staleness={"kueue": 14.2})
    assert kueue_metrics_check(scraped).as_dict() == {
        "check": "Kueue metrics", "verdict": "ok",
        "detail": "2 ClusterQueues in kueue_pending_workloads, the newest sample 14 s old"}
    unscraped = PrometheusReading(gpus=pd.DataFrame(), kueue=kueue.iloc[0:0], serving=pd.DataFrame(),
                                  staleness={"dcgm": 20.0})
    check = kueue_metrics_check(unscraped)
    assert check.verdict is Verdict.warning
    assert check.detail.startswith("no kueue_pending_workloads in Prometheus: scrape the Kueue manager's metrics")
    assert "KEDA-scaled workload is not woken by pending work" in check.detail
    future = replace(scraped, staleness={"kueue": -3600.0})
    assert kueue_metrics_check(future).verdict is Verdict.failed
    assert "3600 s after the instant asked about" in kueue_metrics_check(future).detail
    assert kueue_metrics_check(None).verdict is Verdict.skipped


def test_workloads_that_began_inside_the_window_are_no_warning() -> None:
    """A job admitted ten minutes ago has no whole 30-minute window of samples yet: on a fleet where jobs start all
    day, counting it would make every daily preflight warn. It is said apart, and an older one still warns."""
    from datetime import UTC, datetime

    start = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    frame = _workloads(("complete", 1), ("unknown", 0), ("unknown", 1))
    frame["admitted_at"] = ["2026-12-01T10:00:00Z", "2026-12-01T12:20:00Z", None]
    frame["created_at"] = ["2026-12-01T09:00:00Z", "2026-12-01T12:19:00Z", "2026-12-01T12:25:00Z"]
    young = telemetry_check(frame, M, None, start)
    assert (young.verdict, young.detail) == (Verdict.ok, (
        "1 of 3 GPU workloads have complete telemetry (DCGM_FI_PROF_GR_ENGINE_ACTIVE or DCGM_FI_DEV_GPU_UTIL); "
        "2 more started inside the window (12:00 UTC on), judged once it has passed"))
    frame.loc[2, "created_at"] = "2026-12-01T11:00:00Z"  # held before the window: its gap is a fault
    old = telemetry_check(frame, M, None, start)
    assert old.verdict is Verdict.warning
    assert old.detail.startswith("1 of 3 GPU workloads has incomplete telemetry in the window (RayCluster ns/ray2; ")
    assert old.detail.endswith("never counted as idle; 1 more started inside the window (12:00 UTC on), judged once "
                               "it has passed")
