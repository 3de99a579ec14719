"""GPU usage over time on one resource, and the list scheduling built on it.

Why a step function: a non-preemptive schedule is valid exactly when the sum of the GPUs of the
jobs running at each instant stays within capacity, and that sum only changes where a job starts
or ends. Keeping the breakpoints sorted makes "the earliest start where this job fits" one linear
scan (the serial schedule-generation scheme of project scheduling).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["EPS", "CapacityRange", "Item", "Profile", "lower_bound_extra", "serial_schedule"]

EPS = 1e-9


@dataclass(frozen=True)
class Item:
    """One job of one resource, in the planner's own terms (running jobs have a fixed start 0).

    ``earliest_start``: a pending job starts no sooner (Kueue keeps it out of its queue until then).
    """

    name: str
    gpus: int
    duration: float
    deadline: float | None
    fixed_start: float | None = None
    earliest_start: float = 0.0


@dataclass
class CapacityRange:
    """Capacities ``lo <= c < hi`` on which a list schedule comes out the same (``hi`` infinite: no upper end).

    Why: a list schedule depends on its capacity only through tests "do ``need`` GPUs fit", so every
    capacity from the largest ``need`` that fitted to below the smallest that did not answers them all
    alike. A search over capacities skips such a range in one step instead of one GPU at a time.
    """

    lo: int = 0
    hi: float = math.inf

    def narrow(self, fitted: int, refused: int | None) -> None:
        """Record a fit test's answers: ``fitted`` GPUs fitted, ``refused`` (if any) did not."""
        self.lo = max(self.lo, fitted)
        if refused is not None:
            self.hi = min(self.hi, refused)


class Profile:
    """GPUs in use as a right-continuous step function of time, from 0 to infinity."""

    def __init__(self) -> None:
        self._ts: list[float] = [0.0]
        self._use: list[int] = [0]

    def _split(self, t: float) -> int:
        """Index of the segment starting at ``t``, creating the breakpoint when it is new."""
        i = bisect_right(self._ts, t + EPS) - 1
        if abs(self._ts[i] - t) <= EPS:
            return i
        self._ts.insert(i + 1, t)
        self._use.insert(i + 1, self._use[i])
        return i + 1

    def add(self, start: float, duration: float, gpus: int) -> None:
        first = self._split(start)
        last = self._split(start + duration)
        for k in range(first, last):
            self._use[k] += gpus

    def earliest_fit(self, gpus: int, duration: float, capacity: int, not_before: float = 0.0,
                     same_on: CapacityRange | None = None) -> float:
        """The earliest start >= ``not_before`` where ``gpus`` fit for ``duration`` (always exists).

        ``same_on``, when given, is narrowed to the capacities on which every fit test made here answers as it
        did on ``capacity`` (so the same start comes out on any of them).
        """
        ts, use = self._ts, self._use
        i = max(bisect_right(ts, not_before + EPS) - 1, 0)
        start = max(not_before, ts[i])
        fitted = 0  # the most GPUs a test found room for
        while True:
            end = start + duration
            k = i
            blocked = -1
            while k < len(ts) and ts[k] < end - EPS:
                need = use[k] + gpus
                if need > capacity:
                    blocked = k
                    break
                if need > fitted:
                    fitted = need
                k += 1
            if same_on is not None:
                same_on.narrow(fitted, use[blocked] + gpus if blocked >= 0 else None)
            if blocked < 0:
                return start
            i = blocked + 1
            start = ts[i] if i < len(ts) else math.inf
            if start == math.inf:  # pragma: no cover - the last segment always ends at zero use
                raise AssertionError("profile does not return to zero")

    def peak(self) -> int:
        return max(self._use)


def serial_schedule(
    items: Sequence[Item], capacity: int, order: Iterable[Item] | None = None, same_on: CapacityRange | None = None
) -> dict[str, float]:
    """Start times: fixed items where they are, the others in ``order`` at their earliest fit from their earliest start.

    With ``order`` by deadline this is EDF list scheduling: a fast first answer, optimal for
    one-GPU jobs of equal length, but not in general when jobs need several GPUs at once.
    ``same_on``, when given, is narrowed to the capacities on which these same starts come out: the
    capacity enters only through "do these GPUs fit", so every capacity that answers each such test
    alike gives the same schedule.
    """
    profile = Profile()
    starts: dict[str, float] = {}
    for item in items:
        if item.fixed_start is not None:
            profile.add(item.fixed_start, item.duration, item.gpus)
            starts[item.name] = item.fixed_start
    for item in order if order is not None else items:
        if item.fixed_start is not None:
            continue
        start = profile.earliest_fit(item.gpus, item.duration, capacity, item.earliest_start, same_on)
        profile.add(start, item.duration, item.gpus)
        starts[item.name] = start
    return starts


def lower_bound_extra(items: Sequence[Item], capacity: int) -> int:
    """A proven lower bound on the extra GPUs every deadline needs (0 when none is implied).

    Two arguments, both necessary conditions of any valid schedule: the work due by each deadline
    fits in capacity × deadline (energy), and at each instant the jobs that must be running then
    (their latest start is before it and their earliest end, from their earliest start, after it) fit at
    once (mandatory parts).
    """
    need = 0
    fixed = [i for i in items if i.fixed_start is not None]
    due = sorted((i for i in items if i.fixed_start is None and i.deadline is not None), key=_deadline)
    work = 0.0
    for item in due:
        work += item.gpus * item.duration
        horizon = _deadline(item)
        if horizon <= EPS:
            continue
        held = sum(f.gpus * max(0.0, min(f.duration, horizon)) for f in fixed)
        need = max(need, math.ceil((work + held) / horizon - EPS) - capacity)
    parts = [(_deadline(i) - i.duration, i.earliest_start + i.duration, i.gpus) for i in due
             if _deadline(i) - i.duration < i.earliest_start + i.duration]
    parts += [(0.0, f.duration, f.gpus) for f in fixed]
    for t, _, _ in parts:
        at_t = sum(g for s, e, g in parts if s <= t + EPS and t < e - EPS)
        need = max(need, at_t - capacity)
    return max(need, 0)


def _deadline(item: Item) -> float:
    assert item.deadline is not None
    return item.deadline
