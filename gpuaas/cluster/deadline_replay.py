"""Replay trace jobs with deadlines through the embedded cluster's Kueue model, in simulated time.

Why through the Kueue model and not a formula: the question is what Kueue itself does — admission
by priority then FIFO (BestEffortFIFO: a head that does not fit lets smaller ones pass) — and what
the deadline plan changes when it only holds Workloads (``spec.active: false``) until their planned
start, as the ``deadlines`` flow does. Both runs use the same ``KueueController`` on an in-memory
``ObjectStore``, one ClusterQueue of ``gpus`` nominal GPUs, and bare Workloads (quota only, no pods:
run time is all that matters here). Time moves from event to event (submissions, ends, releases).

The planned run re-plans at every submission (run times are exact in a replay, so a plan stays
valid until new work arrives) and releases each held Workload at its planned start:

1. deadlines that can still hold (``now + duration <= deadline``) in EDF order, each at its earliest
   fit next to the running jobs (``gpuaas.policies.deadlines.profile``);
2. when the next one would miss, the accepted job with the most estimated GPU-seconds (or this one, if
   it is the biggest) moves to best effort and the placement is tried again (Moore-Hodgson's rule, which
   maximises the deadlines met on one machine), so every remaining deadline holds on these GPUs;
3. best-effort work (moved, hopeless, without deadline) fills the gaps, fewest GPU-seconds first
   (shortest first keeps the queue short and blocks the next deadline least): never dropped, only
   run behind the deadlines that can hold.

A hopeless job (duration longer than its time to deadline at submission) counts in ``hopeless``
and never in ``met`` nor in the denominator of ``deadline_satisfaction``.

Estimated run times (``estimates``, see ``estimate_runtimes``): the planner sees only the estimate,
as the ``gpuaas.io/expected-runtime`` annotation would carry it, while Kueue's model runs the true
duration. A running job past its estimate is planned to hold its GPUs ``overrun_buffer`` longer
(the deadline flow's rule), and the plan is made again when a job ends, since ends no longer
come when the plan said.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from gpuaas.cluster.apiserver import ObjectStore
from gpuaas.cluster.kueue import GPU, KueueController
from gpuaas.cluster.kueue.testing import FakeClock, cluster_queue, local_queue, resource_flavor, workload
from gpuaas.cluster.traces import TraceJob
from gpuaas.errors import ConfigError
from gpuaas.policies.deadlines import EPS, Profile, overrun_buffer

__all__ = ["DEFAULT_RUNTIME_ESTIMATE", "LOCAL_QUEUE", "JobsDone", "NAMESPACE", "START", "ReplayStats", "estimate_runtimes",
           "job_name", "kueue_cluster", "replay_deadlines", "replay_stats"]

NAMESPACE, LOCAL_QUEUE = "trace", "lq"
"""Where every replay puts the trace's Workloads (one LocalQueue on the one ClusterQueue)."""
START = datetime(2021, 3, 4, tzinfo=UTC)
"""The instant a trace's time 0 is replayed at."""


@dataclass(frozen=True)
class ReplayStats:
    jobs: int
    deadline_jobs: int
    met: int
    deadline_satisfaction: float
    hopeless: int
    avg_jct_s: float
    p95_queue_s: float
    gpu_allocation_ratio: float
    replans: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()}


def job_name(i: int) -> str:
    return f"job-{i:05d}"


DEFAULT_RUNTIME_ESTIMATE = "lognormal:0.5"
"""What a replay tells the planner of each job's run time unless asked otherwise: the true run time times
e^N(0, 0.5), so the median estimate is right and one in three is off by more than 1.6x. A deployed flow
reads the run time its users expect, never the one the job will take; a replay that told the planner the
truth (``exact``) would judge it on what no flow knows."""
_MAX_FACTOR = 1000.0
_MAX_SIGMA = 10.0
"""e^N(0, 10) already spans estimates off by a factor of 10^13; larger overflows the clock."""


_TOLD_MAX_S = 60 * 1_000_000.0
"""The longest run time a planner is told, in seconds: some two years. A lognormal estimate's tail (e^30 at
SIGMA 10) or a factor on a long job goes past what a deadline plan holds (190 years in minutes); told two
years, the planner already treats the job as never ending before any deadline."""


def _told(estimates: list[float]) -> list[float]:
    """``estimates`` within what a deadline plan can be told (its ``MIN_DURATION`` to ``_TOLD_MAX_S``)."""
    from gpuaas.policies.deadlines.problem import MIN_DURATION

    return [min(max(e, 60 * MIN_DURATION), _TOLD_MAX_S) for e in estimates]


def estimate_runtimes(jobs: Sequence[TraceJob], spec: str, seed: int) -> list[float]:
    """The run time the planner is told per job: ``exact``, ``factor:F`` (F times the truth) or
    ``lognormal:SIGMA`` (the truth times e^N(0, SIGMA), so the median estimate is right); an estimate is
    kept within what a deadline plan holds (``_TOLD_MAX_S``)."""
    kind, _, value = spec.partition(":")
    try:
        number = float(value) if value else None
    except ValueError:
        number = None
    if kind == "exact" and not value:
        return [j.duration for j in jobs]
    if kind == "factor" and number is not None and 0 < number <= _MAX_FACTOR:
        return _told([j.duration * number for j in jobs])
    if kind == "lognormal" and number is not None and 0 <= number <= _MAX_SIGMA:
        import numpy as np

        rng = np.random.default_rng(seed)
        return _told([j.duration * float(f) for j, f in zip(jobs, np.exp(rng.normal(0.0, number, len(jobs))))])
    raise ConfigError(f"expected exact, factor:F (0 < F <= {_MAX_FACTOR:g}) or lognormal:SIGMA "
                      f"(0 <= SIGMA <= {_MAX_SIGMA:g}), got {spec!r}",
                      field="--runtime-estimate")


class _Planner:
    """Planned starts on ``gpus``, per the module docstring; times in seconds since the trace start."""

    def __init__(self, jobs: Sequence[TraceJob], gpus: int, estimates: Sequence[float]) -> None:
        self.jobs, self.gpus, self.est = jobs, gpus, estimates

    def plan(self, now: float, running: dict[int, float], pending: Sequence[int]) -> dict[int, float]:
        profile_base = [(end - now if end > now + EPS else overrun_buffer(self.est[i], minute=60.0), self.jobs[i].gpus)
                        for i, end in running.items()]
        due = sorted((i for i in pending if self._can_hold(i, now)), key=lambda i: (self._deadline(i), i))
        best_effort = [i for i in pending if not self._can_hold(i, now)]
        profile = self._profile(profile_base)
        starts: dict[int, float] = {}
        for i in due:
            # Moore-Hodgson, for jobs of several GPUs: when the next deadline would miss, drop the
            # accepted job (or this one) with the most estimated GPU-seconds to best effort, and try again.
            while True:
                job = self.jobs[i]
                start = profile.earliest_fit(job.gpus, self.est[i], self.gpus)
                if now + start + self.est[i] <= self._deadline(i) + EPS:
                    profile.add(start, self.est[i], job.gpus)
                    starts[i] = start
                    break
                biggest = max(starts, key=lambda k: (self._work(k), k), default=None)
                if biggest is None or self._work(biggest) <= self._work(i):
                    best_effort.append(i)
                    break
                profile.add(starts.pop(biggest), self.est[biggest], -self.jobs[biggest].gpus)
                best_effort.append(biggest)
        for i in sorted(best_effort, key=lambda k: (self._work(k), k)):
            job = self.jobs[i]
            starts[i] = profile.earliest_fit(job.gpus, self.est[i], self.gpus)
            profile.add(starts[i], self.est[i], job.gpus)
        return {i: now + s for i, s in starts.items()}

    def _work(self, i: int) -> float:
        return self.jobs[i].gpus * self.est[i]

    def _profile(self, base: list[tuple[float, int]]) -> Profile:
        profile = Profile()
        for left, gpus in base:
            if left > EPS:
                profile.add(0.0, left, gpus)
        return profile

    def _deadline(self, i: int) -> float:
        deadline = self.jobs[i].deadline
        return math.inf if deadline is None else deadline

    def _can_hold(self, i: int, now: float) -> bool:
        return self.jobs[i].deadline is not None and now + self.est[i] <= self._deadline(i) + EPS


def kueue_cluster(gpus: int) -> tuple[FakeClock, ObjectStore, KueueController]:
    """One ClusterQueue ``cq`` of ``gpus`` GPUs (flavor ``gpu``), its LocalQueue, and Kueue's model watching it."""
    clock = FakeClock(START)
    store = ObjectStore(clock=clock)
    store.create(resource_flavor("gpu"))
    store.create(cluster_queue("cq", {"gpu": {GPU: gpus}}))
    store.create(local_queue(NAMESPACE, LOCAL_QUEUE, "cq"))
    kueue = KueueController(store, clock)
    kueue.attach()
    kueue.reconcile()
    return clock, store, kueue


class JobsDone:
    """Says on ``report`` each tenth of the jobs that has ended (``name: 40 of 195 jobs done, day 3``): a replay
    of a large trace runs for minutes, and a command that says nothing meanwhile reads as hung."""

    def __init__(self, name: str, total: int, report: Callable[[str], None] | None) -> None:
        self.name, self.total, self.report, self.said = name, total, report, 0

    def __call__(self, done: int, now: float) -> None:
        tenth = done * 10 // max(self.total, 1)
        if self.report is not None and tenth > self.said:
            self.said = tenth
            self.report(f"{self.name}: {done:,} of {self.total:,} jobs done, day {now / 86400:.0f}")


def replay_deadlines(jobs: Sequence[TraceJob], gpus: int, *, planned: bool,
                     estimates: Sequence[float] | None = None,
                     progress: Callable[[str], None] | None = None) -> ReplayStats:
    """Run every job once through Kueue on ``gpus`` GPUs, FIFO or with the plan's holds (planned on ``estimates``);
    ``progress`` hears each tenth of the jobs that ends."""
    if not jobs:
        raise ConfigError("the trace has no jobs")
    biggest = max(j.gpus for j in jobs)
    if gpus < biggest:
        raise ConfigError(f"{gpus} GPUs cannot run the trace's largest job ({biggest} GPUs)", field="--gpus")
    clock, store, kueue = kueue_cluster(gpus)
    tick = JobsDone("plan" if planned else "fifo", len(jobs), progress)

    order = sorted(range(len(jobs)), key=lambda i: (jobs[i].submit, i))
    started: dict[int, float] = {}
    ended: dict[int, float] = {}
    running: dict[int, float] = {}  # index -> planned end
    pending: set[int] = set()
    active: dict[int, bool] = {}
    ends: list[tuple[float, int]] = []
    releases: list[tuple[float, int]] = []
    exact = estimates is None
    planner = _Planner(jobs, gpus, [j.duration for j in jobs] if estimates is None else estimates)
    planned_start: dict[int, float] = {}
    next_submit = 0
    replans = 0
    while next_submit < len(order) or running or pending:
        candidates = [t for t in (
            jobs[order[next_submit]].submit if next_submit < len(order) else None,
            ends[0][0] if ends else None,
            releases[0][0] if releases else None,
        ) if t is not None]
        if not candidates:
            raise AssertionError(f"{len(pending)} jobs pending with nothing left to happen")  # pragma: no cover
        now = min(candidates)
        clock.now = START + timedelta(seconds=now)
        arrived = False
        while ends and ends[0][0] <= now + EPS:
            _, i = heapq.heappop(ends)
            kueue.finish(NAMESPACE, job_name(i))
            ended[i] = now
            tick(len(ended), now)
            running.pop(i, None)
            arrived = arrived or not exact
        while next_submit < len(order) and jobs[order[next_submit]].submit <= now + EPS:
            i = order[next_submit]
            next_submit += 1
            obj = workload(NAMESPACE, job_name(i), LOCAL_QUEUE, jobs[i].gpus)
            obj["spec"]["active"] = not planned  # the plan decides before Kueue sees it
            store.create(obj)
            active[i] = not planned
            pending.add(i)
            arrived = True
        if planned:
            if arrived:
                replans += 1
                planned_start = planner.plan(now, running, sorted(pending))
                releases = [(t, i) for i, t in planned_start.items() if t > now + EPS]
                heapq.heapify(releases)
            while releases and releases[0][0] <= now + EPS:
                heapq.heappop(releases)
            for i in pending:
                want = planned_start[i] <= now + EPS
                if want != active[i]:
                    store.patch("Workload", NAMESPACE, job_name(i), {"spec": {"active": want}})
                    active[i] = want
        result = kueue.reconcile()
        for ref in result.admitted:
            i = int(ref.rsplit("-", 1)[1])
            started[i] = now
            pending.discard(i)
            running[i] = now + planner.est[i]  # the end the planner expects
            heapq.heappush(ends, (now + jobs[i].duration, i))
    return replay_stats(jobs, gpus, started, ended, replans)


def replay_stats(jobs: Sequence[TraceJob], gpus: int, started: dict[int, float], ended: dict[int, float],
           replans: int) -> ReplayStats:
    n = len(jobs)
    with_deadline = [i for i in range(n) if jobs[i].deadline is not None]
    hopeless = [i for i in with_deadline if jobs[i].duration > (jobs[i].deadline or 0) - jobs[i].submit + EPS]
    feasible = [i for i in with_deadline if i not in set(hopeless)]
    met = sum(1 for i in feasible if ended[i] <= (jobs[i].deadline or 0) + EPS)
    queue = sorted(started[i] - jobs[i].submit for i in range(n))
    span = max(ended.values()) - min(j.submit for j in jobs)
    work = sum(j.gpus * j.duration for j in jobs)
    return ReplayStats(
        jobs=n, deadline_jobs=len(with_deadline), met=met,
        deadline_satisfaction=met / len(feasible) if feasible else 0.0, hopeless=len(hopeless),
        avg_jct_s=sum(ended[i] - jobs[i].submit for i in range(n)) / n,
        p95_queue_s=queue[min(n - 1, math.ceil(0.95 * n) - 1)],
        gpu_allocation_ratio=work / (gpus * span) if span > 0 else 0.0, replans=replans,
    )
