"""The KEDA signal never outlives its evidence: a real Pushgateway, scraped by a real Prometheus, read by
the shipped ScaledObject's own query.

A previous good run left ``gpuaas_workload_idle{team-a/Deployment/llm} = 1`` (KEDA path), and the
query says 0: scale to zero. Then, each time starting from that leftover:

* a reclaim run (the real flow, Prefect's harness, the embedded cluster) whose Prometheus source
  is missing completes degraded and withdraws the group: the query says 1 (the Deployment keeps running);
* a reclaim run that fails (no source answers) withdraws it too: 1;
* a worker that died without doing either leaves the set, but its evidence is two hours old: 1.

The Deployment's replica count comes from a kube-state-metrics group on the same Pushgateway.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest
import yaml

from gpuaas.cluster.prometheus import PrometheusServer, free_port
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.pushgateway import MetricFamily, push_metrics
from gpuaas.settings import GpuaasSettings
from reports.reclaim import idle_metrics
from tasks.reclaim import IDLE_JOB
from tests.scenarios import embedded, point_at

pytestmark = [pytest.mark.integration, pytest.mark.flow]

ROOT = Path(__file__).resolve().parents[2]
QUERY = yaml.safe_load((ROOT / "deployments" / "keda" / "scaledobject-idle.yaml").read_text())[
    "spec"]["triggers"][0]["metadata"]["query"]
VERDICT = pd.DataFrame([{
    "kind": "Deployment", "namespace": "team-a", "name": "llm-7d9-0", "owner_kind": "Deployment", "owner_name": "llm",
    "tenant": "team-a", "verdict": "idle", "idle_seconds": 3600.0, "actuator": "keda"}])


@pytest.fixture(scope="module")
def scraper(pushgateway_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """Prometheus scraping the Pushgateway every second (``honor_labels``, as for any Pushgateway)."""
    server = PrometheusServer(tmp_path_factory.mktemp("scraper"), port=free_port(),
                              scrape_targets=[pushgateway_url.removeprefix("http://")], scrape_interval="1s")
    server.start()
    push_metrics(GpuaasSettings(pushgateway_url=pushgateway_url), "kube-state-metrics", [MetricFamily(
        "kube_deployment_spec_replicas", "replicas", ("namespace", "deployment"), [(("team-a", "llm"), 1.0)])])
    yield server
    server.stop()


def _scaler_value(server: PrometheusServer) -> float | None:
    resp = httpx.get(f"{server.url}/api/v1/query", params={"query": QUERY}, timeout=10)
    resp.raise_for_status()
    result = resp.json()["data"]["result"]
    return float(result[0]["value"][1]) if result else None


def _idle_series(server: PrometheusServer) -> int:
    resp = httpx.get(f"{server.url}/api/v1/query", params={"query": "count(gpuaas_workload_idle)"}, timeout=10)
    result = resp.json()["data"]["result"]
    return int(float(result[0]["value"][1])) if result else 0


def _eventually(server: PrometheusServer, expected: float, idle_series: int) -> None:
    """Poll (bounded) until Prometheus has scraped the Pushgateway's current state."""
    deadline = time.monotonic() + 30
    while True:
        got = (_scaler_value(server), _idle_series(server))
        if got == (expected, idle_series) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert got == (expected, idle_series)


def _leftover(pushgateway_url: str, server: PrometheusServer, evidence_at: datetime) -> None:
    """What a good earlier run pushed: the verdict, idle, with the instant of its snapshot."""
    push_metrics(GpuaasSettings(pushgateway_url=pushgateway_url), IDLE_JOB, idle_metrics(VERDICT, mode="dry-run", evidence_at=evidence_at))


def _run_reclaim(monkeypatch: pytest.MonkeyPatch, **env: str) -> Any:
    from flows.reclaim import reclaim

    for key, value in {"GPUAAS_NVML": "off", "GPUAAS_RETRIES": "0", "GPUAAS_REQUEST_TIMEOUT_SECONDS": "5",
                       **env}.items():
        monkeypatch.setenv(key, value)
    return reclaim(return_state=True)


@pytest.fixture(scope="module")
def small_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with embedded(tmp_path_factory.mktemp("signal-cluster"), history=timedelta(minutes=10)) as running:
        yield running


def test_a_fresh_leftover_scales_to_zero_then_a_run_missing_prometheus_withdraws_it(
        scraper: PrometheusServer, pushgateway_url: str, prefect_harness: None, small_cluster: EmbeddedCluster,
        monkeypatch: pytest.MonkeyPatch) -> None:
    _leftover(pushgateway_url, scraper, datetime.now(UTC))
    _eventually(scraper, 0.0, 1)  # the control: a fresh idle verdict does scale to zero

    point_at(small_cluster, monkeypatch, pushgateway_url=pushgateway_url,
             prometheus_url=f"http://127.0.0.1:{free_port()}")
    state = _run_reclaim(monkeypatch)
    assert state.is_completed(), state.message  # Kubernetes answered: the run completes, degraded
    assert state.result()["degraded"] is True
    _eventually(scraper, 1.0, 0)
    assert f'job="{IDLE_JOB}"' not in httpx.get(f"{pushgateway_url}/metrics").text


def test_a_failed_run_withdraws_the_leftover(scraper: PrometheusServer, pushgateway_url: str,
                                             prefect_harness: None, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _leftover(pushgateway_url, scraper, datetime.now(UTC))
    _eventually(scraper, 0.0, 1)
    closed = f"http://127.0.0.1:{free_port()}"
    state = _run_reclaim(monkeypatch, GPUAAS_PUSHGATEWAY_URL=pushgateway_url, GPUAAS_PROMETHEUS_URL=closed,
                         GPUAAS_OPENCOST_URL=closed, GPUAAS_KUBECONFIG=str(tmp_path / "no-such-kubeconfig"))
    assert not state.is_completed()
    _eventually(scraper, 1.0, 0)


def test_a_leftover_nobody_withdrew_is_ignored_once_its_evidence_is_old(scraper: PrometheusServer,
                                                                         pushgateway_url: str) -> None:
    _leftover(pushgateway_url, scraper, datetime.now(UTC) - timedelta(hours=2))
    _eventually(scraper, 1.0, 1)  # still served, still idle=1, and ignored
