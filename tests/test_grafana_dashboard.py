"""``deployments/grafana/``: every PromQL expression of the dashboard runs, and returns data, on the
embedded cluster's series.

The test Prometheus holds one simulated hour of the default scenario (dcgm-exporter, Kueue, vLLM
and OpenCost series) plus what the cost_report flow pushes, computed by the real report from
that hour and stamped as a Pushgateway scrape would be, and loads the tenant rules generated from
the scenario's policy (``gpuaas config tenant-rules``; ``promtool check rules`` passes them). Their
recorded series over the hour is backfilled by ``promtool tsdb create-blocks-from rules``, as an
operator backfills a new recording rule. Template variables become "All" (``.*``), as Grafana
sends them; ``label_values(metric, label)`` variables must find at least one value.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from gpuaas.cluster.apiserver import ObjectStore
from gpuaas.cluster.clock import ManualClock
from gpuaas.cluster.kueue import KueueController
from gpuaas.cluster.prometheus import PrometheusServer, require_binary, to_openmetrics
from gpuaas.cluster.scenario import default_scenario
from gpuaas.cluster.simulation import Simulation
from gpuaas.policies.cost import build_cost_report
from gpuaas.policy import Policy, load_policy, parse_policy
from gpuaas.settings import MetricNames, load_settings
from gpuaas.sources.cost_window import read_cost_inputs
from gpuaas.tenant_rules import TENANT_RECORD, tenant_rules_yaml
from reports.collect import policy_metrics
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


def _with_tenant_rules(policy: Policy, samples: list[Sample], evaluator: PrometheusServer, data_dir: Path
                       ) -> PrometheusServer:
    """A Prometheus with ``samples``, loading the policy's generated tenant rules, their recorded series
    over the last hour backfilled by promtool (rules are evaluated from the moment they are loaded)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    rules = data_dir / "gpuaas-tenant-rules.yaml"
    rules.write_text(tenant_rules_yaml(policy, "policy.yaml"))
    promtool = require_binary("promtool")
    check = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0 and "SUCCESS: 1 rules found" in check.stdout, check.stdout + check.stderr
    server = PrometheusServer(data_dir / "prometheus", rule_files=[rules])
    server.backfill(to_openmetrics(samples))
    done = subprocess.run([promtool, "tsdb", "create-blocks-from", "rules", f"--start={int(END.timestamp()) - 3600}",
                           f"--end={int(END.timestamp()) + 60}", f"--url={evaluator.url}", "--eval-interval=60s",
                           f"--output-dir={server.tsdb_dir}", str(rules)],
                          capture_output=True, text=True, timeout=120, cwd=data_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    server.start()
    return server


@pytest.fixture(scope="module")
def prometheus(prometheus_factory: Callable[[Any], PrometheusServer],
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
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
    freeze = {"name": "year-end", "start": (END - timedelta(days=1)).isoformat(), "end": (END + timedelta(days=9)).isoformat()}
    for family in policy_metrics(parse_policy({"reclaim": {"mode": "apply"}, "freezes": [freeze]}), END):
        for values, value in family.samples:
            labels = {**dict(zip(family.labels, values)), "job": "gpuaas_collect"}
            pushed += [(family.name, labels, value, (END - timedelta(minutes=m)).timestamp()) for m in range(9, -1, -1)]
    server = _with_tenant_rules(load_policy(COST_POLICY), samples + pushed, cluster_only,
                                tmp_path_factory.mktemp("dashboard"))
    yield server
    server.stop()


def test_the_tenant_rules_are_loaded_and_record_the_policys_mapping(prometheus: PrometheusServer) -> None:
    """Prometheus loaded the generated group, and the recorded series is the policy's mapping, namespace by namespace."""
    groups = httpx.get(f"{prometheus.url}/api/v1/rules", timeout=30).json()["data"]["groups"]
    assert [r["name"] for g in groups for r in g["rules"]] == [TENANT_RECORD]
    body = httpx.get(f"{prometheus.url}/api/v1/query", params={"query": TENANT_RECORD, "time": END.timestamp()},
                     timeout=30).json()
    recorded = {r["metric"]["namespace"]: r["metric"]["tenant"] for r in body["data"]["result"]}
    policy = load_policy(COST_POLICY)
    assert recorded == {ns: t.name for t in policy.tenants for ns in t.namespaces} and recorded


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


def test_no_panel_lies_on_another() -> None:
    """Grafana pushes an overlapping panel down wherever it finds room: the layout the file means is lost."""
    panels = json.loads(DASHBOARD.read_text())["panels"]
    cells: dict[tuple[int, int], str] = {}
    for panel in panels:
        grid = panel["gridPos"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, f"{panel['title']!r} lies on {cells[(x, y)]!r}"
                cells[(x, y)] = panel["title"]
    assert all(p["gridPos"]["x"] + p["gridPos"]["w"] <= 24 for p in panels)


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


def test_kueues_gauges_count_each_queue_once_whatever_the_replicas(prometheus: PrometheusServer) -> None:
    """With leader election every Kueue replica exports the ClusterQueue gauges (one series each): a panel that
    sums them shows the backlog, usage and quota once per replica, and disagrees with what gpuaas reports. With a
    follower's copy of every Kueue series beside the leader's, each Kueue panel reads the same."""
    def with_a_follower(expr: str) -> str:
        return re.sub(r"kueue_[a-z_]+(\{[^}]*\})?",
                      lambda m: f'({m[0]} or label_replace({m[0]}, "replica_role", "follower", "", ""))', expr)

    kueue = [(title, _grafana(expr)) for title, expr in _targets(json.loads(DASHBOARD.read_text())) if "kueue_" in expr]
    assert kueue
    for title, expr in kueue:
        one, two = (httpx.get(f"{prometheus.url}/api/v1/query", params={"query": q, "time": END.timestamp()},
                              timeout=30).json()["data"]["result"] for q in (expr, with_a_follower(expr)))
        assert one and sorted(r["value"][1] for r in one) == sorted(r["value"][1] for r in two), title


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


_HELM_CHART = {"container": "exporter", "pod": "dcgm-exporter-7xk2p"}
"""The dcgm-exporter's own labels as its Helm chart names them (``deployment/templates/daemonset.yaml``), where the
GPU Operator of the capture names them ``nvidia-dcgm-exporter``."""


@pytest.mark.parametrize("exporter", [{}, _HELM_CHART], ids=["gpu-operator", "helm-chart"])
def test_projects_and_tenants_come_from_the_workloads_not_the_exporter(
        prometheus_factory: Callable[[Any], PrometheusServer], tmp_path: Path, exporter: dict[str, str]) -> None:
    """The real aicr capture (16 H100s on 2 nodes, scraped with honorLabels: true): the 15 GPUs no pod holds
    carry the exporter's own ``namespace="gpu-operator"``; "GPUs held per project" must show the one GPU the
    vLLM pod holds, not 15 under gpu-operator. Per tenant, through the policy's mapping (the recording rule
    generated from a policy whose tenant ``serving`` owns ``dynamo-workload``, and ``ops`` owns
    ``gpu-operator``): that GPU is the serving tenant's, and the exporter's namespace holds none. The same with
    the exporter's container and pod named as its Helm chart names them."""
    capture = json.loads((Path(__file__).resolve().parents[1] / ".." / "shared" / "fixtures" / "telemetry" / "dcgm"
                          / "prometheus-api-query.DCGM_FI_DEV_GPU_UTIL.aicr.json").read_text())

    def labels(metric: dict[str, str]) -> dict[str, str]:
        own = metric.get("container") == "nvidia-dcgm-exporter"  # a GPU no pod holds: the exporter's labels
        return {k: v for k, v in metric.items() if k != "__name__"} | (exporter if own else {})

    samples: list[Sample] = [(r["metric"]["__name__"], labels(r["metric"]), float(r["value"][1]),
                              (END - timedelta(minutes=m)).timestamp())
                             for r in capture["data"]["result"] for m in range(5)]
    policy = parse_policy({"tenants": [{"name": "serving", "namespaces": ["dynamo-workload"]},
                                       {"name": "ops", "namespaces": ["gpu-operator"]}]})
    prom = _with_tenant_rules(policy, samples, prometheus_factory(samples), tmp_path)
    panels = {p["title"]: p["targets"][0]["expr"] for p in json.loads(DASHBOARD.read_text())["panels"]
              if p.get("targets")}

    def run(title: str, by: str) -> dict[str, float]:
        body = httpx.get(f"{prom.url}/api/v1/query", params={"query": _grafana(panels[title]),
                                                             "time": END.timestamp()}, timeout=30).json()
        return {r["metric"][by]: float(r["value"][1]) for r in body["data"]["result"]}

    try:
        assert run("GPUs held per project", "project") == {"dynamo-workload": 1.0}
        assert run("GPUs held per tenant (the policy's tenant mapping)", "tenant") == {"serving": 1.0}
    finally:
        prom.stop()


def test_gpu_hours_are_shown_in_hours() -> None:
    """Grafana's "h" unit turns 1,750 hours into "10.4 week"; a FinOps reader wants GPU-hours."""
    funnel = next(p for p in json.loads(DASHBOARD.read_text())["panels"] if p["title"] == "GPU-hour funnel per tenant")
    assert funnel["fieldConfig"]["defaults"]["unit"] == "suffix: GPU-h"
