"""Requests served without a latency histogram: their verified count is unknown everywhere, not 0 in the tenant.

Why: chat served 100 requests (90 good) and its latency histogram is missing, so how many met the SLO is
unknown, as its service row says (``verified_outcomes`` None). Its tenant's row must not say 0 verified requests
and "no verified outcome", nor count its 8 busy GPU-hours as productive 0 (busy with no verified outcome).
The inputs are the cost report's hand-checked ones, without the histogram.
"""

from __future__ import annotations

from gpuaas.models import CostInputs
from gpuaas.policies.cost import build_cost_report, funnel_stages
from tests.policies.test_cost_report import POLICY, _inputs


def _without_histogram() -> CostInputs:
    base = _inputs()
    serving = base.serving[base.serving["stat"] != "latency_bucket"]
    return CostInputs(base.start, base.end, 1, base.gpu, base.costs, serving, base.jobs)


def test_requests_without_a_histogram_are_unknown_in_the_tenant_and_the_cluster() -> None:
    report = build_cost_report(_without_histogram(), POLICY)
    chat = report.services[0]
    assert (chat["service"], chat["requests"], chat["verified_outcomes"]) == ("chat", 100.0, None)
    assert chat["productive_gpu_hours"] is None and chat["busy_gpu_hours"] == 8.0
    a = report.tenants[0]
    assert (a["verified_requests"], a["verified_outcomes"], a["cost_per_outcome"]) == (None, None, None)
    assert a["productive_gpu_hours"] is None and a["in_progress_gpu_hours"] == 0.0
    assert not any(n.startswith("tenant a:") and n.endswith("no verified outcome") for n in report.notes)
    assert funnel_stages(a)["busy, outcome unknown"] == 8.0 and funnel_stages(a)["busy, no verified outcome"] == 0.0
    assert report.cluster["verified_requests"] is None and report.cluster["productive_gpu_hours"] is None
    assert report.cluster["verified_jobs"] == 1.0  # the batch outcomes are known and stay
    b = report.tenants[1]
    assert (b["productive_gpu_hours"], b["verified_outcomes"]) == (2.0, 1.0)

    # quiet has no serving series at all (no request is known to have been served): with chat's histogram, the
    # tenant's count is chat's, known and whole, as before
    a = build_cost_report(_inputs(), POLICY).tenants[0]
    assert (a["verified_requests"], a["productive_gpu_hours"]) == (72.0, 5.76)
