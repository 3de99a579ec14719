"""``deployments/grafana/``: every PromQL expression of the dashboard runs, and returns data, on the
embedded cluster's series.

The test Prometheus holds one simulated hour of the default scenario (dcgm-exporter, Kueue, vLLM
and OpenCost series) plus what the cost_report flow pushes, computed by the real report from
that hour and stamped as a Pushgateway scrape would be. Template variables become "All" (``.*``),
as Grafana sends them; ``label_values(metric, label)`` variables must find at least one value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from gpuaas.cluster.apiserver import ObjectStore
from gpuaas.cluster.clock import ManualClock
from gpuaas.cluster.kueue import KueueController
from gpuaas.cluster.prometheus import PrometheusServer
from gpuaas.cluster.scenario import default_scenario
from gpuaas.cluster.simulation import Simulation
from gpuaas.policies.cost import build_cost_report
from gpuaas.settings import MetricNames, load_settings
from gpuaas.sources.cost_window import read_cost_inputs
from reports.cost_report import cost_report_metrics
from tests.cost_fleet import COST_POLICY

pytestmark = pytest.mark.integration

DASHBOARD = Path(__file__).resolve().parents[1] / "deployments" / "grafana" / "gpuaas-dashboard.json"
END = datetime(2026, 11, 2, 15, 0, tzinfo=UTC)
Sample = tuple[str, dict[str, str], float, float]


def _targets(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            out.append((panel["title"], target["expr"]))
    return out


def _grafana(expr: str) -> str:
    """Template variables as Grafana fills them for "All", and its interval macros."""
    expr = re.sub(r"\$(tenant|cluster_queue|namespace|gpu)\b", ".*", expr)
    return expr.replace("$__rate_interval", "5m").replace("$__range", "1h")


@pytest.fixture(scope="module")
def prometheus(prometheus_factory: Callable[[Any], PrometheusServer]) -> PrometheusServer:
    clock = ManualClock(END - timedelta(hours=1))
    store = ObjectStore(clock.now)
    kueue = KueueController(store, clock.now)
    kueue.attach()
    sim = Simulation(default_scenario(), store, kueue, clock, seed=2)
    samples: list[Sample] = [s for step in [sim.tick()] + [sim.step(timedelta(minutes=1)) for _ in range(60)]
                             for s in step]
    cluster_only = prometheus_factory(samples)
    settings = load_settings(prometheus_url=cluster_only.url, policy_file=COST_POLICY, nvml="off",
                             metrics=MetricNames(sample_interval_seconds=60))
    report = build_cost_report(read_cost_inputs(settings, END, 3600), settings.policy)
    pushed: list[Sample] = []
    for family in cost_report_metrics(report):
        for values, value in family.samples:
            labels = {**dict(zip(family.labels, values)), "job": "gpuaas_cost_report"}
            pushed += [(family.name, labels, value, (END - timedelta(minutes=m)).timestamp()) for m in range(9, -1, -1)]
    return prometheus_factory(samples + pushed)


def test_dashboard_is_valid_grafana_json() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["schemaVersion"] >= 36
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    titles = " ".join(p["title"] for p in dashboard["panels"]).lower()
    for topic in ("utilisation", "temperature", "power", "xid", "pending", "funnel", "cost per verified outcome",
                  "per project", "per gpu", "per tenant"):
        assert topic in titles, topic
    assert {v["name"] for v in dashboard["templating"]["list"]} >= {"tenant", "namespace", "gpu"}


def test_every_panel_query_runs_and_returns_data(prometheus: PrometheusServer) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    targets = _targets(dashboard)
    assert len(targets) >= 14
    empty, failed = [], []
    for title, expr in targets:
        resp = httpx.get(f"{prometheus.url}/api/v1/query", params={"query": _grafana(expr), "time": END.timestamp()},
                         timeout=30)
        body = resp.json()
        if resp.status_code != 200 or body.get("status") != "success":
            failed.append(f"{title}: {body.get('error', resp.status_code)}")
        elif not body["data"]["result"]:
            empty.append(title)
    assert not failed and not empty, {"failed": failed, "empty": empty}


def test_every_template_variable_has_values(prometheus: PrometheusServer) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    for var in dashboard["templating"]["list"]:
        if var["type"] != "query":
            continue
        match = re.fullmatch(r"label_values\((\w+), (\w+)\)", var["query"]["query"])
        assert match, var["name"]
        metric, label = match.groups()
        body = httpx.get(f"{prometheus.url}/api/v1/query", params={"query": f"group by ({label}) ({metric})",
                                                                   "time": END.timestamp()}, timeout=30).json()
        assert body["status"] == "success" and body["data"]["result"], var["name"]


def test_projects_and_tenants_come_from_the_workloads_not_the_exporter(
        prometheus_factory: Callable[[Any], PrometheusServer]) -> None:
    """The real aicr capture (16 H100s on 2 nodes, scraped with honorLabels: true): the 15 GPUs no pod holds
    carry the exporter's own ``namespace="gpu-operator"``; "GPUs held per project" must show the one GPU the
    vLLM pod holds, not 15 under gpu-operator. Per tenant, through the policy's mapping (pushed as
    ``gpuaas_namespace_tenant``): that GPU is the serving tenant's."""
    capture = json.loads((Path(__file__).resolve().parents[1] / ".." / "shared" / "fixtures" / "telemetry" / "dcgm"
                          / "prometheus-api-query.DCGM_FI_DEV_GPU_UTIL.aicr.json").read_text())
    samples: list[Sample] = [(r["metric"]["__name__"], {k: v for k, v in r["metric"].items() if k != "__name__"},
                              float(r["value"][1]), (END - timedelta(minutes=m)).timestamp())
                             for r in capture["data"]["result"] for m in range(5)]
    samples += [("gpuaas_namespace_tenant", {"namespace": "dynamo-workload", "tenant": "serving"}, 1.0,
                 (END - timedelta(minutes=m)).timestamp()) for m in range(5)]
    prom = prometheus_factory(samples)
    panels = {p["title"]: p["targets"][0]["expr"] for p in json.loads(DASHBOARD.read_text())["panels"]
              if p.get("targets")}

    def run(title: str, by: str) -> dict[str, float]:
        body = httpx.get(f"{prom.url}/api/v1/query", params={"query": _grafana(panels[title]),
                                                             "time": END.timestamp()}, timeout=30).json()
        return {r["metric"][by]: float(r["value"][1]) for r in body["data"]["result"]}

    assert run("GPUs held per project", "project") == {"dynamo-workload": 1.0}
    assert run("GPUs held per tenant (the policy's tenant mapping)", "tenant") == {"serving": 1.0}


def test_gpu_hours_are_shown_in_hours() -> None:
    """Grafana's "h" unit turns 1,750 hours into "10.4 week"; a FinOps reader wants GPU-hours."""
    funnel = next(p for p in json.loads(DASHBOARD.read_text())["panels"] if p["title"] == "GPU-hour funnel per tenant")
    assert funnel["fieldConfig"]["defaults"]["unit"] == "suffix: GPU-h"
