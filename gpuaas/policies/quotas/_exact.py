"""The quota objective in exact arithmetic, for what HiGHS's tolerances cannot settle.

The model's objective is (guarantee gap, shortfall cost, GPUs moved), lexicographic. HiGHS holds each
of its passes to tolerances relative to the whole objective, and an owed piece of the shortfall cost
can cost 1e13 times a light queue's (the owed multiplier is the whole cohort's). Here a plan's value is
a fraction, exact for its whole-GPU quotas: ``costs_more`` checks the model's last pass against the one
before it, ``polish`` finishes a plan GPU by GPU, and ``_split`` compares groups of flavors with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from gpuaas.policies.quotas._reasons import Cell

__all__ = ["SEGMENTS", "ZERO", "Costs", "Value", "add", "costs_more", "polish"]

SEGMENTS = 10
"""Pieces of the shortfall cost: ratios of short queues end up within 1/SEGMENTS of each other (by weight)."""
Value = tuple[int, Fraction, int]
"""(guarantee gap, shortfall cost, GPUs moved): the objective, in its order."""
ZERO: Value = (0, Fraction(0), 0)


def add(a: Value, b: Value) -> Value:
    """The value of two parts together: the objective is a sum over cells."""
    return a[0] + b[0], a[1] + b[1], a[2] + b[2]


def _tier(size: Fraction, short: Fraction, slope: Fraction) -> Fraction:
    width, cost, k = size / SEGMENTS, Fraction(0), 1
    while short > 0 and k <= SEGMENTS:
        piece = min(width, short)
        cost += slope * k * piece
        short -= piece
        k += 1
    return cost


class Costs:
    """Each cell's part of the objective at a quota, exactly (the model's ``segment_cost`` in fractions), the
    cost kept once computed."""

    def __init__(self, owed: float) -> None:
        self.owed = Fraction(owed)
        self.known: dict[tuple[Cell, int], Fraction] = {}

    def cell(self, c: Cell, quota: int) -> Value:
        """One cell's part of the objective at ``quota``."""
        if (c, quota) not in self.known:
            demand = Fraction(c.demand)
            within = min(demand, Fraction(c.share))
            short = max(Fraction(0), demand - quota)
            beyond = min(short, demand - within)
            self.known[(c, quota)] = (_tier(demand - within, beyond, Fraction(c.weight))
                                      + _tier(within, short - beyond, Fraction(c.weight) * self.owed))
        return max(0, c.guaranteed - quota), self.known[(c, quota)], max(0, quota - c.before)

    def value(self, cells: Sequence[Cell], after: Sequence[int]) -> Value:
        total = ZERO
        for c, a in zip(cells, after):
            total = add(total, self.cell(c, a))
        return total


def costs_more(cells: Sequence[Cell], new: Sequence[int], old: Sequence[int], owed: float) -> bool:
    """Whether ``new`` has a larger guarantee gap or shortfall cost than ``old``, exactly (only the cells
    that differ are priced). Holding the cost in a row of the model is only as exact as HiGHS's feasibility
    tolerance times the row's largest coefficient (an owed piece, up to 1e13 times a light queue's)."""
    differ = [i for i, (a, b) in enumerate(zip(new, old)) if a != b]
    costs = Costs(owed)
    part = [cells[i] for i in differ]
    return costs.value(part, [new[i] for i in differ])[:2] > costs.value(part, [old[i] for i in differ])[:2]


def polish(cells: Sequence[Cell], after: Sequence[int], lows: Sequence[int], highs: Sequence[int], hysteresis: int,
           cap: int, owed: float) -> list[int]:
    """``after`` improved by moving GPUs between two queues of a flavor while that lowers the exact objective,
    within each cell's ``lows..highs``, hysteresis and ``cap`` on the GPUs gained: one at a time, or up to
    ``hysteresis`` at once (a change of one may be too small to be allowed).

    Why: HiGHS settles a pass within a gap relative to the whole objective, and an owed piece can cost 1e13
    times a light queue's (the owed multiplier is the whole cohort's): moving a GPU between two owed queues
    swaps two such pieces and gains a few units, below that gap. Without hysteresis a flavor is a transport
    problem with a convex cost per queue (and the cap a bound on the flow), whose every improving cycle runs
    through two queues: where no single GPU moved gains, none of any size does, and the plan is optimal.
    With hysteresis this only improves it."""
    costs, n = Costs(owed), list(after)
    moved = sum(max(0, a - c.before) for c, a in zip(cells, n))

    def fits(i: int, quota: int) -> bool:
        change = quota - cells[i].before
        return lows[i] <= quota <= highs[i] and (hysteresis < 2 or change == 0 or abs(change) >= hysteresis)

    def step(i: int, by: int) -> Value:
        then, now = costs.cell(cells[i], n[i] + by), costs.cell(cells[i], n[i])
        return then[0] - now[0], then[1] - now[1], then[2] - now[2]

    def two_best(options: list[tuple[Value, int]]) -> dict[int, list[tuple[Value, int]]]:
        """The two best per change of GPUs moved: the cap may allow one and not another."""
        out: dict[int, list[tuple[Value, int]]] = {}
        for option in sorted(options):
            if len(out.setdefault(option[0][2], [])) < 2:
                out[option[0][2]].append(option)
        return out

    flavors: dict[str, list[int]] = {}
    for i, c in enumerate(cells):
        flavors.setdefault(c.flavor, []).append(i)
    while True:
        best: tuple[Value, int, int, int] | None = None
        for members, size in ((m, a) for m in flavors.values() for a in range(1, max(1, hysteresis) + 1)):
            gives = two_best([(step(i, -size), i) for i in members if fits(i, n[i] - size)])
            takes = two_best([(step(j, size), j) for j in members if fits(j, n[j] + size)])
            pairs = ((g, t) for gs in gives.values() for g in gs for ts in takes.values() for t in ts)
            for (give, i), (take, j) in pairs:
                change = add(give, take)
                if i != j and moved + change[2] <= cap and change < ZERO and (best is None or change < best[0]):
                    best = (change, i, j, size)
        if best is None:
            return n
        change, i, j, size = best
        n[i], n[j], moved = n[i] - size, n[j] + size, moved + change[2]
