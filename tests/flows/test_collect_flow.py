"""The collect flow end to end: embedded cluster, real Prometheus, real Pushgateway, Prefect harness.

Hand-checked scenario (2 nodes x 4 H100 at $3/GPU-hour, cohort ``c``, 2 h of history, ManualClock):

* ``busy`` RayCluster, team-a, 2 GPUs at activity 0.6           -> admitted, busy
* ``nb``   Notebook,   team-b, 1 GPU at 0.0                      -> admitted, the one idle candidate
* ``dark`` StatefulSet, team-b, 1 GPU, telemetry dropped         -> admitted, telemetry unknown
* ``big``  RayCluster, team-b, 2 pods x 3 GPUs, submitted at 10m -> 6 GPUs > the 4 left: pending 110 min

So team-a-cq: 2 of 4 GPUs admitted, no backlog; team-b-cq: 2 of 4 admitted, 1 workload / 6 GPUs
waiting for 6,600 s.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.models import Snapshot
from gpuaas.settings import load_settings
from gpuaas.store import open_store
from tests.scenarios import embedded, point_at

pytestmark = [pytest.mark.integration, pytest.mark.flow]



@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with embedded(tmp_path_factory.mktemp("collect"), seed=3) as running:
        yield running


@pytest.fixture()
def pointed_at(cluster: EmbeddedCluster, pushgateway_url: str, monkeypatch: pytest.MonkeyPatch) -> EmbeddedCluster:
    return point_at(cluster, monkeypatch, pushgateway_url=pushgateway_url, nvml="auto")


def test_collect_flow_backlog_usage_activity_exact(pointed_at: EmbeddedCluster, prefect_harness: None) -> None:
    from flows.collect import collect

    at = pointed_at.clock.now()
    summary = collect(at=at)

    queues = {q["name"]: q for q in summary["queues"]}
    assert queues["team-a-cq"] | {} == {
        "name": "team-a-cq", "cohort": "c", "pending_workloads": 0, "pending_gpus": 0.0,
        "oldest_pending_seconds": None, "admitted_gpus": 2.0, "nominal_gpus": 4.0}
    assert queues["team-b-cq"] == {
        "name": "team-b-cq", "cohort": "c", "pending_workloads": 1, "pending_gpus": 6.0,
        "oldest_pending_seconds": 6600.0, "admitted_gpus": 2.0, "nominal_gpus": 4.0}
    assert {n: s["ok"] for n, s in summary["sources"].items()} == {
        "kube": True, "prometheus": True, "opencost": True, "nvml": False}
    assert summary["degraded"] is False  # NVML is optional in auto mode
    assert summary["workloads"] == 4 and summary["unknown_telemetry"] == 1 and summary["idle_candidates"] == 1

    store = open_store(load_settings())
    record = store.latest_snapshot()
    store.close()
    assert record is not None and record.id == summary["snapshot_id"] and record.collected_at == at
    snapshot = Snapshot.from_json(record.payload["snapshot"])
    wl = snapshot.workloads.set_index("owner_name")
    assert abs(wl.loc["busy", "activity_avg_30m"] - 0.6) < 0.01
    assert wl.loc["nb", "activity_max_30m"] == 0.0 and wl.loc["nb", "telemetry"] == "complete"
    assert wl.loc["dark", "telemetry"] == "unknown"
    assert wl.loc["big", "state"] == "pending"


def test_collect_pushes_summary_metrics(pointed_at: EmbeddedCluster, pushgateway_url: str,
                                       prefect_harness: None) -> None:
    from flows.collect import collect

    collect(at=pointed_at.clock.now())
    text = httpx.get(f"{pushgateway_url}/metrics", timeout=5).text
    samples = {(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k not in ("instance",)))): s.value
               for fam in text_string_to_metric_families(text) for s in fam.samples
               if s.name.startswith("gpuaas_")}
    job = ("job", "gpuaas_collect")
    assert samples[("gpuaas_backlog_gpus", (("cluster_queue", "team-b-cq"), ("cohort", "c"), job))] == 6.0
    assert samples[("gpuaas_oldest_pending_seconds", (("cluster_queue", "team-b-cq"), ("cohort", "c"), job))] == 6600
    assert samples[("gpuaas_idle_candidates", (job,))] == 1.0
    assert samples[("gpuaas_source_up", (job, ("source", "prometheus")))] == 1.0
    assert samples[("gpuaas_unknown_telemetry_workloads", (job,))] == 1.0


def test_collect_publishes_artifacts(pointed_at: EmbeddedCluster, prefect_harness: None) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from flows.collect import collect

    collect(at=pointed_at.clock.now())
    with get_client(sync_client=True) as client:
        backlog = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["gpuaas-collect-backlog"])))
        quality = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["gpuaas-collect-data-quality"])))
    assert backlog and quality
    latest = max(backlog, key=lambda a: a.created)
    assert latest.type == "table"
    assert "team-b-cq" in str(latest.data) and "1h50m" in str(latest.data)
    assert "prometheus" in str(max(quality, key=lambda a: a.created).data)


def test_collect_degrades_when_prometheus_is_down_and_fails_when_all_are(
    pointed_at: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch, prefect_harness: None, tmp_path: Path
) -> None:
    from flows.collect import collect

    monkeypatch.setenv("GPUAAS_PROMETHEUS_URL", "http://127.0.0.1:9")  # nothing listens on the discard port
    monkeypatch.setenv("GPUAAS_RETRIES", "1")
    monkeypatch.setenv("GPUAAS_RETRY_BACKOFF_SECONDS", "0")
    summary = collect(at=pointed_at.clock.now())
    assert summary["degraded"] is True and summary["sources"]["prometheus"]["ok"] is False
    assert summary["unknown_telemetry"] == 3 and summary["idle_candidates"] == 0  # missing data is never idle

    monkeypatch.setenv("GPUAAS_KUBECONFIG", str(tmp_path / "missing-kubeconfig"))
    monkeypatch.setenv("GPUAAS_OPENCOST_URL", "http://127.0.0.1:9")
    state = collect(at=pointed_at.clock.now(), return_state=True)
    assert state.is_failed() and "every source failed" in str(state.result(raise_on_failure=False))
