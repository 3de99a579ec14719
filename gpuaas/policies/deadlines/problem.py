"""Deadline planning: which deadlines hold on today's GPUs, and the fewest extra GPUs for the rest.

Why not "the queue is long": many queued jobs are not urgent, and reordering them often meets every
deadline on the GPUs already there (4 GPUs, 4 jobs of 2 GPUs due in twice their run time: two, then
two). Kueue admits by priority and FIFO and knows no deadlines, so gpuaas answers the real question.

The method, per resource (resources never share GPUs, so each is its own problem):

1. Earliest-deadline-first list scheduling on current capacity. When every deadline holds, done.
2. Otherwise a proven lower bound on the extra GPUs (energy and mandatory parts); EDF on capacity
   plus that bound meeting every deadline proves the bound is the minimum.
3. Otherwise the exact time-indexed MILP (HiGHS) for the minimum and a schedule, within
   :class:`MilpLimits` (time points, variables, seconds). Past them, EDF with the fewest extra GPUs
   it is found to work on (a bounded search, :func:`~gpuaas.policies.deadlines._search.fewest_working`)
   is returned as a heuristic upper bound, and ``inexact`` says why (:class:`Inexact`).

Pure: no I/O, times in one unit relative to now = 0. Running jobs hold their GPUs until
``duration - running_for`` and are never moved; one already past its duration still holds them,
for :func:`overrun_buffer` more. A running job whose duration is ``math.inf`` (no run time is known)
holds them past every deadline and every other job: its end is unknown, and so is the start of
best-effort work that can only start once it has ended (``None`` in the schedule, never a made-up
time). A job whose duration exceeds its time to deadline is ``missed`` (no capacity helps) and
counts toward no extra GPU.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date

from gpuaas.errors import ConfigError
from gpuaas.models import MAX_GPUS
from gpuaas.phrases import counted
from gpuaas.policies.deadlines._milp import Inexact, MilpAnswer, MilpLimits, solve_max_on_time, solve_min_extra
from gpuaas.policies.deadlines._search import Probe, SearchAnswer, fewest_working
from gpuaas.policies.deadlines.profile import (
    EPS,
    CapacityRange,
    Item,
    Profile,
    lower_bound_extra,
    serial_schedule,
)

__all__ = ["MAX_TIME", "DeadlineJob", "DeadlinePlan", "Inexact", "MilpLimits", "ScheduledJob", "overrun_buffer",
           "plan_deadlines", "validate_problem"]

DEFAULT_RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True)
class DeadlineJob:
    """A job to plan. ``running_for`` set means it is running and has run that long.

    ``duration`` is ``math.inf`` for a running job whose run time is unknown: nobody can say when it
    ends, so the plan keeps its GPUs held to its end instead of guessing one. ``earliest_start``: a
    pending job starts no sooner (Kueue keeps a Workload evicted with a requeue backoff out of its queue
    until ``status.requeueState.requeueAt``; GPUs a plan gave it before then would stay idle).
    """

    name: str
    gpus: int
    duration: float
    deadline: float | None
    resource: str = DEFAULT_RESOURCE
    running_for: float | None = None
    earliest_start: float = 0.0


@dataclass(frozen=True)
class ScheduledJob:
    """Where a job runs in the plan; running jobs start before 0 (they started ``running_for`` ago).

    ``end`` is ``None`` for a running job whose run time is unknown; ``start`` and ``end`` are ``None`` for
    best-effort work that waits for the GPUs such a job holds. An unknown time stays unknown, so that
    no reader takes GPUs for free that are not.
    """

    name: str
    resource: str
    gpus: int
    start: float | None
    end: float | None
    deadline: float | None
    running: bool = False
    past_estimate: bool = False
    """Running past its given duration: planned to hold its GPUs :func:`overrun_buffer` more, not to end now."""

    @property
    def on_time(self) -> bool:
        return self.deadline is None or (self.end is not None and self.end <= self.deadline + EPS)


@dataclass(frozen=True)
class DeadlinePlan:
    """The answer. ``schedule`` fits ``capacity + extra_gpus`` at every instant.

    ``missed`` lists the jobs no capacity can finish in time, and ``missed_by`` how late each ends at
    the earliest (a job that can never start in time is not in ``schedule``); ``at_risk`` the deadlines
    that do not hold on current capacity (the fewest such, when ``exact``); ``inexact`` why the plan is
    not proven, when it is not; ``messages`` say why, in words.
    """

    feasible: bool
    extra_gpus: dict[str, int]
    schedule: list[ScheduledJob]
    missed: list[str]
    inexact: tuple[Inexact, ...]
    messages: list[str]
    at_risk: list[str] = field(default_factory=list)
    missed_by: dict[str, float] = field(default_factory=dict)

    @property
    def exact(self) -> bool:
        """Proven: the fewest extra GPUs and the fewest deadlines at risk."""
        return not self.inexact


def overrun_buffer(expected: float, minute: float) -> float:
    """How much longer a job past its expected run time is assumed to hold its GPUs: half of it, at least 30 min.

    Why not drop it from the plan: it still holds its GPUs, and a plan that counts them free
    schedules an urgent job into GPUs that are not there. ``minute`` is a minute in the caller's
    unit of time (60: seconds, as the cluster's plan; 1: minutes, as a problem file).
    """
    return max(0.5 * expected, 30.0 * minute)


def plan_deadlines(
    capacity: Mapping[str, int], jobs: Sequence[DeadlineJob], *, limits: MilpLimits | None = None, minute: float = 1.0
) -> DeadlinePlan:
    """Plan every resource of ``capacity``; a ``ConfigError`` names the job and field of bad input.

    ``minute`` is a minute in the jobs' unit of time (1: minutes, as a problem file; 60: seconds),
    for :func:`overrun_buffer`'s floor.
    """
    limits = limits or MilpLimits()
    validate_problem(capacity, jobs)
    schedule: list[ScheduledJob] = []
    missed: list[str] = []
    missed_by: dict[str, float] = {}
    at_risk: list[str] = []
    messages: list[str] = []
    extra: dict[str, int] = {}
    inexact: set[Inexact] = set()
    for resource, cap in capacity.items():
        part = _plan_resource(resource, cap, [j for j in jobs if j.resource == resource], limits, minute)
        schedule += part.schedule
        missed += part.missed
        missed_by |= part.missed_by
        at_risk += part.at_risk
        messages += part.messages
        extra[resource] = part.extra_gpus[resource]
        inexact |= set(part.inexact)
    schedule.sort(key=lambda s: (math.inf if s.start is None else s.start, s.name))
    return DeadlinePlan(
        feasible=not any(extra.values()),
        extra_gpus=extra,
        schedule=schedule,
        missed=missed,
        inexact=tuple(r for r in Inexact if r in inexact),
        messages=messages,
        at_risk=at_risk,
        missed_by=missed_by,
    )


def _plan_resource(
    resource: str, cap: int, jobs: Sequence[DeadlineJob], limits: MilpLimits, minute: float
) -> DeadlinePlan:
    messages: list[str] = []
    missed: list[str] = []
    missed_by: dict[str, float] = {}
    overrun: set[str] = set()
    unknown: list[DeadlineJob] = []  # running, no run time: their GPUs held past everything else
    by_name = {j.name: j for j in jobs}
    items: list[Item] = []  # running + deadline jobs that can still hold
    best_effort: list[Item] = []
    for job in jobs:
        if job.running_for is not None and math.isinf(job.duration):
            unknown.append(job)
            if job.deadline is not None:  # missed by how much is unknown: no ``missed_by``
                missed.append(job.name)
                messages.append(f"{job.name} is running with no known run time, so it is planned to hold its "
                                f"GPUs past its deadline {round(job.deadline, 1):g}")
        elif job.running_for is not None:
            left = job.duration - job.running_for
            if left <= EPS:
                overrun.add(job.name)
                left = overrun_buffer(job.duration, minute)
                messages.append(f"{job.name} has run {job.running_for:g} of its expected {job.duration:g}, past its "
                                f"estimate: planned to hold its GPUs {left:g} more")
            if job.deadline is not None and left > job.deadline + EPS:
                missed.append(job.name)
                missed_by[job.name] = left - job.deadline
                messages.append(f"{job.name} is running and ends at {round(left, 1):g}, after its deadline "
                                f"{round(job.deadline, 1):g}")
            items.append(Item(job.name, job.gpus, left, None, fixed_start=0.0))
        elif job.deadline is None:
            best_effort.append(Item(job.name, job.gpus, job.duration, None, earliest_start=job.earliest_start))
        elif job.earliest_start + job.duration > job.deadline + EPS:
            missed.append(job.name)
            missed_by[job.name] = job.earliest_start + job.duration - job.deadline
            after = f" from {job.earliest_start:g}, its earliest start," if job.earliest_start else ""
            messages.append(
                f"{job.name} cannot meet its deadline on any capacity: it runs {job.duration:g}{after}"
                f" and its deadline is {job.deadline:g} from now"
            )
        else:
            items.append(Item(job.name, job.gpus, job.duration, job.deadline, earliest_start=job.earliest_start))
    held_past = _past_every_end(jobs, items, best_effort, minute)
    items += [Item(j.name, j.gpus, held_past, None, fixed_start=0.0) for j in unknown]
    due = [i for i in items if i.fixed_start is None]
    edf = sorted(due, key=lambda i: (i.deadline, -i.gpus * i.duration))

    def late(starts: Mapping[str, float]) -> list[str]:
        return [i.name for i in due if starts[i.name] + i.duration > (i.deadline or math.inf) + EPS]

    starts = serial_schedule(items, cap, edf)
    at_risk = late(starts)
    extra, inexact = 0, set[Inexact]()
    if at_risk:
        edf_late = at_risk
        extra, starts, why, note = _min_extra(items, cap, edf, limits, late)
        inexact |= {why} if why is not None else set()
        best = solve_max_on_time(items, cap, limits)
        if isinstance(best, MilpAnswer) and len(best.starts) >= len(due) - len(at_risk):
            at_risk = [i.name for i in due if i.name not in best.starts]
            inexact |= {best.inexact} if best.inexact is not None else set()
            if not at_risk:  # every deadline on today's GPUs: 0 extra is the least there is, whatever was proven
                extra, inexact = 0, set()
                starts = {i.name: best.starts[i.name] if i.fixed_start is None else i.fixed_start for i in items}
        else:  # no answer, or one worse than EDF's: cut short before it found better
            cut = best if isinstance(best, Inexact) else best.inexact or Inexact.solver_failed
            inexact.add(cut)
            messages.append(f"{resource}: at-risk list from EDF on current capacity ({cut.words})")
        if at_risk or extra:
            messages += [note, f"{resource}: {counted(len(at_risk), 'deadline')} at risk on {counted(cap, 'GPU')} "
                         f"({', '.join(at_risk)}); {counted(extra, 'more GPU')} {'makes' if extra == 1 else 'make'} "
                         "every holdable deadline hold"]
        else:  # the order matters, not the GPUs: say so rather than "0 at risk, 0 more GPUs"
            messages.append(f"{resource}: every deadline holds on {counted(cap, 'GPU')} in this plan's order; "
                            f"earliest deadline first would miss {counted(len(edf_late), 'deadline')} "
                            f"({', '.join(edf_late)})")
    profile = Profile()
    for item in items:
        profile.add(starts[item.name], item.duration, item.gpus)
    waiting: set[str] = set()  # best effort that only fits once a job of unknown end has ended
    for item in best_effort:
        start = profile.earliest_fit(item.gpus, item.duration, cap + extra, item.earliest_start)
        if unknown and start >= held_past - EPS:
            waiting.add(item.name)
            messages.append(f"{item.name} waits for GPUs that a running job with no run time holds, so its start "
                            "is unknown")
            continue
        starts[item.name] = start
        profile.add(start, item.duration, item.gpus)
    ends_unknown = {j.name for j in unknown}
    schedule = []
    for item in items + best_effort:
        job = by_name[item.name]
        if item.name in waiting:
            schedule.append(ScheduledJob(item.name, resource, item.gpus, None, None, job.deadline))
            continue
        start = starts[item.name] - (job.running_for or 0.0)
        end = None if item.name in ends_unknown else starts[item.name] + item.duration
        schedule.append(
            ScheduledJob(
                item.name, resource, item.gpus, start, end,
                job.deadline, running=job.running_for is not None, past_estimate=item.name in overrun,
            )
        )
    return DeadlinePlan(
        feasible=extra == 0, extra_gpus={resource: extra}, schedule=schedule, missed=missed,
        inexact=tuple(inexact), messages=messages, at_risk=at_risk, missed_by=missed_by,
    )


def _past_every_end(jobs: Sequence[DeadlineJob], items: Sequence[Item], best_effort: Sequence[Item],
                    minute: float) -> float:
    """How long the plan has a job of unknown run time hold its GPUs: past every end the plan can place.

    Why this length: every deadline, every known end of a running job and every earliest start, then
    every other job run one after another, and a minute more. Deadline jobs then never count on its GPUs
    (as if it never ended), and a best-effort job starts before it only where it fits beside it: one
    placed at it or later is one that waits for its GPUs, whose start is unknown. The number itself is
    never shown.
    """
    latest = max([0.0, *(j.deadline for j in jobs if j.deadline is not None),
                  *(i.duration for i in items if i.fixed_start is not None),
                  *(i.earliest_start for i in [*items, *best_effort])])
    return latest + sum(i.duration for i in [*items, *best_effort] if i.fixed_start is None) + minute


def _min_extra(
    items: list[Item], cap: int, edf: list[Item], limits: MilpLimits, late: Callable[[Mapping[str, float]], list[str]]
) -> tuple[int, dict[str, float], Inexact | None, str]:
    """The fewest extra GPUs and a schedule on them; why that is not proven (``None``: it is); how it was found."""
    lower = lower_bound_extra(items, cap)  # EDF already failed at 0, but the MILP may not
    starts = serial_schedule(items, cap + lower, edf)
    if lower > 0 and not late(starts):
        return lower, starts, None, f"EDF meets every deadline with {counted(lower, 'extra GPU')}, a proven lower bound"
    upper = sum(i.gpus for i in edf)
    answer = solve_min_extra(items, cap, lower, upper, limits)
    if isinstance(answer, MilpAnswer):
        merged = {i.name: 0.0 for i in items if i.fixed_start is not None} | answer.starts
        how = "proven optimal by the MILP" if answer.optimal else "the MILP's best within its time limit"
        return answer.extra, merged, answer.inexact, f"{counted(answer.extra, 'extra GPU')}: {how}"
    found = _fewest_for_edf(items, cap, edf, max(lower, 1), upper, late)
    return (
        found.extra, found.found, answer,
        f"{answer.words} ({counted(len(edf), 'job')}): {counted(found.extra, 'extra GPU')} from EDF, a heuristic"
        f" (at least {lower} {'is' if lower == 1 else 'are'} needed"
        f"{'' if found.exhaustive else '; fewer may also do, not every number was tried'})",
    )


SCAN_TRIES = 32
"""How many distinct EDF schedules :func:`_fewest_for_edf` tries one after another before it bisects: below it, the
answer is the first number of extra GPUs on which EDF meets every deadline; past it, a few dozen more schedules
find one whose predecessor fails, on a pool of any size."""


def _fewest_for_edf(items: list[Item], cap: int, edf: list[Item], start: int, upper: int,
                    late: Callable[[Mapping[str, float]], list[str]]) -> SearchAnswer[dict[str, float]]:
    """The fewest extra GPUs from ``start`` on which EDF meets every deadline (:func:`fewest_working`).

    ``upper`` (the GPUs of every job with a deadline) always works: each such job fits at its earliest start
    beside the running ones, which hold at most ``cap``, and ends by its deadline, since a job that cannot
    (its earliest end past its deadline) is ``missed`` and left out of ``items``, and a running job is never
    late.
    """

    def probe(extra: int) -> Probe[dict[str, float]]:
        same = CapacityRange()
        starts = serial_schedule(items, cap + extra, edf, same)
        return Probe(not late(starts), starts, same.lo - cap, same.hi - cap)

    return fewest_working(probe, start, upper, SCAN_TRIES)


def validate_problem(capacity: Mapping[str, int], jobs: Sequence[DeadlineJob]) -> None:
    """Reject what cannot be planned, naming the job and field (the file loader adds the file)."""
    for resource, cap in capacity.items():
        if not _is_count(cap) or cap < 0:
            raise ConfigError(f"must be a whole number of GPUs from 0 to {MAX_GPUS:,}, got {_given(cap)}", field=f"capacity.{resource}")
    seen: set[str] = set()
    held: dict[str, int] = {}
    for k, job in enumerate(jobs):
        where = f"jobs[{k}] ({job.name})"
        if job.name in seen:
            raise ConfigError("duplicate job name", field=f"{where}.name")
        seen.add(job.name)
        if not _is_count(job.gpus) or job.gpus < 1:
            raise ConfigError(f"must be a whole number of GPUs from 1 to {MAX_GPUS:,}, got {_given(job.gpus)}", field=f"{where}.gpus")
        ends_unknown = job.running_for is not None and job.duration == math.inf  # a running job, no run time
        if not ends_unknown and (not _is_time(job.duration) or job.duration < MIN_DURATION):
            raise ConfigError(f"must be a number of minutes from {MIN_DURATION:g} to {MAX_TIME:,}, got {_given(job.duration)}", field=f"{where}.duration")
        if job.deadline is not None and not _is_time(job.deadline):
            raise ConfigError(f"must be a number of minutes from now, at most {MAX_TIME:,} either way, got {_given(job.deadline)}", field=f"{where}.deadline")
        if job.running_for is not None and (not _is_time(job.running_for) or job.running_for < 0):
            raise ConfigError(f"must be a number of minutes from 0 to {MAX_TIME:,}, got {_given(job.running_for)}", field=f"{where}.running_for")
        if not _is_time(job.earliest_start) or job.earliest_start < 0:
            raise ConfigError(f"must be a number of minutes from now, 0 to {MAX_TIME:,}, got {_given(job.earliest_start)}",
                              field=f"{where}.earliest_start")
        if job.running_for is not None and job.earliest_start:
            raise ConfigError("a running job has started: only a pending one has an earliest start",
                              field=f"{where}.earliest_start")
        if job.resource not in capacity:
            raise ConfigError(
                f"{job.resource!r} is not in capacity ({', '.join(capacity) or 'empty'})", field=f"{where}.resource"
            )
        if job.gpus > capacity[job.resource]:
            raise ConfigError(
                f"{job.gpus} GPUs is more than the {capacity[job.resource]} of {job.resource}", field=f"{where}.gpus"
            )
        if job.running_for is not None:
            held[job.resource] = held.get(job.resource, 0) + job.gpus
            if held[job.resource] > capacity[job.resource]:
                raise ConfigError(
                    f"running jobs hold {held[job.resource]} GPUs, more than the {capacity[job.resource]}"
                    f" of {job.resource}",
                    field=f"{where}.gpus",
                )


MAX_TIME = 100_000_000
"""The largest time a problem may hold, either way, in the unit of its times: in minutes (a file a person wrote)
some 190 years, a typo past that, which would round to the minute wrongly; in seconds (a cluster's pools,
``minute=60``) some 3 years, the horizon ``deadline_problems`` clamps a cluster's times to."""
MIN_DURATION = 1e-6
"""The shortest run time a job may have, in minutes: a thousand times the schedule's tolerance (``EPS``), under
which two jobs on one GPU would be read as overlapping by nothing."""


def _given(value: object) -> str:
    """A refused value as the file wrote it: YAML reads ``2026-12-06T10:00:00Z`` as a date and time, which
    Python's repr would quote as ``datetime.datetime(2026, 12, 6, 10, 0, tzinfo=...)``."""
    return value.isoformat() if isinstance(value, date) else repr(value)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value <= MAX_GPUS


def _is_time(value: object) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
            and abs(value) <= MAX_TIME)
