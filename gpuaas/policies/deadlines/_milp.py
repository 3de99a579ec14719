"""The exact deadline planner: a time-indexed MILP solved by SciPy's HiGHS.

Why these time points and no others: in a schedule where no job can start earlier (every valid
schedule can be shifted left into one), a job starts at 0 or at the moment another job ends —
if nothing ended at its start, it would already have fitted an instant before. So the starts lie
in the closure of {0, the ends of running jobs} under adding durations, cut at the last latest
start. Restricting the MILP to that set loses no schedule, for any real durations, and the answer
is exact; usage only rises at those points, so checking capacity there checks it everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_array

from gpuaas.policies.deadlines.profile import EPS, Item

__all__ = ["MilpAnswer", "MilpLimits", "candidate_times", "solve_min_extra", "solve_max_on_time"]


@dataclass(frozen=True)
class MilpLimits:
    """The stated bound on the exact method; past it the planner says its answer is a heuristic."""

    max_time_points: int = 2_000
    max_variables: int = 60_000
    time_limit_s: float = 10.0


@dataclass(frozen=True)
class MilpAnswer:
    """``starts`` for the jobs scheduled on time; ``optimal`` when HiGHS proved it."""

    optimal: bool
    extra: int
    starts: dict[str, float]


def candidate_times(items: Sequence[Item], limit: int) -> list[float] | None:
    """The start times the exact model needs, or ``None`` when there are more than ``limit``."""
    pending = [i for i in items if i.fixed_start is None and i.deadline is not None]
    if not pending:
        return [0.0]
    horizon = max(_latest_start(i) for i in pending)
    durations = sorted({round(i.duration, 9) for i in pending})
    seeds = {0.0} | {round(i.duration, 9) for i in items if i.fixed_start is not None}
    points = {t for t in seeds if t <= horizon + EPS}
    frontier = sorted(points)
    while frontier:
        nxt: set[float] = set()
        for t in frontier:
            for d in durations:
                u = round(t + d, 9)
                if u > horizon + EPS:
                    break
                if u not in points:
                    points.add(u)
                    nxt.add(u)
            if len(points) > limit:
                return None
        frontier = sorted(nxt)
    return sorted(points)


def _latest_start(item: Item) -> float:
    assert item.deadline is not None
    return item.deadline - item.duration


def _model(
    items: Sequence[Item], capacity: int, times: list[float], limits: MilpLimits
) -> tuple[list[tuple[int, float]], np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Columns (job, start) and the capacity rows; ``None`` past the variable bound."""
    pending = [i for i in items if i.fixed_start is None and i.deadline is not None]
    columns = [(j, t) for j, item in enumerate(pending) for t in times if t <= _latest_start(item) + EPS]
    if len(columns) > limits.max_variables:
        return None
    held = np.array(
        [sum(f.gpus for f in items if f.fixed_start is not None and f.duration > t + EPS) for t in times]
    )
    rows, cols, vals = [], [], []
    for c, (j, start) in enumerate(columns):
        end = start + pending[j].duration
        lo = int(np.searchsorted(times, start - EPS))
        hi = int(np.searchsorted(times, end - EPS))
        for r in range(lo, hi):
            rows.append(r)
            cols.append(c)
            vals.append(pending[j].gpus)
    return columns, np.array(rows), np.array(cols), np.array(vals, dtype=float), held


def solve_min_extra(
    items: Sequence[Item], capacity: int, lower: int, upper: int, limits: MilpLimits
) -> MilpAnswer | None:
    """Fewest extra GPUs (between ``lower`` and ``upper``) with every deadline met; None past the bound."""
    times = candidate_times(items, limits.max_time_points)
    if times is None:
        return None
    built = _model(items, capacity, times, limits)
    if built is None:
        return None
    columns, rows, cols, vals, held = built
    pending = [i for i in items if i.fixed_start is None and i.deadline is not None]
    n, m = len(columns), len(times)
    # Variables: x_(j,t) binary, then e (extra GPUs) integer. Capacity rows: usage - e <= C - held.
    cap = coo_array(
        (np.concatenate([vals, -np.ones(m)]), (np.concatenate([rows, np.arange(m)]), np.concatenate([cols, np.full(m, n)]))),
        shape=(m, n + 1),
    )
    assign = coo_array(
        (np.ones(n), ([j for j, _ in columns], np.arange(n))), shape=(len(pending), n + 1)
    )
    constraints = [
        LinearConstraint(cap, -np.inf, capacity - held),
        LinearConstraint(assign, 1, 1),
    ]
    cost = np.zeros(n + 1)
    cost[n] = 1.0
    bounds = Bounds(np.concatenate([np.zeros(n), [lower]]), np.concatenate([np.ones(n), [upper]]))
    result = milp(
        cost,
        integrality=np.ones(n + 1),
        bounds=bounds,
        constraints=constraints,
        options={"time_limit": limits.time_limit_s, "mip_rel_gap": 0.0},
    )
    if result.x is None:
        return None
    starts = {pending[j].name: t for c, (j, t) in enumerate(columns) if result.x[c] > 0.5}
    return MilpAnswer(optimal=result.status == 0, extra=int(round(result.x[n])), starts=starts)


def solve_max_on_time(items: Sequence[Item], capacity: int, limits: MilpLimits) -> MilpAnswer | None:
    """Most deadlines met on ``capacity`` as it is; the others are left out of ``starts``."""
    times = candidate_times(items, limits.max_time_points)
    if times is None:
        return None
    built = _model(items, capacity, times, limits)
    if built is None:
        return None
    columns, rows, cols, vals, held = built
    pending = [i for i in items if i.fixed_start is None and i.deadline is not None]
    n, m = len(columns), len(times)
    if n == 0:
        return MilpAnswer(optimal=True, extra=0, starts={})
    cap = coo_array((vals, (rows, cols)), shape=(m, n))
    assign = coo_array((np.ones(n), ([j for j, _ in columns], np.arange(n))), shape=(len(pending), n))
    result = milp(
        -np.ones(n),
        integrality=np.ones(n),
        bounds=Bounds(0, 1),
        constraints=[
            LinearConstraint(cap, -np.inf, np.maximum(capacity - held, 0)),
            LinearConstraint(assign, 0, 1),
        ],
        options={"time_limit": limits.time_limit_s, "mip_rel_gap": 0.0},
    )
    if result.x is None:
        return None
    starts = {pending[j].name: t for c, (j, t) in enumerate(columns) if result.x[c] > 0.5}
    return MilpAnswer(optimal=result.status == 0, extra=0, starts=starts)
