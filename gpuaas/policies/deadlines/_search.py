"""The fewest extra GPUs on which a list schedule meets every deadline, in few schedules even on huge pools.

Why not one GPU at a time: on a pool of hundreds of thousands of GPUs the answer can lie a hundred
thousand GPUs above the lower bound, and each try is a whole schedule. Why not plain bisection: a
list schedule is not monotone in its capacity (one more GPU lets an early job start sooner and take
the gap a later, more urgent one needed), so "meets every deadline" can hold at ``e``, fail at
``e + 1`` and hold again later; bisection then lands on a later ``e`` than the first one that works.

So, in three steps, each try also saying on which neighbouring capacities it would come out the same
(:class:`~gpuaas.policies.deadlines.profile.CapacityRange`), so that a whole range is settled at once:

1. scan up from ``start``, one *distinct* schedule a try, for at most ``scan`` tries: where the answer
   is found here it is the first that works, exactly what a scan one GPU at a time would return;
2. otherwise gallop up from there (steps of 1, 2, 4, ... GPUs) to one that works, bounded by ``upper``,
   where every deadline the caller counts is known to hold;
3. bisect between the last that failed and the first that worked.

Steps 2 and 3 return an answer that works and whose predecessor fails, but maybe not the first:
``exhaustive`` says which. At most ``scan + 2 * ceil(log2(upper - start + 1)) + 2`` tries in all.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Probe", "SearchAnswer", "fewest_working", "probe_bound"]

T = TypeVar("T")


@dataclass(frozen=True)
class Probe(Generic[T]):
    """One try at ``extra``: whether it ``works``, what it found, and the extras ``same_lo <= e < same_hi`` (around
    the one tried) on which the try would come out the same."""

    works: bool
    found: T
    same_lo: int
    same_hi: float


@dataclass(frozen=True)
class SearchAnswer(Generic[T]):
    """The extra chosen, the ``found`` of a try that works on it, how many tries it took, and whether it is the
    first that works at or above ``start`` (``exhaustive``) or only one whose predecessor fails."""

    extra: int
    found: T
    tries: int
    exhaustive: bool


def probe_bound(start: int, upper: int, scan: int) -> int:
    """The most tries :func:`fewest_working` makes: the scan, then a gallop and a bisection over the rest."""
    return scan + 2 * math.ceil(math.log2(max(upper - start, 0) + 1)) + 2


def fewest_working(probe: Callable[[int], Probe[T]], start: int, upper: int, scan: int) -> SearchAnswer[T]:
    """The fewest extra ``>= start`` that works, searched as the module says; ``probe(upper)`` must work.

    Raises ``AssertionError`` if ``probe(upper)`` fails: the caller's proof that ``upper`` works is wrong, and a
    search past it might never end.
    """
    upper = max(upper, start)
    tries = 0

    def tried(extra: int) -> Probe[T]:
        nonlocal tries
        tries += 1
        answer = probe(extra)
        assert answer.same_lo <= extra < answer.same_hi, (extra, answer.same_lo, answer.same_hi)
        return answer

    extra = start
    for _ in range(scan):
        at = tried(extra)
        if at.works:
            return SearchAnswer(extra, at.found, tries, exhaustive=True)
        extra = _past(at, extra, upper)
    failed = prefix = extra - 1  # every extra from start to ``prefix`` fails; ``failed`` fails
    step = 1
    while True:
        hi = min(failed + step, upper)
        at = tried(hi)
        if at.works:
            break
        if hi >= upper:
            raise AssertionError(f"no schedule at the upper bound {upper}: it should meet every deadline")
        failed, step = _past(at, hi, upper) - 1, step * 2
        prefix = failed if at.same_lo <= prefix + 1 else prefix
    best = at
    while hi - failed > 1:
        mid = (failed + hi) // 2
        at = tried(mid)
        if at.works:
            hi, best = max(at.same_lo, failed + 1), at  # the same schedule on every extra of its range
        else:
            failed = _past(at, mid, hi) - 1
            prefix = failed if at.same_lo <= prefix + 1 else prefix
    return SearchAnswer(hi, best.found, tries, exhaustive=prefix >= hi - 1)


def _past(at: Probe[T], extra: int, cap: int) -> int:
    """The next extra that may come out differently from ``extra`` (no further than ``cap``)."""
    return min(max(extra + 1, math.ceil(at.same_hi) if math.isfinite(at.same_hi) else cap), cap)
