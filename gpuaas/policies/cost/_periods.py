"""The cost report's rows per service and period (a day of a multi-day window): cost, verified outcomes and
cost per outcome, with a period nothing was read for said as unknown, never as $0 or 0 outcomes."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from gpuaas.models import COST_COLS, CostInputs
from gpuaas.policies.cost._coverage import Coverage
from gpuaas.policies.cost._figures import cost_per_outcome, footed_cents, num
from gpuaas.policies.cost.services import ServiceTally

__all__ = ["period_rows", "periods_with_data", "period_span"]


def periods_with_data(inputs: CostInputs, coverage: Coverage | None) -> set[int]:
    """The periods anything was read for: telemetry spans (where recorded), GPU hours, costs, requests."""
    days = set(inputs.gpu["day"].astype(int)) | set(inputs.serving["day"].astype(int))
    if inputs.costs is not None:
        days |= set(inputs.costs["day"].astype(int))
    if coverage is not None:
        days |= {day for day, covered in coverage.per_period.items() if covered > 0}
    return days


def period_span(coverage: Coverage | None, day: int, period_s: float, with_data: bool) -> dict[str, Any]:
    """``covered_hours`` (the hours of the period its GPU telemetry spans; None where the reader did not record it)
    and ``partial``: the period has data, and its telemetry spans less of it by a step or more (it began or stopped
    in the period), so its figures are those of that part, not of a whole period beside the others. A window
    without any telemetry is said once, in the headline, not as every period partial."""
    if coverage is None:
        return {"covered_hours": None, "partial": False}
    covered = coverage.per_period.get(day, 0.0)
    partial = with_data and coverage.data_from is not None and period_s - covered >= coverage.step_s
    return {"covered_hours": num(covered / 3600), "partial": partial}


def period_rows(inputs: CostInputs, services: list[ServiceTally], costs_known: bool, pods: pd.DataFrame,
           basis: str, coverage: Coverage | None = None, unpriced: set[str] | None = None,
           shown: Mapping[str, Mapping[str, Any]] | None = None,
           understated: set[tuple[str, int]] | None = None, decimals: int = 2) -> list[dict[str, Any]]:
    """Per service and period: cost, verified outcomes (whole requests, each period's estimate rounded), cost per
    outcome (the cost shown over the outcomes shown). A period without any data (a window longer than the
    telemetry) is ``data: False`` with every figure None: no data is not $0 or 0 outcomes; one with data for part
    of it only is ``partial`` (``period_span``). A service in
    ``unpriced`` (work done, none of its pods found or priced by OpenCost) has its cost unknown in every
    period, never $0. A (service, period) in ``understated`` (a pod of it that OpenCost does not list had
    telemetry then) has its cost per outcome unknown: its cost leaves that pod out, its outcomes do not.

    A service's periods add up to its money over the window, to the cent (``footed_cents``): ``shown`` (service ->
    its row) gives the figures they add up to, else each service's periods' own sum, rounded once; three days of
    $10.004 print $10.01, $10.00 and $10.00 under $30.01. ``decimals``: the currency's minor units (the cent)."""
    with_data = periods_with_data(inputs, coverage)
    costs = inputs.costs if costs_known and inputs.costs is not None else pd.DataFrame(columns=COST_COLS)
    owner = pods.set_index(["namespace", "pod"])["service"].to_dict()
    by_service_day: dict[tuple[str, int], dict[str, float]] = {}
    if not costs.empty:
        costs = costs.assign(service=[owner.get((ns, p)) for ns, p in zip(costs["namespace"], costs["pod"])])
        sums = costs.dropna(subset=["service"]).groupby(["service", "day"])[["gpu_cost", "total_cost"]].sum()
        by_service_day = {key: row.to_dict() for key, row in sums.iterrows()}
    out = []
    for svc in services:
        known_days = [day for day in range(inputs.days) if day in with_data]
        row = (shown or {}).get(svc.spec.name, {})
        footed = {column: footed_cents({day: by_service_day.get((svc.spec.name, day), {}).get(column, 0.0)
                                        for day in known_days}, row.get(column), decimals)
                  for column in ("gpu_cost", "total_cost")}
        for day in range(inputs.days):
            money = {column: footed[column].get(day, 0.0) for column in footed}
            verified = svc.daily_verified.get(day)
            if verified is not None and svc.spec.kind == "serving":  # whole requests, as shown: 0.4 is 0, not $x/0.4
                verified = float(math.floor(verified + 0.5))
            known = costs_known and day in with_data and svc.spec.name not in (unpriced or set())
            out.append({
                "service": svc.spec.name, "tenant": svc.tenant, "day": day,
                "day_end": (inputs.start + (day + 1) * inputs.period).isoformat(), "data": day in with_data,
                **period_span(coverage, day, inputs.period.total_seconds(), day in with_data),
                "gpu_cost": money["gpu_cost"] if known else None,
                "total_cost": money["total_cost"] if known else None,
                "verified_outcomes": num(verified) if day in with_data else None,
                "cost_per_outcome": num(cost_per_outcome(money[f"{basis}_cost"], verified))
                if known and (svc.spec.name, day) not in (understated or set()) else None,
            })
    return out


