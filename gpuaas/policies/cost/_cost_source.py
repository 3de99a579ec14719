"""Which source the cost report's money came from: OpenCost's allocation API, or OpenCost's metrics in Prometheus
(the fallback, read where the API is not configured or failed).

Why the report says it: the two differ by about 1 % (the metrics count whole minutes of allocation), so a reviewer
who recomputes a figure must know which one to recompute it from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuaas.models import CostInputs

__all__ = ["ALLOCATION_API", "COST_SOURCES", "PROMETHEUS_METRICS", "cost_source"]

ALLOCATION_API = "opencost-allocation-api"
PROMETHEUS_METRICS = "opencost-prometheus-metrics"
COST_SOURCES = {
    ALLOCATION_API: "OpenCost's allocation API",
    PROMETHEUS_METRICS: "OpenCost's metrics in Prometheus (the fallback: it counts whole minutes of allocation, so "
                        "its figures can differ from the allocation API's by about 1 %)",
}
"""Each value of ``CostReport.cost_source``, as a reader is told it."""


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
