"""Kueue's own order, played on the plan's estimates: the baseline a hold has to beat.

Why: a hold leaves GPUs idle until its release, and the plan that justifies it proves only the
deadlines it knows of. Where Kueue's own order would meet as many of those deadlines on the same
GPUs and the same estimates, the hold buys nothing that can be shown and costs the GPUs it leaves
idle to whatever arrives next. So a pool is held only where Kueue's order, played here, misses a
deadline the plan meets.

The play is Kueue v0.17's classical scheduler on one pool, cycle by cycle: running jobs keep their GPUs
until their expected end (never, for one whose run time is unknown); whenever GPUs free up, each
ClusterQueue of the pool puts forward its next pending job in each cycle, one that does not fit is set
aside until GPUs free up again (``BestEffortFIFO``: smaller ones behind it pass in later cycles), and the
others are admitted while they fit, those within their own queue's nominal quota before those that
would borrow, then by priority and queue time. A job in its requeue backoff (``earliest_start``) joins its
queue when the backoff ends, untried, without putting the set-aside ones forward again (GPUs did not free
up). Pure: jobs in, ends out, times relative to now = 0 as in the plan.

The same play judges a demotion (``demotion_harmless``): it reorders the queue, and with Workloads of
different widths a new order can leave GPUs idle that the old one filled, or put a wide job that runs
long ahead of a deadline.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, insort
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from gpuaas.policies.deadlines.problem import DeadlineJob
from gpuaas.policies.deadlines.profile import EPS

__all__ = ["ClusterQueues", "Preemption", "QueueKey", "demotion_harmless", "kueue_order_ends", "kueue_order_on_time",
           "may_preempt", "on_time_count", "queue_keys"]

QueueKey = tuple[float, float, str]
"""(minus the priority, the queue time in seconds, the uid): Kueue's order within a ClusterQueue."""


@dataclass(frozen=True)
class Preemption:
    """A ClusterQueue's ``spec.preemption`` rules that pick targets, each Kueue's default ``Never`` where it is left
    out. (``borrowWithinCohort`` picks none of its own: it only lets reclaim's candidates be taken while borrowing,
    and Kueue refuses it beside ``reclaimWithinCohort: Never``.)"""

    within_cluster_queue: str = "Never"
    reclaim_within_cohort: str = "Never"

    def against(self, same_queue: bool) -> str:
        """The rule for a target in the pending Workload's own queue, or in another queue of the cohort tree."""
        return self.within_cluster_queue if same_queue else self.reclaim_within_cohort


@dataclass(frozen=True)
class ClusterQueues:
    """The ClusterQueues of a pool: the one each job queues in, and each one's nominal GPUs of the pool's flavor.

    Why: in a cohort of several ClusterQueues, Kueue admits a head within its own queue's nominal quota before
    one that has to borrow, whatever their priorities and ages. Empty (the default): the pool is one queue.
    """

    queue_of: Mapping[str, str] = field(default_factory=dict)
    nominal: Mapping[str, int] = field(default_factory=dict)
    preemption: Mapping[str, Preemption] = field(default_factory=dict)
    """The cohort tree's queues whose rules let a pending Workload preempt (a queue left out preempts nothing)."""
    waiting: tuple[tuple[str, str], ...] = ()
    """Pending Workloads of the cohort tree's queues that the pool's plan does not place (another flavor, no GPUs,
    a queue without this flavor), with their queue: each may still preempt a job of the pool."""


def kueue_order_ends(jobs: Sequence[DeadlineJob], capacity: int, order: Sequence[str],
                     queues: ClusterQueues | None = None) -> dict[str, float]:
    """Each job's expected end when Kueue admits the pending ones in ``order`` (names; others after, by name).

    A running job ends at ``duration - running_for`` (at once if already past it, ``inf`` if unknown); a
    pending job joins its queue at its ``earliest_start``; one that can never fit (more GPUs than the pool) is
    left out. ``queues``: the pool's ClusterQueues (one queue of the pool's GPUs when None or empty).
    """
    queues = queues if queues is not None and queues.queue_of else ClusterQueues({}, {"": capacity})
    queue_of = queues.queue_of
    rank = {name: i for i, name in enumerate(order)}
    queue = sorted((j for j in jobs if j.running_for is None and j.gpus <= capacity),
                   key=lambda j: (rank.get(j.name, len(rank)), j.name))
    pending = _Pending(queue, queue_of)
    backoff = sorted((job.earliest_start, place) for place, job in enumerate(queue) if job.earliest_start > EPS)
    for place, job in enumerate(queue):
        if job.earliest_start <= EPS:
            pending.join(place)
    ends: dict[str, float] = {}
    running: list[tuple[float, int, str]] = []
    used: dict[str, int] = {}
    free = capacity
    for job in jobs:
        if job.running_for is not None:
            end = max(0.0, job.duration - job.running_for)
            ends[job.name] = end
            cq = queue_of.get(job.name, "")
            heapq.heappush(running, (end, job.gpus, cq))
            used[cq] = used.get(cq, 0) + job.gpus
            free -= job.gpus
    now, freed = 0.0, True
    while pending or backoff:
        if freed:
            pending.requeue()
        while backoff and backoff[0][0] <= now + EPS:
            pending.join(heapq.heappop(backoff)[1])
        while heads := pending.nominate(free):
            heads.sort(key=lambda h: (used.get(h[1], 0) + h[2].gpus > queues.nominal.get(h[1], 0), h[0]))
            for place, cq, job in heads:
                if job.gpus > free:
                    continue  # an earlier head of this cycle took the GPUs: its queue puts it forward again
                pending.take(cq, place)
                free -= job.gpus
                used[cq] = used.get(cq, 0) + job.gpus
                ends[job.name] = now + job.duration
                heapq.heappush(running, (now + job.duration, job.gpus, cq))
        if not pending and not backoff:
            break
        end = running[0][0] if running else math.inf
        if backoff and backoff[0][0] < end - EPS:  # a backoff ends first: its job joins, nothing freed up
            now, freed = backoff[0][0], False
            continue
        if math.isinf(end):
            break  # what waits now waits for a job of unknown end: it ends past every deadline
        now, freed = end, True
        while running and running[0][0] <= now + EPS:
            _, gpus, cq = heapq.heappop(running)
            free += gpus
            used[cq] -= gpus
    return ends


class _Pending:
    """The pending jobs of each ClusterQueue, in Kueue's scheduling cycles.

    In a cycle each ClusterQueue puts forward one job, the next it has not tried since GPUs last freed up.
    One that does not fit is set aside until then, and its queue puts forward nothing else in that
    cycle: a queue with wide jobs ahead loses cycles to the others (Kueue v0.17's heap and inadmissible
    list). Why lines per width and a cursor per queue: walking every job at every end is quadratic,
    seconds on a pool of thousands, and there are few widths. Cycles in which no queue puts forward a job
    that fits are skipped in bulk, by counting: the free GPUs only shrink until the next end, so a job
    that does not fit now does not fit later in the same pass. A job that joins behind its queue's cursor
    (its backoff ended) is untried: it goes forward before the cursor's next, as Kueue's heap pops it first.
    """

    def __init__(self, queue: Sequence[DeadlineJob], queue_of: Mapping[str, str]) -> None:
        self._jobs = list(queue)
        self._queue_of = queue_of
        self._lines: dict[str, dict[int, list[int]]] = {}
        self._cursor: dict[str, int] = {}
        self._joined: dict[str, list[int]] = {}
        """Per queue, the places behind its cursor that joined since GPUs last freed up and are untried, in order."""

    def __bool__(self) -> bool:
        return bool(self._lines)

    def join(self, place: int) -> None:
        """The job at ``place`` enters its queue, untried."""
        job = self._jobs[place]
        cq = self._queue_of.get(job.name, "")
        insort(self._lines.setdefault(cq, {}).setdefault(job.gpus, []), place)
        if place < self._cursor.get(cq, 0):
            insort(self._joined.setdefault(cq, []), place)

    def requeue(self) -> None:
        """GPUs freed up: every job set aside is tried again, each queue from its first."""
        self._cursor = dict.fromkeys(self._lines, 0)
        self._joined = {}

    def nominate(self, free: int) -> list[tuple[int, str, DeadlineJob]]:
        """The heads of the next cycle in which some queue puts forward a job that fits ``free`` GPUs:
        (its place, the queue, the job). The cycles before it, and the queues whose own job does not fit
        in it, set aside one job each per cycle."""
        firsts = {}
        for cq in self._lines:
            found = self._first_fit(cq, free)
            if found is not None:
                firsts[cq] = found
        if not firsts:  # the cycles go on until every untried job is set aside
            self._cursor = dict.fromkeys(self._lines, len(self._jobs))
            self._joined = {}
            return []
        cycles = min(ahead for _, ahead in firsts.values())
        heads = []
        for cq, (place, ahead) in firsts.items():
            if ahead == cycles:
                self._skip(cq, cycles, free)  # the set-aside ones ahead of it: none fits, so the count moves past them
                heads.append((place, cq, self._jobs[place]))
            else:
                self._skip(cq, cycles + 1, free)
        return heads

    def take(self, cq: str, place: int) -> None:
        """Admit a head :meth:`nominate` put forward: out of the queue."""
        lines = self._lines[cq]
        line = lines[self._jobs[place].gpus]
        line.pop(bisect_left(line, place))
        if not line:
            del lines[self._jobs[place].gpus]
        if not lines:
            del self._lines[cq]
        joined = self._joined.get(cq, [])
        if joined and joined[0] == place:
            joined.pop(0)

    def _first_fit(self, cq: str, free: int) -> tuple[int, int] | None:
        """The queue's next untried job that fits, and how many untried jobs (none fitting) are ahead of it."""
        joined = self._joined.get(cq, [])
        for ahead, place in enumerate(joined):
            if self._jobs[place].gpus <= free:
                return place, ahead
        cursor = self._cursor.get(cq, 0)
        fit = None
        for width, line in self._lines[cq].items():
            if width <= free:
                i = bisect_left(line, cursor)
                if i < len(line) and (fit is None or line[i] < fit):
                    fit = line[i]
        if fit is None:
            return None
        return fit, len(joined) + self._untried(cq, free, cursor, fit)

    def _untried(self, cq: str, free: int, start: int, stop: int) -> int:
        """The queue's jobs wider than ``free`` with a place in ``[start, stop)``."""
        return sum(bisect_left(line, stop) - bisect_left(line, start)
                   for width, line in self._lines[cq].items() if width > free)

    def _skip(self, cq: str, count: int, free: int) -> None:
        """Set aside the queue's next ``count`` untried jobs (all wider than ``free``): the joined ones first, then
        the cursor moves past the rest."""
        joined = self._joined.get(cq, [])
        taken = min(count, len(joined))
        del joined[:taken]
        count -= taken
        if count == 0:
            return
        cursor = self._cursor.get(cq, 0)
        low, high = cursor, len(self._jobs)
        while low < high:  # the first place at which ``count`` of them lie behind the cursor
            middle = (low + high) // 2
            if self._untried(cq, free, cursor, middle + 1) >= count:
                high = middle
            else:
                low = middle + 1
        self._cursor[cq] = low + 1


def may_preempt(jobs: Sequence[DeadlineJob], queues: ClusterQueues, keys: Mapping[str, QueueKey],
                limit: int | None = None) -> list[tuple[str, str]]:
    """(pending, target) pairs where Kueue v0.17's classical preemption may evict the target, a job of the pool the
    plan runs (now or later), for the pending Workload: in the pending one's own queue under its
    ``withinClusterQueue``, in any other queue of the cohort tree under its ``reclaimWithinCohort``. The pending ones
    are the plan's and ``queues.waiting``. At most ``limit`` pairs.

    Why: the plan has each job keep its GPUs from its start to its expected end; a pending Workload that its rules
    let preempt one of them (once released, for one gpuaas holds) would end it sooner and run it again later, so
    the plan proves nothing there. Deliberately simple and conservative: when a job runs, what else Kueue admits
    meanwhile, and so which queue borrows, depend on run times and admissions no plan can promise, so every job of
    the pool counts whatever its planned start, a job of another queue whether or not that queue borrows, and a
    priority or queue time the snapshot does not say as one that may preempt.
    """
    if not queues.preemption:
        return []
    cq = {job.name: queues.queue_of.get(job.name, "") for job in jobs} | dict(queues.waiting)
    pending = [job.name for job in jobs if job.running_for is None] + [name for name, _ in queues.waiting]
    weakest = _weakest(jobs, cq, keys)

    def evicts(name: str, other: str) -> bool:
        rule = queues.preemption[cq[name]].against(cq[other] == cq[name])
        return other != name and _satisfies(keys.get(name), keys.get(other), rule)

    pairs: list[tuple[str, str]] = []
    for name in pending:
        if cq[name] not in queues.preemption or not any(evicts(name, o) for few in weakest.values() for o in few):
            continue  # none of each queue's most preemptable jobs: none of its others either
        for other in jobs:
            if evicts(name, other.name):
                pairs.append((name, other.name))
                if limit is not None and len(pairs) >= limit:
                    return pairs
    return pairs


def _weakest(jobs: Sequence[DeadlineJob], cq: Mapping[str, str], keys: Mapping[str, QueueKey]) -> dict[str, list[str]]:
    """Per queue, its two most preemptable jobs: those whose priority or queue time is not known, else the lowest
    priority queued last. Why two: the waiting one may be one of them. A rule that spares both spares the queue's
    every other job (a lower priority, or the same one queued later, is what every rule asks), so the pairs are
    looked for only where one of them is taken: linear in the pool where nothing may be preempted."""
    out: dict[str, list[tuple[tuple[bool, float, float], str]]] = {}
    for job in jobs:
        key = keys.get(job.name)
        rank = (True, 0.0, 0.0) if key is None else (False, key[0], key[1])
        few = out.setdefault(cq[job.name], [])
        few.append((rank, job.name))
        few.sort(reverse=True)
        del few[2:]
    return {queue: [name for _, name in few] for queue, few in out.items()}


def _satisfies(preemptor: QueueKey | None, candidate: QueueKey | None, policy: str) -> bool:
    """Kueue's ``SatisfiesPreemptionPolicy``: a lower priority, or (``LowerOrNewerEqualPriority``) the same and queued
    later; ``Any``: every candidate; ``Never`` (or a rule Kueue does not know): none."""
    if policy == "Any":
        return True
    if policy not in ("LowerPriority", "LowerOrNewerEqualPriority"):
        return False
    if preemptor is None or candidate is None:
        return True
    lower = candidate[0] > preemptor[0]  # keys hold minus the priority
    newer = candidate[0] == preemptor[0] and candidate[1] > preemptor[1]
    return lower or (policy == "LowerOrNewerEqualPriority" and newer)


def on_time_count(jobs: Sequence[DeadlineJob], ends: Mapping[str, float | None]) -> int:
    """How many of the jobs with a deadline end by it (a job without an end is late)."""
    count = 0
    for job in jobs:
        end = ends.get(job.name)
        if job.deadline is not None and end is not None and end <= job.deadline + EPS:
            count += 1
    return count


def queue_keys(workloads: pd.DataFrame, recorded: Mapping[str, Any]) -> dict[str, QueueKey]:
    """``namespace/name`` -> its place in Kueue's order without gpuaas: priority, then queue time, then uid.

    The queue time is ``queued_at`` where the snapshot has it (an eviction by a PodsReady timeout or an admission
    check queues a Workload anew), else the creation time. ``recorded``: the priority a demoted Workload had
    before (the baseline is Kueue untouched). A Workload whose queue time or priority the snapshot does not say
    is left out: its place is unknown.
    """
    if workloads.empty or "priority" not in workloads or "created_at" not in workloads:
        return {}
    created = pd.to_datetime(workloads["created_at"], utc=True, errors="coerce")
    queued = pd.to_datetime(workloads["queued_at"], utc=True, errors="coerce") if "queued_at" in workloads else created
    frame = workloads.assign(queued=queued.fillna(created),
                             uid_=workloads["uid"].fillna("").astype(str) if "uid" in workloads else "")
    keys = {}
    for row in frame[["namespace", "name", "priority", "queued", "uid_"]].itertuples(index=False):
        ref = f"{row.namespace}/{row.name}"
        queued = pd.Timestamp(row.queued)
        try:
            rank = -float(recorded.get(ref, row.priority))
        except (TypeError, ValueError):
            continue
        if not pd.isna(queued) and not math.isnan(rank):
            keys[ref] = (rank, queued.timestamp(), row.uid_)
    return keys


def kueue_order_on_time(jobs: Sequence[DeadlineJob], capacity: int, keys: Mapping[str, QueueKey],
                        demoted: frozenset[str] = frozenset(), longer: float = 1.0,
                        past_estimate: frozenset[str] = frozenset(), queues: ClusterQueues | None = None) -> int | None:
    """The deadlines Kueue's order meets, ``demoted`` one priority lower, every run ``longer`` times its estimate.

    A running job's whole run is scaled, so it ends later too; one in ``past_estimate`` (running past its estimate,
    its duration extended by what the plan gives it more) only that extension: what has run is not an estimate.
    None where the place of some pending job is unknown: then Kueue's order cannot be played.
    """
    scaled = [_stretched(job, longer, job.name in past_estimate) for job in jobs]
    if any(job.running_for is None and job.name not in keys for job in scaled):
        return None
    pending = [job.name for job in scaled if job.running_for is None]  # the snapshot's others are not in the play
    order = sorted(pending, key=lambda ref: (keys[ref][0] + (ref in demoted), *keys[ref][1:], ref))
    return on_time_count(scaled, kueue_order_ends(scaled, capacity, order, queues))


def _stretched(job: DeadlineJob, longer: float, past: bool) -> DeadlineJob:
    """The job with its run ``longer`` times its estimate; for one past its estimate, what is left of it."""
    if past and job.running_for is not None:
        return replace(job, duration=job.running_for + (job.duration - job.running_for) * longer)
    return replace(job, duration=job.duration * longer)


def demotion_harmless(jobs: Sequence[DeadlineJob], capacity: int, keys: Mapping[str, QueueKey],
                      given_up: set[str], error: float, past_estimate: frozenset[str] = frozenset(),
                      queues: ClusterQueues | None = None) -> bool:
    """Whether Kueue's order meets at least as many deadlines with ``given_up`` demoted as without, on the
    estimates and with every run ``error`` times longer.

    Where it meets fewer either way, the demotion is not made. One that meets as many is: what a demotion is
    for is mostly the work that has not arrived yet, which then goes ahead of the lost Workloads. Where the
    order cannot be played, the rule stands as it is.
    """
    if not given_up:
        return True  # nothing reordered: the same play twice
    for longer in {1.0, error}:
        before = kueue_order_on_time(jobs, capacity, keys, longer=longer, past_estimate=past_estimate, queues=queues)
        after = kueue_order_on_time(jobs, capacity, keys, frozenset(given_up), longer, past_estimate, queues)
        if before is not None and after is not None and after < before:
            return False
    return True
