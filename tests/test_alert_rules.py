"""``deployments/prometheus/gpuaas-alerts.yaml``: valid, right on hand-made series, and raised by what gpuaas pushes.

* ``promtool check rules`` and ``promtool test rules tests/alert_rules.test.yaml``: each alert's age,
  ``for:``, labels and rendered text on series written by hand (the minutes are worked out there).
* End to end: the collect on the hand-checked cluster (``tests/scenarios.py``) with OpenCost unreachable
  pushes to a real Pushgateway, a real Prometheus scrapes it as the file's header asks (``honor_labels``)
  with the file loaded, and exactly the alerts the scenario calls for go pending: OpenCost down (NVML,
  optional and absent here, is down too and must not alert) and ``dark``, which it cannot judge (its telemetry was dropped); the
  queue's 110 minutes are under the 4 hours, and the pushes are fresh.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gpuaas.cluster.prometheus import PrometheusServer, require_binary
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.services import pushgateway_server
from tests.scenarios import embedded, point_at

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "deployments" / "prometheus" / "gpuaas-alerts.yaml"
UNIT_TESTS = Path(__file__).with_name("alert_rules.test.yaml")


def test_promtool_checks_the_rules() -> None:
    out = subprocess.run([require_binary("promtool"), "check", "rules", str(RULES)], capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 6 rules found" in out.stdout


def test_promtool_unit_tests_pass() -> None:
    out = subprocess.run([require_binary("promtool"), "test", "rules", UNIT_TESTS.name], cwd=UNIT_TESTS.parent,
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "SUCCESS" in out.stdout


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with embedded(tmp_path_factory.mktemp("alerts"), seed=3) as running:
        yield running


def _pending(prometheus_url: str, deadline_s: float = 60.0) -> dict[tuple[str, str], dict[str, str]]:
    """The alerts Prometheus holds once its rules have seen a scrape: ``(alertname, source or queue) -> annotations``."""
    deadline = time.monotonic() + deadline_s
    alerts: list[dict[str, object]] = []
    while time.monotonic() < deadline:
        body = httpx.get(f"{prometheus_url}/api/v1/alerts", timeout=5).json()
        alerts = body["data"]["alerts"]
        # Both scrape-driven alerts in: the rules have evaluated a scrape holding every pushed series.
        if len(alerts) >= 2:
            time.sleep(3)  # and three more evaluations, for anything that would come late
            alerts = httpx.get(f"{prometheus_url}/api/v1/alerts", timeout=5).json()["data"]["alerts"]
            break
        time.sleep(0.5)
    out = {}
    for alert in alerts:
        labels, annotations = alert["labels"], alert["annotations"]
        assert isinstance(labels, dict) and isinstance(annotations, dict)
        assert alert["state"] == "pending", alert
        out[(labels["alertname"], labels.get("source") or labels.get("cluster_queue") or "")] = annotations
    return out


@pytest.mark.integration
def test_what_the_collect_pushes_raises_the_alerts_it_should(cluster: EmbeddedCluster, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from flows._collect import collect_snapshot

    (tmp_path / "gateway").mkdir()
    with pushgateway_server(tmp_path / "gateway") as gateway:
        point_at(cluster, monkeypatch, pushgateway_url=gateway, nvml="auto", opencost_url="http://127.0.0.1:9",
                 retries="0")
        summary = collect_snapshot(at=cluster.clock.now())
        assert summary["pushed_samples"] and summary["unjudged_count"] == 1
        assert {n: (s["ok"], s["required"]) for n, s in summary["sources"].items()} == {
            "kube": (True, True), "prometheus": (True, True), "opencost": (False, True), "nvml": (False, False)}
        with PrometheusServer(tmp_path / "prometheus", scrape_targets=[gateway.removeprefix("http://")],
                              scrape_interval="1s", evaluation_interval="1s", rule_files=[RULES]) as prometheus:
            pending = _pending(prometheus.url)
    assert pending == {
        ("GpuaasSourceDown", "opencost"): {
            "summary": "gpuaas cannot read opencost",
            "description": "Every collect of the last 15 minutes failed to read opencost: the flows run degraded and "
                           "act on nothing that needs it. `gpuaas config preflight` names the cause."},
        ("GpuaasWorkloadsUnjudged", ""): {
            "summary": "GPU workloads gpuaas has not been able to judge for an hour: 1",
            "description": "gpuaas never reclaims a workload it cannot call idle or busy. `gpuaas collect` lists "
                           "them and what each lacks: most often incomplete telemetry (a node without "
                           "dcgm-exporter)."},
    }
