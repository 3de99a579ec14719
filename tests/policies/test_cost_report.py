"""The cost report as a pure function, on inputs small enough to check by hand.

Every GPU pod also pays $0.5 per GPU-hour of CPU and RAM (OpenCost's totalCost), so GPU cost and
total cost differ and the tests say which one each figure is.

Tenant ``a`` (namespace a, $4 per GPU-hour):
* ``chat`` service, pod chat-predictor-0: 10 GPU-h allocated ($40 GPU, $45 total), 10 observed, 8 busy,
  3 activity-weighted. Requests: 90 stop + 10 abort = 100; latency <=1 s: 60, <=2 s: 80, all: 100;
  SLO 2 s -> 0.8. Verified = 90 good x 0.8 = 72; productive = 8 busy x 72/100 = 5.76 GPU-h;
  $45 / 72 per outcome (total, the default basis).
* ``nb-0``: 5 GPU-h allocated ($20, $22.5), observed, never busy -> 5 idle GPU-h, waste $20 (GPU price).
* ``dark-0``: 4 GPU-h allocated ($16, $18), no telemetry -> 4 unknown GPU-h, not idle, no waste.
* ``api-0``: a CPU-only pod, $3 total, no GPU: in the tenant's total cost only.
  Tenant a: allocated 19, busy 8, active 3, productive 5.76, unknown 4, idle 2 (chat) + 5 (nb) = 7,
  GPU cost $76, total $88.5, waste 2 x $4 + $20 = $28, 72 outcomes.
Tenant ``b`` (namespace b, $3 per GPU-hour), batch service ``etl``:
* ``etl-daily`` finished on time: 2 GPU-h, busy, $6 ($7 total) -> productive 2, 1 outcome.
* ``etl-late`` finished after its deadline: 3 GPU-h, busy, $9 ($10.5) -> productive 0.
  Tenant b: GPU cost $15, total $17.5, 1 outcome, $17.5 per outcome; service etl: 2 jobs, 1 verified.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from gpuaas.models import COST_COLS, GPU_COLS, SERVING_COLS, CostInputs, FinishedJob, RunningJob
from gpuaas.policies.cost import build_cost_report
from gpuaas.policy import parse_policy

END = datetime(2026, 11, 2, tzinfo=UTC)
START = END - timedelta(days=1)
POLICY = parse_policy({
    "tenants": [{"name": "a", "namespaces": ["a"], "cluster_queues": ["a-cq"]},
                {"name": "b", "namespaces": ["b"], "cluster_queues": ["b-cq"]}],
    "services": [
        {"name": "chat", "namespace": "a", "model_name": "m", "latency_slo_seconds": 2.0},
        {"name": "etl", "namespace": "b", "kind": "batch"},
        {"name": "quiet", "namespace": "a", "model_name": "q", "latency_slo_seconds": 1.0},
    ],
})


def _inputs(costs: bool = True, kueue: pd.DataFrame | None = None, jobs: bool = True) -> CostInputs:
    gpu = pd.DataFrame([("a", "chat-predictor-0", 0, 10.0, 8.0, 3.0), ("a", "nb-0", 0, 5.0, 0.0, 0.0),
                        ("b", "etl-daily-head", 0, 2.0, 2.0, 1.8), ("b", "etl-late-head", 0, 3.0, 3.0, 2.7),
                        ("", "", 0, 7.0, 0.0, 0.0)],  # a free GPU: no pod, no namespace, in nobody's funnel
                       columns=GPU_COLS)
    cost = pd.DataFrame([("a", "deployment", "chat-predictor", "chat-predictor-0", 0, 10.0, 40.0, 45.0),
                         ("a", "statefulset", "nb", "nb-0", 0, 5.0, 20.0, 22.5),
                         ("a", "statefulset", "dark", "dark-0", 0, 4.0, 16.0, 18.0),
                         ("a", "deployment", "api", "api-0", 0, 0.0, 0.0, 3.0),
                         ("b", "raycluster", "etl-daily", "etl-daily-head", 0, 2.0, 6.0, 7.0),
                         ("b", "raycluster", "etl-late", "etl-late-head", 0, 3.0, 9.0, 10.5)], columns=COST_COLS)
    reqs = [("a", "m", 0, "requests", "stop", "", 90.0), ("a", "m", 0, "requests", "abort", "", 10.0)]
    hist = [("a", "m", 0, "latency_bucket", "", le, v) for le, v in (("1.0", 60.0), ("2.0", 80.0), ("+Inf", 100.0))]
    serving = pd.DataFrame(reqs + hist, columns=SERVING_COLS)
    finished = [FinishedJob("b", "wl-1", "u1", "RayCluster", "etl-daily", START + timedelta(hours=2), "Succeeded",
                            START + timedelta(hours=3)),
                FinishedJob("b", "wl-2", "u2", "RayCluster", "etl-late", START + timedelta(hours=5), "Succeeded",
                            START + timedelta(hours=4))]
    return CostInputs(START, END, 1, gpu, cost if costs else None, serving, finished if jobs else None,
                      kueue_hours=kueue, notes=[] if costs else ["OpenCost unknown: no OpenCost metrics"])


def test_funnel_outcomes_and_cost_per_outcome() -> None:
    report = build_cost_report(_inputs(), POLICY)
    a, b = report.tenants
    assert a == {"tenant": "a", "allocated_gpu_hours": 19.0, "busy_gpu_hours": 8.0, "productive_gpu_hours": 5.76,
                 "in_progress_gpu_hours": 0.0, "unknown_gpu_hours": 4.0, "idle_gpu_hours": 7.0,
                 "active_gpu_hours": 3.0, "gpu_cost": 76.0, "total_cost": 88.5, "waste_cost": 28.0,
                 "verified_outcomes": 72.0, "cost_per_outcome": float(f"{88.5 / 72:.6g}"),
                 "verified_requests": 72.0, "verified_jobs": 0.0, "configured_tenant": True}
    assert (b["allocated_gpu_hours"], b["productive_gpu_hours"], b["gpu_cost"], b["total_cost"],
            b["verified_outcomes"], b["cost_per_outcome"]) == (5.0, 2.0, 15.0, 17.5, 1.0, 17.5)
    chat, etl, quiet = report.services
    assert (chat["requests"], chat["good_requests"], chat["verified_outcomes"]) == (100.0, 90.0, 72.0)
    assert (chat["slo_fraction"], chat["slo_error_bound"], chat["gpu_cost"], chat["total_cost"]) == (
        0.8, 0.0, 40.0, 45.0)
    assert chat["cost_per_outcome"] == float(f"{45 / 72:.6g}")
    assert (etl["requests"], etl["verified_outcomes"], etl["total_cost"], etl["cost_per_outcome"]) == (
        2.0, 1.0, 17.5, 17.5)
    assert quiet["verified_outcomes"] is None and quiet["cost_per_outcome"] is None
    assert report.wasters[0]["workload"] == "nb" and report.wasters[0]["waste_cost"] == 20.0
    assert report.cluster["unknown_gpu_hours"] == 4.0
    assert (report.cluster["gpu_cost"], report.cluster["total_cost"], report.cost_basis) == (91.0, 106.0, "total")
    assert {(j["job"], j["verdict"]) for j in report.batch} == {("etl-daily", "on-time"), ("etl-late", "late")}


def test_cost_per_outcome_on_the_gpu_cost_when_the_policy_says_so() -> None:
    policy = parse_policy({**POLICY.model_dump(mode="json"), "cost": {"basis": "gpu"}})
    report = build_cost_report(_inputs(), policy)
    assert report.tenants[0]["cost_per_outcome"] == float(f"{76 / 72:.6g}")
    assert report.services[0]["cost_per_outcome"] == float(f"{40 / 72:.6g}")
    assert (report.tenants[0]["gpu_cost"], report.tenants[0]["total_cost"]) == (76.0, 88.5)  # both still shown


def test_cost_and_no_outcome_is_not_infinite() -> None:
    inputs = _inputs()
    serving = inputs.serving.assign(finished_reason=inputs.serving["finished_reason"].replace("stop", "abort"))
    report = build_cost_report(CostInputs(inputs.start, inputs.end, 1, inputs.gpu, inputs.costs, serving,
                                          inputs.jobs), POLICY)
    chat = report.services[0]
    assert chat["verified_outcomes"] == 0.0 and chat["total_cost"] == 45.0 and chat["cost_per_outcome"] is None
    assert "service chat: total cost $45.00, no verified outcome" in report.notes
    assert report.tenants[0]["productive_gpu_hours"] == 0.0


def test_missing_opencost_leaves_money_unknown_and_keeps_the_funnel() -> None:
    # Kueue says a-cq held 19 GPU-h; DCGM saw 15 of them (10 chat + 5 nb): 4 unknown
    kueue = pd.DataFrame([{"cluster_queue": "a-cq", "allocated_h": 19.0}])
    report = build_cost_report(_inputs(costs=False, kueue=kueue), POLICY)
    a, b = report.tenants
    assert (a["allocated_gpu_hours"], a["busy_gpu_hours"], a["unknown_gpu_hours"], a["idle_gpu_hours"]) == (
        19.0, 8.0, 4.0, 7.0)
    assert a["gpu_cost"] is None and a["total_cost"] is None and a["waste_cost"] is None
    assert a["cost_per_outcome"] is None and a["verified_outcomes"] == 72.0
    assert any(n.startswith("cost unknown: OpenCost unknown") for n in report.notes)
    assert all(s["total_cost"] is None for s in report.services)
    # no controller from OpenCost: the batch pod is its job's by name (etl-daily-head), still productive
    assert b["productive_gpu_hours"] == 2.0


def test_unknown_kubernetes_means_batch_outcomes_unknown() -> None:
    """Without the Kubernetes API nothing says which batch job finished in time: every figure that counts
    them (jobs, outcomes, productive and in-progress hours, cost per outcome) is unknown, never 0; the
    serving tenant's figures stay known, and so does the busy time of the batch pods."""
    from reports.cost_report import cost_first_line, funnel_rows, service_rows

    report = build_cost_report(_inputs(jobs=False), POLICY)
    assert "batch outcomes unknown: the Kubernetes API did not answer" in report.notes
    a, b = report.tenants
    assert (b["productive_gpu_hours"], b["in_progress_gpu_hours"], b["verified_jobs"], b["verified_outcomes"],
            b["cost_per_outcome"]) == (None, None, None, None, None)
    assert b["busy_gpu_hours"] == 5.0 and b["total_cost"] == 17.5
    assert (a["verified_jobs"], a["verified_requests"], a["productive_gpu_hours"]) == (0.0, 72.0, 5.76)
    etl = report.services[1]
    assert (etl["requests"], etl["verified_outcomes"], etl["productive_gpu_hours"], etl["cost_per_outcome"]) == (
        None, None, None, None)
    assert [d["verified_outcomes"] for d in report.daily if d["service"] == "etl"] == [None]
    assert (report.cluster["verified_jobs"], report.cluster["productive_gpu_hours"]) == (None, None)
    assert "0 batch jobs" not in cost_first_line(report)
    assert cost_first_line(report).endswith("72 verified requests and batch jobs done in time unknown.")
    assert {r["jobs in time"] for r in funnel_rows(report) if r["tenant"] in ("b", "(cluster)")} == {"unknown"}
    assert service_rows(report)[1]["requests/jobs"] == service_rows(report)[1]["verified outcomes"] == "unknown"
    from reports.cost_report_html import _headline

    box = _headline(report)  # the HTML's figures too: unknown, never 0
    assert "<span>unknown</span><small>jobs done in time</small>" in box
    assert "<span>unknown</span><small>productive (busy, with verified outcomes)</small>" in box


@pytest.mark.parametrize("bad", [
    {"name": "x", "namespace": "a"},
    {"name": "x", "namespace": "a", "latency_slo_seconds": 1, "good_finished_reasons": ["stop", "abort"]},
    {"name": "x", "namespace": "a", "kind": "batch", "latency_slo_seconds": 1},
    {"name": "x", "namespace": "a", "latency_slo_seconds": 1, "quality": {"metric": "eval_score", "threshold": 0.8}},
    {"name": "x", "namespace": "a", "latency_slo_seconds": 1, "model_name": "m",
     "quality": {"metric": "eval score", "threshold": 0.8}},
], ids=["serving-without-slo", "abort-is-never-good", "batch-with-slo", "quality-without-model", "bad-metric-name"])
def test_services_section_is_validated(bad: dict[str, object]) -> None:
    from gpuaas.errors import ConfigError

    with pytest.raises(ConfigError, match=r"policy.yaml: services\[0\]"):
        parse_policy({"services": [bad]}, "policy.yaml")


def _batch_inputs(running: list[RunningJob], last_seen: dict[tuple[str, str], float],
                  extra_gpu: list[tuple[str, str, int, float, float, float]]) -> CostInputs:
    base = _inputs(costs=False)
    gpu = pd.concat([base.gpu, pd.DataFrame(extra_gpu, columns=GPU_COLS)], ignore_index=True)
    return CostInputs(base.start, base.end, 1, gpu, None, base.serving, base.jobs, running=running,
                      last_seen=last_seen, notes=list(base.notes))


def test_only_the_attempt_that_produced_the_outcome_is_productive() -> None:
    """etl-daily failed once: its first attempt's pod (etl-daily-head-old, 4 busy GPU-h) was last seen at
    +1 h, the Workload that succeeded was created at +1.5 h; only its pod (etl-daily-head, 2 busy) is productive."""
    inputs = _batch_inputs([], {("b", "etl-daily-head-old"): (START + timedelta(hours=1)).timestamp(),
                                ("b", "etl-daily-head"): (START + timedelta(hours=2)).timestamp()},
                           [("b", "etl-daily-head-old", 0, 4.0, 4.0, 3.0)])
    jobs = [FinishedJob("b", "wl-1", "u1", "RayCluster", "etl-daily", START + timedelta(hours=2), "Succeeded",
                        START + timedelta(hours=3), created_at=START + timedelta(hours=1.5))]
    inputs = CostInputs(inputs.start, inputs.end, 1, inputs.gpu, None, inputs.serving, jobs,
                        last_seen=inputs.last_seen)
    b = build_cost_report(inputs, POLICY).tenants[1]
    assert (b["busy_gpu_hours"], b["productive_gpu_hours"]) == (9.0, 2.0)  # 2 + 3 (etl-late) + 4 (failed attempt)


def test_a_job_still_running_is_in_progress_not_unproductive() -> None:
    """etl-long (an admitted, unfinished Workload created at +10 h) ran 6 busy GPU-h on its head and 2 on a
    worker whose name does not say whose it is (``gpu-worker-7``): its ownerReferences do. All in progress."""
    running = [RunningJob("b", "RayCluster", "etl-long", START + timedelta(hours=10))]
    inputs = _batch_inputs(running, {("b", "etl-long-head"): END.timestamp()},
                           [("b", "etl-long-head", 0, 6.0, 6.0, 5.0), ("b", "gpu-worker-7", 0, 2.0, 2.0, 2.0)])
    inputs = CostInputs(inputs.start, inputs.end, 1, inputs.gpu, None, inputs.serving, inputs.jobs,
                        running=running, last_seen=inputs.last_seen, pod_owners={("b", "gpu-worker-7"): "etl-long"})
    report = build_cost_report(inputs, POLICY)
    b = report.tenants[1]
    assert (b["productive_gpu_hours"], b["in_progress_gpu_hours"], b["busy_gpu_hours"]) == (2.0, 8.0, 13.0)
    assert {"namespace": "b", "job": "etl-long", "kind": "RayCluster", "finished_at": None, "deadline": None,
            "verdict": "in progress"} in report.batch
    etl = report.services[1]
    assert (etl["in_progress_gpu_hours"], etl["verified_outcomes"]) == (6.0, 1.0)  # the worker is no "etl-" pod


def test_two_services_on_the_same_series_are_refused_naming_both() -> None:
    """Without a model_name a service takes every series of its namespace: a second service there would
    have each count all requests (200 verified out of 100)."""
    from gpuaas.errors import ConfigError

    services = [{"name": "chat", "namespace": "a", "latency_slo_seconds": 2.0},
                {"name": "summarise", "namespace": "a", "latency_slo_seconds": 2.0}]
    with pytest.raises(ConfigError, match=r"policy.yaml: services: services 'chat' and 'summarise' select the same"):
        parse_policy({"services": services}, "policy.yaml")
    same_model = [{**services[0], "model_name": "m"}, {**services[1], "model_name": "m"}]
    with pytest.raises(ConfigError, match="'chat' and 'summarise'"):
        parse_policy({"services": same_model}, "policy.yaml")
    parse_policy({"services": [{**services[0], "model_name": "m"}, {**services[1], "model_name": "n"}]})


def test_replicas_from_the_peak_rate_plus_headroom() -> None:
    """The window's p95 of the 5-minute rate is 20 rps (its mean would be ~12); with the default headroom
    0.2 the forecast is 24 rps, at 5 rps per replica: 5 replicas (sizing on the mean said 3)."""
    from gpuaas.models import CapacityEstimate

    base = _inputs()
    serving = pd.concat([base.serving, pd.DataFrame([("a", "m", 0, "rate_quantile", "", "", 20.0)],
                                                    columns=SERVING_COLS)], ignore_index=True)
    estimate = CapacityEstimate("a", "chat", True, 5.0, 5.0, 5.0, "p95", 2.0, "sweep file x.csv", END, 0.0, "ok")
    inputs = CostInputs(base.start, base.end, 1, base.gpu, base.costs, serving, base.jobs,
                        capacity={"chat": estimate})
    chat = build_cost_report(inputs, POLICY).services[0]
    assert (chat["peak_rps"], chat["forecast_rps"], chat["per_replica_rps"], chat["replicas_needed"]) == (
        20.0, 24.0, 5.0, 5)


def test_the_headline_counts_one_job_in_the_singular() -> None:
    from reports._cost_words import _jobs_in_time

    assert [_jobs_in_time({"verified_jobs": n}) for n in (0.0, 1.0, 2.0, None)] == [
        "0 batch jobs done in time", "1 batch job done in time", "2 batch jobs done in time",
        "batch jobs done in time unknown"]


def test_large_figures_keep_their_cents_and_units_and_the_notes_agree_with_the_tables() -> None:
    """A month of a large fleet: money over $10,000 keeps its cents, counts over a million stay whole,
    and a note about a figure prints the figure the table shows."""
    inputs = _inputs()
    scale = 1234.5671
    assert inputs.costs is not None
    costs = inputs.costs.assign(**{c: inputs.costs[c] * scale for c in ("gpu_cost", "total_cost")})
    serving = pd.DataFrame([("a", "m", 0, "requests", "stop", "", 0.0), ("a", "m", 0, "requests", "abort", "",
                                                                          12_345_678.0),
                            ("a", "m", 0, "latency_bucket", "", "2.0", 12_345_678.0),
                            ("a", "m", 0, "latency_bucket", "", "+Inf", 12_345_678.0)], columns=SERVING_COLS)
    report = build_cost_report(CostInputs(inputs.start, inputs.end, 1, inputs.gpu, costs, serving, inputs.jobs),
                               POLICY)
    a = report.tenants[0]
    assert (a["gpu_cost"], a["total_cost"]) == (round(76 * scale, 2), round(88.5 * scale, 2))
    assert report.cluster["total_cost"] == round(106 * scale, 2)
    chat = report.services[0]
    assert chat["requests"] == 12_345_678.0 and chat["total_cost"] == round(45 * scale, 2) == 55_555.52
    assert "service chat: total cost $55,555.52, no verified outcome" in report.notes
    assert report.wasters[0]["waste_cost"] == round(20 * scale, 2)
