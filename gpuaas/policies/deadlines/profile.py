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

__all__ = ["EPS", "Item", "Profile", "lower_bound_extra", "serial_schedule"]

EPS = 1e-9


@dataclass(frozen=True)
class Item:
    """One job of one resource, in the planner's own terms (running jobs have a fixed start 0)."""

    name: str
    gpus: int
    duration: float
    deadline: float | None
    fixed_start: float | None = None


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

    def earliest_fit(self, gpus: int, duration: float, capacity: int, not_before: float = 0.0) -> float:
        """The earliest start >= ``not_before`` where ``gpus`` fit for ``duration`` (always exists)."""
        ts, use = self._ts, self._use
        i = max(bisect_right(ts, not_before + EPS) - 1, 0)
        start = max(not_before, ts[i])
        while True:
            end = start + duration
            k = i
            blocked = -1
            while k < len(ts) and ts[k] < end - EPS:
                if use[k] + gpus > capacity:
                    blocked = k
                    break
                k += 1
            if blocked < 0:
                return start
            i = blocked + 1
            start = ts[i] if i < len(ts) else math.inf
            if start == math.inf:  # pragma: no cover - the last segment always ends at zero use
                raise AssertionError("profile does not return to zero")

    def peak(self) -> int:
        return max(self._use)


def serial_schedule(
    items: Sequence[Item], capacity: int, order: Iterable[Item] | None = None
) -> dict[str, float]:
    """Start times: fixed items where they are, the others in ``order`` at their earliest fit.

    With ``order`` by deadline this is EDF list scheduling: a fast first answer, optimal for
    one-GPU jobs of equal length, but not in general when jobs need several GPUs at once.
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
        start = profile.earliest_fit(item.gpus, item.duration, capacity)
        profile.add(start, item.duration, item.gpus)
        starts[item.name] = start
    return starts


def lower_bound_extra(items: Sequence[Item], capacity: int) -> int:
    """A proven lower bound on the extra GPUs every deadline needs (0 when none is implied).

    Two arguments, both necessary conditions of any valid schedule: the work due by each deadline
    fits in capacity × deadline (energy), and at each instant the jobs that must be running then
    (their latest start is before it and their earliest end after it) fit at once (mandatory parts).
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
    parts = [(_deadline(i) - i.duration, i.duration, i.gpus) for i in due if _deadline(i) - i.duration < i.duration]
    parts += [(0.0, f.duration, f.gpus) for f in fixed]
    for t, _, _ in parts:
        at_t = sum(g for s, e, g in parts if s <= t + EPS and t < e - EPS)
        need = max(need, at_t - capacity)
    return max(need, 0)


def _deadline(item: Item) -> float:
    assert item.deadline is not None
    return item.deadline
