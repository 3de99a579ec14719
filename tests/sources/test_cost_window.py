"""The cost report on the embedded cluster, one case of the default scenario at a time, by hand.

Window: the 2 h of history ``[S, S + 2 h]`` (``tests/cost_fleet.py``); the platform tenant runs on
A100s at $2.5 per GPU-hour, the forecast tenant too, and every pod pays $0.32 an hour of CPU and
RAM on top (its total cost). Each test states its arithmetic. Then: the
fixed number of requests, OpenCost's API down (its Prometheus metrics give the same money),
OpenCost missing altogether (money unknown with the reason, funnel still there), and the real
vLLM and OpenCost captures through the same parsing code.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuaas.cluster.clock import ManualClock
from gpuaas.cluster.prometheus import PrometheusServer, free_port
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.scenario import parse_scenario
from gpuaas.cluster.simulation import Simulation
from gpuaas.models import CostInputs
from gpuaas.policies.cost import CostReport, build_cost_report
from gpuaas.settings import GpuaasSettings, MetricNames, load_settings
from gpuaas.sources.cost_window import allocation_rows, read_cost_inputs, serving_rows
from gpuaas.sources.opencost import parse_allocation
from reports.cost_report import cost_report_metrics, service_rows
from tests.cost_fleet import COST_HISTORY, COST_POLICY, POD_EXTRA_PER_HOUR, cost_cluster, cost_settings
from tests.scenarios import HAND_CHECKED
from tests.sources.helpers import NOW, fixture_path, parse_exposition, series

pytestmark = pytest.mark.integration
PRICE = 2.5
WINDOW_S = COST_HISTORY.total_seconds()


def _phi(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with cost_cluster(tmp_path_factory.mktemp("cost")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def read(fleet: EmbeddedCluster) -> tuple[CostInputs, CostReport, GpuaasSettings]:
    settings = cost_settings(fleet)
    inputs = read_cost_inputs(settings, fleet.clock.now(), WINDOW_S)
    return inputs, build_cost_report(inputs, settings.policy), settings


def _service(report: CostReport, name: str) -> dict[str, Any]:
    return next(s for s in report.services if s["service"] == name)


def _tenant(report: CostReport, name: str) -> dict[str, Any]:
    return next(t for t in report.tenants if t["tenant"] == name)


def test_productive_service_within_slo(read: tuple[CostInputs, CostReport, GpuaasSettings]) -> None:
    """llm-chat: log-normal latency, median 0.9 s, sigma 0.6; SLO 2 s is a bucket bound, so the share is
    exact: P(L <= 2) = Phi(ln(2/0.9)/0.6) = 0.9084. 1 % errors: good = 0.99 x requests (rounded per
    step). Cost: 2 pods x 1 GPU x 2 h x $2.5 = $10 of GPU; + 2 pods x 2 h x $0.32 = $11.28 in all, the
    basis of cost per outcome."""
    chat = _service(read[1], "llm-chat")
    assert chat["slo_fraction"] == pytest.approx(_phi(math.log(2 / 0.9) / 0.6), abs=0.002)
    assert chat["slo_error_bound"] == 0.0 and chat["slo_bucket"] == [1.5, 2.0]
    assert chat["good_requests"] / chat["requests"] == pytest.approx(0.99, abs=0.003)
    assert chat["verified_outcomes"] == pytest.approx(chat["good_requests"] * chat["slo_fraction"], rel=1e-4)
    assert chat["gpu_cost"] == pytest.approx(2 * 2 * PRICE, abs=0.1)
    assert chat["total_cost"] == pytest.approx(2 * 2 * (PRICE + POD_EXTRA_PER_HOUR), abs=0.1)
    assert chat["cost_per_outcome"] == pytest.approx(chat["total_cost"] / chat["verified_outcomes"], rel=1e-4)


def test_service_meeting_latency_but_aborting(read: tuple[CostInputs, CostReport, GpuaasSettings]) -> None:
    """llm-abort: 4 req/s x 7200 s = 28,800 requests, 80 % abort -> 5,760 good; median 0.6 s, sigma 0.4:
    Phi(ln(2/0.6)/0.4) = 0.9987 within SLO, better than llm-chat, yet only ~20 % are outcomes.
    Cost $5 of GPU (1 GPU x 2 h x $2.5), $5.64 in all -> about $5.64 / 5,753 per outcome."""
    report = read[1]
    abort, chat = _service(report, "llm-abort"), _service(report, "llm-chat")
    assert abort["requests"] == pytest.approx(28_800, abs=240)  # one 60 s step of 4 req/s
    assert abort["good_requests"] == pytest.approx(5_760, abs=48)
    assert abort["slo_fraction"] >= 0.998 > chat["slo_fraction"]
    assert abort["verified_outcomes"] / abort["requests"] == pytest.approx(0.2, abs=0.003)
    assert abort["gpu_cost"] == pytest.approx(5.0, abs=0.05)
    assert abort["total_cost"] == pytest.approx(5.64, abs=0.05)
    assert abort["cost_per_outcome"] == pytest.approx(5.64 / abort["verified_outcomes"], rel=0.01)


def test_quality_below_threshold_part_of_the_window(read: tuple[CostInputs, CostReport, GpuaasSettings]) -> None:
    """llm-eval: 6 req/s x 7200 s = 43,200 requests, all good; the eval score is below 0.8 during 25 of
    every 60 minutes of 5-minute steps -> 43,200 x 35/60 = 25,200 count; x Phi(ln(2/0.8)/0.5) = 0.9666
    within SLO -> 24,358 verified."""
    ev = _service(read[1], "llm-eval")
    assert ev["requests"] == pytest.approx(43_200, abs=360)
    assert ev["good_requests"] == pytest.approx(25_200, abs=360)
    assert ev["slo_fraction"] == pytest.approx(_phi(math.log(2 / 0.8) / 0.5), abs=0.002)
    assert ev["verified_outcomes"] == pytest.approx(25_200 * 0.96657, rel=0.015)


def test_idle_reservation_is_waste(read: tuple[CostInputs, CostReport, GpuaasSettings]) -> None:
    """nb-alice: 1 GPU held 2 h at activity 0 -> 2 idle GPU-h, $5 of waste, no productive hour. The
    service nobody calls (llm-legacy) costs $5 too and shows "no verified outcome"."""
    report = read[1]
    nb = next(w for w in report.wasters if w["workload"] == "nb-alice")
    assert (nb["idle_gpu_hours"], nb["allocated_gpu_hours"]) == (pytest.approx(2.0, abs=0.02),
                                                                 pytest.approx(2.0, abs=0.02))
    assert nb["waste_cost"] == pytest.approx(2 * PRICE, abs=0.05)
    legacy = _service(report, "llm-legacy")
    assert legacy["gpu_cost"] == pytest.approx(5.0, abs=0.05) and legacy["verified_outcomes"] == 0
    assert legacy["cost_per_outcome"] is None
    assert any(n.startswith("service llm-legacy: total cost $5.6") and n.endswith("no verified outcome")
               for n in report.notes)


def test_batch_jobs_in_time_and_late(read: tuple[CostInputs, CostReport, GpuaasSettings]) -> None:
    """forecast-eod ran 1 h, due at S + 2 h -> on time; forecast-backfill ran 90 min, due at S + 1 h -> late.
    Cost: (2 GPUs x 1 h + 2 GPUs x 1.5 h) x $2.5 = $12.5 (less the last 60 s step of each job, which
    OpenCost's emulator does not charge: 2 x 2 GPUs x 1/60 h x $2.5 = $0.17) for 1 outcome."""
    report = read[1]
    verdicts = {b["job"]: b["verdict"] for b in report.batch if b["namespace"] == "forecast"}
    assert verdicts == {"forecast-eod": "on-time", "forecast-backfill": "late"}
    forecast = _service(report, "forecast")
    assert (forecast["requests"], forecast["verified_outcomes"]) == (2.0, 1.0)
    assert forecast["gpu_cost"] == pytest.approx(12.5, abs=0.2)
    assert forecast["cost_per_outcome"] == forecast["total_cost"] > forecast["gpu_cost"]
    tenant = _tenant(report, "forecast")
    # productive = the busy hours of the job that made it: 2 GPUs x ~1 h
    assert tenant["productive_gpu_hours"] == pytest.approx(2.0, abs=0.05)
    assert tenant["busy_gpu_hours"] == pytest.approx(5.0, abs=0.1)


def test_missing_telemetry_is_unknown_not_idle(read: tuple[CostInputs, CostReport, GpuaasSettings]) -> None:
    """embed-batch holds 1 GPU for 2 h with no dcgm series: 2 unknown GPU-h, not idle, no waste."""
    report = read[1]
    assert _tenant(report, "platform")["unknown_gpu_hours"] == pytest.approx(2.0, abs=0.02)
    assert all(w["workload"] != "embed-batch" for w in report.wasters)


def test_a_fixed_number_of_requests(read: tuple[CostInputs, CostReport, GpuaasSettings]) -> None:
    """6 PromQL range queries (the fallback probe; GPU hours observed, busy; serving; Kueue; when the batch
    services' pods were last seen) + 1 OpenCost request + 9 Kubernetes lists (the deadline owners: RayClusters and
    the six batch job kinds; running pods, Workloads; one page each)."""
    assert read[0].queries == 16


def test_opencost_api_down_falls_back_to_its_metrics(fleet: EmbeddedCluster,
                                                     read: tuple[CostInputs, CostReport, GpuaasSettings]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    settings = cost_settings(fleet, opencost_url=url)
    inputs = read_cost_inputs(settings, fleet.clock.now(), WINDOW_S)
    report = build_cost_report(inputs, settings.policy)
    failed = f"OpenCost at {url}: connection refused (nothing listens on that port)"
    assert f"{failed}; the costs are read from OpenCost's metrics in Prometheus instead" in report.notes
    # the money is still known, but the configured API failed: the source says so, for the run to be degraded
    assert not inputs.sources["opencost"].ok
    assert inputs.sources["opencost"].error == f"OpenCost at {url}: connection refused (nothing listens on that port)"
    assert inputs.sources["prometheus"].ok and inputs.sources["kube"].ok
    assert all(status.ok for status in read[0].sources.values()) and set(read[0].sources) == {
        "kube", "opencost", "prometheus"}
    # both sources give both costs with one meaning: GPU cost, and the total with CPU and RAM
    for column in ("gpu_cost", "total_cost"):
        api = {t["tenant"]: t[column] for t in read[1].tenants}
        # the API charges pod records, the metrics 60 s samples: up to one step per pod apart (vision
        # ran ~18 short jobs in the window: 18 x 4 GPUs x 1/60 h x $4 = $4.8 at most on $170)
        assert {t["tenant"]: t[column] for t in report.tenants} == pytest.approx(api, rel=0.03)
    assert all(t["total_cost"] > t["gpu_cost"] for t in report.tenants if t["gpu_cost"])
    assert inputs.queries == 6 + 1 + 1 + 9  # the failed API request and the metrics query


@pytest.fixture(scope="module")
def no_opencost_prometheus(prometheus_factory: Callable[[Any], PrometheusServer]) -> tuple[PrometheusServer, Any]:
    """HAND_CHECKED's series for 1 h, without OpenCost's metrics: a cluster where OpenCost is not installed."""
    scenario = parse_scenario(HAND_CHECKED)
    clock = ManualClock(NOW - timedelta(hours=1))
    from gpuaas.cluster.apiserver import ObjectStore
    from gpuaas.cluster.kueue import KueueController

    store = ObjectStore(clock.now)
    kueue = KueueController(store, clock.now)
    kueue.attach()
    sim = Simulation(scenario, store, kueue, clock, 1)
    steps = [sim.tick()] + [sim.step(timedelta(minutes=1)) for _ in range(60)]
    opencost = {"container_gpu_allocation", "node_gpu_hourly_cost", "node_gpu_count", "node_cpu_hourly_cost",
                "node_ram_hourly_cost", "node_total_hourly_cost"}
    return prometheus_factory([s for step in steps for s in step if s[0] not in opencost]), scenario


def test_missing_opencost_means_cost_unknown_with_the_funnel(no_opencost_prometheus: tuple[PrometheusServer, Any]
                                                             ) -> None:
    """HAND_CHECKED for 1 h: busy (2 GPUs at 0.6) -> 2 busy GPU-h; nb (1 GPU at 0) -> 1 idle GPU-h; money unknown."""
    prom, _ = no_opencost_prometheus
    settings = load_settings(prometheus_url=prom.url, nvml="off", metrics=MetricNames(sample_interval_seconds=60))
    inputs = read_cost_inputs(settings, NOW, 3600)
    report = build_cost_report(inputs, settings.policy)
    assert inputs.costs is None
    assert any(n.startswith("cost unknown: OpenCost unknown: no OpenCost allocation API configured") for n in
               report.notes)
    assert list(inputs.sources) == ["prometheus"]  # neither OpenCost's API nor Kubernetes configured: none failed
    assert "Kubernetes API not configured (GPUAAS_KUBECONFIG or GPUAAS_IN_CLUSTER)" in report.notes
    team_a, team_b = report.tenants
    assert team_a["busy_gpu_hours"] == pytest.approx(2.0, abs=0.05) and team_a["total_cost"] is None
    assert team_b["idle_gpu_hours"] == pytest.approx(1.0, abs=0.02) and team_b["waste_cost"] is None
    assert all(t["cost_per_outcome"] is None for t in report.tenants)


# --- real captures through the same parsing code ----------------------------------------------
def _as_counter_history(path: Path, start: float, end: float) -> list[tuple[str, dict[str, str], float, float]]:
    """A capture as two scrapes: every counter/bucket at 0 when created (``start``), then its captured value."""
    out = []
    for name, labels, value in parse_exposition(path):
        if name.startswith("vllm:") and (name.endswith("_total") or name.endswith("_bucket")):
            out += [(name, labels, 0.0, start), (name, labels, value, end)]
    return out


VLLM_CAPTURES = {"Qwen/Qwen2.5-0.5B-Instruct": "vllm-metrics.qwen2.5-0.5b-instruct.kops-conformance.prom",
                 "facebook/opt-125m": "vllm-metrics.datadog-fixture.txt"}


@pytest.fixture(scope="module")
def vllm_prometheus(prometheus_factory: Callable[[Any], PrometheusServer]) -> PrometheusServer:
    """Both vLLM captures (their models differ) as two scrapes an hour apart, and OpenCost's metrics
    capture scraped every minute of that hour, in one Prometheus."""
    start, end = (NOW - timedelta(hours=1)).timestamp(), NOW.timestamp()
    vllm = [s for name in VLLM_CAPTURES.values()
            for s in _as_counter_history(fixture_path("telemetry", "vllm", name), start, end)]
    opencost = series(parse_exposition(fixture_path("telemetry", "opencost", "opencost-metrics.scraper-test-data.prom")),
                      end=NOW, minutes=60, step_s=60)
    return prometheus_factory(vllm + opencost)


def test_real_opencost_metrics_capture(vllm_prometheus: PrometheusServer) -> None:
    """No allocation API: the cost comes from OpenCost's own metrics. The capture's two pods hold 0 GPUs on
    nodes priced $0 per GPU-hour: rows for both, 0 GPU-hours, $0 — known, not unknown."""
    settings = load_settings(prometheus_url=vllm_prometheus.url, nvml="off",
                             metrics=MetricNames(sample_interval_seconds=60))
    inputs = read_cost_inputs(settings, NOW, 3600)
    assert inputs.costs is not None
    assert sorted(zip(inputs.costs["namespace"], inputs.costs["pod"])) == [("namespace1", "pod1"),
                                                                            ("namespace1", "pod2")]
    assert inputs.costs["gpu_hours"].sum() == 0 and inputs.costs["gpu_cost"].sum() == 0


@pytest.mark.parametrize(("model", "requests", "fraction"), [
    ("Qwen/Qwen2.5-0.5B-Instruct", 0.0, None),
    ("facebook/opt-125m", 1.0, 1.0),
], ids=["vllm-v1-idle", "vllm-legacy-names"])
def test_real_vllm_captures(model: str, requests: float, fraction: float | None,
                            vllm_prometheus: PrometheusServer) -> None:
    """The captures carry no namespace (vLLM adds none): rows get namespace "" and still match a service
    by model. Qwen (V1 names, ``engine`` label, five reasons) was idle: 0 requests, SLO share unknown,
    not 0. opt-125m (legacy names): 1 request, finished "length", under 1 s -> within a 2 s SLO."""
    start, end = NOW - timedelta(hours=1), NOW
    prom = vllm_prometheus
    settings = load_settings(prometheus_url=prom.url, nvml="off", policy_file=None)
    from gpuaas.policy import parse_policy
    from gpuaas.sources import PromClient
    from gpuaas.sources import _promql_cost as q

    policy = parse_policy({"services": [{"name": "svc", "namespace": "team", "model_name": model,
                                         "latency_slo_seconds": 2.0}]})
    client = PromClient(settings)
    rows = serving_rows(client.query_range(q.serving_window_query(settings.metrics, policy.services, 3600),
                                           end, end, 3600), start, 3600, 1)
    client.close()
    assert set(rows["namespace"]) == {""} and set(rows["model_name"]) == set(VLLM_CAPTURES)
    inputs = CostInputs(start, end, 1, pd_empty_gpu(), None, rows.drop(columns=["hist"]), [])
    svc = build_cost_report(inputs, policy).services[0]
    assert svc["requests"] == pytest.approx(requests) and svc["slo_fraction"] == fraction


def pd_empty_gpu() -> Any:
    import pandas as pd

    from gpuaas.models import GPU_COLS

    return pd.DataFrame(columns=GPU_COLS)


@pytest.mark.parametrize("capture", ["allocation-compute.aggregate-namespace.swagger-example.json",
                                     "allocation-compute.aggregate-label-app.swagger-example.json"])
def test_real_opencost_allocation_captures(capture: str) -> None:
    """Every named allocation keeps its totalCost; ``__unallocated__``/``__idle__`` are not anybody's cost."""
    text = fixture_path("telemetry", "opencost", capture).read_text()
    frame = parse_allocation(json.loads(text.replace(",\n}", "\n}").replace(",\n]", "\n]")))
    from datetime import UTC, datetime

    starts = frame["window_start"].dropna()
    start = datetime.fromisoformat(str(starts.min()).replace("Z", "+00:00")).astimezone(UTC)
    rows = allocation_rows(frame, start, 86400, 1)
    named = frame[~frame["name"].str.startswith("__") & (frame["namespace"] != "")]
    assert len(rows) == len(named) > 0
    assert rows["total_cost"].sum() == pytest.approx(named["total_cost"].sum())
    assert rows["gpu_cost"].sum() == pytest.approx(named["gpu_cost"].fillna(0).sum())
    assert set(rows["day"]) == {0}


def test_a_pod_whose_controller_opencost_does_not_know_keeps_its_cost() -> None:
    """OpenCost names controllers from Deployments, StatefulSets, DaemonSets, Jobs and Rollouts only: a RayCluster's
    pod is ``<namespace>/__unallocated__/<pod>`` under ``aggregate=namespace,controller,pod``. It is somebody's cost;
    idle capacity and what no namespace holds are not."""
    from datetime import UTC, datetime

    doc = json.loads(fixture_path("telemetry", "opencost",
                                  "allocation-compute.aggregate-namespace.swagger-example.json").read_text())
    base = doc["data"][0]["opencost"]
    ray = {**base, "gpuCount": 1.0, "gpuHours": 47.99, "gpuCost": 100.0,
           "properties": {k: v for k, v in base["properties"].items() if not k.startswith("controller")}
           | {"namespace": "ml-team", "pod": "raycluster-gpu-head-x7k2p"}}
    idle = {**base, "gpuCost": 7.0, "properties": {"cluster": "cluster-one"}}
    unmounted = {**base, "properties": {"cluster": "cluster-one", "namespace": "__unmounted__"}}
    frame = parse_allocation({"code": 200, "data": [{
        "opencost/deployment:opencost/opencost-75dc7dcc49-xdx5t": base,
        "ml-team/__unallocated__/raycluster-gpu-head-x7k2p": ray,
        "__idle__": idle, "__unmounted__/__unmounted__/__unmounted__": unmounted}]})
    start = datetime.fromisoformat(base["window"]["start"].replace("Z", "+00:00")).astimezone(UTC)
    rows = allocation_rows(frame, start, 2 * 86400, 1)
    assert sorted(rows["pod"]) == ["opencost-75dc7dcc49-xdx5t", "raycluster-gpu-head-x7k2p"]
    assert rows["gpu_hours"].sum() == pytest.approx(47.99) and rows["gpu_cost"].sum() == pytest.approx(100.0)


def test_replicas_needed_unknown_without_capacity(read: tuple[CostInputs, CostReport, GpuaasSettings]) -> None:
    """The default policy names no sweep and the store holds no load test: replicas needed is null, with
    the reason; the forecast is still there: the p95 of the 5-minute rate plus 20 % headroom, above the mean."""
    chat = _service(read[1], "llm-chat")
    assert chat["replicas_needed"] is None and chat["per_replica_rps"] is None and chat["capacity_source"] is None
    assert chat["peak_rps"] >= chat["requests"] / WINDOW_S
    assert chat["forecast_rps"] == pytest.approx(1.2 * chat["peak_rps"], rel=1e-5)
    assert ("service llm-chat: replicas needed unknown: no capacity sweep in the policy and no load test of it in "
            "the store") in read[1].notes
    assert _service(read[1], "forecast")["replicas_needed"] is None  # batch: not a serving capacity


def test_replicas_needed_from_the_policys_sweep(fleet: EmbeddedCluster, tmp_path: Path) -> None:
    """llm-abort's sweep (2 replicas): p95 0.5 / 0.9 / 1.6 / 2.4 s at 1 / 2 / 3 / 4 rps, SLO 2 s -> 3 rps
    sustainable, 1.5 rps per replica. Forecast: 4 req/s constant (aborts are load too), its p95 too, plus
    20 % headroom: 4.8 -> ceil(4.8 / 1.5) = 4 replicas. The sweep file was written an hour before the window's end: age 3,600 s. A sweep that never
    meets the SLO (llm-chat's: 3 s at its lowest rate) leaves replicas null, with the reason."""
    (tmp_path / "abort.csv").write_text("rate_rps,replicas,gpus,latency_p95_s\n1,2,2,0.5\n2,2,2,0.9\n3,2,2,1.6\n"
                                        "4,2,2,2.4\n")
    (tmp_path / "chat.csv").write_text("rate_rps,replicas,gpus,latency_p95_s\n1,1,1,3.0\n2,1,1,3.5\n")
    end = fleet.clock.now()
    for name in ("abort.csv", "chat.csv"):
        os.utime(tmp_path / name, (end.timestamp() - 3600, end.timestamp() - 3600))
    policy = yaml.safe_load(COST_POLICY.read_text())
    for svc in policy["services"]:
        if svc["name"] in ("llm-abort", "llm-chat"):
            svc["capacity"] = {"sweep": "abort.csv" if svc["name"] == "llm-abort" else "chat.csv"}
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(policy))
    settings = cost_settings(fleet, policy_file=tmp_path / "policy.yaml")
    report = build_cost_report(read_cost_inputs(settings, end, WINDOW_S), settings.policy)
    abort = _service(report, "llm-abort")
    assert abort["peak_rps"] == pytest.approx(4.0, abs=0.05)
    assert abort["forecast_rps"] == pytest.approx(4.8, abs=0.06)
    assert (abort["per_replica_rps"], abort["replicas_needed"]) == (1.5, 4)
    assert abort["capacity_source"] == f"sweep file {tmp_path / 'abort.csv'}"
    assert abort["capacity_age_s"] == pytest.approx(3600, abs=1)
    assert next(r for r in service_rows(report) if r["service"] == "llm-abort")["replicas needed"].startswith("4 (")
    pushed = {m.name: m for m in cost_report_metrics(report)}["gpuaas_replicas_needed"]
    assert pushed.samples == [(("llm-abort", "platform"), 4.0)]  # llm-chat: unknown, so absent (never 0)
    chat = _service(report, "llm-chat")
    assert chat["replicas_needed"] is None and chat["capacity_source"] == f"sweep file {tmp_path / 'chat.csv'}"
    assert any(n.startswith("service llm-chat: replicas needed unknown: its capacity (sweep file")
               and "never meets the SLO" in n for n in report.notes)


def test_a_malformed_deadline_is_a_note_of_the_report_not_a_crash(fleet: EmbeddedCluster) -> None:
    """A finished Workload whose deadline has no zone: the report is built, the job counts without a deadline, and
    a note names the Workload and the annotation."""
    from gpuaas.sources._cost_jobs import DEADLINE_ANNOTATION, finished_jobs

    done = finished_jobs(fleet.store.list("Workload"))
    assert done, "the cost fleet has a finished job"
    job = done[0]
    prior = (fleet.store.get("Workload", job.namespace, job.workload)["metadata"].get("annotations") or {}).get(
        DEADLINE_ANNOTATION)
    fleet.store.patch("Workload", job.namespace, job.workload,
                      {"metadata": {"annotations": {DEADLINE_ANNOTATION: "2030-12-01T18:00:00"}}})
    try:
        settings = cost_settings(fleet)
        inputs = read_cost_inputs(settings, fleet.clock.now(), WINDOW_S)
        build_cost_report(inputs, settings.policy)
    finally:
        fleet.store.patch("Workload", job.namespace, job.workload,
                          {"metadata": {"annotations": {DEADLINE_ANNOTATION: prior}}})
    assert any(n.startswith(f"Workload {job.namespace}/{job.workload}: annotation {DEADLINE_ANNOTATION}=")
               for n in inputs.notes)
