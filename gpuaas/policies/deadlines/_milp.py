"""The exact deadline planner: a time-indexed MILP solved by SciPy's HiGHS.

Why these time points and no others: in a schedule where no job can start earlier (every valid
schedule can be shifted left into one), a job starts at 0, at its earliest start, or at the moment
another job ends — if nothing ended at its start, it would already have fitted an instant before. So
the starts lie in the closure of {0, the earliest starts, the ends of running jobs} under adding
durations, cut at the last latest start. Restricting the MILP to that set loses no schedule, for any real durations, and the answer
is exact; usage only rises at those points, so checking capacity there checks it everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_array

from gpuaas.policies.deadlines.profile import EPS, Item

__all__ = ["Inexact", "MilpAnswer", "MilpLimits", "candidate_times", "solve_min_extra", "solve_max_on_time"]


class Inexact(StrEnum):
    """Why a plan is not proven: each calls for a different remedy, so the answer names which."""

    too_large = "too_large"
    """Past :class:`MilpLimits`' time points or variables: the problem is too large for the exact search."""
    time_limit = "time_limit"
    """HiGHS stopped at :attr:`MilpLimits.time_limit_s` before it proved its best answer (or found one)."""
    solver_failed = "solver_failed"
    """HiGHS ended without an answer for another reason (a numerical failure, say): a retry may do."""
    split_pool = "split_pool"
    """Not every queue of the pool can reach all of its GPUs, so one number of GPUs does not model it."""

    @property
    def words(self) -> str:
        """The reason in words, for the plan's messages and its verdict."""
        return _WORDS[self]


_WORDS = {
    Inexact.too_large: "past the size the exact search covers",
    Inexact.time_limit: "the exact search hit its time limit",
    Inexact.solver_failed: "the exact solver gave up",
    Inexact.split_pool: "not every queue of the pool can reach all of its GPUs",
}


@dataclass(frozen=True)
class MilpLimits:
    """The stated bound on the exact method; past it the planner says its answer is a heuristic."""

    max_time_points: int = 2_000
    max_variables: int = 60_000
    time_limit_s: float = 10.0


@dataclass(frozen=True)
class MilpAnswer:
    """``starts`` for the jobs scheduled on time; ``inexact`` says why HiGHS did not prove it (``None``: proven)."""

    inexact: Inexact | None
    extra: int
    starts: dict[str, float]

    @property
    def optimal(self) -> bool:
        return self.inexact is None


_TIME_LIMIT = 1
"""``scipy.optimize.milp``'s status when HiGHS reached its time (or iteration) limit; 0 is proven optimal."""


def _inexact(status: int) -> Inexact | None:
    return None if status == 0 else Inexact.time_limit if status == _TIME_LIMIT else Inexact.solver_failed


def candidate_times(items: Sequence[Item], limit: int) -> list[float] | None:
    """The start times the exact model needs, or ``None`` when there are more than ``limit``."""
    pending = [i for i in items if i.fixed_start is None and i.deadline is not None]
    if not pending:
        return [0.0]
    horizon = max(_latest_start(i) for i in pending)
    durations = sorted({round(i.duration, 9) for i in pending})
    seeds = ({0.0} | {round(i.duration, 9) for i in items if i.fixed_start is not None}
             | {round(i.earliest_start, 9) for i in pending})
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


@dataclass(frozen=True)
class _Model:
    """The pending jobs, the time points, the columns (job, start) and the capacity rows over them."""

    pending: list[Item]
    times: list[float]
    columns: list[tuple[int, float]]
    rows: np.ndarray
    cols: np.ndarray
    vals: np.ndarray
    held: np.ndarray

    def assignment(self, width: int) -> coo_array:
        """One row per pending job over its columns (``width`` leaves room for extra variables)."""
        n = len(self.columns)
        return coo_array((np.ones(n), ([j for j, _ in self.columns], np.arange(n))), shape=(len(self.pending), width))

    def starts(self, x: np.ndarray) -> dict[str, float]:
        return {self.pending[j].name: t for c, (j, t) in enumerate(self.columns) if x[c] > 0.5}


def _model(items: Sequence[Item], limits: MilpLimits) -> _Model | None:
    """The exact model's structure; ``None`` past the time-point or the variable bound."""
    times = candidate_times(items, limits.max_time_points)
    if times is None:
        return None
    pending = [i for i in items if i.fixed_start is None and i.deadline is not None]
    columns = [(j, t) for j, item in enumerate(pending) for t in times
               if item.earliest_start - EPS <= t <= _latest_start(item) + EPS]
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
    return _Model(pending, times, columns, np.array(rows), np.array(cols), np.array(vals, dtype=float), held)


def solve_min_extra(
    items: Sequence[Item], capacity: int, lower: int, upper: int, limits: MilpLimits
) -> MilpAnswer | Inexact:
    """Fewest extra GPUs (between ``lower`` and ``upper``) with every deadline met; why not, when there is no answer."""
    model = _model(items, limits)
    if model is None:
        return Inexact.too_large
    n, m = len(model.columns), len(model.times)
    # Variables: x_(j,t) binary, then e (extra GPUs) integer. Capacity rows: usage - e <= C - held.
    cap = coo_array(
        (np.concatenate([model.vals, -np.ones(m)]),
         (np.concatenate([model.rows, np.arange(m)]), np.concatenate([model.cols, np.full(m, n)]))),
        shape=(m, n + 1),
    )
    constraints = [
        LinearConstraint(cap, -np.inf, capacity - model.held),
        LinearConstraint(model.assignment(n + 1), 1, 1),
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
        return _inexact(result.status) or Inexact.solver_failed
    return MilpAnswer(_inexact(result.status), extra=int(round(result.x[n])), starts=model.starts(result.x))


def solve_max_on_time(items: Sequence[Item], capacity: int, limits: MilpLimits) -> MilpAnswer | Inexact:
    """Most deadlines met on ``capacity`` as it is (the others left out of ``starts``); why not, without an answer."""
    model = _model(items, limits)
    if model is None:
        return Inexact.too_large
    n, m = len(model.columns), len(model.times)
    if n == 0:
        return MilpAnswer(None, extra=0, starts={})
    cap = coo_array((model.vals, (model.rows, model.cols)), shape=(m, n))
    result = milp(
        -np.ones(n),
        integrality=np.ones(n),
        bounds=Bounds(0, 1),
        constraints=[
            LinearConstraint(cap, -np.inf, np.maximum(capacity - model.held, 0)),
            LinearConstraint(model.assignment(n), 0, 1),
        ],
        options={"time_limit": limits.time_limit_s, "mip_rel_gap": 0.0},
    )
    if result.x is None:
        return _inexact(result.status) or Inexact.solver_failed
    return MilpAnswer(_inexact(result.status), extra=0, starts=model.starts(result.x))
