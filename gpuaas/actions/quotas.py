"""Apply a quota plan to the ClusterQueues of a cohort, recover an interrupted one, undo one.

One plan, one audit id: the *intent* row (``action="quota-plan"``, kind ``Cohort``, outcome
``planned``) holds the whole plan (``before``/``after`` nominal quota per queue and flavor, the
reasons and demand evidence in ``evidence``, with ``manage_limits`` and, in apply mode, each moved
GPU entry as read and as the plan writes it, limits and the prior ``gpuaas.io/quota-plan``
included: ``_quota_record``); each patch is a ``quota-change`` row for its ClusterQueue
(before/after, the resourceVersion written, the entries in ``evidence``); a completion row
(``quota-plan`` again, ``applied`` | ``skipped`` | ``failed``, ``refers_to`` the intent) closes it.
``gpuaas undo PLAN_ID`` takes the intent's id; it, a rollback and the recovery write back the
recorded entries, never the limit rule run backwards (its clamps lose what was there).

Safety, in order:

* A plan from a degraded snapshot is recorded and never applied.
* Before the first write (and before the intent, which records what they hold) every queue of the
  plan is re-read; a nominal quota that differs from the plan's ``before`` (someone edited it, the
  cohort's total moved) ends the apply with outcome ``changed``, and the caller recomputes the plan
  from fresh data. Nothing is forced.
* Patches are ordered decreases first, then increases, so the cohort's total is never above its
  capacity: between two patches it is at most the original (a decrease has landed, its matching
  increase not yet), and equal once the plan is through. Kueue cannot be patched atomically
  across objects; a briefly smaller cohort only delays admission, a larger one would over-admit.
* Each patch carries the resourceVersion just read. A 409 is re-read once; if only the status
  moved (Kueue writes it all the time) the patch is retried on the new version, if the quota or a
  recorded limit moved the apply stops and what had landed is rolled back (same order rule).
* A run that dies mid-apply leaves an intent without completion: ``recover_quota_plans`` (the
  next run, under the same lock) rolls back whatever landed, per flavor, from the object's
  values (``after`` = landed, its entries included, ``before`` = not, anything else = someone
  else's change, left alone and named), then closes the intent. Rolling back rather than completing: the plan was
  made on evidence that is now old; the same run plans again from a fresh snapshot.
* A read or a write the API refuses (a 403 without the rebalancer role bound, any error but a
  409) closes the intent at once, ``failed``, naming the error and, for a 403, the role to bind;
  what had landed is rolled back as above. Nothing is left open for the recovery to mistake for
  an interrupted run.
* A patch whose answer is lost (``INDEFINITE``: it may have landed) is read back: landed, it is
  audited and rolled back with the rest; not landed, the apply stops as above. When the read-back
  fails too, nothing is rolled back or closed on a guess: the plan stays open, the result says so,
  and the next run's recovery settles it from the objects (a rollback the recovery finds landed
  without its row is audited then).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from gpuaas.actions._kube_writer import KubeWriter
from gpuaas.actions._quota_moves import (
    CHANGE_ACTION,
    FLOW,
    KIND,
    PLAN_ACTION,
    Ctx,
    Moves,
    Why,
    audit_found,
    audit_row,
    changed_words,
    holds,
    landed,
    move,
    moved_for,
    refused,
)
from gpuaas.actions._quota_patches import gpu_nominal, only
from gpuaas.actions._quota_record import RECORD_KEY, record_queue, records_evidence, records_of
from gpuaas.actions._quota_undo import undo_quota_plan
from gpuaas.errors import GpuaasError, NotFound
from gpuaas.models import Outcome
from gpuaas.phrases import counted
from gpuaas.policies.quotas import QuotaPlan, plan_to_dict
from gpuaas.policy import Mode
from gpuaas.store import AuditEntry, Store

__all__ = ["FLOW", "PLAN_ACTION", "QuotaApplyResult", "apply_quota_plan", "quota_moved_since", "recent_quota_changes",
           "recover_quota_plans", "undo_quota_plan"]

RECOVERY_LOOKBACK = timedelta(days=7)
NOT_THE_PLANS = "not the plan's"
OPEN_WORDS = "the plan is left open: the next run's recovery reads every queue and rolls back what landed"


@dataclass(frozen=True)
class QuotaApplyResult:
    plan_id: int
    outcome: Outcome
    """planned (dry-run) | applied | skipped (degraded, nothing to do) | changed (recompute) | failed (closed
    ``failed``, or, when a write's answer was lost and the queue could not be read back, left open for the next
    run's recovery: the message says so)"""
    message: str
    patched: list[str] = field(default_factory=list)


def _plan_moves(plan: QuotaPlan) -> Moves:
    out: Moves = {}
    for c in plan.changes:
        if c.after != c.before:
            out.setdefault(c.queue, {})[c.flavor] = (c.before, c.after)
    return out


def _reread(writer: KubeWriter, queues: Sequence[str]) -> tuple[dict[str, dict[str, Any]], GpuaasError | None]:
    """Every queue of the plan as it is now, up to the first read the API refuses (and that refusal).

    Read before the intent is written, so that the intent records what the first write replaces."""
    objs: dict[str, dict[str, Any]] = {}
    for queue in queues:
        try:
            objs[queue] = writer.get_cluster_scoped(KIND, queue)
        except GpuaasError as exc:
            return objs, exc
    return objs, None


def apply_quota_plan(store: Store, writer: KubeWriter, cohort: str, plan: QuotaPlan, *, mode: Mode,
                     degraded: str | None, flow_run_id: str | None, evidence: Mapping[str, Any],
                     gpu_resources: Sequence[str], manage_limits: bool = False) -> QuotaApplyResult:
    """Record the plan under one id; in apply mode (and only on a complete snapshot) carry it out."""
    before: dict[str, dict[str, int]] = {}
    after: dict[str, dict[str, int]] = {}
    for c in plan.changes:
        before.setdefault(c.queue, {})[c.flavor] = c.before
        after.setdefault(c.queue, {})[c.flavor] = c.after
    moves = _plan_moves(plan)
    applying = mode is Mode.apply and not degraded
    # A plan that moves nothing is still checked against the live quotas: a recovery earlier in this run
    # may have rolled an interrupted plan back, and a plan made before that is then stale, not finished.
    objs, unread = _reread(writer, list(before)) if applying else ({}, None)
    records = {q: record_queue(objs[q], m, gpu_resources, manage_limits) for q, m in moves.items() if q in objs}
    recorded = {RECORD_KEY: records_evidence(records)} if applying else {}
    ctx = Ctx(store, writer, 0, cohort, flow_run_id, gpu_resources, manage_limits)
    intent = audit_row(ctx, PLAN_ACTION, "Cohort", cohort, Outcome.planned,
                       f"{counted(plan.moved_gpus, 'GPU')} moved, weighted shortfall {plan.weighted_shortfall_before:g} -> "
                       f"{plan.weighted_shortfall:g}", mode=mode.value, before=before, after=after,
                       evidence={"plan": plan_to_dict(plan), "gpu_resources": list(gpu_resources), **evidence,
                                 "manage_limits": manage_limits, **recorded})
    ctx = Ctx(store, writer, int(intent.id or 0), cohort, flow_run_id, gpu_resources, manage_limits, records)

    def close(outcome: Outcome, message: str, patched: list[str] | None = None) -> QuotaApplyResult:
        audit_row(ctx, PLAN_ACTION, "Cohort", cohort, outcome, message, mode=mode.value)
        return QuotaApplyResult(ctx.plan_id, outcome, message, patched or [])

    if mode is not Mode.apply:
        return QuotaApplyResult(ctx.plan_id, Outcome.planned, "dry-run: nothing written")
    if degraded:
        return close(Outcome.skipped, f"degraded snapshot ({degraded}): a plan from it is never applied")
    for queue, flavors in before.items():
        if queue not in objs:  # nothing written yet: close the intent now, never leave it to the recovery
            if isinstance(unread, NotFound):
                return close(Outcome.changed, f"{queue}: ClusterQueue deleted since the plan; recompute")
            return close(Outcome.failed, f"nothing written: {refused(unread) if unread else 'not read'}")
        now = gpu_nominal(objs[queue], gpu_resources)
        differ = {f: now.get(f) for f, b in flavors.items() if now.get(f) != b}
        if differ:
            words = ", ".join(f"{f} {flavors[f]} -> {v}" for f, v in differ.items())
            return close(Outcome.changed, f"{queue}: quota changed since the plan ({words}); recompute, never forced")
    if not moves:
        return close(Outcome.skipped, "nothing to move")
    went = move(ctx, moves, Why.apply)
    if went.stopped is None:
        return close(Outcome.applied, f"{counted(len(went.done), 'patch', 'patches')}, decreases first", went.done)
    message = f"stopped after {counted(len(went.done), 'patch', 'patches')}: {went.stopped}"
    if went.unsettled:  # rolled back now, an increase that did land would leave the cohort above its capacity
        return _left_open(ctx, f"{message}; nothing rolled back", went.done)
    back = move(ctx, landed(moves, len(went.done)), Why.rollback)
    message += f"; rolled back {len(back.done)}" + (f"; rollback stopped: {back.stopped}" if back.stopped else "")
    if back.unsettled:
        return _left_open(ctx, message, went.done)
    return close(Outcome.failed, message, went.done)


def _left_open(ctx: Ctx, message: str, patched: list[str]) -> QuotaApplyResult:
    """A plan whose write may or may not have landed: no completion row (it would close the plan on a guess),
    so the next run's recovery, which reads every queue, rolls back whatever landed. ``failed``: the run is red."""
    return QuotaApplyResult(ctx.plan_id, Outcome.failed, f"{message}; {OPEN_WORDS}", patched)


def recover_quota_plans(store: Store, writer: KubeWriter, *, flow_run_id: str | None, now: datetime,
                        gpu_resources: Sequence[str], manage_limits: bool = False) -> list[AuditEntry]:
    """Roll back every applied-mode plan a crash left open; returns the completion rows appended.

    What landed goes back to the entries the intent recorded; ``manage_limits`` (this run's policy) only
    moves the limits of a queue whose intent recorded none."""
    rows = store.audit(flow=FLOW, since=now - RECOVERY_LOOKBACK, limit=None)
    closed = {r.refers_to for r in rows if r.action == PLAN_ACTION and r.refers_to is not None}
    out = []
    for intent in rows:
        if intent.action != PLAN_ACTION or intent.outcome != Outcome.planned or intent.mode != Mode.apply.value:
            continue
        if intent.id in closed:
            continue
        ctx = Ctx(store, writer, int(intent.id or 0), intent.name, flow_run_id, gpu_resources, manage_limits,
                  records_of(intent))
        back: Moves = {}
        foreign = []
        found = []
        mine_rows = [r for r in rows if r.action == CHANGE_ACTION and r.refers_to == intent.id]
        audited = {(r.name, f) for r in mine_rows if r.outcome == Outcome.applied for f in (r.before or {})}
        put_back = {(r.name, f) for r in mine_rows if r.outcome == Outcome.restored for f in (r.before or {})}
        for queue, flavors in (intent.after or {}).items():
            try:
                obj = writer.get_cluster_scoped(KIND, queue)
            except NotFound:
                foreign.append(f"{queue} deleted")
                continue
            prior = (intent.before or {}).get(queue, {})
            mine, theirs = _landed_here(ctx, queue, obj, prior, flavors)
            if mine:
                back[queue] = mine
            foreign += theirs
            _audit_unanswered(ctx, queue, obj, {f: m for f, m in mine.items() if (queue, f) not in audited})
            home = {f: (to, prior[f]) for f, to in flavors.items() if (queue, f) in audited - put_back
                    and f not in mine and prior.get(f) not in (None, to)}
            home = {f: m for f, m in home.items() if not holds(ctx, queue, obj, {f: m}, Why.rollback, target=True)}
            if home:  # a rollback that landed but whose answer (or row) never came: the change is undone
                audit_found(ctx, queue, obj, home, Why.rollback, "; recovered: this rollback had landed before the "
                            "interruption (its answer or audit row never came)")
                found.append(queue)
        rolled = move(ctx, back, Why.rollback)
        if rolled.unsettled:
            continue  # a rollback patch's outcome is unknown: the next run reads the objects again
        reason = (f"recovered: the run was interrupted mid-apply; rolled back {len(rolled.done)} of {len(back)} "
                  "queues that had landed" + (f"; {'; '.join(foreign)}" if foreign else "")
                  + (f"; the rollback of {', '.join(found)} had landed already (read back)" if found else "")
                  + (f"; rollback stopped: {rolled.stopped}" if rolled.stopped else ""))
        out.append(audit_row(ctx, PLAN_ACTION, "Cohort", intent.name, Outcome.failed, reason))
    return out


def _landed_here(ctx: Ctx, queue: str, obj: Mapping[str, Any], before: Mapping[str, int],
                 after: Mapping[str, int]) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """(flavor -> (landed, prior) of the moves of an interrupted plan that landed on ``queue``, someone else's
    changes in words): landed is the plan's ``after`` (nominal quota and, where recorded, every moved entry),
    not landed its ``before``, anything else someone else's."""
    live = gpu_nominal(obj, ctx.gpu_resources)
    record = ctx.records.get(queue)
    mine: dict[str, tuple[int, int]] = {}
    theirs: list[str] = []
    for f, to in after.items():
        frm = before.get(f)
        if frm is None or frm == to or live.get(f) == frm:
            continue
        if live.get(f) != to:
            theirs.append(f"{queue} {f} is {live.get(f)} (plan {frm} -> {to}), left alone")
            continue
        diffs = (record.differences(obj, ctx.gpu_resources, [f], landed=True)
                 if record is not None and record.covers([f]) else [])
        if diffs:
            theirs.append(f"{queue} {changed_words(diffs, NOT_THE_PLANS)[1]}, left alone")
            continue
        mine[f] = (to, frm)
    return mine, theirs


def _audit_unanswered(ctx: Ctx, queue: str, obj: Mapping[str, Any], moves: Mapping[str, tuple[int, int]]) -> None:
    """The change row of a patch that landed but whose run died before writing it (killed with the answer
    in flight). Without it the rollback's row alone would read as a net move gpuaas made, and the
    no-reversal rule would steer the next plan away from a fault-free run's."""
    if not moves:
        return
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    record = ctx.records.get(queue)
    evidence = ({"entries": {"before": only(record.before, moves), "after": only(record.after, moves)}}
                if record is not None and record.covers(moves) else {})
    audit_row(ctx, CHANGE_ACTION, KIND, queue, Outcome.applied,
              "recovered: this patch had landed before the interruption (its answer and audit row never came): "
              + ", ".join(f"{f} {frm} -> {to}" for f, (to, frm) in moves.items()),
              before={f: frm for f, (_, frm) in moves.items()},
              after={**{f: to for f, (to, _) in moves.items()}, "resourceVersion": rv}, evidence=evidence)


def recent_quota_changes(store: Store, since: datetime) -> dict[tuple[str, str], int]:
    """(queue, flavor) -> net quota change gpuaas made since ``since`` (applies, rollbacks and undos)."""
    out: dict[tuple[str, str], int] = {}
    for row, flavor, delta in _quota_deltas(store, since):
        if row.outcome in (Outcome.applied, Outcome.restored):
            out[(row.name, flavor)] = out.get((row.name, flavor), 0) + delta
    return out


def quota_moved_since(store: Store, since: datetime) -> dict[tuple[str, str], tuple[int, int]]:
    """(queue, flavor) -> (GPUs gained, GPUs lost) by the plans gpuaas applied since ``since``.

    Each plan's net move of the cell, summed as gains and losses: the step and the total cap are
    what may move in a day, so an undo gives none of it back (a plan undone in the morning is not
    made again at noon); a plan a crash interrupted and gpuaas rolled back moved nothing."""
    net: dict[tuple[int | None, str, str], int] = {}
    for row, flavor, delta in _quota_deltas(store, since):
        if moved_for(row) in (Why.apply, Why.rollback):
            key = (row.refers_to, row.name, flavor)
            net[key] = net.get(key, 0) + delta
    out: dict[tuple[str, str], tuple[int, int]] = {}
    for (_, queue, flavor), delta in net.items():
        if not delta:
            continue
        gained, lost = out.get((queue, flavor), (0, 0))
        out[(queue, flavor)] = (gained + max(delta, 0), lost + max(-delta, 0))
    return out


def _quota_deltas(store: Store, since: datetime) -> Iterator[tuple[AuditEntry, str, int]]:
    """(row, flavor, after - before) of every ``quota-change`` row since ``since``."""
    for row in store.audit(flow=FLOW, since=since, limit=None):
        if row.action != CHANGE_ACTION:
            continue
        for f, b in (row.before or {}).items():
            a = (row.after or {}).get(f)
            if isinstance(a, int) and isinstance(b, int):
                yield row, f, a - b
