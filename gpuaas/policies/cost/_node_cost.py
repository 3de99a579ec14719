"""What the nodes cost beside what the workloads were allocated: OpenCost's ``__idle__``, per period and in all.

Why: the report's money is what workloads were allocated, and idle GPUs are the first waste this product exists
to cut. OpenCost's ``__idle__`` (asked with ``includeIdle`` in the same request as the costs) is what the nodes cost
that no allocation held, per resource: with the allocated cost it foots to what the nodes cost, GPUs alone
(``gpu_cost``) and in all (``total_cost``). Money is to the cent, half up, and the nodes' cost is the two figures as
printed added, so that the line adds up; the periods are shared out to add up to the window (``footed_cents``).

Idle capacity that cannot be known is None, with ``idle_unknown`` saying why, never $0: the costs came from
OpenCost's metrics (which price no idle capacity), or the allocation API's answer held no ``__idle__`` for a
period in which it held allocations or the GPU telemetry saw GPUs (an OpenCost that does not answer
``includeIdle``), or OpenCost left its GPU cost null, or wrote it below 0 (its node prices below what it allocated). The GPU-hours nobody held are what the GPU telemetry saw of
GPUs no pod held (its series without a pod); None without any GPU telemetry.
"""

from __future__ import annotations

import math
from typing import Any

from gpuaas.models import CostInputs, IdlePeriod
from gpuaas.phrases import first_few
from gpuaas.policies.cost._cost_source import ALLOCATION_API, PROMETHEUS_METRICS, cost_source
from gpuaas.policies.cost._figures import cents, footed_cents, num

__all__ = ["NODE_COST_KEYS", "node_cost"]

NODE_COST_KEYS = ("gpu_cost", "allocated_gpu_cost", "idle_gpu_cost", "total_cost", "allocated_total_cost",
                  "idle_total_cost", "unheld_gpu_hours", "idle_unknown")
"""The window's figures of ``node_cost`` (beside its ``periods``): the nodes' cost is the allocated plus the idle."""


def _plus(a: float | None, b: float | None, decimals: int) -> float | None:
    """Two amounts to the cent added, exactly as printed; None where either is unknown."""
    return None if a is None or b is None else cents(a + b, decimals)


def _why_unknown(inputs: CostInputs, idle: dict[int, IdlePeriod], needed: set[int]) -> str | None:
    """Why the window's idle GPU cost cannot be known (None: it can)."""
    if inputs.costs is None:
        return "no cost source answered"
    source = cost_source(inputs)
    if not idle:
        if source == PROMETHEUS_METRICS:
            return "the costs came from OpenCost's metrics in Prometheus, which do not price idle capacity"
        if source == ALLOCATION_API:
            return "OpenCost's allocation answer held no __idle__: includeIdle not answered, or no node priced"
        return "no __idle__ was read with the costs"
    below = sorted(day for day, p in idle.items() if p.gpu_cost < 0 or p.total_cost < 0)
    if below:  # OpenCost's node prices below what it allocated: no idle figure a reviewer can sign
        worst = min(min(idle[day].gpu_cost, idle[day].total_cost) for day in below)
        return (f"OpenCost's __idle__ is below 0 in {len(below)} of the window's {inputs.days} periods (down to "
                f"{worst:,.2f}): its node prices are below what it allocated on the nodes")
    lacking = sorted(day for day in needed if day not in idle or math.isnan(idle[day].gpu_cost))
    if not lacking:
        return None
    ends = [f"{inputs.start + (day + 1) * inputs.period:%Y-%m-%d %H:%M}" for day in lacking]
    null = [day for day in lacking if day in idle]
    what = "OpenCost left the idle GPU cost null" if len(null) == len(lacking) else "OpenCost's answer held no __idle__"
    return f"{what} for {len(lacking)} of the window's {inputs.days} periods (ending {first_few(ends)} UTC)"


def node_cost(inputs: CostInputs, cluster: dict[str, Any], telemetry: bool, decimals: int = 2) -> dict[str, Any]:
    """The nodes' cost over the window (``NODE_COST_KEYS``) and per period (``periods``), beside ``cluster``'s
    allocated cost (the report's, after unknown money is blanked). ``telemetry``: whether any GPU telemetry was
    read (without it the GPU-hours nobody held are unknown, not 0). ``decimals``: the currency's minor units."""
    gpu = inputs.gpu
    seen = gpu[gpu["observed_h"].astype(float) > 0]
    unheld = seen[seen["namespace"].fillna("") == ""].groupby("day")["observed_h"].sum()
    needed = {int(d) for d in seen["day"]}
    if inputs.costs is not None and not inputs.costs.empty:
        needed |= {int(d) for d in inputs.costs["day"]}
    idle = {p.day: p for p in inputs.idle or ()}
    why = _why_unknown(inputs, idle, needed)
    idle_gpu = None if why else cents(sum(p.gpu_cost for p in idle.values()), decimals)
    totals = [p.total_cost for p in idle.values()]
    idle_total = None if why or any(math.isnan(t) for t in totals) else cents(sum(totals), decimals)
    gpu_shares = (footed_cents({d: p.gpu_cost for d, p in idle.items()}, idle_gpu, decimals) if idle_gpu is not None
                  else {})
    total_shares = (footed_cents({d: p.total_cost for d, p in idle.items()}, idle_total, decimals)
                    if idle_total is not None
                    else {})
    periods = []
    for day in range(inputs.days):  # a period nothing was read for has no figure: no data, not $0
        data = day in needed or day in idle
        periods.append({"day": day, "day_end": (inputs.start + (day + 1) * inputs.period).isoformat(), "data": data,
                        "idle_gpu_cost": gpu_shares.get(day) if data else None,
                        "idle_total_cost": total_shares.get(day) if data else None,
                        "unheld_gpu_hours": num(float(unheld.get(day, 0.0))) if data and telemetry else None})
    allocated_gpu, allocated_total = cluster.get("gpu_cost"), cluster.get("total_cost")
    return {
        "gpu_cost": _plus(allocated_gpu, idle_gpu, decimals), "allocated_gpu_cost": allocated_gpu, "idle_gpu_cost": idle_gpu,
        "total_cost": _plus(allocated_total, idle_total, decimals), "allocated_total_cost": allocated_total,
        "idle_total_cost": idle_total,
        "unheld_gpu_hours": num(float(unheld.sum())) if telemetry else None,
        "idle_unknown": why, "periods": periods,
    }

