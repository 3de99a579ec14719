"""The cost report as a pure function, on inputs small enough to check by hand.

Tenant ``a`` (namespace a, $4 per GPU-hour):
* ``chat`` service, pod chat-predictor-0: 10 GPU-h allocated ($40), 10 observed, 8 busy.
  Requests: 90 stop + 10 abort = 100; latency <=1 s: 60, <=2 s: 80, all: 100; SLO 2 s -> 0.8.
  Verified = 90 good x 0.8 = 72; productive = 8 busy x 72/100 = 5.76 GPU-h; $40 / 72 per outcome.
* ``nb-0``: 5 GPU-h allocated ($20), observed, never busy -> 5 idle GPU-h, waste $20.
* ``dark-0``: 4 GPU-h allocated ($16), no telemetry -> 4 unknown GPU-h, not idle, no waste.
  Tenant a: allocated 19, busy 8, productive 5.76, unknown 4, idle 2 (chat) + 5 (nb) = 7,
  cost $76, waste 2 x $4 + $20 = $28, 72 outcomes.
Tenant ``b`` (namespace b, $3 per GPU-hour), batch service ``etl``:
* ``etl-daily`` finished on time: 2 GPU-h, busy, $6 -> productive 2, 1 outcome.
* ``etl-late`` finished after its deadline: 3 GPU-h, busy, $9 -> productive 0.
  Tenant b: cost $15, 1 outcome, $15 per outcome; service etl: 2 jobs, 1 verified.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from gpuaas.policies.cost import COST_COLS, GPU_COLS, SERVING_COLS, CostInputs, build_cost_report
from gpuaas.policies.outcomes import FinishedJob
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
    gpu = pd.DataFrame([("a", "chat-predictor-0", 0, 10.0, 8.0), ("a", "nb-0", 0, 5.0, 0.0),
                        ("b", "etl-daily-head", 0, 2.0, 2.0), ("b", "etl-late-head", 0, 3.0, 3.0),
                        ("", "", 0, 7.0, 0.0)],  # a free GPU: no pod, no namespace, in nobody's funnel
                       columns=GPU_COLS)
    cost = pd.DataFrame([("a", "deployment", "chat-predictor", "chat-predictor-0", 0, 10.0, 40.0),
                         ("a", "statefulset", "nb", "nb-0", 0, 5.0, 20.0),
                         ("a", "statefulset", "dark", "dark-0", 0, 4.0, 16.0),
                         ("b", "raycluster", "etl-daily", "etl-daily-head", 0, 2.0, 6.0),
                         ("b", "raycluster", "etl-late", "etl-late-head", 0, 3.0, 9.0)], columns=COST_COLS)
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
                 "unknown_gpu_hours": 4.0, "idle_gpu_hours": 7.0, "cost": 76.0, "waste_cost": 28.0,
                 "verified_outcomes": 72.0, "cost_per_outcome": float(f"{76 / 72:.6g}")}
    assert (b["allocated_gpu_hours"], b["productive_gpu_hours"], b["cost"], b["verified_outcomes"],
            b["cost_per_outcome"]) == (5.0, 2.0, 15.0, 1.0, 15.0)
    chat, etl, quiet = report.services
    assert (chat["requests"], chat["good_requests"], chat["verified_outcomes"]) == (100.0, 90.0, 72.0)
    assert (chat["slo_fraction"], chat["slo_error_bound"], chat["cost"]) == (0.8, 0.0, 40.0)
    assert chat["cost_per_outcome"] == float(f"{40 / 72:.6g}")
    assert (etl["requests"], etl["verified_outcomes"], etl["cost"], etl["cost_per_outcome"]) == (2.0, 1.0, 15.0, 15.0)
    assert quiet["verified_outcomes"] is None and quiet["cost_per_outcome"] is None
    assert report.wasters[0]["workload"] == "nb" and report.wasters[0]["waste_cost"] == 20.0
    assert report.cluster["unknown_gpu_hours"] == 4.0 and report.cluster["cost"] == 91.0
    assert {(j["job"], j["verdict"]) for j in report.batch} == {("etl-daily", "on-time"), ("etl-late", "late")}


def test_cost_and_no_outcome_is_not_infinite() -> None:
    inputs = _inputs()
    serving = inputs.serving.assign(finished_reason=inputs.serving["finished_reason"].replace("stop", "abort"))
    report = build_cost_report(CostInputs(inputs.start, inputs.end, 1, inputs.gpu, inputs.costs, serving,
                                          inputs.jobs), POLICY)
    chat = report.services[0]
    assert chat["verified_outcomes"] == 0.0 and chat["cost"] == 40.0 and chat["cost_per_outcome"] is None
    assert "service chat: cost 40.00, no verified outcome" in report.notes
    assert report.tenants[0]["productive_gpu_hours"] == 0.0


def test_missing_opencost_leaves_money_unknown_and_keeps_the_funnel() -> None:
    # Kueue says a-cq held 19 GPU-h; DCGM saw 15 of them (10 chat + 5 nb): 4 unknown
    kueue = pd.DataFrame([{"cluster_queue": "a-cq", "allocated_h": 19.0}])
    report = build_cost_report(_inputs(costs=False, kueue=kueue), POLICY)
    a = report.tenants[0]
    assert (a["allocated_gpu_hours"], a["busy_gpu_hours"], a["unknown_gpu_hours"], a["idle_gpu_hours"]) == (
        19.0, 8.0, 4.0, 7.0)
    assert a["cost"] is None and a["waste_cost"] is None and a["cost_per_outcome"] is None
    assert a["verified_outcomes"] == 72.0
    assert any(n.startswith("cost unknown: OpenCost unknown") for n in report.notes)
    assert all(s["cost"] is None for s in report.services)


def test_unknown_kubernetes_means_batch_outcomes_unknown() -> None:
    report = build_cost_report(_inputs(jobs=False), POLICY)
    assert "batch outcomes unknown: the Kubernetes API did not answer" in report.notes
    assert report.tenants[1]["productive_gpu_hours"] == 0.0


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
