"""Deadline nudges, as one use case: from a snapshot to audited holds and releases, without Prefect.

The path of one run, in order (every caller takes it: the ``deadlines`` flow, the flow replay, the tests):

1. ``release_sweep`` (any mode): close the release intents a killed run left open (from the objects,
   writing nothing to them), then release every held Workload whose ``release_at`` has come, read
   from the Workload objects alone. It comes first and needs no snapshot, so a run whose collect or
   plan fails later has already released; a hold is gpuaas's own change, so it is undone in dry-run too.
2. ``plan``: the whole decision, pure. The pools (one per cohort tree and GPU flavor) and their
   plans, then the nudges with their reasons, holds capped per run. On a degraded snapshot (a required
   source failed) holds and demotions are decided and shown, never written, as everywhere in gpuaas;
   releases still are, since they only give Kueue its own order back. What is already held is read
   from the snapshot's Workloads (the ``gpuaas.io/deadline-hold`` annotation), and counted only where
   the audit log proves gpuaas wrote that mark and it still holds (``recorded_holds``: read once per
   run, in one query, before the plan, by the rule a release proves). Anyone who may edit a Workload
   may write the annotation: any other mark is planned as not held (the Workload may be held or
   demoted like any other, the hold's mark written over it) and said in its pool's notes. A tenant a
   change freeze holds back is found by its namespaces and, for Workloads elsewhere, its ClusterQueues:
   while such a tenant names a ClusterQueue the snapshot lacks (``misnamed``), the freeze may miss
   Workloads of its real queue, so no hold or demotion is written in apply mode (``apply``).
3. ``apply``: per nudge, the intent row, the write (a hold only in apply mode), the completion row.
   A hold or demotion is written only on the Workload the snapshot read (same uid and resourceVersion).
   No recovery step for holds: a hold interrupted before its write left the object unheld and is
   decided again; one interrupted after it is on the object, and the next plan keeps or releases it.
   A release interrupted either way is closed by the next sweep (step 1).

``plan_problem`` is the planner of one pool on a problem written by hand: what ``gpuaas plan deadlines FILE`` calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from gpuaas.misnamed_queues import DEADLINES_MEANING, misnamed_queues
from gpuaas.models import Outcome, Snapshot
from gpuaas.policies.deadlines import (
    DeadlineJob,
    DeadlinePlan,
    Nudge,
    NudgeAction,
    PoolPlan,
    RecordedHolds,
    counts_as_held,
    deadline_problems,
    due_release,
    plan_deadlines,
    plan_nudges,
    plan_pools,
    snapshot_marks,
    with_kueue_order,
)
from gpuaas.policy import DeadlinesPolicy, FreezeOn, Mode, Policy

if TYPE_CHECKING:  # the writes load the Kubernetes client and SQLAlchemy; planning, in a REPL or from a file, does not
    from gpuaas.actions import KubeWriter
    from gpuaas.actions.deadline_holds import NudgeResult
    from gpuaas.store import Store

__all__ = ["DeadlinesPlan", "DeadlinesResult", "apply", "frozen_misnamed", "frozen_workloads", "plan", "plan_problem",
           "pool_plans", "recorded_holds", "release_sweep", "undo", "would_write"]


@dataclass(frozen=True)
class DeadlinesPlan:
    """One run's decision: every pool's plan and the nudges that follow from them; nothing left to decide."""

    at: datetime
    pools: tuple[PoolPlan, ...]
    nudges: tuple[Nudge, ...] = ()
    """Releases first (never capped), then demotions and holds, least urgent first; each with its reason and
    outcome (``planned``, or ``deferred`` over the cap). Empty when the run plans only."""
    misnamed: tuple[str, ...] = ()
    """One sentence per tenant a change freeze holds back that names a ClusterQueue the snapshot lacks
    (``frozen_misnamed``): in apply mode no hold or demotion is written while there is one."""
    recorded: RecordedHolds | None = None
    """The hold marks the plan counted as gpuaas's (``recorded_holds``); None: every mark (no audit log read)."""

    def holds_withheld(self) -> DeadlinesPlan:
        """The same plan with no hold or demotion written, each ``skipped`` for ``misnamed``; releases stay."""
        why = "not written: " + "; ".join(self.misnamed)
        return replace(self, nudges=tuple(replace(n, outcome=Outcome.skipped, reason=f"{n.reason}; {why}")
                                          if n.action is not NudgeAction.release and n.outcome == Outcome.planned
                                          else n for n in self.nudges))

    def releases_withheld(self, why: str) -> DeadlinesPlan:
        """The same plan with no release written: each planned release ``skipped`` for ``why``. A release
        is written in a dry-run too, so a run that decides for another instant than now must not make one
        (it would lift a hold the present plan still needs)."""
        return replace(self, nudges=tuple(replace(n, outcome=Outcome.skipped, reason=f"{n.reason}; {why}")
                                          if n.action is NudgeAction.release and n.outcome == Outcome.planned else n
                                          for n in self.nudges))

    @property
    def holds(self) -> tuple[Nudge, ...]:
        """The holds and demotions this run writes (or, in dry-run, would)."""
        return tuple(n for n in self.nudges if n.action in (NudgeAction.hold, NudgeAction.demote) and n.outcome == Outcome.planned)

    @property
    def at_risk(self) -> tuple[str, ...]:
        """Every deadline that does not hold on today's GPUs (``namespace/name``): at risk, then missed, per pool."""
        return tuple(ref for p in self.pools for ref in (*p.plan.at_risk, *p.missed))

    @property
    def extra_gpus(self) -> dict[str, int]:
        """The fewest extra GPUs per flavor that make every holdable deadline hold, summed over the pools."""
        out: dict[str, int] = {}
        for p in self.pools:
            out[p.problem.flavor] = out.get(p.problem.flavor, 0) + p.plan.extra_gpus.get(p.problem.flavor, 0)
        return out


@dataclass(frozen=True)
class DeadlinesResult:
    """What became of each nudge of a step (sweep, apply or undo), in the order they were carried out."""

    nudges: tuple[NudgeResult, ...] = ()

    def counts(self) -> dict[str, int]:
        """``{"hold applied": 1, "hold deferred": 1, ...}``: the run's log line."""
        out: dict[str, int] = {}
        for r in self.nudges:
            key = f"{r.nudge.action} {r.result}"
            out[key] = out.get(key, 0) + 1
        return out

    def of(self, outcome: Outcome) -> tuple[NudgeResult, ...]:
        return tuple(r for r in self.nudges if r.result == outcome)


def pool_plans(snapshot: Snapshot, *, recorded: RecordedHolds | None = None) -> tuple[PoolPlan, ...]:
    """The plan of every cohort-tree/flavor pool of ``snapshot``, beside the deadlines Kueue's own order would meet;
    what the rebalance flow's demand reads too. ``recorded``: the hold marks gpuaas recorded (``recorded_holds``);
    None counts every mark as a hold. Pure."""
    problems = deadline_problems(snapshot, recorded=recorded)
    return tuple(with_kueue_order(plan_pools(problems), snapshot.workloads, recorded=recorded))


def recorded_holds(snapshot: Snapshot, store: Store) -> RecordedHolds:
    """Which ``gpuaas.io/deadline-hold`` marks on the snapshot's Workloads are holds or demotions gpuaas recorded
    and that still hold: the audit rows about every id they name, read in one query, judged by the rule a release
    proves (same object, same ``before``, written, not released). What ``plan`` takes as ``recorded``."""
    from gpuaas.actions.deadline_holds import recorded_holds as proven

    return proven(store, ((m.uid, m.mark) for m in snapshot_marks(snapshot.workloads)))


def plan_problem(capacity: Mapping[str, int], jobs: Sequence[DeadlineJob]) -> DeadlinePlan:
    """The plan of one problem written by hand (GPUs per resource, the jobs): the planner every pool of ``plan``
    runs, so that a file checked by a person gets the answer the cluster would. Pure; bad input is a
    ``ConfigError`` naming the job and field."""
    return plan_deadlines(capacity, jobs)


def frozen_misnamed(snapshot: Snapshot, policy: Policy, held: Mapping[str, FreezeOn],
                    file: str = "policy.yaml") -> tuple[str, ...]:
    """The tenants of ``held`` (those a change freeze holds back now) that name a ClusterQueue the snapshot lacks,
    one sentence each: a Workload of the real queue outside the tenant's namespaces would be nudged past the
    freeze. Only a freeze is lost so (the deadlines flow reads no guarantee), so other tenants are not named. Pure."""
    return misnamed_queues(snapshot, policy, DEADLINES_MEANING, file=file, tenants=held) if held else ()


def plan(snapshot: Snapshot, policy: DeadlinesPolicy, now: datetime, *, nudge: bool = True,
         held: Mapping[str, FreezeOn] | None = None, misnamed: Sequence[str] = (),
         recorded: RecordedHolds | None = None) -> DeadlinesPlan:
    """The pools' plans and, with ``nudge``, the holds and releases that steer Kueue toward them. Pure.

    ``now`` is the instant the nudges are judged at (their ``release_at`` counts from it); the pools
    count from the snapshot's ``collected_at``, the instant the snapshot describes. ``held``: the tenants a
    change freeze holds back (``Policy.frozen_tenants``), whose Workloads are neither held nor demoted;
    ``misnamed``: ``frozen_misnamed``'s answer, kept on the plan for ``apply`` and the headline. ``recorded``:
    ``recorded_holds``'s answer, the only marks counted as holds; None (a replay, a plan with no audit log)
    counts every mark.
    """
    pools = pool_plans(snapshot, recorded=recorded)
    frozen = frozen_workloads(snapshot, held or {})
    nudges = plan_nudges(pools, snapshot.workloads, now, policy, frozen, recorded=recorded) if nudge else []
    if failed := snapshot.failed_sources:  # decided and shown, never written; a release only gives Kueue its own order back, so it still is
        why = f"{failed[0]} did not answer for this snapshot: no hold or demotion on a degraded snapshot"
        nudges = [n if n.action is NudgeAction.release or n.outcome == Outcome.skipped
                  else replace(n, reason=why, outcome=Outcome.skipped) for n in nudges]
    return DeadlinesPlan(now, pools, tuple(nudges), tuple(misnamed), recorded)


def would_write(deadlines_plan: DeadlinesPlan, snapshot: Snapshot, frozen: FreezeOn | None = None) -> tuple[Nudge, ...]:
    """What a run in apply mode at the plan's instant would write, for a plan that writes nothing (``gpuaas plan
    deadlines --from-cluster``): the releases its sweep would make (the holds of the snapshot's Workloads whose
    ``release_at`` has come), then the plan's own nudges but the releases of those same Workloads. A change freeze
    of the whole flow (``frozen``), or a frozen tenant's ClusterQueue the cluster lacks (the plan's ``misnamed``),
    turns its holds and demotions ``skipped``, as a run would. Pure.

    A Workload released by the sweep is planned here as still held: a run plans on a snapshot taken after its
    sweep, and may hold it again; this says only that its hold ends now. A mark the plan did not count (its
    ``recorded``) is one the sweep refuses to release: no release is listed for it."""
    marks = [m for m in snapshot_marks(snapshot.workloads) if counts_as_held(m.mark, m.uid, deadlines_plan.recorded)]
    due = [n for n in (due_release(m.namespace, m.name, m.text, deadlines_plan.at) for m in marks) if n is not None]
    swept = {n.ref for n in due}
    planned = [n for n in deadlines_plan.nudges if not (n.action is NudgeAction.release and n.ref in swept)]
    if frozen is not None:
        planned = [n if n.action is NudgeAction.release or n.outcome != Outcome.planned
                   else replace(n, outcome=Outcome.skipped, reason=f"{n.reason}; not written: {frozen}") for n in planned]
    if deadlines_plan.misnamed:
        planned = list(replace(deadlines_plan, nudges=tuple(planned)).holds_withheld().nudges)
    return (*due, *planned)


def frozen_workloads(snapshot: Snapshot, held: Mapping[str, FreezeOn]) -> dict[str, FreezeOn]:
    """``namespace/name`` -> its tenant's change freeze, for every Workload of a tenant in ``held``."""
    rows = snapshot.workloads
    if not held or rows.empty or "tenant" not in rows.columns:
        return {}
    mine = rows[rows["tenant"].isin(sorted(held))]
    return {f"{ns}/{name}": held[str(t)] for ns, name, t in mine[["namespace", "name", "tenant"]].itertuples(index=False)}


def release_sweep(workloads: Iterable[dict[str, Any]], store: Store, writer: KubeWriter, *, now: datetime,
                  flow_run_id: str | None) -> DeadlinesResult:
    """Release every Workload object in ``workloads`` held by gpuaas whose ``release_at`` has come; audited.

    First the release intents an earlier run left open are closed from their objects, so that the audit log
    says how each release ended before this run adds its own."""
    from gpuaas.actions.deadline_holds import recover_releases, release_due

    recover_releases(store, writer, flow_run_id=flow_run_id, now=now)
    return DeadlinesResult(tuple(release_due(workloads, store, writer, now, flow_run_id=flow_run_id)))


def apply(deadlines_plan: DeadlinesPlan, store: Store, writer: KubeWriter, *, mode: Mode, flow_run_id: str | None,
          now: datetime) -> DeadlinesResult:
    """Audit every nudge and carry out the planned ones: releases in any mode, holds only in apply mode, and there
    none while the plan's ``misnamed`` names a frozen tenant's ClusterQueue the cluster lacks (each ``skipped``).

    A hold: GET the Workload, refuse it when it is not the one the snapshot read (uid, resourceVersion) or
    no longer pending, active and unheld, the intent row, the merge patch at that version (its annotation
    names the intent row), the completion row; a 409 is never overwritten. ``now`` is taken for the same
    call as every use case's ``apply``; a nudge's own times (its ``release_at``) were fixed by ``plan``,
    so nothing here reads the clock.
    """
    from gpuaas.actions.deadline_holds import apply_nudges

    if mode is Mode.apply and deadlines_plan.misnamed:
        deadlines_plan = deadlines_plan.holds_withheld()
    return DeadlinesResult(tuple(apply_nudges(deadlines_plan.nudges, store, writer, mode=mode,
                                              flow_run_id=flow_run_id)))


def undo(store: Store, writer: KubeWriter, audit_ids: Sequence[int], *, flow_run_id: str | None) -> DeadlinesResult:
    """Release the holds named by their audit ids (intent or completion row), if each is still that hold."""
    from gpuaas.actions.deadline_holds import undo_holds

    return DeadlinesResult(tuple(undo_holds(store, writer, audit_ids, flow_run_id=flow_run_id)))
