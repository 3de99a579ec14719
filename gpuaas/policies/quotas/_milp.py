"""The quota planner's MILP: the model of ``gpuaas.policies.quotas.plan`` in matrix form, and its passes.

Variables per cell (queue, flavor) with current quota ``b``: ``inc``, ``dec`` integers in
``[0, step]`` (the new quota is ``b + inc - dec``); the shortfall in two tiers (the part of the
demand within the queue's weighted share of the cohort, ``owed``, and the rest), each split into
``SEGMENTS`` pieces of a tenth of that tier (continuous); the guarantee gap ``e`` in ``[0, g - b]``
where a guarantee is above the quota; and, only where hysteresis can bind (``hysteresis_gpus >=
2``), binaries ``u``/``v`` with ``h*u <= inc <= step*u``, ``h*v <= dec <= step*v``, ``u + v <= 1``.

Why segments: the k-th piece of a tier's shortfall costs ``weight * k`` per GPU, so the cost is
convex in the shortfall ratio and a GPU goes where the weighted ratio is highest. A linear cost
is flat between two short queues, and a plan that then moves nothing wins the tie: when every
queue is short, the scarce GPUs would stay frozen where they are.

Why two tiers: a GPU short of a queue's share (``capacity * weight / sum of weights``, up to its
demand) costs more than any GPU short beyond a share (``OWED`` times the heaviest slope). So a
queue that asks for the whole cohort cannot pull a queue below its share while that queue uses
it; only what a queue does not need of its share is lent. This is max-min fairness by weight,
and it is what keeps the worst-off tenant no worse than under static quotas of the same shares.

Why the guarantee is a gap to minimise and not a hard bound: a guarantee the steps cannot reach
tonight, or that the other queues cannot fund, would make the whole cohort's plan infeasible,
every night. Minimising the gap first raises the queue as far as the limits allow tonight (and
the rest the following nights) while the rest of the cohort is still planned.

Passes: (0) the smallest total guarantee gap, only when a guarantee is above its quota; (1) with
that held, the smallest shortfall cost; (2) with both held, the fewest GPUs moved. Pass 2 has a
whole-number objective and its LP relaxation is cheap: when the relaxation's bound rounds up to
the moves of pass 1's answer, that answer is already optimal and the MIP is skipped. Pass 2's plan
is kept only where it costs no more than pass 1's, exactly, and where the shortfall cost spans more
than HiGHS's gaps resolve (``_POLISH_SPAN``), the plan is finished GPU by GPU in exact arithmetic
(``_exact``).
Flavors share only the day's cap: each gets its own model where the cap cannot bind; where it can,
flavors whose weights are within ``_split.SCALE`` of each other share one model, and the cap is split
exactly between such groups (``_split``: one model's tolerances would drop the lighter group's moves).

Why a time budget and not a failure: every pass shares one budget of ``TIME_LIMIT_SECONDS``. A pass
that runs out keeps the best plan it found (each is feasible, so safe to apply, only not proven
best); one that found none keeps the previous pass's plan, and before the first, staying put, which
is always feasible. The plan then says so in a note instead of the nightly run failing on a big fleet.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

from gpuaas.policies.quotas._exact import SEGMENTS, costs_more, polish
from gpuaas.policies.quotas._reasons import Cell
from gpuaas.policies.quotas._split import Plan, scale_groups, share_cap

__all__ = ["SEGMENTS", "TIME_LIMIT_SECONDS", "Solution", "owed_multiplier", "segment_cost", "solve_lexicographic"]

_GAP = 1e-9
_MOVED_GAP = 1e-7
"""GPUs moved is a whole number, so a relative gap below 1/moved proves the integer optimum; a gap of
zero has HiGHS chase floating-point noise (399.999999 against 400) until its time limit."""
_HOLD = 1e-9
_DEAREST = 1e12
"""The most one GPU of shortfall may cost in the model, after ``_cost_unit``."""
_LIFTED = 1e3
"""What the dearest GPU of shortfall costs in the model where the weights would make it cost under 1."""
_POLISH_SPAN = 1e6
"""Where the dearest piece of the shortfall cost is more than this many times the cheapest, the plan is
checked GPU by GPU in exact arithmetic (``polish``): beyond it, a gain can fall below HiGHS's relative gap."""
TIME_LIMIT_SECONDS = 120.0
"""For all passes together."""


@dataclass(frozen=True)
class Solution:
    """The new quota per cell, and what the solver could not finish within its time budget."""

    after: list[int]
    notes: list[str] = field(default_factory=list)


def owed_multiplier(weights: Sequence[float]) -> float:
    """How much more a GPU short of a share costs than one beyond it: above the dearest beyond-share slope."""
    return SEGMENTS * max(weights) / min(weights) + 1.0 if weights else 1.0


def _tier_cost(size: float, short: float, slope: float) -> float:
    if short <= 0 or size <= 0:
        return 0.0
    width, cost = size / SEGMENTS, 0.0
    for k in range(1, SEGMENTS + 1):
        piece = min(width, short)
        cost += slope * k * piece
        short -= piece
        if short <= 0:  # not a fixed 1e-12: a light queue's owed tier may be 1e-12 GPUs in all (as ``_exact._tier``)
            break
    return cost


def segment_cost(demand: float, weight: float, quota: float, share: float, owed: float) -> float:
    """One cell's shortfall cost at ``quota``: the beyond-share tier short first, then the owed tier."""
    within = min(demand, share)
    short = max(0.0, demand - quota)
    beyond_short = min(short, demand - within)
    return (_tier_cost(demand - within, beyond_short, weight)
            + _tier_cost(within, short - beyond_short, weight * owed))


class _Rows:
    """A sparse constraint matrix built row by row."""

    def __init__(self, nvars: int) -> None:
        self.nvars = nvars
        self.r: list[int] = []
        self.c: list[int] = []
        self.v: list[float] = []
        self.lo: list[float] = []
        self.hi: list[float] = []

    def add(self, entries: Sequence[tuple[int, float]], low: float, high: float) -> None:
        index = len(self.lo)
        for col, val in entries:
            self.r.append(index)
            self.c.append(col)
            self.v.append(val)
        self.lo.append(low)
        self.hi.append(high)

    def constraint(self) -> LinearConstraint:
        a = coo_matrix((self.v, (self.r, self.c)), shape=(len(self.lo), self.nvars)).tocsr()
        return LinearConstraint(a, np.array(self.lo), np.array(self.hi))


def solve_lexicographic(cells: Sequence[Cell], hysteresis: int, max_total_moved: int,
                        time_limit: float = TIME_LIMIT_SECONDS) -> Solution | None:
    """The new quota per cell, or None when HiGHS proves the model infeasible.

    Flavors share nothing but the day's cap, so where the cap cannot bind (every queue's largest gain
    together is within it) each is solved on its own: a pass holds its objective to a tolerance relative
    to the whole, and with one flavor's cost near 1e19 (weights a million apart) that tolerance would
    swallow every other flavor's plan. Where the cap can bind, flavors of like weights share one model,
    and groups of unlike weights get one each, the cap split between them by ``share_cap``; all within
    the one time budget.
    """
    deadline = time.monotonic() + time_limit
    owed = owed_multiplier([c.weight for c in cells])
    by_flavor: dict[str, list[int]] = {}
    for i, c in enumerate(cells):
        by_flavor.setdefault(c.flavor, []).append(i)
    groups = scale_groups(cells)
    if len(by_flavor) > 1 and sum(c.step_up for c in cells) <= max_total_moved:
        groups = list(by_flavor.values())
    if len(groups) == 1:
        return _solve(cells, hysteresis, max_total_moved, owed, deadline, time_limit)

    def plan(members: Sequence[int], cap: int) -> Plan | None:
        part = _solve([cells[i] for i in members], hysteresis, cap, owed, deadline, time_limit)
        return None if part is None else (part.after, part.notes)

    return Solution(*share_cap(cells, groups, max_total_moved, plan, owed, deadline, time_limit))


def _solve(cells: Sequence[Cell], hysteresis: int, max_total_moved: int, owed: float, deadline: float,
           time_limit: float) -> Solution | None:
    """The three passes over one model of ``cells``, within what is left until ``deadline``."""
    k = len(cells)
    binaries = hysteresis >= 2
    inc_, dec_, e_, s_ = 0, k, 2 * k, 3 * k
    o_ = s_ + SEGMENTS * k
    u_ = o_ + SEGMENTS * k
    v_ = u_ + k
    nvars = v_ + k if binaries else u_
    before = np.array([c.before for c in cells], dtype=float)
    demand = np.array([c.demand for c in cells], dtype=float)
    weight = np.array([c.weight for c in cells], dtype=float)
    guaranteed = np.array([c.guaranteed for c in cells], dtype=float)
    within = np.minimum(demand, np.array([c.share for c in cells], dtype=float))
    up = np.array([c.step_up for c in cells], dtype=float)
    down = np.minimum(np.array([c.step_down for c in cells], dtype=float), np.maximum(0.0, before - guaranteed))
    if binaries:
        up = np.where(up >= hysteresis, up, 0.0)
        down = np.where(down >= hysteresis, down, 0.0)

    lb = np.zeros(nvars)
    ub = np.zeros(nvars)
    ub[inc_:inc_ + k] = up
    ub[dec_:dec_ + k] = down
    ub[e_:e_ + k] = np.maximum(0.0, guaranteed - before)
    for j in range(SEGMENTS):
        ub[s_ + j * k:s_ + (j + 1) * k] = (demand - within) / SEGMENTS
        ub[o_ + j * k:o_ + (j + 1) * k] = within / SEGMENTS
    integrality = np.zeros(nvars)
    integrality[inc_:e_] = 1
    if binaries:
        ub[u_:u_ + k] = (up > 0).astype(float)
        ub[v_:v_ + k] = (down > 0).astype(float)
        integrality[u_:] = 1

    rows = _Rows(nvars)
    h = float(hysteresis)
    for i in range(k):
        if demand[i] > before[i] - down[i]:
            rows.add([(s_ + j * k + i, 1.0) for j in range(SEGMENTS)] + [(o_ + j * k + i, 1.0) for j in range(SEGMENTS)]
                     + [(inc_ + i, 1.0), (dec_ + i, -1.0)], demand[i] - before[i], np.inf)
        if guaranteed[i] > before[i]:
            rows.add([(inc_ + i, 1.0), (dec_ + i, -1.0), (e_ + i, 1.0)], guaranteed[i] - before[i], np.inf)
        if binaries:
            if up[i] > 0:
                rows.add([(inc_ + i, 1.0), (u_ + i, -up[i])], -np.inf, 0.0)
                rows.add([(inc_ + i, 1.0), (u_ + i, -h)], 0.0, np.inf)
            if down[i] > 0:
                rows.add([(dec_ + i, 1.0), (v_ + i, -down[i])], -np.inf, 0.0)
                rows.add([(dec_ + i, 1.0), (v_ + i, -h)], 0.0, np.inf)
            if up[i] > 0 and down[i] > 0:
                rows.add([(u_ + i, 1.0), (v_ + i, 1.0)], -np.inf, 1.0)
    by_flavor: dict[str, list[int]] = {}
    for i, c in enumerate(cells):
        by_flavor.setdefault(c.flavor, []).append(i)
    for members in by_flavor.values():
        rows.add([(inc_ + i, 1.0) for i in members] + [(dec_ + i, -1.0) for i in members], 0.0, 0.0)
    rows.add([(inc_ + i, 1.0) for i in range(k)], -np.inf, float(max_total_moved))

    bounds = Bounds(lb, ub)
    notes: list[str] = []
    x: Any = np.zeros(nvars)  # staying put (inc = dec = 0): the plan until a pass finds a better one
    if ub[e_:e_ + k].sum() > 0:
        gap_cost = np.zeros(nvars)
        gap_cost[e_:e_ + k] = 1.0
        zeroth = _milp(gap_cost, integrality, bounds, rows, _GAP, deadline)
        if zeroth is _INFEASIBLE:
            return None
        if zeroth is None or isinstance(zeroth, _Unsolved):
            what = "raising queues to their guarantees"
            why = _out_of_time(what, time_limit) if zeroth is None else zeroth.note(what)
            return Solution(_after(before, x, inc_, dec_, k), [why])
        x = zeroth.x
        gap = float(x[e_:e_ + k].sum())
        rows.add([(e_ + i, 1.0) for i in range(k)], -np.inf, gap + _HOLD * max(1.0, gap))
    shortfall_cost = np.zeros(nvars)
    unit = _cost_unit(weight, owed)
    for j in range(SEGMENTS):
        shortfall_cost[s_ + j * k:s_ + (j + 1) * k] = weight * (j + 1) * unit
        shortfall_cost[o_ + j * k:o_ + (j + 1) * k] = weight * (j + 1) * owed * unit
    first = _milp(shortfall_cost, integrality, bounds, rows, _GAP, deadline)
    if first is _INFEASIBLE:
        return None
    if first is None or isinstance(first, _Unsolved) or first.status != 0:
        what = "the smallest shortfall"
        if first is None or isinstance(first, _Unsolved):
            notes.append(_out_of_time(what, time_limit) if first is None else first.note(what))
        else:
            notes.append(_not_proven(what, time_limit))
            x = first.x
        return Solution(_after(before, x, inc_, dec_, k), notes)
    x = first.x
    best = float(np.dot(shortfall_cost, x))
    rows.add([(col, shortfall_cost[col]) for col in range(s_, u_)], -np.inf, best + _HOLD * max(1.0, abs(best)))
    moved_cost = np.zeros(nvars)
    moved_cost[inc_:inc_ + k] = 1.0
    moved = float(np.round(x[inc_:inc_ + k]).sum())
    relaxed = _highs(moved_cost, integrality=np.zeros(nvars), bounds=bounds, constraints=rows.constraint(),
                     options={"time_limit": max(1.0, deadline - time.monotonic())})
    if not (relaxed.status == 0 and math.ceil(relaxed.fun - 1e-6) >= moved):
        second = _milp(moved_cost, integrality, bounds, rows, _MOVED_GAP, deadline)
        what = "the fewest GPUs moved"
        if second is None:
            notes.append(_out_of_time(what, time_limit))
        elif second is _INFEASIBLE or isinstance(second, _Unsolved):
            # the previous step's plan satisfies the held rows: only the solver's numbers failed there
            notes.append((second if isinstance(second, _Unsolved) else _Unsolved("held as infeasible")).note(what))
        elif not costs_more(cells, _after(before, second.x, inc_, dec_, k), _after(before, x, inc_, dec_, k), owed):
            x = second.x
            if second.status != 0:
                notes.append(_not_proven(what, time_limit))
    after = _after(before, x, inc_, dec_, k)
    if SEGMENTS * owed * float(weight.max() / weight.min()) > _POLISH_SPAN:
        lows = [int(b - d) for b, d in zip(before, down)]
        highs = [int(b + u) for b, u in zip(before, up)]
        after = polish(cells, after, lows, highs, hysteresis, max_total_moved, owed)
    return Solution(after, notes)


def _cost_unit(weight: Any, owed: float) -> float:
    """What the shortfall cost is multiplied by in the model (one factor for all of it: the same optimum).

    Where the dearest piece lies outside 1 to ``_DEAREST``, it is brought back: HiGHS takes a cost of 1e20
    for infinite, and its absolute gap (1e-6) would end a search among queues weighted 1e-6 early. Within,
    the model is left as it is: a larger factor than needed only makes HiGHS's numbers worse."""
    dearest = float(weight.max()) * owed * SEGMENTS
    if dearest > _DEAREST:
        return _DEAREST / dearest
    return _LIFTED / dearest if dearest < 1.0 else 1.0


def _after(before: Any, x: Any, inc_: int, dec_: int, k: int) -> list[int]:
    delta = np.round(x[inc_:inc_ + k]) - np.round(x[dec_:dec_ + k])
    return [int(b + d) for b, d in zip(before, delta)]


def _out_of_time(what: str, limit: float) -> str:
    return f"the solver found no plan for {what} within {limit:.0f} s: kept the previous step's plan"


def _not_proven(what: str, limit: float) -> str:
    return f"the solver's plan for {what} is feasible but not proven best within {limit:.0f} s"


_INFEASIBLE: Any = object()


@dataclass(frozen=True)
class _Unsolved:
    """A pass the solver gave up on without a plan, not for time: numerical trouble with weights far apart
    (1:1,000,000 puts coefficients near 1e19 in the model). The previous step's plan stands, as after a time-out."""

    why: str

    def note(self, what: str) -> str:
        return f"the solver could not settle {what} ({self.why}): kept the previous step's plan"


_STDOUT_LOCK = threading.Lock()
"""File descriptor 1 is the process's: one solve at a time points it away (the solves are short)."""


@contextmanager
def _solver_output_discarded() -> Iterator[None]:
    """HiGHS prints some internal diagnostics (``HighsMipSolverData::...``) with C's printf, whatever its
    options say: on stdout they would land in the middle of a command's JSON, and they tell a user nothing
    (what matters reaches the plan's notes). File descriptor 1 points at the null device while it runs, and
    C's buffers are flushed before it points back. Two threads doing this at once would each save the
    other's null device as "stdout" and leave it there, so the whole swap holds ``_STDOUT_LOCK``."""
    with _STDOUT_LOCK, _stdout_to_null():
        yield


@contextmanager
def _stdout_to_null() -> Iterator[None]:
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
        saved = os.dup(1)
        null = os.open(os.devnull, os.O_WRONLY)
    except (OSError, ValueError):  # no file descriptor 1 (a closed stdout): nothing to protect
        yield
        return
    try:
        os.dup2(null, 1)
        yield
    finally:
        try:
            _flush_c_streams()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
            os.close(null)


def _flush_c_streams() -> None:
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except Exception:  # no C library to ask, or another platform's: its buffers are flushed at exit
        pass


def _highs(cost: Any, **kwargs: Any) -> Any:
    with _solver_output_discarded():
        return milp(cost, **kwargs)


def _milp(cost: Any, integrality: Any, bounds: Bounds, rows: _Rows, gap: float, deadline: float) -> Any:
    """HiGHS's result with a plan (status 0, or 1 with an incumbent), None when the time ran out
    without one, ``_INFEASIBLE`` when the model has no solution, ``_Unsolved`` when HiGHS gave up otherwise."""
    left = deadline - time.monotonic()
    if left <= 0:
        return None
    result = _highs(cost, integrality=integrality, bounds=bounds, constraints=rows.constraint(),
                    options={"mip_rel_gap": gap, "time_limit": left, "presolve": True})
    if result.status == 2 and (left := deadline - time.monotonic()) > 0:
        # Every model here has a plan (staying put, or the previous pass's), so "infeasible" is HiGHS's presolve
        # misreading bounds near its tolerances (a share of 2e-6 GPUs beside costs of 1e8): asked again without it.
        result = _highs(cost, integrality=integrality, bounds=bounds, constraints=rows.constraint(),
                        options={"mip_rel_gap": gap, "time_limit": left, "presolve": False})
    if result.status == 2:
        return _INFEASIBLE
    if result.x is not None and result.status in (0, 1):
        return result
    if result.status == 1:
        return None
    return _Unsolved(f"HiGHS: {result.message}")
