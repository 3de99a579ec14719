"""Kueue's own order, played on the plan's estimates: the baseline a hold has to beat.

Why: a hold leaves GPUs idle until its release, and the plan that justifies it proves only the
deadlines it knows of. Where Kueue's own order (priority, then creation time) would meet as many of
those deadlines on the same GPUs and the same estimates, the hold buys nothing that can be shown
and costs the GPUs it leaves idle to whatever arrives next. So a pool is held only where Kueue's
order, played here, misses a deadline the plan meets.

The play is Kueue's ``BestEffortFIFO`` on one pool: running jobs keep their GPUs until their
expected end (never, for one whose run time is unknown); whenever GPUs free up, the pending jobs
are walked in queue order and each one that fits now is admitted, a head that does not fit letting
smaller ones pass. Pure: jobs in, ends out, times relative to now = 0 as in the plan.

The same play judges a demotion (``demotion_harmless``): it reorders the queue, and with Workloads of
different widths a new order can leave GPUs idle that the old one filled, or put a wide job that runs
long ahead of a deadline.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from gpuaas.policies.deadlines.problem import DeadlineJob
from gpuaas.policies.deadlines.profile import EPS

__all__ = ["QueueKey", "demotion_harmless", "kueue_order_ends", "kueue_order_on_time", "on_time_count", "queue_keys"]

QueueKey = tuple[float, float]
"""(minus the priority, the creation time in seconds): Kueue's order is the order of these keys."""


def kueue_order_ends(jobs: Sequence[DeadlineJob], capacity: int, order: Sequence[str]) -> dict[str, float]:
    """Each job's expected end when Kueue admits the pending ones in ``order`` (names; others after, by name).

    A running job ends at ``duration - running_for`` (at once if already past it, ``inf`` if unknown); a
    pending job that can never fit (more GPUs than the pool) is left out.
    """
    rank = {name: i for i, name in enumerate(order)}
    queue = sorted((j for j in jobs if j.running_for is None and j.gpus <= capacity),
                   key=lambda j: (rank.get(j.name, len(rank)), j.name))
    pending = _Pending(queue)
    ends: dict[str, float] = {}
    running: list[tuple[float, int]] = []
    free = capacity
    for job in jobs:
        if job.running_for is not None:
            end = max(0.0, job.duration - job.running_for)
            ends[job.name] = end
            heapq.heappush(running, (end, job.gpus))
            free -= job.gpus
    now = 0.0
    while pending:
        while (admitted := pending.first_fitting(free)) is not None:
            free -= admitted.gpus
            ends[admitted.name] = now + admitted.duration
            heapq.heappush(running, (now + admitted.duration, admitted.gpus))
        if not pending or not running or math.isinf(running[0][0]):
            break  # what waits now waits for a job of unknown end: it ends past every deadline
        now, gpus = heapq.heappop(running)
        free += gpus
        while running and running[0][0] <= now + EPS:
            free += heapq.heappop(running)[1]
    return ends


class _Pending:
    """The queue, one line per width: the first job that fits ``free`` GPUs is the first of the heads that do.

    Why: walking every pending job at every end is quadratic, seconds on a pool of thousands; there are
    few widths. Taking the first that fits, again and again, admits what a walk in queue order admits:
    the free GPUs only shrink while it admits, so a job passed over would not fit later in the same walk.
    """

    def __init__(self, queue: Sequence[DeadlineJob]) -> None:
        self._lines: dict[int, deque[tuple[int, DeadlineJob]]] = {}
        for place, job in enumerate(queue):
            if job.gpus not in self._lines:
                self._lines[job.gpus] = deque()
            self._lines[job.gpus].append((place, job))

    def __bool__(self) -> bool:
        return bool(self._lines)

    def first_fitting(self, free: int) -> DeadlineJob | None:
        """Take the first job in queue order of at most ``free`` GPUs out of the queue; None if none fits."""
        heads = [(line[0][0], width) for width, line in self._lines.items() if width <= free]
        if not heads:
            return None
        width = min(heads)[1]
        line = self._lines[width]
        job = line.popleft()[1]
        if not line:
            del self._lines[width]
        return job


def on_time_count(jobs: Sequence[DeadlineJob], ends: Mapping[str, float | None]) -> int:
    """How many of the jobs with a deadline end by it (a job without an end is late)."""
    count = 0
    for job in jobs:
        end = ends.get(job.name)
        if job.deadline is not None and end is not None and end <= job.deadline + EPS:
            count += 1
    return count


def queue_keys(workloads: pd.DataFrame, recorded: Mapping[str, Any]) -> dict[str, QueueKey]:
    """``namespace/name`` -> its place in Kueue's order without gpuaas: priority, then creation time.

    ``recorded``: the priority a demoted Workload had before (the baseline is Kueue untouched). A Workload
    whose creation time or priority the snapshot does not say is left out: its place is unknown.
    """
    if workloads.empty or "priority" not in workloads or "created_at" not in workloads:
        return {}
    keys = {}
    for row in workloads[["namespace", "name", "priority", "created_at"]].itertuples(index=False):
        ref = f"{row.namespace}/{row.name}"
        created = pd.Timestamp(row.created_at)
        try:
            rank = -float(recorded.get(ref, row.priority))
        except (TypeError, ValueError):
            continue
        if not pd.isna(created) and not math.isnan(rank):
            keys[ref] = (rank, created.timestamp())
    return keys


def kueue_order_on_time(jobs: Sequence[DeadlineJob], capacity: int, keys: Mapping[str, QueueKey],
                        demoted: frozenset[str] = frozenset(), longer: float = 1.0,
                        past_estimate: frozenset[str] = frozenset()) -> int | None:
    """The deadlines Kueue's order meets, ``demoted`` one priority lower, every run ``longer`` times its estimate.

    A running job's whole run is scaled, so it ends later too; one in ``past_estimate`` (running past its estimate,
    its duration extended by what the plan gives it more) only that extension: what has run is not an estimate.
    None where the place of some pending job is unknown: then Kueue's order cannot be played.
    """
    scaled = [_stretched(job, longer, job.name in past_estimate) for job in jobs]
    if any(job.running_for is None and job.name not in keys for job in scaled):
        return None
    pending = [job.name for job in scaled if job.running_for is None]  # the snapshot's others are not in the play
    order = sorted(pending, key=lambda ref: (keys[ref][0] + (ref in demoted), keys[ref][1], ref))
    return on_time_count(scaled, kueue_order_ends(scaled, capacity, order))


def _stretched(job: DeadlineJob, longer: float, past: bool) -> DeadlineJob:
    """The job with its run ``longer`` times its estimate; for one past its estimate, what is left of it."""
    if past and job.running_for is not None:
        return replace(job, duration=job.running_for + (job.duration - job.running_for) * longer)
    return replace(job, duration=job.duration * longer)


def demotion_harmless(jobs: Sequence[DeadlineJob], capacity: int, keys: Mapping[str, QueueKey],
                      given_up: set[str], error: float, past_estimate: frozenset[str] = frozenset()) -> bool:
    """Whether Kueue's order meets at least as many deadlines with ``given_up`` demoted as without, on the
    estimates and with every run ``error`` times longer.

    Where it meets fewer either way, the demotion is not made. One that meets as many is: what a demotion is
    for is mostly the work that has not arrived yet, which then goes ahead of the lost Workloads. Where the
    order cannot be played, the rule stands as it is.
    """
    if not given_up:
        return True  # nothing reordered: the same play twice
    for longer in {1.0, error}:
        before = kueue_order_on_time(jobs, capacity, keys, longer=longer, past_estimate=past_estimate)
        after = kueue_order_on_time(jobs, capacity, keys, frozenset(given_up), longer, past_estimate)
        if before is not None and after is not None and after < before:
            return False
    return True
