"""Reclaim, as one use case: from a snapshot to audited stops, without Prefect.

The path of one decision, in order (every caller takes it: the flow, ``gpuaas reclaim``, the tests):

1. ``recover`` (apply mode): close the intents a killed run left open, from the objects themselves.
   First, because what it closes changes what the audit log says is already decided.
2. ``verdicts``: which GPU workloads are idle (the adaptive rows decided again from their history).
3. ``plan``: the whole decision, pure. Targets and their order, the tenants a change freeze holds
   back, what the audit log already decided for this window, what an undo restored inside it, what a guard of an
   earlier run found on an object that is unchanged since (``hold_unchanged``), and the cap; the audit log's answer
   is read beforehand by ``read_audit_view`` and passed in as data, so ``plan`` can be called in a REPL.
4. ``apply``: per decision, the intent row, the write (only in apply mode), the completion row; a skip or
   deferral unchanged since an earlier run's row points at it instead (``reclaim.record_skips_every_minutes``).

``decide`` is 2 and 3 with the audit read between them: what the flow and the command call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import pandas as pd

from gpuaas.actions import (
    ActionResult,
    KubeWriter,
    already_decided,
    execute_decisions,
    recently_restored,
    recover_interrupted,
)
from gpuaas.actions.reclaim import FLOW, last_row
from gpuaas.misnamed_queues import RECLAIM_MEANING, misnamed_queues
from gpuaas.models import Outcome, Snapshot
from gpuaas.policies.reclaim import (
    KEPT_BY_THE_OBJECT,
    Decision,
    GpuEvidence,
    LastRow,
    SkipCause,
    apply_adaptive,
    finalize_decisions,
    find_idle,
    plan_reclaim,
    still_held_back,
)
from gpuaas.policy import HELD_BACK, FreezeOn, Mode, Policy, WritingFlow
from gpuaas.store import AuditEntry, Store

__all__ = ["HELD_BACK_LOOKBACK", "AuditView", "ReclaimPlan", "apply", "decide", "hold_frozen", "hold_tenantless",
           "hold_unchanged", "plan", "propose", "read_audit_view", "recover", "verdicts"]

HELD_BACK_LOOKBACK = timedelta(hours=24)
"""How far beyond ``reclaim.record_skips_every_minutes`` a plan looks for the guard skips it may repeat: an unchanged
skip has a row at most one interval and one run old, so runs up to a day apart (a reclaim run by hand, a schedule of
hours) still skip it before the cap; after a longer pause the object is read live once, and its new row carries on.
A day of the flow's rows, in the narrow columns ``newest_rows`` reads, is one query of tens of milliseconds."""


@dataclass(frozen=True)
class AuditView:
    """What the audit log says that a plan must respect, read once before planning."""

    decided: Mapping[str, int] = field(default_factory=dict)
    """Idempotency key -> the audit id of the decision that already counts for this window."""
    restored: Mapping[tuple[str, str, str], tuple[int, datetime]] = field(default_factory=dict)
    """(kind, namespace, name) -> (audit id, time) of the latest undo inside the longest window."""
    guard_skips: Mapping[tuple[str, str, str], LastRow] = field(default_factory=dict)
    """(kind, namespace, name) -> the object's newest row, where it is a guard's skip (or failed stop) of a cause the
    object keeps (``KEPT_BY_THE_OBJECT``): ``hold_unchanged`` repeats it while the object is unchanged."""


@dataclass(frozen=True)
class ReclaimPlan:
    """Every idle target of one run and what becomes of it, most wasteful first; nothing left to decide."""

    mode: Mode
    decisions: list[Decision]
    cap: int
    record_skips_every: timedelta = timedelta(0)
    """``reclaim.record_skips_every_minutes``: an unchanged skip is recorded once per this (zero: every run)."""

    @property
    def targets(self) -> list[Decision]:
        """The decisions this run acts on (or, in dry-run, would)."""
        return [d for d in self.decisions if d.outcome == Outcome.planned]


def recover(store: Store, writer: KubeWriter, *, flow_run_id: str | None, now: datetime) -> list[AuditEntry]:
    """Close the apply intents, reclaims and restores, that a killed run left without a completion row."""
    return recover_interrupted(store, writer, flow_run_id=flow_run_id, now=now)


def verdicts(snapshot: Snapshot, policy: Policy, adaptive: pd.DataFrame | None = None) -> pd.DataFrame:
    """The idle verdict of every GPU workload; the rows of an adaptive rule decided again from ``adaptive``."""
    return apply_adaptive(find_idle(snapshot.workloads, policy, snapshot.collected_at), adaptive)


def propose(snapshot: Snapshot, idle: pd.DataFrame, policy: Policy, mode: Mode,
            wall_clock: datetime | None = None) -> list[Decision]:
    """The targets the verdicts give, each with its per-GPU evidence (the GPUs of the pods the verdict judged:
    those the snapshot links to the target's Workloads), before the audit log has a say."""
    evidence = GpuEvidence(snapshot.gpus, snapshot.workloads)
    out = []
    for d in plan_reclaim(snapshot, idle, policy, mode, wall_clock):
        window = d.evidence.get("base_window_minutes") or d.evidence["window_minutes"]
        gpus = evidence.of(d.namespace, d.evidence.get("workloads") or (), window)
        out.append(replace(d, evidence={**d.evidence, "gpus": gpus}))
    return out


def read_audit_view(store: Store, proposed: Sequence[Decision], now: datetime, *,
                    skips_every: timedelta = timedelta(0), wall_clock: datetime | None = None) -> AuditView:
    """The audit rows ``plan`` needs for ``proposed``: their keys' decisions, undos inside the longest window, and
    the guard skips an unchanged object keeps (``AuditView.guard_skips``: one read of each object's newest row written
    since ``wall_clock`` (or ``now``) less ``skips_every`` and ``HELD_BACK_LOOKBACK``, the reason of those alone)."""
    longest = max((float(d.evidence.get("window_minutes") or 0) for d in proposed), default=0.0)
    targets = {(d.kind, d.namespace, d.name) for d in proposed if d.outcome == Outcome.planned}
    newest = store.newest_rows(flow=FLOW, since=(wall_clock or now) - skips_every - HELD_BACK_LOOKBACK,
                               detail=KEPT_BY_THE_OBJECT) if targets else {}
    return AuditView(
        decided=already_decided(store, [d.idempotency_key for d in proposed if d.outcome == Outcome.planned]),
        restored=recently_restored(store, now - timedelta(minutes=longest)),
        guard_skips={key: last_row(row) for key, row in newest.items() if key in targets and row.cause in KEPT_BY_THE_OBJECT},
    )


def hold_frozen(decisions: Sequence[Decision], held: Mapping[str, FreezeOn]) -> list[Decision]:
    """The targets of a tenant a change freeze holds back, skipped and saying which freeze, so that they take no
    place under the cap; the rest as they were. Pure."""
    return [replace(d, outcome=Outcome.skipped, reason=f"{HELD_BACK}{held[d.tenant]}", cause=SkipCause.change_freeze)
            if d.outcome == Outcome.planned and d.tenant is not None and d.tenant in held else d for d in decisions]


def hold_tenantless(decisions: Sequence[Decision], misnamed: Sequence[str]) -> list[Decision]:
    """While a frozen tenant names a ClusterQueue the cluster lacks (``misnamed``, one sentence per tenant), the
    targets of no tenant skipped, saying why: a Workload queued in the ClusterQueue the typo meant belongs to no
    tenant, so its tenant's freeze would not hold it back. Those of a tenant are that tenant's, and stay. Pure."""
    if not misnamed:
        return list(decisions)
    why = "not stopped: " + "; ".join(misnamed)
    return [replace(d, outcome=Outcome.skipped, reason=why, cause=SkipCause.queue_misnamed)
            if d.outcome == Outcome.planned and d.tenant is None
            else d for d in decisions]


def hold_unchanged(decisions: Sequence[Decision], skips: Mapping[tuple[str, str, str], LastRow]) -> list[Decision]:
    """The targets an earlier run's guard held back for a cause the object keeps (a GitOps controller, a stop that did
    not hold), while the snapshot shows the object unchanged since (``still_held_back``: same uid and
    resourceVersion), skipped with that cause and naming that row, so that they take no place under the cap: the
    action would read them only to skip them again. ``skips``: ``AuditView.guard_skips``. The rest as they were.
    Pure."""
    out = []
    for d in decisions:
        last = skips.get((d.kind, d.namespace, d.name))
        found = (still_held_back(last, uid=d.uid, resource_version=d.resource_version)
                 if d.outcome == Outcome.planned else None)
        out.append(d if found is None else replace(d, outcome=Outcome.skipped, cause=found[0], reason=found[1]))
    return out


def plan(proposed: Sequence[Decision], audit: AuditView, policy: Policy, mode: Mode, now: datetime,
         held: Mapping[str, FreezeOn] | None = None, misnamed: Sequence[str] = ()) -> ReclaimPlan:
    """The whole decision: skip what a change freeze of its tenant holds back (``held``: tenant -> freeze, from
    ``Policy.frozen_tenants``) or might (``hold_tenantless``), what a guard found on an object unchanged since
    (``hold_unchanged``), what the window already decided or an undo restored, then cap by waste. Pure."""
    cap = policy.reclaim.max_actions_per_run
    kept = hold_unchanged(hold_tenantless(hold_frozen(proposed, held or {}), misnamed), audit.guard_skips)
    return ReclaimPlan(mode, finalize_decisions(kept, audit.decided, cap, audit.restored, now), cap,
                       timedelta(minutes=policy.reclaim.record_skips_every_minutes))


def decide(snapshot: Snapshot, idle: pd.DataFrame, policy: Policy, mode: Mode, store: Store, *, now: datetime,
           wall_clock: datetime | None = None, policy_file: str = "policy.yaml") -> ReclaimPlan:
    """``propose``, the audit log's answer, ``plan``: one run's decision, as the flow and the command make it.
    The tenants' change freezes are judged on ``wall_clock`` (the instant the run writes), or ``now``;
    ``policy_file`` is named where a tenant's ClusterQueue is to be fixed there."""
    proposed = propose(snapshot, idle, policy, mode, wall_clock)
    held = policy.frozen_tenants(WritingFlow.reclaim, wall_clock or now)
    misnamed = misnamed_queues(snapshot, policy, RECLAIM_MEANING, file=policy_file, tenants=held) if held else ()
    every = timedelta(minutes=policy.reclaim.record_skips_every_minutes)
    audit = read_audit_view(store, proposed, now, skips_every=every, wall_clock=wall_clock)
    return plan(proposed, audit, policy, mode, now, held, misnamed)


def apply(reclaim_plan: ReclaimPlan, store: Store, writer: KubeWriter, *, flow_run_id: str | None,
          now: datetime) -> list[ActionResult]:
    """Audit every decision and act on the targets: intent row, write (apply mode only), completion row.

    Not retried by its callers: a retry of a half-done write is what the intent rows and ``recover`` guard against.
    """
    return execute_decisions(reclaim_plan.decisions, store, writer, mode=reclaim_plan.mode, flow_run_id=flow_run_id,
                             now=now, record_skips_every=reclaim_plan.record_skips_every)
