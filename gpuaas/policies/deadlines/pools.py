"""The deadline problem of a live cluster: one pool per cohort tree and GPU flavor, read off a snapshot.

Why per cohort tree and flavor: GPUs are shared inside a Kueue cohort tree (what one ClusterQueue
does not use, another borrows; a Cohort object's own quota is shared by its subtree, and
``spec.parentName`` joins cohorts into a tree whose root pools it all), never across trees, and a
workload admitted on one flavor cannot use another's GPUs. So a pool's capacity is the tree's
nominal GPU quota of that flavor, its ClusterQueues' plus its Cohort objects' (a ClusterQueue
without a cohort is a pool of its own), and the planner sees each pool alone. The pool is named
after the tree's root cohort. Where a borrowingLimit or lendingLimit keeps a queue from reaching all
of it (``gpuaas.models._cohort_tree``), or the tree's parents loop, the pool is planned but not
exact and holds nothing.

Which workloads, and how they enter (times in seconds from the snapshot's ``collected_at``):
- admitted or quota-reserved: running on their flavor since ``admitted_at``; their run time is the
  annotation or Kueue's maximum execution time; without either their end is unknown (the
  planner's ``math.inf``): they hold their GPUs past every deadline of the pool, whether or not
  it has any, and the plan shows no end for them (said in a note: never a silent guess).
- pending and active, with a deadline and a run time: pending on the first GPU flavor of their
  ClusterQueue (the one Kueue tries first). With a run time and no deadline: best-effort work.
  Deactivated workloads (``spec.active: false``) are not queued and are left out, except those
  gpuaas itself holds for the plan (a ``gpuaas.io/deadline-hold`` mark gpuaas recorded): they are still
  pending work.
- a pending job larger than its pool can never be admitted there: it is ``missed``, with a note; so is one
  queued from a namespace its ClusterQueue's ``namespaceSelector`` does not select (``gpuaas.kueue_gaps``).

Pure: the snapshot in, the plans out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from gpuaas.kueue_gaps import missing_note, unselected_queues
from gpuaas.models import CohortTree, Snapshot, WorkloadState, inactive_queues
from gpuaas.phrases import counted, first_few
from gpuaas.policies.deadlines.kueue_order import ClusterQueues, Preemption
from gpuaas.policies.deadlines.marks import RecordedHolds, counts_as_held, parse_hold, uid_text, unrecorded_note
from gpuaas.policies.deadlines.problem import (
    MAX_TIME,
    DeadlineJob,
    DeadlinePlan,
    Inexact,
    MilpLimits,
    overrun_buffer,
    plan_deadlines,
)

__all__ = ["PoolPlan", "PoolProblem", "plan_pools", "pool_problems"]

NO_COHORT = "-"
_HOLDING = (WorkloadState.admitted.value, WorkloadState.quota_reserved.value)


@dataclass(frozen=True)
class PoolProblem:
    """One cohort-tree/flavor pool (``cohort`` is the root cohort): its GPUs and the jobs on it, named ``namespace/name``."""

    cohort: str
    flavor: str
    capacity: int
    jobs: tuple[DeadlineJob, ...]
    too_big: tuple[DeadlineJob, ...] = ()
    """Pending jobs larger than the pool, or in ``unselected``: never admitted there, so never planned (each
    ``missed``)."""
    notes: tuple[str, ...] = ()
    uncontrolled: tuple[str, ...] = ()
    """Pending Workloads of the pool the plan cannot place (no run time): Kueue may admit them into any gap."""
    inexact: tuple[str, ...] = ()
    """Why one number of GPUs does not model what each queue of the pool can reach (then the plan is not exact)."""
    by_priority: tuple[str, ...] = ()
    """ClusterQueues of the pool whose preemption compares priorities: no Workload of the pool is demoted."""
    past_estimate: tuple[str, ...] = ()
    """Running jobs past their expected run time, planned to hold their GPUs :func:`overrun_buffer` more."""
    queues: ClusterQueues = ClusterQueues()
    """Each job's ClusterQueue and each queue's nominal GPUs: Kueue's own order admits within nominal quota first."""
    unselected: tuple[str, ...] = ()
    """The jobs of ``too_big`` queued from a namespace their ClusterQueue's ``namespaceSelector`` does not select."""


@dataclass(frozen=True)
class PoolPlan:
    """A pool's problem and its plan; ``at_risk_count`` counts at-risk and missed deadlines."""

    problem: PoolProblem
    plan: DeadlinePlan
    missed: tuple[str, ...] = field(default=())
    versus_kueue: tuple[int, int] | None = None
    """The deadlines the plan meets and those Kueue's own order meets on the same GPUs and estimates
    (``with_kueue_order``); None where not played."""

    @property
    def at_risk_count(self) -> int:
        return len(self.plan.at_risk) + len(self.missed)


def _pool_key(tree: CohortTree, cluster_queue: str) -> str:
    """The root cohort of the queue's tree; ``-queue`` for a queue without a cohort (no cohort name starts with ``-``)."""
    root = tree.pool(cluster_queue)
    return root if root is not None else f"{NO_COHORT}{cluster_queue}"


def _whole(value: float) -> int:
    return int(math.floor(value + 1e-9))


def _capacities(snapshot: Snapshot, tree: CohortTree, gpu_resources: Sequence[str]
                ) -> tuple[dict[tuple[str, str], int], dict[str, str], dict[tuple[str, str], dict[str, int]]]:
    """GPUs per (pool, flavor): the tree's ClusterQueues' and Cohort objects' nominal quota; each queue's first GPU
    flavor; per (pool, flavor) each ClusterQueue's own nominal GPUs.

    A Cohort's quota of a flavor counts only in a pool where some ClusterQueue of the tree lists the
    flavor: Kueue lends a flavor only to a queue that lists it.
    """
    quotas = snapshot.quotas
    caps: dict[tuple[str, str], int] = {}
    first: dict[str, str] = {}
    own: dict[tuple[str, str], dict[str, int]] = {}
    if quotas.empty:
        return caps, first, own
    gpu = quotas[quotas["resource"].isin(list(gpu_resources))]
    inactive = inactive_queues(snapshot.quotas)
    for row in gpu.itertuples(index=False):
        key = (_pool_key(tree, str(row.cluster_queue)), str(row.flavor))
        caps[key] = caps.get(key, 0) + _whole(_usable(row, inactive))
        queues = own.setdefault(key, {})
        queues[str(row.cluster_queue)] = queues.get(str(row.cluster_queue), 0) + _whole(float(row.nominal))
        first.setdefault(str(row.cluster_queue), str(row.flavor))
    for root, flavor in list(caps):
        for cohort in [] if root.startswith(NO_COHORT) else tree.cohorts_under(root):
            for resource in gpu_resources:
                quota = tree.quota((True, cohort), (flavor, resource))
                caps[(root, flavor)] += _whole(quota.nominal) if quota is not None else 0
    return caps, first, own


def _usable(row: Any, inactive: Mapping[str, str]) -> float:
    """A quota cell's GPUs the pool's jobs can run on: Kueue leaves an inactive queue out of its scheduling snapshot,
    not its quota out of the cohort's, so others borrow all of it but what its lendingLimit keeps."""
    nominal = float(row.nominal)
    limit = getattr(row, "lending_limit", None)
    if str(row.cluster_queue) not in inactive or limit is None or pd.isna(limit):
        return nominal
    return min(nominal, float(limit))


def _inactive_notes(snapshot: Snapshot, tree: CohortTree, inactive: Mapping[str, str],
                    skipped: Mapping[str, int]) -> dict[str, list[str]]:
    """Per pool (root cohort), a sentence per inactive ClusterQueue of it: its pending work is not planned."""
    out: dict[str, list[str]] = {}
    for queue, why in sorted(inactive.items()):
        left = skipped.get(queue, 0)
        out.setdefault(_pool_key(tree, queue), []).append(
            f"{queue} is {why}: Kueue admits nothing into it, and the plan leaves out its "
            f"{counted(left, 'pending Workload')}; its quota still counts, as Kueue lends it to the cohort (but for "
            "what a lendingLimit keeps)")
    return out


def _split(tree: CohortTree, key: tuple[str, str], gpu_resources: Sequence[str]) -> tuple[str, ...]:
    """Why one number of GPUs does not model what each queue of the pool can reach; () when it does.

    The plan treats a pool's GPUs as one set that any of its queues may fill. That is what Kueue does
    when every ClusterQueue of the tree that lists the flavor reaches all of the tree's quota of it: no
    borrowingLimit or lendingLimit anywhere in the tree binds (a tree of one queue is its quota either
    way). Where a queue reaches less, a job may not get GPUs the plan counts on, so the plan holds nothing.
    """
    root, flavor = key
    queues = [] if root.startswith(NO_COHORT) else tree.queues_under(root)
    if not queues:
        return ()
    loop = tree.loop_words(queues[0])
    if loop is not None:
        return (f"{loop}; the plan is not exact and holds nothing",)
    out = []
    for resource in gpu_resources:
        fr = (flavor, resource)
        total = tree.total(root, fr)
        short = [(q, tree.reach(q, fr)) for q in queues if tree.quota((False, q), fr) is not None]
        short = [(q, r) for q, r in short if r < total - 1e-9]
        if short:
            reached = ", ".join(f"{q} reaches {r:g}" for q, r in short)
            out.append(f"{'; '.join(tree.limits(root, fr))}: not every queue can reach the pool's {total:g} GPUs "
                       f"({reached}), so the pool's GPUs are not one pool every queue may fill; the plan is not "
                       "exact and holds nothing")
    return tuple(out)


def _tree_notes(tree: CohortTree, key: tuple[str, str], gpu_resources: Sequence[str]) -> list[str]:
    """What makes the pool more than one cohort's ClusterQueues: the tree, Cohort quota, implicit parents."""
    root, flavor = key
    if root.startswith(NO_COHORT):
        return []
    cohorts = tree.cohorts_under(root)
    own = sum(q.nominal for c in cohorts for r in gpu_resources if (q := tree.quota((True, c), (flavor, r))))
    notes = []
    if len(cohorts) > 1 or own:
        notes.append(f"pool of cohort tree {root} (cohorts {', '.join(cohorts)}): its ClusterQueues' quota plus "
                     f"{own:g} GPUs of the Cohort objects' own quota")
    for cohort in cohorts:
        parent = tree.cohort_parent.get(cohort)
        if cohort in tree.explicit and parent is not None and parent not in tree.explicit:
            notes.append(f"cohort {cohort} names parent {parent}, which has no Cohort object: Kueue makes it an "
                         "empty cohort, and so does the plan")
    return notes


def _held(wl: object, recorded: RecordedHolds | None) -> bool:
    """Deactivated by gpuaas's own deadline hold (one it recorded): still queued work as far as the plan goes."""
    return counts_as_held(parse_hold(getattr(wl, "deadline_hold", None)), uid_text(getattr(wl, "uid", None)), recorded)


def _seconds_until(now: pd.Timestamp, value: object) -> float | None:
    if value is None or pd.isna(value):
        return None
    return float((pd.Timestamp(value) - now).total_seconds())


def pool_problems(snapshot: Snapshot, gpu_resources: Sequence[str] = ("nvidia.com/gpu",), *,
                  recorded: RecordedHolds | None = None) -> list[PoolProblem]:
    """Every cohort-tree/flavor pool with GPU quota, sorted by root cohort and flavor (``deadline_problems`` adds
    the work queued to a ClusterQueue that does not exist). ``recorded``: the hold marks gpuaas recorded
    (``marks``; None: every mark); a Workload with any other mark is planned as not held, said in a note."""
    tree = CohortTree.of(snapshot)
    caps, first_flavor, nominal = _capacities(snapshot, tree, gpu_resources)
    wls = snapshot.workloads
    if wls.empty or "deadline_at" not in wls:
        return [replace(_problem(key, caps[key], [], _tree_notes(tree, key, gpu_resources)),
                        inexact=_split(tree, key, gpu_resources)) for key in sorted(caps)]
    now = pd.Timestamp(snapshot.collected_at)
    inactive = inactive_queues(snapshot.quotas)
    skipped: dict[str, int] = {}
    pools: dict[tuple[str, str], list[tuple[DeadlineJob | None, str, float | None]]] = {}
    notes: dict[tuple[str, str], list[str]] = {}
    blind: dict[tuple[str, str], list[str]] = {}
    queue_of: dict[tuple[str, str], dict[str, str]] = {}
    unadmitted = unselected_queues(snapshot.data_quality)
    stranded: dict[tuple[str, str], list[DeadlineJob]] = {}
    noted: set[tuple[tuple[str, str], tuple[str, str]]] = set()
    for wl in wls[wls["gpus"] > 0].itertuples(index=False):
        ref = f"{wl.namespace}/{wl.name}"
        holding = wl.state in _HOLDING
        if holding:
            flavor = str(wl.flavor).split(",")[0] if isinstance(wl.flavor, str) and wl.flavor else None
        elif str(wl.cluster_queue) in inactive:  # pending in a queue Kueue admits nothing into: said in a note
            if wl.state == WorkloadState.pending.value and bool(wl.active):
                skipped[str(wl.cluster_queue)] = skipped.get(str(wl.cluster_queue), 0) + 1
            continue
        elif wl.state == WorkloadState.pending.value and (bool(wl.active) or _held(wl, recorded)):
            flavor = first_flavor.get(str(wl.cluster_queue))
        else:
            continue
        if flavor is None:
            continue
        key = (_pool_key(tree, str(wl.cluster_queue)), flavor)
        if key not in caps:
            continue
        if not holding and parse_hold(getattr(wl, "deadline_hold", None)) is not None and not _held(wl, recorded):
            notes.setdefault(key, []).append(unrecorded_note(ref))
        local = (str(wl.namespace), str(getattr(wl, "queue", "")))
        if not holding and local in unadmitted:  # Kueue never admits it, whatever the pool holds
            if (key, local) not in noted:
                noted.add((key, local))
                cluster_queue, gap = unadmitted[local]
                notes.setdefault(key, []).append(missing_note(*local, cluster_queue, wls, gap))
            if (due := _seconds_until(now, wl.deadline_at)) is not None:
                stranded.setdefault(key, []).append(DeadlineJob(
                    ref, int(math.ceil(float(wl.gpus) - 1e-9)), 0.0, min(max(due, -MAX_TIME), MAX_TIME), flavor))
            continue
        queue_of.setdefault(key, {})[ref] = str(wl.cluster_queue)
        gpus = int(math.ceil(float(wl.gpus) - 1e-9))
        if gpus != float(wl.gpus):
            notes.setdefault(key, []).append(f"{ref} asks for {float(wl.gpus):g} GPUs; planned as {gpus}")
        runtime = None if pd.isna(wl.runtime_seconds) else float(wl.runtime_seconds)
        if runtime is not None and runtime > MAX_TIME:  # past the planner's horizon (some 3 years): no run time it can use
            notes.setdefault(key, []).append(f"{ref}: a run time of {runtime:g} s is past the {MAX_TIME:,} s the plan "
                                             "covers; planned as unknown")
            runtime = None
        deadline = _seconds_until(now, wl.deadline_at)
        if deadline is not None:  # a deadline years away (or years ago) is at the planner's horizon: as far, and as lost
            deadline = min(max(deadline, -MAX_TIME), MAX_TIME)
        if holding:
            since = _seconds_until(now, wl.admitted_at)
            ran = max(0.0, -since) if since is not None else 0.0
            duration = runtime if runtime is not None else math.inf
            if runtime is not None and ran >= runtime:
                duration = ran + overrun_buffer(runtime, minute=60.0)
                notes.setdefault(key, []).append(
                    f"{ref} has run {ran / 60:.0f} min, past its expected {runtime / 60:.0f} min: planned to hold its "
                    f"GPUs {overrun_buffer(runtime, minute=60.0) / 60:.0f} min more")
            # Admitted years ago: what is left of its run is what the plan needs, and the planner's times end at
            # its horizon. Counted from there, as if it had run only that long.
            ran = min(ran, MAX_TIME - (duration - ran)) if math.isfinite(duration) else min(ran, MAX_TIME)
            duration = min(duration, MAX_TIME) if math.isfinite(duration) else duration
            job = DeadlineJob(ref, gpus, duration, deadline, flavor, ran)
            pools.setdefault(key, []).append((job, ref, runtime))
        elif runtime is not None:  # after an eviction with a requeue backoff, Kueue queues it at ``requeue_at``
            wait = _seconds_until(now, getattr(wl, "requeue_at", None))
            earliest = min(max(wait, 0.0), MAX_TIME) if wait is not None else 0.0
            if earliest:
                notes.setdefault(key, []).append(f"{ref} is in Kueue's requeue backoff for {earliest / 60:.0f} min more "
                                                 "(status.requeueState.requeueAt): planned to start no sooner")
            job = DeadlineJob(ref, gpus, runtime, deadline, flavor, earliest_start=earliest)
            pools.setdefault(key, []).append((job, ref, runtime))
        else:
            blind.setdefault(key, []).append(ref)
    # Every pool, with or without deadlines: "0 extra GPUs" is a signal too (a node-pool scaler that
    # hears nothing for a pool must not scale it down on silence, nor keep it up forever).
    by_priority = _by_priority(snapshot, tree)
    preemption = _preemption(snapshot)
    waiting = _waiting(wls, tree, caps, queue_of, recorded)
    for root, said in _inactive_notes(snapshot, tree, inactive, skipped).items():
        for key in caps:
            if key[0] == root:
                notes.setdefault(key, []).extend(said)
    out = []
    for key in sorted(caps):
        problem = _problem(key, caps[key], pools.get(key, []), [*_tree_notes(tree, key, gpu_resources),
                                                                *notes.get(key, []), *_blind_note(blind.get(key))])
        out.append(replace(problem, too_big=(*problem.too_big, *stranded.get(key, ())),
                           unselected=tuple(job.name for job in stranded.get(key, ())),
                           uncontrolled=tuple(blind.get(key, [])), inexact=_split(tree, key, gpu_resources),
                           by_priority=by_priority.get(key[0], ()),
                           queues=ClusterQueues(queue_of.get(key, {}), nominal.get(key, {}),
                                                {cq: rules for cq, rules in preemption.items()
                                                 if _pool_key(tree, cq) == key[0]},
                                                tuple(waiting.get(key, ())))))
    return out


def _blind_note(refs: Sequence[str] | None) -> list[str]:
    """The pending Workloads the plan leaves out, said (a table of every job but these would read as all of
    them): with no run time there is no place to give them, and Kueue may admit them into any gap."""
    if not refs:
        return []
    one = len(refs) == 1
    return [f"{len(refs)} pending Workload{'' if one else 's'} without a run time (the gpuaas.io/expected-runtime "
            f"annotation) {'is' if one else 'are'} not planned; Kueue may admit {'it' if one else 'them'} into any "
            f"gap: {first_few(refs)}"]


def _by_priority(snapshot: Snapshot, tree: CohortTree) -> dict[str, tuple[str, ...]]:
    """Per pool (root cohort), its ClusterQueues whose preemption compares priorities."""
    quotas = snapshot.quotas
    if quotas.empty or "priority_preemption" not in quotas:
        return {}
    out: dict[str, list[str]] = {}
    for cq in sorted(set(quotas.loc[quotas["priority_preemption"].fillna(False).astype(bool), "cluster_queue"])):
        out.setdefault(_pool_key(tree, str(cq)), []).append(str(cq))
    return {k: tuple(v) for k, v in out.items()}


_RULES = ("within_cluster_queue", "reclaim_within_cohort")


def _preemption(snapshot: Snapshot) -> dict[str, Preemption]:
    """Each ClusterQueue's preemption rules, where one is other than Kueue's default ``Never``."""
    quotas = snapshot.quotas
    out = {}
    for row in quotas.drop_duplicates("cluster_queue").to_dict("records") if not quotas.empty else []:
        rules = {rule: row[rule] if isinstance(row[rule], str) and row[rule] else "Never" for rule in _RULES
                 if rule in quotas}
        if any(value != "Never" for value in rules.values()):
            out[str(row["cluster_queue"])] = Preemption(**rules)
    return out


def _waiting(wls: pd.DataFrame, tree: CohortTree, caps: dict[tuple[str, str], int],
             placed: dict[tuple[str, str], dict[str, str]],
             recorded: RecordedHolds | None) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """Per pool, the pending Workloads of its cohort tree's queues that it does not place (another flavor first, no
    GPUs, a queue without this flavor): Kueue may still preempt a job of the pool for them."""
    out: dict[tuple[str, str], list[tuple[str, str]]] = {}
    pending = wls[wls["state"] == WorkloadState.pending.value]
    for wl in pending.itertuples(index=False):
        if not (bool(wl.active) or _held(wl, recorded)):
            continue
        ref, cq = f"{wl.namespace}/{wl.name}", str(wl.cluster_queue)
        root = _pool_key(tree, cq)
        for key in caps:
            if key[0] == root and ref not in placed.get(key, {}):
                out.setdefault(key, []).append((ref, cq))
    return out


def _problem(key: tuple[str, str], cap: int, entries: list[tuple[DeadlineJob | None, str, float | None]],
             notes: list[str]) -> PoolProblem:
    jobs: list[DeadlineJob] = []
    too_big: list[DeadlineJob] = []
    held = 0
    for job, ref, runtime in entries:
        assert job is not None
        if job.running_for is not None:
            if runtime is None:  # its duration stays math.inf: the planner keeps its end unknown
                notes.append(f"{ref}: running with no run time, so assumed to hold its GPUs past every deadline")
            held += job.gpus
            if held > cap:
                notes.append(f"{ref}: running GPUs exceed the pool's {cap} nominal GPUs; not planned")
                held -= job.gpus
                continue
        elif job.gpus > cap:
            too_big.append(replace(job, name=ref))
            notes.append(f"{ref}: asks for {job.gpus} GPUs, more than the pool's {cap}, so it cannot be admitted here")
            continue
        jobs.append(job)
    past = tuple(ref for job, ref, runtime in entries
                 if job is not None and job.running_for is not None and runtime is not None and job.running_for >= runtime)
    return PoolProblem(key[0], key[1], cap, tuple(jobs), tuple(too_big), tuple(notes), past_estimate=past)


def plan_pools(problems: Sequence[PoolProblem], limits: MilpLimits | None = None) -> list[PoolPlan]:
    """The plan of every pool; a job too big for its pool joins the plan's ``missed``."""
    out = []
    for problem in problems:
        plan = plan_deadlines({problem.flavor: problem.capacity}, problem.jobs, limits=limits, minute=60.0)
        if problem.past_estimate:  # extended before planning: the planner saw their buffered run time only
            plan = replace(plan, schedule=[replace(s, past_estimate=True) if s.name in problem.past_estimate else s
                                           for s in plan.schedule])
        if problem.inexact:
            why = (*plan.inexact, Inexact.split_pool)
            plan = replace(plan, inexact=tuple(r for r in Inexact if r in why), messages=[*plan.messages,
                                                                                        *problem.inexact])
        out.append(PoolPlan(problem, plan, missed=tuple(plan.missed) + tuple(j.name for j in problem.too_big)))
    return out
