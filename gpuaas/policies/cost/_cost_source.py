"""Which source the cost report's money came from: OpenCost's allocation API, or OpenCost's metrics in Prometheus
(the fallback, read where the API is not configured or failed).

Why the report says it: the two are not the same prices. The allocation API applies the custom-pricing discounts
to CPU and RAM and adds OpenCost's reconciliation adjustments (``*CostAdjustment``); the metrics
(``node_*_hourly_cost`` x ``container_*_allocation``) are OpenCost's list prices per node, without either, and are
counted in whole minutes. Where discounts or reconciliation are set up, the two can differ by far more than rounding
(a quarter, in either direction), so a reviewer who recomputes a figure must know which one to recompute it from, and
two periods priced by different sources are not compared as a change in cost (``pricing_differs``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuaas.models import CostInputs

__all__ = ["ALLOCATION_API", "COST_SOURCES", "PROMETHEUS_METRICS", "cost_source", "pricing_differs"]

ALLOCATION_API = "opencost-allocation-api"
PROMETHEUS_METRICS = "opencost-prometheus-metrics"
COST_SOURCES = {
    ALLOCATION_API: "OpenCost's allocation API",
    PROMETHEUS_METRICS: "OpenCost's metrics in Prometheus (the fallback: OpenCost's list prices per node, without the "
                        "custom-pricing discounts or the reconciliation adjustments that the allocation API applies, "
                        "so its figures can be far from the API's where those are set up)",
}
"""Each value of ``CostReport.cost_source``, as a reader is told it."""
_SHORT = {ALLOCATION_API: "OpenCost's allocation API", PROMETHEUS_METRICS: "OpenCost's metrics in Prometheus"}


def cost_source(inputs: CostInputs) -> str | None:
    """Where ``inputs``' costs came from; None where there are none (money unknown), or the reader recorded no
    source (inputs built by hand).

    The reader records the allocation API as answering only where its answer is the one used: an answer that holds
    no allocation for a period the fleet held GPUs in is recorded as a failure, and the metrics are read instead."""
    if inputs.costs is None:
        return None
    opencost = inputs.sources.get("opencost")
    if opencost is not None and opencost.ok:
        return ALLOCATION_API
    return PROMETHEUS_METRICS if "prometheus" in inputs.sources else None


def pricing_differs(now: str | None, before: str | None) -> str | None:
    """Why two periods' money (``now`` and ``before``: their ``cost_source``) cannot be compared as a change in cost;
    None where it can (the same source, or either unknown: an unknown cost is said as unknown already).

    Why: the allocation API's prices are discounted and reconciled, the metrics' are list prices, so a period read
    from each differs by the difference in prices as much as by any change in what was spent."""
    if now is None or before is None or now == before:
        return None
    return (f"the previous period was priced by {_SHORT.get(before, before)} and this one by {_SHORT.get(now, now)}: "
            "the difference is not a change in cost (the metrics are list prices, without the API's discounts and "
            "reconciliation adjustments), so no change is shown")
