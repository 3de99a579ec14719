"""The day's cap on moved GPUs, shared between flavors whose costs are too far apart for one model.

Why not one model: HiGHS holds each pass to tolerances relative to the objective it sees. Beside a
flavor of queues weighted 1,000,000 (costs near 1e19), a flavor weighted 1 is below every tolerance:
its moves are made or dropped by rounding, not by what they gain. So flavors are grouped by their
heaviest weight (``scale_groups``: within ``SCALE`` of each other, one model, as one flavor with
such weights would be), and where the cap binds, the groups are planned in models of their own and
the cap is split between them here.

Why that is the optimum of the one model: groups share nothing but the cap. For caps ``c_p`` with
``sum c_p <= cap``, the best joint plan is each group's best plan under its own cap: the objective
(guarantee gap, shortfall cost, GPUs moved) is a sum over groups, and its lexicographic order is
kept by sums (``a <= b`` and ``c <= d`` give ``a + c <= b + d``). So the optimum is the smallest
``sum V_p(c_p)``, with ``V_p(c)`` the group's own optimum moving at most ``c``. ``V_p`` never rises
with ``c`` (a plan for a smaller cap is one for a larger) and is flat from ``t_p`` on (the moves of
the group's plan under the whole cap), so some split with ``c_p <= t_p`` and ``sum c_p = cap`` is
optimal; ``_branch`` searches those, without assuming more of ``V_p`` (with hysteresis it is not
convex: a cap of 1 may buy nothing, 2 a lot).

Values are compared as exact fractions (``_exact``), computed from each plan's whole-GPU quotas: in
floats, a gain of 10 next to a cost of 1e19 is lost again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial
from heapq import heappop, heappush
from itertools import count

from gpuaas.policies.quotas._exact import ZERO, Costs, Value, add
from gpuaas.policies.quotas._reasons import Cell

__all__ = ["SCALE", "Plan", "scale_groups", "share_cap"]

SCALE = 100.0
"""Flavors whose heaviest weights are at most this far apart share one model."""

Plan = tuple[list[int], list[str]]
"""A model's new quota per cell (in the order given) and its notes."""


def scale_groups(cells: Sequence[Cell]) -> list[list[int]]:
    """Cell indices per group of flavors whose heaviest weights are within ``SCALE`` of the group's lightest."""
    heaviest: dict[str, float] = {}
    for c in cells:
        heaviest[c.flavor] = max(heaviest.get(c.flavor, 0.0), c.weight)
    groups: list[list[str]] = []
    for flavor in sorted(heaviest, key=lambda f: (heaviest[f], f)):
        if groups and heaviest[flavor] <= SCALE * heaviest[groups[-1][0]]:
            groups[-1].append(flavor)
        else:
            groups.append([flavor])
    return [[i for i, c in enumerate(cells) if c.flavor in group] for group in groups]


class _Curve:
    """One group's best plan per cap, solved on demand; a plan for a smaller cap stands in where it is better
    (it is feasible under the larger one) and where the time is up. Values are priced only when compared."""

    def __init__(self, solve: Callable[[int], Plan | None], cells: Sequence[Cell], costs: Costs,
                 deadline: float) -> None:
        self.solve, self.cells, self.costs, self.deadline = solve, cells, costs, deadline
        self.known: dict[int, Plan] = {0: ([c.before for c in cells], [])}  # a cap of 0 moves nothing: no solve
        self.values: dict[int, Value] = {}
        self.cut = False

    def solved(self, cap: int) -> Plan:
        """The group's own plan under ``cap`` (solved once)."""
        if cap not in self.known:
            plan = self.solve(cap)
            if plan is None:  # only the solver's numbers can say so (staying put is a plan): a smaller cap's stands
                after, notes = self.below(cap)[1]
                plan = after, [*notes, f"the solver held the plan under a cap of {cap} GPUs infeasible: kept the "
                                       "plan for a smaller cap"]
            self.known[cap] = plan
        return self.known[cap]

    def at(self, cap: int) -> tuple[Value, Plan]:
        """The best plan for a cap of at most ``cap``, solving ``cap`` itself unless the time is up."""
        if cap not in self.known:
            if time.monotonic() >= self.deadline:
                self.cut = True
            else:
                self.solved(cap)
        return self.below(cap)

    def below(self, cap: int) -> tuple[Value, Plan]:
        """The best plan solved so far for a cap of at most ``cap``."""
        for c in self.known:
            if c not in self.values:
                self.values[c] = self.costs.value(self.cells, self.known[c][0])
        best = min((c for c in self.known if c <= cap), key=lambda c: self.values[c])
        return self.values[best], self.known[best]

    def value(self, cap: int) -> Value:
        return self.at(cap)[0]


def share_cap(cells: Sequence[Cell], groups: Sequence[Sequence[int]], cap: int,
              solve: Callable[[Sequence[int], int], Plan | None], owed: float, deadline: float,
              time_limit: float) -> Plan:
    """The optimal plan of ``cells`` when ``groups`` (cell indices) share nothing but ``cap``. ``solve(group, c)``
    plans one group under a cap of ``c``, None where HiGHS holds that infeasible."""
    costs = Costs(owed)
    curves = [_Curve(partial(_solve_group, solve, group), [cells[i] for i in group], costs, deadline)
              for group in groups]
    chosen = [curve.solved(cap) for curve in curves]
    tops = [sum(max(0, a - c.before) for c, a in zip(curve.cells, plan[0])) for curve, plan in zip(curves, chosen)]
    if sum(tops) > cap:  # t_p: what each group moves under the whole cap; that plan is its plan for a cap of t_p
        for curve, top, plan in zip(curves, tops, chosen):
            curve.known.setdefault(top, plan)
        chosen = [curve.at(c)[1] for curve, c in zip(curves, _branch(curves, tops, cap))]
    after = [c.before for c in cells]
    notes: list[str] = []
    for group, (part, part_notes) in zip(groups, chosen):
        for i, a in zip(group, part):
            after[i] = a
        names = ", ".join(dict.fromkeys(cells[i].flavor for i in group))
        notes += [f"{names}: {n}" for n in part_notes]
    if any(curve.cut for curve in curves):
        notes.append(f"the solver's split of the day's cap of {cap} GPUs between flavors whose weights are "
                     f"far apart is feasible but not proven best within {time_limit:.0f} s")
    return after, notes


def _solve_group(solve: Callable[[Sequence[int], int], Plan | None], group: Sequence[int], cap: int) -> Plan | None:
    return solve(group, cap)


def _branch(curves: Sequence[_Curve], tops: Sequence[int], cap: int) -> list[int]:
    """Best-first branch and bound over boxes of caps, one range per group. A box's bound is
    each group at the top of its range (``V_p`` never rises with the cap), so the first box popped with a
    single split in it is the best split; halving the widest range solves one new cap. Where the groups'
    costs are far apart (why they are apart) a few solves settle it: a GPU of cap taken from the dear group
    costs more than all the cheap group could gain."""
    highs = [min(t, cap) for t in tops]
    root = [(max(0, cap - (sum(highs) - h)), h) for h in highs]
    order = count()

    def bound(box: list[tuple[int, int]]) -> Value:
        total = ZERO
        for curve, (_, top) in zip(curves, box):
            total = add(total, curve.value(top))
        return total

    heap = [(bound(root), next(order), root)]
    while True:
        _, _, box = heappop(heap)
        widths = [top - low for low, top in box]
        p = widths.index(max(widths))
        if widths[p] == 0:
            return [low for low, _ in box]
        low, top = box[p]
        mid = (low + top) // 2
        for part in ((low, mid), (mid + 1, top)):
            child = [*box[:p], part, *box[p + 1:]]
            if sum(lo for lo, _ in child) <= cap <= sum(hi for _, hi in child):
                heappush(heap, (bound(child), next(order), child))
