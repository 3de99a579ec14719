"""A service none of whose pods OpenCost's allocation lists has its cost unknown, never $0 per outcome.

Why: chat's only pod (10 GPU-hours of telemetry, 72 verified requests) is missing from OpenCost's allocation: its
cost is in no total, as the note about the pod says, so $0.00 and $0.00 per verified request in its row (and in
its period's) would be a price no one paid. The inputs are the cost report's hand-checked ones, without the
pod's OpenCost row. Its tenant's cost per outcome would divide a cost without chat's by outcomes with them.
"""

from __future__ import annotations

from gpuaas.models import CostInputs
from gpuaas.policies.cost import build_cost_report
from tests.policies.test_cost_report import POLICY, _inputs


def test_a_service_whose_pods_opencost_does_not_list_has_its_cost_unknown() -> None:
    base = _inputs()
    assert base.costs is not None
    costs = base.costs[base.costs["pod"] != "chat-predictor-0"]
    report = build_cost_report(CostInputs(base.start, base.end, 1, base.gpu, costs, base.serving, base.jobs), POLICY)
    chat = report.services[0]
    assert (chat["service"], chat["verified_outcomes"], chat["busy_gpu_hours"]) == ("chat", 72.0, 8.0)
    assert (chat["gpu_cost"], chat["total_cost"], chat["cost_per_outcome"]) == (None, None, None)
    (day,) = [d for d in report.daily if d["service"] == "chat"]
    assert (day["total_cost"], day["cost_per_outcome"], day["verified_outcomes"]) == (None, None, 72.0)
    assert ("service chat: none of its pods (10.00 GPU-hours of telemetry) is in OpenCost's allocation: its cost and "
            "cost per outcome are unknown, not $0") in report.notes
    # tenant a's cost ($43.50, without chat's pod) over chat's 72 requests would read $0.60 a request: unknown
    a = report.tenants[0]
    assert (a["total_cost"], a["verified_requests"], a["cost_per_outcome"]) == (43.5, 72.0, None)
    assert ("tenant a: cost per outcome unknown: the cost of service chat is in no total (none of its pods is in "
            "OpenCost's allocation)") in report.notes
    etl = report.services[1]
    assert (etl["total_cost"], etl["cost_per_outcome"]) == (17.5, 17.5)  # priced: as before
