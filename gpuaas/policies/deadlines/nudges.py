"""Nudging Kueue toward the deadline plan: hold what can wait, demote what is lost, release both in time.

Why these two levers: Kueue admits by priority, then creation time, and knows no deadlines. On a live
pending Workload it lets users and controllers patch ``spec.active`` (``false`` keeps the Workload and
takes it out of the queue, ``true`` requeues it; see the Kueue notes, §6) and ``spec.priority``
(requeued at its new place; no webhook or validation rule forbids it). ``podSets`` are immutable
while quota is reserved and ``maximumExecutionTimeSeconds`` while admitted, so the plan is followed
by *when* and *in which order* a Workload is queued, not by changing it. A held Workload waits behind
nobody it should precede; a demoted one waits behind every Workload of its own priority, and keeps
nothing idle.

The rules, each a guard against a missed deadline:

- A Workload waits for its planned start only in a pool whose plan is **proven** (exact) to meet
  every holdable deadline on today's GPUs (``feasible``) and **enforceable**: no pending Workload
  the plan cannot hold could be admitted into a gap it counts on (one without a run time, a
  best-effort one planned to start later, one whose deadline is lost by its estimate but not given
  up), and no pending Workload may preempt a job the plan runs (its ClusterQueue's
  ``withinClusterQueue`` or ``reclaimWithinCohort`` rule; a held one would preempt when released).
  Anywhere else such holds are released: Kueue's own order, the baseline, is never made worse by a
  plan it cannot enforce. (A Workload in Kueue's requeue backoff, kept out of its queue until
  ``status.requeueState.requeueAt`` after an eviction, is planned to start no sooner.)
- A hold is placed only where it is **needed**: Kueue's own order, played in its scheduling cycles
  on the same GPUs and estimates (``kueue_order``), misses a deadline the plan meets. A hold
  leaves GPUs idle until its release, and the plan proves only the deadlines it knows of: where
  Kueue's order meets as many, a hold buys nothing and a later arrival could pay for the idle GPUs.
  Where the snapshot does not say some pending Workload's place in the queue, the order cannot be
  played and the proven plan stands.
- A best-effort Workload (no deadline) is never held: holding it would only delay it, and again
  at every run.
- A hold is placed only when the planned start is more than ``release_margin`` away, and its
  ``release_at`` (stored on the object) is the planned start minus that margin — never after the
  latest start that still meets the deadline. A Workload whose requeue backoff lasts until then is
  not held: the backoff keeps it out as long (and deactivating it would clear its ``requeueState``).
- A hold leaves slack for estimate error: it is placed only when the job's latest start is at least
  ``runtime_estimate_error`` times its planned start away, so that it still starts in time if the
  work planned ahead of it runs that many times longer than expected (released on time, a held job
  otherwise waits for GPUs held by jobs past their estimates, and misses a deadline FIFO meets).
- A held Workload is released when its ``release_at`` has come (checked first in every run, from
  the objects alone, before any plan: a run that fails to plan still releases), when a new plan
  starts it sooner, or when the plan is no longer proven.
- With ``give_up_lost`` (on by default), a deadline already lost is **given up** (Moore and
  Hodgson's rule: the late jobs run after the on-time ones): a pending Workload whose deadline is
  lost even if it runs ``runtime_estimate_error`` times shorter than expected is **demoted**, its
  ``spec.priority`` one below its own, so that Kueue admits every Workload of its priority that can
  still meet its deadline first, and the lost one whenever GPUs are left (nothing is kept idle). The
  factor keeps a long estimate from giving up a deadline that Kueue's order would meet. Not where
  Kueue's order, played with the lost Workloads demoted, meets fewer deadlines than without, on the
  estimates or with every run that factor longer (``demotion_harmless``). Not in a pool
  where a ClusterQueue's preemption compares priorities: there a lower priority would also make the
  Workload easier to preempt once it runs. The demotion is a lease (``give_up_lease_minutes``): the
  release sweep restores the recorded priority and the same run demotes again while the reason
  stands, so a gpuaas that stops running strands nothing; an admitted Workload gets its priority back
  at the next run. A demoted Workload still takes any gap that nothing of its priority fits, so,
  like any lost one, it makes a plan unenforceable: where deadlines are lost, the plan holds nothing.
- Holds and demotions are capped per run (demotions first, then the least urgent holds); releases
  never are.
- A hold or a demotion names the Workload as the snapshot read it (uid and resourceVersion): the plan
  was made on that object, so one recreated under the same name or edited since is not nudged.
- A ``gpuaas.io/deadline-hold`` mark is a hold only where gpuaas recorded it (``marks``): a Workload whose
  mark anyone else wrote is planned as not held, and may be held or demoted like any other.

Pure: the plans, the snapshot's workloads and the marks gpuaas recorded in, the nudges out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

import pandas as pd

from gpuaas.instant import utc_stamp
from gpuaas.models import Outcome, bounded_key
from gpuaas.phrases import counted
from gpuaas.policies.deadlines.kueue_order import (
    QueueKey,
    demotion_harmless,
    kueue_order_on_time,
    may_preempt,
    on_time_count,
    queue_keys,
)
from gpuaas.policies.deadlines.marks import (
    UNRECORDED,
    RecordedHolds,
    counts_as_held,
    is_demotion,
    parse_hold,
    release_is_due,
    snapshot_marks,
    uid_text,
)
from gpuaas.policies.deadlines.pools import PoolPlan
from gpuaas.policies.deadlines.problem import DeadlineJob
from gpuaas.policies.deadlines.profile import EPS
from gpuaas.policy import HELD_BACK, DeadlinesPolicy

__all__ = ["RELEASE_TIME", "Nudge", "NudgeAction", "due_release", "plan_nudges", "with_kueue_order"]

_NEEDLESS_DEMOTION = ("deadline lost, but Kueue's own order meets fewer deadlines on the same estimates with the "
                      "lost Workloads demoted: its own priority restored")
_AUDITED_JOBS = 50


class NudgeAction(StrEnum):
    """What a nudge does to a pending Workload (its value is the audit row's ``action``)."""

    hold = "hold"
    """Deactivate it until ``release_at``, so the work with deadlines goes first."""
    demote = "demote"
    """Lower its priority by one: its deadline is lost, so it waits behind those that can still be met."""
    release = "release"
    """Undo either: put back what the hold or the demotion changed."""


@dataclass(frozen=True)
class Nudge:
    """One hold or release of a Workload; ``outcome`` is ``planned`` or ``deferred`` (over the cap)."""

    action: NudgeAction
    namespace: str
    name: str
    reason: str
    outcome: Outcome = Outcome.planned
    release_at: datetime | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    uid: str | None = None
    """The Workload's uid as the snapshot read it: a hold or demotion is refused on any other object."""
    resource_version: str | None = None
    """Its resourceVersion in the snapshot: a hold or demotion is refused once it changed (the plan was made on it)."""
    over_mark: str | None = None
    """The ``gpuaas.io/deadline-hold`` mark the snapshot read on it that gpuaas did not record: a hold or demotion
    is written over that mark (its own ``before`` read from the live object), and refused over any other."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "action", NudgeAction(self.action))  # "hold" from a caller or a row: the member

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def idempotency_key(self) -> str:
        """Action, Workload and release time, bounded to the audit log's column (``bounded_key``): a Workload's
        name may be 253 characters, and a plain cut would drop the release time that tells two holds apart."""
        stamp = self.release_at.isoformat() if self.release_at else ""
        return bounded_key(f"deadline-{self.action}/{self.namespace}/{self.name}/{stamp}")


def due_release(namespace: str, name: str, annotation: object, now: datetime) -> Nudge | None:
    """The release sweep's rule for one Workload (its ``gpuaas.io/deadline-hold`` annotation's value): the release
    of gpuaas's hold on it once its ``release_at`` has come, else None."""
    hold = parse_hold(annotation)
    if hold is None or not release_is_due(hold, now):
        return None
    return Nudge(NudgeAction.release, namespace, name, f"release time {hold.get('release_at', '(unreadable)')} has come",
                 evidence={"hold": hold})


def _marks(workloads: pd.DataFrame, recorded: RecordedHolds | None) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """The marks the plan counts as gpuaas's holds (``namespace/name`` -> the mark), and the others (-> their text)."""
    held: dict[str, dict[str, Any]] = {}
    unrecorded: dict[str, str] = {}
    for m in snapshot_marks(workloads):
        if counts_as_held(m.mark, m.uid, recorded):
            held[m.ref] = m.mark
        else:
            unrecorded[m.ref] = m.text
    return held, unrecorded


def _over_mark(n: Nudge, unrecorded: Mapping[str, str]) -> Nudge:
    """A hold or demotion of a Workload whose mark gpuaas did not record: written over that very mark, and said."""
    text = unrecorded.get(n.ref)
    if text is None:
        return n
    return replace(n, reason=f"{n.reason}; {UNRECORDED}", evidence=n.evidence | {"unrecorded_mark": text[:500]},
                   over_mark=text)


def _versions(workloads: pd.DataFrame) -> dict[str, tuple[str | None, str | None]]:
    """``namespace/name`` -> (uid, resourceVersion) of each Workload as the snapshot read it (None where unknown)."""
    if workloads.empty or "uid" not in workloads or "resource_version" not in workloads:
        return {}
    rows = workloads[["namespace", "name", "uid", "resource_version"]].itertuples(index=False)
    return {f"{row.namespace}/{row.name}": (uid_text(row.uid), uid_text(row.resource_version)) for row in rows}


def plan_nudges(pools: Sequence[PoolPlan], workloads: pd.DataFrame, now: datetime,
                policy: DeadlinesPolicy, held_back: Mapping[str, object] | None = None, *,
                recorded: RecordedHolds | None = None) -> list[Nudge]:
    """Releases first (all planned), then holds (capped: given-up Workloads first, then the least urgent).

    A pool that carries ``versus_kueue`` (``with_kueue_order`` on the same ``workloads`` and ``recorded``) is not
    played again. ``held_back``: ``namespace/name`` -> the change freeze of its tenant (said in the reason). Such a
    Workload is neither held nor demoted (a ``skipped`` nudge, outside the cap); a hold it already has is still
    released. ``recorded``: the marks gpuaas recorded (``marks``); any other is planned as no hold, and a hold or
    demotion of its Workload is written over it. None: every mark is gpuaas's (a plan with no audit log).
    """
    margin = policy.release_margin_minutes * 60.0
    held, unrecorded = _marks(workloads, recorded)
    keys = _kueue_keys(workloads, held)
    versions = _versions(workloads)
    releases: list[Nudge] = []
    holds: list[tuple[float, Nudge]] = []
    seen: set[str] = set()
    for pool in pools:
        plan = pool.plan
        starts = {s.name: s for s in plan.schedule}
        given_up = _given_up(pool, policy)
        harmless = demotion_harmless(pool.problem.jobs, pool.problem.capacity, keys, given_up,
                                     policy.runtime_estimate_error, frozenset(pool.problem.past_estimate),
                                     pool.problem.queues)
        demote = given_up if given_up and harmless else set()
        loose = _unenforceable(pool, starts, margin, given_up)
        evicting = [f"{a} may preempt {b}"
                    for a, b in may_preempt(pool.problem.jobs, pool.problem.queues, keys, _AUDITED_JOBS)]
        proven = plan.feasible and plan.exact and not loose and not evicting
        baseline = (pool.versus_kueue or _versus_kueue_order(pool, keys)) if proven else None
        needless = baseline if baseline is not None and baseline[1] >= baseline[0] else None
        where = f"cohort {pool.problem.cohort}, flavor {pool.problem.flavor}"
        # The plan that justifies the nudge, in the audit row: its first 50 jobs by start, seconds from now.
        schedule = [[s.name, _rounded(s.start), _rounded(s.end)] for s in plan.schedule[:_AUDITED_JOBS]]
        for job in pool.problem.jobs:
            ns, _, name = job.name.partition("/")
            if job.running_for is not None:
                if job.name in held and is_demotion(held[job.name]):
                    seen.add(job.name)
                    releases.append(Nudge(NudgeAction.release, ns, name, "admitted: its own priority restored"))
                continue
            seen.add(job.name)
            scheduled = starts.get(job.name)
            start = scheduled.start if scheduled is not None else None
            evidence = {"pool": where, "capacity_gpus": pool.problem.capacity, "gpus": job.gpus,
                        "duration_s": job.duration, "deadline_s": job.deadline, "planned_start_s": start,
                        "plan_exact": plan.exact, "plan_feasible": plan.feasible,
                        "at_risk": list(plan.at_risk), "missed": list(pool.missed), "schedule": schedule,
                        "uncontrolled": loose[:_AUDITED_JOBS], "planned_at": now.isoformat()}
            if evicting:
                evidence["may_preempt"] = evicting[:_AUDITED_JOBS]
            if job.earliest_start:
                evidence["earliest_start_s"] = job.earliest_start
            if baseline is not None:
                evidence["plan_on_time"], evidence["kueue_order_on_time"] = baseline
            if job.name in given_up:
                if job.name in held and not is_demotion(held[job.name]):
                    lost = ("deadline lost: released, to be demoted instead" if job.name in demote
                            else "deadline lost: released (demoted, Kueue's order would meet fewer deadlines)")
                    releases.append(Nudge(NudgeAction.release, ns, name, lost, evidence=evidence))
                elif job.name in held and job.name not in demote:
                    releases.append(Nudge(NudgeAction.release, ns, name, _NEEDLESS_DEMOTION, evidence=evidence))
                elif job.name not in held and job.name in demote and not pool.problem.by_priority:
                    holds.append((math.inf, _give_up(job, where, now, policy, evidence, versions.get(job.name))))
                continue
            if job.name in held and is_demotion(held[job.name]):
                releases.append(Nudge(NudgeAction.release, ns, name, "not given up any more: its own priority restored",
                                      evidence=evidence))
                continue
            if job.name in held:
                why = ("a best-effort Workload (no deadline) is never held: released" if job.deadline is None
                       else _release_reason(held[job.name], now, proven, start, margin, bool(loose), needless,
                                           evicting))
                if why:
                    releases.append(Nudge(NudgeAction.release, ns, name, why, evidence=evidence))
                continue
            if not proven or needless is not None or start is None or start <= margin or job.deadline is None:
                continue
            if start - margin <= job.earliest_start:
                continue  # Kueue's requeue backoff keeps it out of the queue as long as the hold would
            release_at = now + timedelta(seconds=start - margin)
            latest = None if job.deadline is None else job.deadline - job.duration
            if latest is not None and start > latest + 1e-6:  # the plan never does this; the guard says so
                continue
            if latest is not None and latest < start * policy.runtime_estimate_error:
                continue  # the work ahead running longer than expected would make it miss: no hold
            evidence["release_at"] = release_at.isoformat()
            evidence["latest_start_s"] = latest
            reason = (f"{where}: planned start in {start / 60:.0f} min on today's GPUs (proven plan, every deadline"
                      f" holds); held until {_when(release_at)} so that the urgent Workloads are admitted first")
            uid, version = versions.get(job.name, (None, None))
            holds.append((start, Nudge(NudgeAction.hold, ns, name, reason, release_at=release_at, evidence=evidence, uid=uid,
                                       resource_version=version)))
    for ref, hold in held.items():
        if ref not in seen:
            ns, _, name = ref.partition("/")
            releases.append(Nudge(NudgeAction.release, ns, name, "in no deadline plan any more: released",
                                  evidence={"hold": hold}))
    holds = [(at, _over_mark(n, unrecorded)) for at, n in holds]
    holds.sort(key=lambda h: -h[0])
    frozen = held_back or {}
    free = [n for _, n in holds if n.ref not in frozen]
    capped = [n if i < policy.max_holds_per_run else
              replace(n, reason=f"over the cap of {counted(policy.max_holds_per_run, 'hold')} per run", outcome=Outcome.deferred)
              for i, n in enumerate(free)]
    skipped = [replace(n, reason=f"{HELD_BACK}{frozen[n.ref]}", outcome=Outcome.skipped)
               for _, n in holds if n.ref in frozen]
    return releases + capped + skipped


def with_kueue_order(pools: Sequence[PoolPlan], workloads: pd.DataFrame, *,
                     recorded: RecordedHolds | None = None) -> list[PoolPlan]:
    """Each pool with the deadlines its plan meets and those Kueue's own order, untouched by gpuaas, would meet
    (``versus_kueue``): what the plan adds, shown beside it; None where the order cannot be played. ``recorded``:
    as for ``plan_nudges`` (a demotion's recorded priority is read only from a mark gpuaas recorded)."""
    keys = _kueue_keys(workloads, _marks(workloads, recorded)[0])
    return [replace(pool, versus_kueue=_versus_kueue_order(pool, keys)) for pool in pools]


def _kueue_keys(workloads: pd.DataFrame, held: Mapping[str, Mapping[str, Any]]) -> dict[str, QueueKey]:
    """Kueue's order without gpuaas: a demoted Workload at the priority its mark recorded."""
    return queue_keys(workloads, {ref: mark["before"]["priority"] for ref, mark in held.items() if is_demotion(mark)})


def _versus_kueue_order(pool: PoolPlan, keys: Mapping[str, QueueKey]) -> tuple[int, int] | None:
    """The deadlines the plan meets and those Kueue's own order would meet (None where it cannot be played)."""
    kueue = kueue_order_on_time(pool.problem.jobs, pool.problem.capacity, keys, queues=pool.problem.queues)
    if kueue is None:
        return None
    return on_time_count(pool.problem.jobs, {s.name: s.end for s in pool.plan.schedule}), kueue


def _given_up(pool: PoolPlan, policy: DeadlinesPolicy) -> set[str]:
    """Pending Workloads whose deadline is lost even at the shortest run time the estimate's error allows."""
    if not policy.give_up_lost:
        return set()
    return {job.name for job in pool.problem.jobs
            if job.running_for is None and job.deadline is not None
            and job.earliest_start + job.duration / policy.runtime_estimate_error > job.deadline + EPS}


RELEASE_TIME = "%Y-%m-%d %H:%M UTC"
"""How a hold's or a demotion's release time is written, in its reason and in ``plan deadlines``: with the date,
always, as the reason is also read later (an audit row, a Kubernetes Event) when "05:08" no longer says which day."""


def _when(at: datetime) -> str:
    """``at`` as a release time is written: ``2026-12-08 05:08 UTC``."""
    return utc_stamp(at, RELEASE_TIME)


def _give_up(job: DeadlineJob, where: str, now: datetime, policy: DeadlinesPolicy,
             evidence: dict[str, Any], seen: tuple[str | None, str | None] | None) -> Nudge:
    ns, _, name = job.name.partition("/")
    uid, version = seen or (None, None)
    release_at = now + timedelta(minutes=policy.give_up_lease_minutes)
    deadline = job.deadline or 0.0
    when = f"{deadline / 60:.0f} min from now" if deadline >= 0 else f"{-deadline / 60:.0f} min ago"
    backoff = f" once its requeue backoff ends in {job.earliest_start / 60:.0f} min" if job.earliest_start else ""
    reason = (f"{where}: deadline lost (due {when}, expected to run {job.duration / 60:.0f} min{backoff}, lost even if "
              f"{policy.runtime_estimate_error:g}x shorter); given up: demoted one priority below its own, so that "
              f"the Workloads that can still meet theirs are admitted first, until {_when(release_at)} unless "
              f"the next run renews it")
    return Nudge(NudgeAction.demote, ns, name, reason, release_at=release_at,
                 evidence=evidence | {"given_up": True, "release_at": release_at.isoformat()}, uid=uid,
                 resource_version=version)


def _unenforceable(pool: PoolPlan, starts: Mapping[str, Any], margin: float, given_up: set[str]) -> list[str]:
    """Pending Workloads of the pool that Kueue may admit into a gap the plan counts on, and gpuaas may not hold."""
    out = list(pool.problem.uncontrolled)
    lost = set(pool.plan.missed)
    for job in pool.problem.jobs:
        if job.running_for is not None:
            continue
        scheduled = starts.get(job.name)
        if job.name in given_up or (job.name in lost and scheduled is None):
            out.append(job.name)
        elif job.deadline is None and scheduled is not None and (
                scheduled.start is None or scheduled.start > max(margin, job.earliest_start) + EPS):
            out.append(job.name)  # a start that is unknown (after a job of unknown end) is later than any margin
    return out


def _rounded(seconds: float | None) -> float | None:
    """A planned time for the audit row; ``None`` (unknown: a job of unknown run time) stays ``None``."""
    return None if seconds is None else round(seconds, 1)


def _release_reason(hold: Mapping[str, Any], now: datetime, proven: bool, start: float | None,
                    margin: float, loose: bool = False, needless: tuple[int, int] | None = None,
                    evicting: Sequence[str] = ()) -> str | None:
    """Why a hold is released now, or None to keep it. ``needless``: the plan's and Kueue's order's deadlines met,
    where Kueue's order meets as many. ``evicting``: which pending Workload may preempt which job the plan runs."""
    if release_is_due(hold, now):
        return f"release time {hold.get('release_at', '(unreadable)')} has come"
    if loose:
        return ("pending Workloads the plan cannot hold (no run time, best effort, or a lost deadline) could take "
                "the gaps it counts on: released")
    if evicting:
        return (f"Kueue's preemption rules let a pending Workload evict one the plan runs "
                f"({evicting[0]}): released")
    if not proven:
        return "the plan no longer proves every deadline holds on today's GPUs: released"
    if needless is not None:
        return (f"Kueue's own order meets as many deadlines on the same estimates ({needless[1]} of the plan's "
                f"{needless[0]}): no hold is needed, released")
    if start is None:
        return "no longer in the plan's schedule: released"
    if start <= margin:
        return f"the new plan starts it in {start / 60:.0f} min: released"
    if not release_is_due(hold, now + timedelta(seconds=start - margin + 60)):
        return "the new plan starts it before the held release time: released"
    return None
