"""Rebalance, as one use case: from a snapshot and the queues' history to audited quota moves, without Prefect.

The path of one quota change, in order (the flow takes it; so can a test or a REPL):

1. ``read_audit_view``: the net quota change gpuaas itself made per queue and flavor over the last
   ``no_reversal_days``, and what its plans moved in the last 22 hours (``MOVES_WINDOW``), read from the
   audit log. The planner needs the first so as not to undo tonight what it did last night, the second so
   that a step and the total cap hold per night, however many runs there are; both are read beforehand
   and passed in as data, so ``plan`` stays pure.
2. ``plan``: the whole decision, pure. Per cohort the demand (``cohort_demands``), the planner's
   moves (``plan_quotas``) or why there are none (contradictory input, the same flavor's cpu or
   memory quota binding), and the borrowing a lowered quota creates; for the run, whether the
   snapshot or the history is degraded: such plans are recorded and never applied; and whether a
   tenant names a ClusterQueue the cluster lacks (``misnamed``): then nothing is applied at all.
3. ``apply``: in apply mode first the recovery of plans a killed run left half-applied (it
   changes the quotas the new plans are checked against); then per cohort with a plan the intent
   row, the patches (apply mode and a complete snapshot only) and the completion row, all in
   ``gpuaas.actions.quotas.apply_quota_plan``. A cohort whose quotas moved since the snapshot
   comes back ``changed``: the caller plans it again from a fresh one, never forces it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pandas as pd

from gpuaas.errors import ConfigError, PolicyError
from gpuaas.misnamed_queues import REBALANCE_MEANING, misnamed_queues
from gpuaas.models import Outcome, Snapshot
from gpuaas.policies.deadlines import PoolPlan
from gpuaas.policies.quotas import (
    CohortDemand,
    QuotaPlan,
    binding_resources,
    borrowing_flags,
    cohort_demands,
    deadline_gpus_per_queue,
    plan_quotas,
)
from gpuaas.policy import HELD_BACK, MAX_HISTORY_DAYS, MOVES_WINDOW, FreezeOn, Mode, Policy
from gpuaas.sources.kube import DEFAULT_GPU_RESOURCES, unmanaged_accelerators

if TYPE_CHECKING:  # the writes load the Kubernetes client and SQLAlchemy; planning (a replay, a REPL) does not
    from gpuaas.actions import KubeWriter
    from gpuaas.store import AuditEntry, Store

__all__ = ["GPU_RESOURCES", "CohortOutcome", "RebalanceAuditView", "RebalancePlan", "RebalanceResult", "apply",
           "degraded_reason", "gpu_cohorts", "history_window", "hold_frozen", "moves_window_start", "no_reversal_start",
           "plan", "plan_cohort", "read_audit_view"]

GPU_RESOURCES: tuple[str, ...] = DEFAULT_GPU_RESOURCES
"""The extended resources counted as GPUs when the caller names none (the collector's default)."""


@dataclass(frozen=True)
class CohortOutcome:
    """One cohort: its demand, its plan or why there is none, what the operator should know; after ``apply``,
    the plan's audit id and what became of it."""

    cohort: str
    demand: CohortDemand
    plan: QuotaPlan | None
    error: str | None = None
    """Why there is no plan (the result is then ``no plan``)."""
    plan_id: int | None = None
    result: Outcome = Outcome.planned
    message: str = ""
    flags: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RebalanceAuditView:
    """What the audit log says that a plan must respect, read once before planning."""

    recent_change: Mapping[tuple[str, str], int] = field(default_factory=dict)
    """(queue, flavor) -> net GPUs of quota gpuaas moved there within ``no_reversal_days``."""
    moved_24h: Mapping[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    """(queue, flavor) -> (GPUs gained, GPUs lost) by plans applied since ``moves_window_start``: the night's."""


@dataclass(frozen=True)
class RebalancePlan:
    """Every cohort of one run and its plan; nothing left to decide, only to record and (apply mode) carry out."""

    cohorts: list[CohortOutcome]
    degraded: str | None
    """Why the inputs are incomplete (a required source failed, the history was not read): plans are
    recorded and never applied. None when complete."""
    snapshot_id: int | None = None
    """The stored snapshot planned on, kept in each plan's evidence."""
    gpu_resources: tuple[str, ...] = GPU_RESOURCES
    manage_limits: bool = False
    """Whether applying moves lendingLimit and borrowingLimit with the quota (``rebalance.manage_limits``)."""
    misnamed: tuple[str, ...] = ()
    """One sentence per tenant naming a ClusterQueue the snapshot lacks (``misnamed_queues``): while there is one,
    ``apply`` writes nothing, as the tenant's change freeze and guarantee would hold none of its real queues."""

    @property
    def moved_gpus(self) -> int:
        """GPUs of quota the plans move, all cohorts together."""
        return sum(o.plan.moved_gpus for o in self.cohorts if o.plan is not None)


@dataclass(frozen=True)
class RebalanceResult:
    """What ``apply`` did: every cohort with its plan's audit id and outcome, and the recovery's rows."""

    cohorts: list[CohortOutcome]
    recovered: list[AuditEntry] = field(default_factory=list)
    """Completion rows of interrupted plans the recovery closed before this run's plans."""
    refused: tuple[str, ...] = ()
    """Why an apply run wrote nothing (``RebalancePlan.misnamed``): its plans were recorded as a dry-run's."""

    @property
    def changed(self) -> list[str]:
        """The cohorts whose quotas moved since the snapshot: to plan again from a fresh one."""
        return [o.cohort for o in self.cohorts if o.result == Outcome.changed]


def moves_window_start(now: datetime) -> datetime:
    """The earliest instant whose applied quota moves a run deciding at ``now`` counts as spent of the night's
    steps and total cap: ``MOVES_WINDOW`` (22 hours) before it, so that the previous nightly run's moves do
    not count and those of any run since do. The flow reads the audit log from there; a replay counts its
    own moves from there."""
    return now - MOVES_WINDOW


def no_reversal_start(now: datetime, days: float) -> datetime:
    """The earliest instant whose applied quota moves count toward a queue's net change for the no-reversal
    rule: ``days`` nights back, and the two hours ``MOVES_WINDOW`` leaves short of a day besides. A move made
    by the nightly run ``days`` nights ago is stamped a minute or so after that night's start, so a window of
    exactly ``days`` would count it on one night and not on the next, by seconds of start-time jitter; with
    the slack it counts on every night up to that one, as in the replay, which sums its last ``days`` nights.
    ``days`` 0 turns the rule off: no move counts, as none does in the replay."""
    if days <= 0:
        return now
    return now - timedelta(days=days) - (timedelta(days=1) - MOVES_WINDOW)


def history_window(history_days: float | None, policy: Policy) -> float:
    """The days of history a run plans on: ``history_days`` (a run's override) or the policy's. Raises
    ``ConfigError`` (field ``history_days``) outside (0, ``MAX_HISTORY_DAYS``]."""
    if history_days is None:
        return policy.rebalance.usage_lookback_days
    if not 0 < history_days <= MAX_HISTORY_DAYS:
        raise ConfigError(f"must be above 0 and at most {MAX_HISTORY_DAYS:g} days, got {history_days:g}",
                          field="history_days")
    return history_days


def read_audit_view(store: Store, policy: Policy, now: datetime) -> RebalanceAuditView:
    """The quota moves gpuaas made since ``no_reversal_start(now)``, net per queue and flavor, and
    those since ``moves_window_start(now)`` (the night's), gross.

    The windows end at the wall clock when ``now`` is later: the log holds no move after it, and a window
    that started later would leave out the moves made today, so a run given a future instant would find the
    night's whole cap and no move to keep from reversing (the windows have no upper end: a past ``now``
    counts every move since, never fewer)."""
    from gpuaas.actions.quotas import quota_moved_since, recent_quota_changes

    end = min(now, datetime.now(UTC))
    since = no_reversal_start(end, policy.rebalance.no_reversal_days)
    return RebalanceAuditView(recent_change=recent_quota_changes(store, since),
                              moved_24h=quota_moved_since(store, moves_window_start(end)))


def degraded_reason(snapshot: Snapshot, history_error: str | None = None) -> str | None:
    """Each required source that failed and the history's error, in one line; None when nothing failed."""
    failed = [f"{n}: {s.error or 'failed'}" for n, s in snapshot.sources.items() if s.required and not s.ok]
    if history_error:
        failed.append(f"history: {history_error}")
    return "; ".join(failed) or None


def plan_cohort(demand: CohortDemand, quotas: pd.DataFrame | None = None,
                gpu_resources: Sequence[str] = GPU_RESOURCES) -> CohortOutcome:
    """One cohort's decision from its demand: the planner's moves, or the sentence saying why there are none
    (never raised). Pure. ``quotas``: the snapshot's quota cells, so that no plan gives a queue GPUs its cpu or
    memory quota would not let it use (none: GPUs alone, as in a replay that models only them). A cohort with a GPU
    quota that is not a whole number of GPUs has none, the quota named: the planner moves whole GPUs."""
    if demand.not_whole:
        return CohortOutcome(demand.cohort, demand, None, error="; ".join(demand.not_whole), result=Outcome.no_plan)
    try:
        quota_plan = plan_quotas(demand.queues, demand.limits)
    except (ConfigError, PolicyError) as exc:
        return CohortOutcome(demand.cohort, demand, None, error=str(exc), result=Outcome.no_plan)
    binding = binding_resources(quotas if quotas is not None else pd.DataFrame(), quota_plan.changes, gpu_resources)
    if binding:
        return CohortOutcome(demand.cohort, demand, None, error="; ".join(binding), result=Outcome.no_plan)
    flags = borrowing_flags(demand, quota_plan) + quota_plan.notes
    return CohortOutcome(demand.cohort, demand, quota_plan, flags=flags)


def gpu_cohorts(snapshot: Snapshot, gpu_resources: Sequence[str] = GPU_RESOURCES) -> list[str]:
    """The cohorts whose ClusterQueues hold nominal quota of a GPU resource, sorted: the ones a plan covers."""
    quotas = snapshot.quotas
    if quotas.empty:
        return []
    gpu = quotas[quotas["resource"].isin(list(gpu_resources)) & quotas["cohort"].notna() & (quotas["cohort"] != "")]
    return sorted({str(c) for c in gpu["cohort"]})


def _no_such_cohort(snapshot: Snapshot, cohort: str, known: Sequence[str], gpu_resources: Sequence[str]) -> str:
    """Why ``--cohort`` names nothing to rebalance: no quota of the resources gpuaas manages, and what the cohort
    holds instead where it is an accelerator gpuaas does not (MIG slices, AMD GPUs): not "no GPUs" when it has some."""
    managed = ", ".join(gpu_resources)
    quotas = snapshot.quotas
    mine = quotas.loc[quotas["cohort"] == cohort, "resource"] if not quotas.empty else pd.Series(dtype=object)
    other = unmanaged_accelerators((str(r) for r in mine), gpu_resources)
    held = f"; it holds {', '.join(other)}, which gpuaas does not manage" if other else ""
    return (f"no cohort {cohort!r} holds {managed} quota in the cluster{held}"
            + (f" (those that do: {', '.join(known)})" if known else " (none does)"))


def hold_frozen(demand: CohortDemand, policy: Policy, held: Mapping[str, FreezeOn]) -> CohortDemand:
    """The cohort without the ClusterQueues of a tenant a change freeze holds back (``held``: tenant -> freeze):
    they keep their quota, the others plan among themselves, and a note says which and why. Pure."""
    frozen = {q.name: held[t.name] for q in demand.queues
              if (t := policy.tenant_for(None, q.name)) is not None and t.name in held}
    if not frozen:
        return demand
    notes = [f"{queue} keeps its quota: {HELD_BACK}{freeze}" for queue, freeze in sorted(frozen.items())]
    return replace(demand, queues=[q for q in demand.queues if q.name not in frozen], notes=[*demand.notes, *notes])


def plan(snapshot: Snapshot, history: pd.DataFrame, policy: Policy, *, audit: RebalanceAuditView | None = None,
         pools: Sequence[PoolPlan] = (), cohort: str | None = None, history_error: str | None = None,
         snapshot_id: int | None = None, gpu_resources: Sequence[str] = GPU_RESOURCES,
         held: Mapping[str, FreezeOn] | None = None, window_days: float | None = None,
         policy_file: str = "policy.yaml") -> RebalancePlan:
    """The whole decision for every cohort (only ``cohort`` when given). Pure.

    ``history``: the per-queue percentiles (``gpuaas.sources.queue_history``), empty when it could
    not be read (``history_error`` then says why, and the plan is degraded); ``pools``: the
    deadline plans, whose GPUs per queue are part of the demand; ``audit``: ``read_audit_view``'s answer;
    ``held``: the tenants a change freeze holds back (``Policy.frozen_tenants``), whose queues keep their quota;
    ``window_days``: the window ``history`` was read over (the policy's ``usage_lookback_days`` when None);
    ``policy_file``: the policy's file, as ``misnamed`` names it.
    Raises ``ConfigError`` (field ``cohort``) for a ``cohort`` that holds no GPU quota: a typo in a nightly
    job must not read as "nothing to rebalance".
    """
    audit = audit or RebalanceAuditView()
    if cohort is not None:
        known = gpu_cohorts(snapshot, gpu_resources)
        if cohort not in known:
            raise ConfigError(_no_such_cohort(snapshot, cohort, known, gpu_resources), field="cohort")
    demands = cohort_demands(snapshot, history, policy, deadline_gpus=deadline_gpus_per_queue(pools, snapshot),
                             recent_change=audit.recent_change, moved_24h=audit.moved_24h,
                             gpu_resources=gpu_resources, window_days=window_days,
                             cohorts=[cohort] if cohort else ())
    demands = [hold_frozen(d, policy, held or {}) for d in demands]
    return RebalancePlan(cohorts=[plan_cohort(d, snapshot.quotas, gpu_resources) for d in demands],
                         degraded=degraded_reason(snapshot, history_error), snapshot_id=snapshot_id,
                         gpu_resources=tuple(gpu_resources), manage_limits=policy.rebalance.manage_limits,
                         misnamed=misnamed_queues(snapshot, policy, REBALANCE_MEANING, file=policy_file))


def apply(rebalance_plan: RebalancePlan, store: Store, writer: KubeWriter, *, mode: Mode, flow_run_id: str | None,
          now: datetime) -> RebalanceResult:
    """Recover interrupted plans (apply mode), then record every cohort's plan and, in apply mode, carry it out.

    A plan whose policy names a ClusterQueue the cluster lacks (``RebalancePlan.misnamed``) is recorded as a
    dry-run's and nothing is written, the recovery's rollbacks neither: the result's ``refused`` says why.
    Not to be retried by its callers: a retry of a half-applied plan is what the audit log and the recovery
    guard against.
    """
    from gpuaas.actions.quotas import apply_quota_plan, recover_quota_plans

    refused = rebalance_plan.misnamed if mode is Mode.apply else ()
    if refused:
        mode = Mode.dry_run
    gpu = list(rebalance_plan.gpu_resources)
    recovered = []
    if mode is Mode.apply:
        recovered = recover_quota_plans(store, writer, flow_run_id=flow_run_id, now=now, gpu_resources=gpu,
                                        manage_limits=rebalance_plan.manage_limits)
    done = []
    for o in rebalance_plan.cohorts:
        if o.plan is None:
            done.append(o)
            continue
        evidence: dict[str, Any] = {"snapshot_id": rebalance_plan.snapshot_id, "notes": o.demand.notes,
                                    "flags": o.flags, "history_seconds": o.demand.history_seconds,
                                    "limits": o.demand.limits.__dict__}
        result = apply_quota_plan(store, writer, o.cohort, o.plan, mode=mode, degraded=rebalance_plan.degraded,
                                  flow_run_id=flow_run_id, evidence=evidence, gpu_resources=gpu,
                                  manage_limits=rebalance_plan.manage_limits)
        done.append(replace(o, plan_id=result.plan_id, result=result.outcome, message=result.message))
    return RebalanceResult(done, recovered, refused)
