"""One configuration of the rebalance replay: trace jobs through the Kueue model, in simulated time.

The model is the embedded cluster's own: quota and cohort arithmetic (``QuotaBook``), the
scheduling pass (``schedule``: BestEffortFIFO, nominal before borrowing, priority then FIFO) and
classic preemption (``Preemption``). What is left out is the API server around it: trace jobs are
Workload records, not stored objects, so 80,000 jobs replay in minutes. Time only moves from event
to event (arrivals, completions, hourly demand samples, nightly plans): nothing waits on a clock.

A preempted job loses everything since its admission (trace jobs have no checkpoints) and runs
its full duration again when admitted again; its queueing delay is the sum of all its waits.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from gpuaas.operations.rebalance import moves_window_start
from gpuaas.policy import Policy

from ...quantity import GPU
from ..kueue._admission import Assignment, Preemption, schedule
from ..kueue._model import PodSetInfo, WorkloadRecord, WorkloadState
from ..kueue._preemption import AdmittedIndex, Target
from ..kueue._quota import ClusterQueueQuota, PreemptionPolicy, QuotaBook, ResourceQuota
from ..traces import TraceJob
from ._nightly import (
    EPOCH,
    FLAVOR,
    DeadlineWork,
    History,
    deadline_gpus,
    history_hours,
    no_reversal_nights,
    plan_night,
)
from ._pending import PendingQueue

__all__ = ["Configuration", "JobRecord", "QuotaReplay", "ReplayRun"]

HOUR, DAY = 3600.0, 86400.0
COHORT = "trace"
COHORT_PREEMPTION = PreemptionPolicy(within_cluster_queue="LowerPriority", reclaim_within_cohort="Any")


@dataclass(frozen=True)
class Configuration:
    name: str
    cohort: bool  # one cohort with borrowing and preemption (Kueue's answer) or isolated queues
    rebalance: bool  # nightly plan_quotas


@dataclass
class JobRecord(WorkloadRecord):
    """A trace job as a Workload record, with what the replay measures about it."""

    gpus: int = 0
    duration: float = 0.0
    estimate: float = 0.0  # the run time the nightly plan is told (its annotation): the duration when exact
    submit: float = 0.0
    deadline: float | None = None
    pending_since: float = 0.0
    queue_s: float = 0.0
    started: float | None = None
    finished: float | None = None
    runs: int = 0
    epoch: int = 0  # bumped on preemption: a completion event of an older run is void


@dataclass
class ReplayRun:
    """What one configuration produced."""

    jobs: list[JobRecord]
    total_gpus: int
    makespan_s: float
    allocated_gpu_s: float
    preempted_gpu_hours: float
    preemptions: int
    gpus_moved_per_night: list[int]
    quota_totals: list[int]  # the sum of nominal quotas after every night (conservation)
    failed_nights: list[str] = field(default_factory=list)


class QuotaReplay:
    """Replays ``jobs`` with ``quotas`` (tenant -> GPUs) under one configuration."""

    def __init__(self, jobs: list[TraceJob], quotas: dict[str, int], config: Configuration, *,
                 policy: Policy | None = None, progress: Callable[[str], None] | None = None,
                 estimates: Sequence[float] | None = None) -> None:
        """``estimates``: per job of ``jobs``, the run time the nightly plan's deadline need is told (its
        Workload's annotation); the true durations when None."""
        self.config = config
        self.quotas = dict(quotas)
        self.policy = policy or Policy()
        self.history_hours = history_hours(self.policy)
        self.no_reversal_nights = no_reversal_nights(self.policy)
        self.progress = progress
        self.book = QuotaBook()
        self.pending = {q: PendingQueue() for q in quotas}
        self.history = {q: History() for q in quotas}
        self.index = AdmittedIndex()
        self.now = 0.0
        self.allocated_gpu_s = 0.0
        self.lost_gpu_h = 0.0
        self.preemptions = 0
        self._running: list[tuple[float, int, int, JobRecord]] = []
        self._moved: list[int] = []
        self._totals: list[int] = []
        self._failed: list[str] = []
        told = [j.duration for j in jobs] if estimates is None else list(estimates)
        if len(told) != len(jobs):
            raise ValueError(f"{len(told)} run-time estimates for {len(jobs)} jobs")
        self.records = [self._record(i, job, estimate) for i, (job, estimate) in enumerate(zip(jobs, told))]
        self._set_quotas()

    # --- setup ----------------------------------------------------------------------------------
    def _record(self, i: int, job: TraceJob, estimate: float) -> JobRecord:
        at = EPOCH + timedelta(seconds=job.submit)
        podset = PodSetInfo("main", 1, {GPU: job.gpus * 1000}, {})
        return JobRecord(namespace=job.tenant, name=f"job-{i}", uid=f"job-{i}", queue_name=job.tenant, priority=0,
                         created=at, queued_at=at, podsets=[podset], seq=i, gpus=job.gpus,
                         duration=max(job.duration, 1.0), estimate=estimate, submit=job.submit, deadline=job.deadline)

    def _set_quotas(self) -> None:
        queues = [ClusterQueueQuota(
            name, COHORT if self.config.cohort else None, [((GPU,), (FLAVOR,))],
            {(FLAVOR, GPU): ResourceQuota(gpus * 1000)},
            preemption=COHORT_PREEMPTION if self.config.cohort else PreemptionPolicy(),
        ) for name, gpus in sorted(self.quotas.items())]
        self.book.set_queues(queues, [])

    # --- the loop -------------------------------------------------------------------------------
    def run(self) -> ReplayRun:
        arrivals = sorted(self.records, key=lambda r: (r.submit, r.seq))
        last_arrival = arrivals[-1].submit if arrivals else 0.0
        i, next_hour, next_night, reported = 0, HOUR, DAY, 0
        while i < len(arrivals) or self._running or any(p.count for p in self.pending.values()):
            upcoming = [t for t in (arrivals[i].submit if i < len(arrivals) else None,
                                    self._running[0][0] if self._running else None) if t is not None]
            if not upcoming and self.now > last_arrival + 30 * DAY:
                break  # jobs left that no quota will ever admit: stop, they are reported unfinished
            if self.config.rebalance:
                upcoming.append(next_night)
            t = min(upcoming) if upcoming else next_hour
            while next_hour <= t:
                self._sample()
                next_hour += HOUR
            night = self.config.rebalance and next_night <= t
            if night:
                next_night += DAY
            self.now = t
            self._complete(t)
            while i < len(arrivals) and arrivals[i].submit <= t:
                self._arrive(arrivals[i])
                i += 1
            if night:
                self._night()
            self._schedule()
            if self.progress and t >= (reported + 10) * DAY:
                reported = int(t // DAY)
                done = sum(1 for r in self.records if r.finished is not None)
                self.progress(f"{self.config.name}: day {reported}, {done:,} of {len(self.records):,} jobs done")
        return ReplayRun(self.records, sum(self.quotas.values()), self.now, self.allocated_gpu_s, self.lost_gpu_h,
                         self.preemptions, self._moved, self._totals, self._failed)

    def _arrive(self, record: JobRecord) -> None:
        record.pending_since = self.now
        self.pending[record.queue_name].push(record, record.gpus)

    def _complete(self, t: float) -> None:
        while self._running and self._running[0][0] <= t:
            _, epoch, _, record = heapq.heappop(self._running)
            if epoch != record.epoch or record.state is not WorkloadState.RESERVED:
                continue
            self._release(record)
            record.state, record.finished = WorkloadState.FINISHED, self.now

    def _release(self, record: JobRecord) -> None:
        cq = record.cluster_queue or ""
        self.book.add(cq, record.usage, -1)
        self.index.remove(record, cq)
        self.allocated_gpu_s += record.gpus * self._ran(record)
        record.cluster_queue, record.usage = None, {}

    def _ran(self, record: JobRecord) -> float:
        return 0.0 if record.started is None else self.now - record.started

    def _schedule(self) -> None:
        queues = self._queues()
        if not queues:
            return
        preemption = Preemption(self.book, self.index, self._evict) if self.config.cohort else None
        schedule(self.book, queues, self._admit, self._reject, preemption)

    def _queues(self) -> dict[str, Iterable[WorkloadRecord | int]]:
        """Each queue's pending records for one pass, walked by size bucket: what cannot fit is counted, not tried."""
        return {cq: pending.walk(self._bound(cq), self.config.cohort)
                for cq, pending in self.pending.items() if pending.count}

    def _bound(self, cq: str) -> Callable[[], int]:
        """The largest job the queue could admit now: what fits, or (cohort) what may reclaim.

        Every trace job has the same priority, so ``withinClusterQueue: LowerPriority`` never
        finds a candidate, and a cohort reclaim needs the job within the queue's own nominal quota.
        """
        fr = (FLAVOR, GPU)
        quota = self.book.queues[cq]

        def bound() -> int:
            fits = self.book.available(cq, fr)
            if self.config.cohort:
                fits = max(fits, quota.nominal(fr) - quota.usage.get(fr, 0))
            return fits // 1000

        return bound

    def _admit(self, cq: str, record: WorkloadRecord, assignment: Assignment) -> None:
        assert isinstance(record, JobRecord)
        flavors, usage = assignment
        self.pending[cq].remove(record, record.gpus)
        self.book.add(cq, usage)
        record.state, record.cluster_queue, record.flavors, record.usage = WorkloadState.RESERVED, cq, flavors, usage
        record.admitted_at = EPOCH + timedelta(seconds=self.now)
        record.queue_s += self.now - record.pending_since
        record.started = self.now
        record.runs += 1
        heapq.heappush(self._running, (self.now + record.duration, record.epoch, record.seq, record))

    def _reject(self, cq: str, record: WorkloadRecord, message: str) -> None:
        """A record put forward and refused stays pending; its queue lost the round (``schedule`` counts it)."""

    def _evict(self, target: Target, preemptor: WorkloadRecord, cq: str) -> None:
        record = target.record
        assert isinstance(record, JobRecord)
        self.lost_gpu_h += record.gpus * self._ran(record) / HOUR
        self.preemptions += 1
        self._release(record)
        record.state, record.admitted_at, record.started = WorkloadState.PENDING, None, None
        record.epoch += 1
        record.pending_since = self.now
        self.pending[record.queue_name].push(record, record.gpus)

    # --- demand history and the nightly plan ------------------------------------------------------
    def _sample(self) -> None:
        fr = (FLAVOR, GPU)
        for name, h in self.history.items():
            h.used.append(float(self.book.queues[name].usage.get(fr, 0) // 1000))
            h.pending.append(float(self.pending[name].gpus))
            while len(h.used) > self.history_hours:
                h.used.popleft()
                h.pending.popleft()

    def _night(self) -> None:
        for name, h in self.history.items():
            waiting = [r for r in self.pending[name].records() if isinstance(r, JobRecord)]
            h.pending_now = float(self.pending[name].gpus)
            h.oldest_wait_s = self.now - min((r.pending_since for r in waiting), default=self.now)
        reclaims = {name: q.cohort is not None and q.preemption.reclaim_within_cohort != "Never"
                    for name, q in self.book.queues.items()}
        at = EPOCH + timedelta(seconds=self.now)
        need = deadline_gpus(self.quotas, self._deadline_work(), self.now)
        result = plan_night(self.quotas, self.history, self.policy, reclaims, now=at, deadline_need=need)
        if result.failed:
            self._failed.append(f"day {int(self.now // DAY)}: {result.failed}")
        since = moves_window_start(at)
        for name, gpus in result.quotas.items():
            h = self.history[name]
            h.changes.append(gpus - self.quotas[name])
            if len(h.changes) > max(1, self.no_reversal_nights):
                h.changes.popleft()
            if gpus != self.quotas[name]:
                h.applied.append((at, gpus - self.quotas[name]))
            while h.applied and h.applied[0][0] < since:
                h.applied.popleft()
        self.quotas = result.quotas
        self._moved.append(result.moved_gpus)
        self._totals.append(sum(self.quotas.values()))
        self._set_quotas()

    def _deadline_work(self) -> list[DeadlineWork]:
        """Every job with a deadline that is pending or running now, with its estimate: what the flow's snapshot
        shows of it."""
        work = [DeadlineWork(name, r.name, r.gpus, r.estimate, r.deadline)
                for name in sorted(self.pending) for r in self.pending[name].records()
                if isinstance(r, JobRecord) and r.deadline is not None]
        for _, epoch, _, r in sorted(self._running, key=lambda e: e[2]):
            if epoch == r.epoch and r.state is WorkloadState.RESERVED and r.deadline is not None:
                work.append(DeadlineWork(r.queue_name, r.name, r.gpus, r.estimate, r.deadline, r.started))
        return work
