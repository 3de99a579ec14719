"""OpenCost's total cost stands where it is below the GPU cost.

Why: a reconciliation credit on another part (``cpuCostAdjustment`` -3 on a $1 CPU cost) makes a pod's totalCost lower
than its gpuCost, legitimately. The report raised every pod's total to its GPU cost, so a pod OpenCost charged $3.00 in
all was reported at $5.00: the credit was billed back. The inputs are the cost report's hand-checked ones
(``tests/policies/test_cost_report``), with such a credit on nb-0.
"""

from __future__ import annotations

from dataclasses import replace

from gpuaas.policies.cost import build_cost_report
from tests.policies.test_cost_report import POLICY, _inputs


def test_a_credit_on_cpu_is_not_billed_back() -> None:
    base = _inputs()
    assert base.costs is not None
    costs = base.costs.copy()
    costs.loc[costs["pod"] == "nb-0", "total_cost"] = 17.0  # $20 GPU, $-3 net on CPU and RAM
    report = build_cost_report(replace(base, costs=costs), POLICY)
    a = report.tenants[0]
    assert (a["gpu_cost"], a["total_cost"]) == (76.0, 88.5 - 22.5 + 17.0)
    assert (report.cluster["gpu_cost"], report.cluster["total_cost"]) == (91.0, 106.0 - 22.5 + 17.0)
    [nb] = [w for w in report.wasters if w["workload"] == "nb"]
    assert nb["waste_cost"] == 20.0  # the waste is at the GPU price, which the credit does not touch
