"""The deadline problem of a live cluster: one pool per cohort and GPU flavor, read off a snapshot.

Why per cohort and flavor: GPUs are shared inside a Kueue cohort (what one ClusterQueue does not
use, another borrows), never across cohorts, and a workload admitted on one flavor cannot use
another's GPUs. So a pool's capacity is the cohort's nominal GPU quota of that flavor (a
ClusterQueue without a cohort is a pool of its own), and the planner sees each pool alone.

Which workloads, and how they enter (times in seconds from the snapshot's ``collected_at``):
- admitted or quota-reserved: running on their flavor since ``admitted_at``; their run time is the
  annotation or Kueue's maximum execution time; without either they are assumed to hold their
  GPUs past every deadline of the pool (said in a note: never a silent guess).
- pending and active, with a deadline and a run time: pending on the first GPU flavor of their
  ClusterQueue (the one Kueue tries first). With a run time and no deadline: best-effort work.
  Deactivated workloads (``spec.active: false``) are not queued and are left out, except those
  gpuaas itself holds for the plan (``gpuaas.io/deadline-hold``): they are still pending work.
- a pending job larger than its pool can never be admitted there: it is ``missed``, with a note.

Pure: the snapshot in, the plans out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import pandas as pd

from gpuaas.models import Snapshot, WorkloadState
from gpuaas.policies.deadlines import DeadlineJob, DeadlinePlan, MilpLimits, plan_deadlines

__all__ = ["PoolPlan", "PoolProblem", "deadline_problems", "plan_pools"]

NO_COHORT = "-"
_HOLDING = (WorkloadState.admitted.value, WorkloadState.quota_reserved.value)


@dataclass(frozen=True)
class PoolProblem:
    """One cohort/flavor pool: its GPUs and the jobs on it, named ``namespace/name``."""

    cohort: str
    flavor: str
    capacity: int
    jobs: tuple[DeadlineJob, ...]
    too_big: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    uncontrolled: tuple[str, ...] = ()
    """Pending Workloads of the pool the plan cannot place (no run time): Kueue may admit them into any gap."""
    inexact: tuple[str, ...] = ()
    """Why one number of GPUs does not model what each queue of the pool can reach (then the plan is not exact)."""


@dataclass(frozen=True)
class PoolPlan:
    """A pool's problem and its plan; ``at_risk_count`` counts at-risk and missed deadlines."""

    problem: PoolProblem
    plan: DeadlinePlan
    missed: tuple[str, ...] = field(default=())

    @property
    def at_risk_count(self) -> int:
        return len(self.plan.at_risk) + len(self.missed)


def _pool_key(cohort: object, cluster_queue: object) -> str:
    return str(cohort) if isinstance(cohort, str) and cohort else f"{NO_COHORT}{cluster_queue}"


def _capacities(snapshot: Snapshot, gpu_resources: Sequence[str]) -> tuple[dict[tuple[str, str], int], dict[str, str]]:
    """GPUs per (pool, flavor), and each ClusterQueue's first GPU flavor."""
    quotas = snapshot.quotas
    caps: dict[tuple[str, str], int] = {}
    first: dict[str, str] = {}
    if quotas.empty:
        return caps, first
    gpu = quotas[quotas["resource"].isin(list(gpu_resources))]
    for row in gpu.itertuples(index=False):
        key = (_pool_key(row.cohort, row.cluster_queue), str(row.flavor))
        caps[key] = caps.get(key, 0) + int(math.floor(float(row.nominal) + 1e-9))
        first.setdefault(str(row.cluster_queue), str(row.flavor))
    return caps, first


def _limited(snapshot: Snapshot, gpu_resources: Sequence[str]) -> dict[tuple[str, str], list[str]]:
    """(pool, flavor) -> the queues whose borrowingLimit or lendingLimit splits the pool's GPUs.

    Why: the plan treats a cohort's GPUs as one pool that any of its queues may fill, which is what
    Kueue does only without limits; with them a job may not reach GPUs the plan counts on, so the
    plan is not exact there and holds nothing. A cohort of one queue is its nominal quota either way.
    """
    quotas = snapshot.quotas
    out: dict[tuple[str, str], list[str]] = {}
    if quotas.empty or not {"borrowing_limit", "lending_limit"} <= set(quotas.columns):
        return out
    gpu = quotas[quotas["resource"].isin(list(gpu_resources))]
    members: dict[tuple[str, str], set[str]] = {}
    for row in gpu.itertuples(index=False):
        members.setdefault((_pool_key(row.cohort, row.cluster_queue), str(row.flavor)), set()).add(str(row.cluster_queue))
    for row in gpu.itertuples(index=False):
        limits = [f"{name} {float(value):g}" for name, value in (("borrowingLimit", row.borrowing_limit),
                                                                  ("lendingLimit", row.lending_limit))
                  if value is not None and not pd.isna(value)]
        key = (_pool_key(row.cohort, row.cluster_queue), str(row.flavor))
        if limits and isinstance(row.cohort, str) and row.cohort and len(members[key]) > 1:
            out.setdefault(key, []).append(f"{row.cluster_queue} has {', '.join(limits)}")
    return out


def _held(wl: object) -> bool:
    """Deactivated by gpuaas's own deadline hold: still queued work as far as the plan goes."""
    value = getattr(wl, "deadline_hold", None)
    return isinstance(value, str) and bool(value)


def _seconds_until(now: pd.Timestamp, value: object) -> float | None:
    if value is None or pd.isna(value):
        return None
    return float((pd.Timestamp(value) - now).total_seconds())


def deadline_problems(snapshot: Snapshot, gpu_resources: Sequence[str] = ("nvidia.com/gpu",)) -> list[PoolProblem]:
    """Every cohort/flavor pool with GPU quota, sorted by cohort and flavor."""
    caps, first_flavor = _capacities(snapshot, gpu_resources)
    wls = snapshot.workloads
    if wls.empty or "deadline_at" not in wls:
        limited = _limited(snapshot, gpu_resources)
        return [replace(_problem(key, caps[key], [], []), inexact=_inexact(limited.get(key, []))) for key in sorted(caps)]
    now = pd.Timestamp(snapshot.collected_at)
    pools: dict[tuple[str, str], list[tuple[DeadlineJob | None, str, float | None]]] = {}
    notes: dict[tuple[str, str], list[str]] = {}
    blind: dict[tuple[str, str], list[str]] = {}
    for wl in wls[wls["gpus"] > 0].itertuples(index=False):
        ref = f"{wl.namespace}/{wl.name}"
        holding = wl.state in _HOLDING
        if holding:
            flavor = str(wl.flavor).split(",")[0] if isinstance(wl.flavor, str) and wl.flavor else None
        elif wl.state == WorkloadState.pending.value and (bool(wl.active) or _held(wl)):
            flavor = first_flavor.get(str(wl.cluster_queue))
        else:
            continue
        if flavor is None:
            continue
        key = (_pool_key(wl.cohort, wl.cluster_queue), flavor)
        if key not in caps:
            continue
        gpus = int(math.ceil(float(wl.gpus) - 1e-9))
        if gpus != float(wl.gpus):
            notes.setdefault(key, []).append(f"{ref} asks for {float(wl.gpus):g} GPUs; planned as {gpus}")
        runtime = None if pd.isna(wl.runtime_seconds) else float(wl.runtime_seconds)
        deadline = _seconds_until(now, wl.deadline_at)
        if holding:
            since = _seconds_until(now, wl.admitted_at)
            ran = max(0.0, -since) if since is not None else 0.0
            duration = runtime if runtime is not None else math.inf
            if runtime is not None and ran >= runtime:
                duration = ran + overrun_buffer(runtime)
                notes.setdefault(key, []).append(
                    f"{ref} has run {ran / 60:.0f} min, past its expected {runtime / 60:.0f} min: planned to hold its "
                    f"GPUs {overrun_buffer(runtime) / 60:.0f} min more")
            job = DeadlineJob(ref, gpus, duration, deadline, flavor, ran)
            pools.setdefault(key, []).append((job, ref, runtime))
        elif runtime is not None:
            pools.setdefault(key, []).append((DeadlineJob(ref, gpus, runtime, deadline, flavor), ref, runtime))
        else:
            blind.setdefault(key, []).append(ref)
    # Every pool, with or without deadlines: "0 extra GPUs" is a signal too (a node-pool scaler that
    # hears nothing for a pool must not scale it down on silence, nor keep it up forever).
    limited = _limited(snapshot, gpu_resources)
    return [replace(_problem(key, caps[key], pools.get(key, []), notes.get(key, [])),
                    uncontrolled=tuple(blind.get(key, [])), inexact=_inexact(limited.get(key, [])))
            for key in sorted(caps)]


def _inexact(limited: list[str]) -> tuple[str, ...]:
    if not limited:
        return ()
    return (f"{'; '.join(limited)}: the pool's GPUs are not one pool every queue may fill, so the plan is "
            "not exact and holds nothing",)


def overrun_buffer(runtime: float) -> float:
    """How much longer a job past its expected run time is assumed to hold its GPUs: half of it, at least 30 min.

    Why not drop it from the plan: it still holds its GPUs, and a plan that counts them free
    schedules an urgent job into GPUs that are not there.
    """
    return max(0.5 * runtime, 1800.0)


def _problem(key: tuple[str, str], cap: int, entries: list[tuple[DeadlineJob | None, str, float | None]],
             notes: list[str]) -> PoolProblem:
    horizon = max((j.deadline for j, _, _ in entries if j is not None and j.deadline is not None), default=0.0)
    jobs: list[DeadlineJob] = []
    too_big: list[str] = []
    held = 0
    for job, ref, runtime in entries:
        assert job is not None
        if job.running_for is not None:
            if runtime is None:
                notes.append(f"{ref} is running with no run time: assumed to hold its GPUs past every deadline")
                job = DeadlineJob(ref, job.gpus, job.running_for + max(horizon, 0.0) + 1.0, job.deadline,
                                  job.resource, job.running_for)
            held += job.gpus
            if held > cap:
                notes.append(f"{ref}: running GPUs exceed the pool's {cap} nominal GPUs; not planned")
                held -= job.gpus
                continue
        elif job.gpus > cap:
            too_big.append(ref)
            notes.append(f"{ref} asks for {job.gpus} GPUs, more than the pool's {cap}: it cannot be admitted here")
            continue
        jobs.append(job)
    return PoolProblem(key[0], key[1], cap, tuple(jobs), tuple(too_big), tuple(notes))


def plan_pools(problems: Sequence[PoolProblem], limits: MilpLimits | None = None) -> list[PoolPlan]:
    """The plan of every pool; a job too big for its pool joins the plan's ``missed``."""
    out = []
    for problem in problems:
        plan = plan_deadlines({problem.flavor: problem.capacity}, problem.jobs, limits=limits)
        if problem.inexact:
            plan = replace(plan, exact=False, messages=[*plan.messages, *problem.inexact])
        out.append(PoolPlan(problem, plan, missed=tuple(plan.missed) + problem.too_big))
    return out
