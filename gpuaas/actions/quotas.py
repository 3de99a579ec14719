"""Apply a quota plan to the ClusterQueues of a cohort, recover an interrupted one, undo one.

One plan, one audit id: the *intent* row (``action="quota-plan"``, kind ``Cohort``, outcome
``planned``) holds the whole plan (``before``/``after`` per queue and flavor, the reasons and
demand evidence in ``evidence``); each patch is a ``quota-change`` row for its ClusterQueue
(before/after, the resourceVersion written); a completion row (``quota-plan`` again,
``applied`` | ``skipped`` | ``failed``, ``refers_to`` the intent) closes it. ``gpuaas undo
PLAN_ID`` takes the intent's id.

Safety, in order:

* A plan from a degraded snapshot is recorded and never applied.
* Before the first write every queue of the plan is re-read; a nominal quota that differs from
  the plan's ``before`` (someone edited it, the cohort's total moved) ends the apply with outcome
  ``changed``, and the caller recomputes the plan from fresh data. Nothing is forced.
* Patches are ordered decreases first, then increases, so the cohort's total is never above its
  capacity: between two patches it is at most the original (a decrease has landed, its matching
  increase not yet), and equal once the plan is through. Kueue cannot be patched atomically
  across objects; a briefly smaller cohort only delays admission, a larger one would over-admit.
* Each patch carries the resourceVersion just read. A 409 is re-read once; if only the status
  moved (Kueue writes it all the time) the patch is retried on the new version, if the quota
  moved the apply stops and what had landed is rolled back (same order rule).
* A run that dies mid-apply leaves an intent without completion: ``recover_quota_plans`` (the
  next run, under the same lock) rolls back whatever landed, per flavor, from the object's
  values (``after`` = landed, ``before`` = not, anything else = someone else's change, left
  alone and named), then closes the intent. Rolling back rather than completing: the plan was
  made on evidence that is now old; the same run plans again from a fresh snapshot.
* A read or a write the API refuses (a 403 without the rebalancer role bound, any error but a
  409) closes the intent at once, ``failed``, naming the error and, for a 403, the role to bind;
  what had landed is rolled back as above. Nothing is left open for the recovery to mistake for
  an interrupted run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from gpuaas.actions._events import EventReason
from gpuaas.actions._kube_writer import KubeWriter
from gpuaas.actions._quota_patches import gpu_nominal, quota_patch
from gpuaas.actions._undoing import Undone
from gpuaas.errors import Conflict, Forbidden, GpuaasError, NotFound
from gpuaas.models import Outcome
from gpuaas.permissions import ROLES, bind_command
from gpuaas.policies.quotas import QuotaPlan, plan_to_dict
from gpuaas.policy import Mode
from gpuaas.store import AuditEntry, Store

__all__ = ["FLOW", "PLAN_ACTION", "QuotaApplyResult", "apply_quota_plan", "quota_moved_since", "recent_quota_changes",
           "recover_quota_plans", "undo_quota_plan"]

FLOW = "rebalance"
PLAN_ACTION = "quota-plan"
CHANGE_ACTION = "quota-change"
KIND = "ClusterQueue"
RECOVERY_LOOKBACK = timedelta(days=7)
Moves = dict[str, dict[str, tuple[int, int]]]
"""queue -> flavor -> (from, to)."""


@dataclass(frozen=True)
class QuotaApplyResult:
    plan_id: int
    outcome: Outcome
    """planned (dry-run) | applied | skipped (degraded, nothing to do) | changed (recompute) | failed"""
    message: str
    patched: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Ctx:
    store: Store
    writer: KubeWriter
    plan_id: int
    cohort: str
    flow_run_id: str | None
    gpu_resources: Sequence[str]
    manage_limits: bool


def _ordered(moves: Moves) -> list[tuple[str, dict[str, tuple[int, int]]]]:
    """Per queue its decreases as one step, its increases as another; every decrease first."""
    down = [(q, {f: m for f, m in fl.items() if m[1] < m[0]}) for q, fl in sorted(moves.items())]
    up = [(q, {f: m for f, m in fl.items() if m[1] > m[0]}) for q, fl in sorted(moves.items())]
    return [(q, step) for q, step in down + up if step]


def _row(ctx: _Ctx, action: str, kind: str, name: str, outcome: str, reason: str, *, mode: str = "apply",
         before: dict[str, Any] | None = None, after: dict[str, Any] | None = None,
         evidence: dict[str, Any] | None = None, key: str | None = None) -> AuditEntry:
    return ctx.store.append(AuditEntry(
        flow=FLOW, flow_run_id=ctx.flow_run_id, action=action, kind=kind, name=name, mode=mode, outcome=outcome,
        reason=reason[:2000], evidence=evidence or {}, before=before, after=after, idempotency_key=key,
        refers_to=ctx.plan_id or None))


def _refused(exc: GpuaasError) -> str:
    """The error as the audit row says it; a 403 also names the role that grants the rebalance's accesses."""
    words = str(exc)[:500]
    if isinstance(exc, Forbidden) and exc.status == 403:
        words += f"; {bind_command(ROLES[FLOW])}"
    return words


def _move(ctx: _Ctx, moves: Moves, why: str) -> tuple[list[str], str | None]:
    """Patch in the safe order; (queues patched, or the reason it stopped). Each step audited."""
    done: list[str] = []
    for queue, step in _ordered(moves):
        for attempt in (1, 2):
            try:
                obj = ctx.writer.get_cluster_scoped(KIND, queue)
            except NotFound:
                return done, f"{queue}: ClusterQueue deleted"
            except GpuaasError as exc:  # the read before the patch is part of the write: stop as a refused patch does
                return done, f"{queue}: {_refused(exc)}"
            now = gpu_nominal(obj, ctx.gpu_resources)
            moved = {f: now.get(f) for f, (frm, _) in step.items() if now.get(f) != frm}
            if moved:
                words = ", ".join(f"{f} is {v}, expected {step[f][0]}" for f, v in moved.items())
                return done, f"{queue}: quota changed by someone else ({words}); not overwritten"
            target = {f: to for f, (_, to) in step.items()}
            try:
                patched = ctx.writer.patch_cluster_scoped(KIND, queue, quota_patch(
                    obj, target, ctx.plan_id, ctx.gpu_resources, manage_limits=ctx.manage_limits,
                    restore=why != "apply"))
            except Conflict:
                if attempt == 2:
                    return done, f"{queue}: 409 Conflict twice; not overwritten"
                continue
            except GpuaasError as exc:
                return done, f"{queue}: {_refused(exc)}"
            rv = (patched.get("metadata") or {}).get("resourceVersion")
            changes = ", ".join(f"{f} {a} -> {b}" for f, (a, b) in step.items())
            if why == "apply":
                ctx.writer.record_event(patched, EventReason.quota_moved, f"Nominal GPU quota moved by gpuaas "
                                        f"rebalance: {changes}. Plan #{ctx.plan_id}; to reverse it: gpuaas undo "
                                        f"{ctx.plan_id}")
            else:
                ctx.writer.record_event(patched, EventReason.quota_restored, f"Nominal GPU quota restored by "
                                        f"gpuaas ({why} of plan #{ctx.plan_id}): {changes}")
            _row(ctx, CHANGE_ACTION, KIND, queue, Outcome.applied if why == "apply" else Outcome.restored,
                 f"{why}: {changes}",
                 before={f: a for f, (a, _) in step.items()},
                 after={**{f: b for f, (_, b) in step.items()}, "resourceVersion": rv})
            done.append(queue)
            break
    return done, None


def _plan_moves(plan: QuotaPlan) -> Moves:
    out: Moves = {}
    for c in plan.changes:
        if c.after != c.before:
            out.setdefault(c.queue, {})[c.flavor] = (c.before, c.after)
    return out


def _landed(moves: Moves, steps_done: int) -> Moves:
    """The reverse of the first ``steps_done`` steps of ``moves`` in patch order (what to roll back)."""
    back: Moves = {}
    for queue, step in _ordered(moves)[:steps_done]:
        for f, (a, b) in step.items():
            back.setdefault(queue, {})[f] = (b, a)
    return back


def apply_quota_plan(store: Store, writer: KubeWriter, cohort: str, plan: QuotaPlan, *, mode: Mode,
                     degraded: str | None, flow_run_id: str | None, evidence: Mapping[str, Any],
                     gpu_resources: Sequence[str], manage_limits: bool = False) -> QuotaApplyResult:
    """Record the plan under one id; in apply mode (and only on a complete snapshot) carry it out."""
    before: dict[str, dict[str, int]] = {}
    after: dict[str, dict[str, int]] = {}
    for c in plan.changes:
        before.setdefault(c.queue, {})[c.flavor] = c.before
        after.setdefault(c.queue, {})[c.flavor] = c.after
    ctx = _Ctx(store, writer, 0, cohort, flow_run_id, gpu_resources, manage_limits)
    intent = _row(ctx, PLAN_ACTION, "Cohort", cohort, Outcome.planned,
                  f"{plan.moved_gpus} GPUs moved, weighted shortfall {plan.weighted_shortfall_before:g} -> "
                  f"{plan.weighted_shortfall:g}", mode=mode.value, before=before, after=after,
                  evidence={"plan": plan_to_dict(plan), "gpu_resources": list(gpu_resources), **evidence})
    ctx = _Ctx(store, writer, int(intent.id or 0), cohort, flow_run_id, gpu_resources, manage_limits)

    def close(outcome: Outcome, message: str, patched: list[str] | None = None) -> QuotaApplyResult:
        _row(ctx, PLAN_ACTION, "Cohort", cohort, outcome, message, mode=mode.value)
        return QuotaApplyResult(ctx.plan_id, outcome, message, patched or [])

    if mode is not Mode.apply:
        return QuotaApplyResult(ctx.plan_id, Outcome.planned, "dry-run: nothing written")
    if degraded:
        return close(Outcome.skipped, f"degraded snapshot ({degraded}): a plan from it is never applied")
    # A plan that moves nothing is still checked against the live quotas: a recovery earlier in this run
    # may have rolled an interrupted plan back, and a plan made before that is then stale, not finished.
    for queue, flavors in before.items():
        try:
            now = gpu_nominal(writer.get_cluster_scoped(KIND, queue), gpu_resources)
        except NotFound:
            return close(Outcome.changed, f"{queue}: ClusterQueue deleted since the plan; recompute")
        except GpuaasError as exc:  # nothing written yet: close the intent now, never leave it to the recovery
            return close(Outcome.failed, f"nothing written: {_refused(exc)}")
        differ = {f: now.get(f) for f, b in flavors.items() if now.get(f) != b}
        if differ:
            words = ", ".join(f"{f} {flavors[f]} -> {v}" for f, v in differ.items())
            return close(Outcome.changed, f"{queue}: quota changed since the plan ({words}); recompute, never forced")
    moves = _plan_moves(plan)
    if not moves:
        return close(Outcome.skipped, "nothing to move")
    done, stopped = _move(ctx, moves, "apply")
    if stopped is None:
        return close(Outcome.applied, f"{len(done)} patches, decreases first", done)
    rolled, problem = _move(ctx, _landed(moves, len(done)), "rollback")
    message = f"stopped after {len(done)} patches: {stopped}; rolled back {len(rolled)}"
    return close(Outcome.failed, message + (f"; rollback stopped: {problem}" if problem else ""), done)


def recover_quota_plans(store: Store, writer: KubeWriter, *, flow_run_id: str | None, now: datetime,
                        gpu_resources: Sequence[str], manage_limits: bool = False) -> list[AuditEntry]:
    """Roll back every applied-mode plan a crash left open; returns the completion rows appended."""
    rows = store.audit(flow=FLOW, since=now - RECOVERY_LOOKBACK, limit=None)
    closed = {r.refers_to for r in rows if r.action == PLAN_ACTION and r.refers_to is not None}
    out = []
    for intent in rows:
        if intent.action != PLAN_ACTION or intent.outcome != Outcome.planned or intent.mode != Mode.apply.value:
            continue
        if intent.id in closed:
            continue
        ctx = _Ctx(store, writer, int(intent.id or 0), intent.name, flow_run_id, gpu_resources, manage_limits)
        back: Moves = {}
        foreign = []
        audited = {(r.name, f) for r in rows if r.action == CHANGE_ACTION and r.refers_to == intent.id
                   and r.outcome == Outcome.applied for f in (r.before or {})}
        for queue, flavors in (intent.after or {}).items():
            try:
                obj = writer.get_cluster_scoped(KIND, queue)
            except NotFound:
                foreign.append(f"{queue} deleted")
                continue
            live = gpu_nominal(obj, gpu_resources)
            for f, to in flavors.items():
                frm = (intent.before or {}).get(queue, {}).get(f)
                if frm == to or live.get(f) == frm:
                    continue
                if live.get(f) == to:
                    back.setdefault(queue, {})[f] = (to, frm)
                else:
                    foreign.append(f"{queue} {f} is {live.get(f)} (plan {frm} -> {to}), left alone")
            _audit_unanswered(ctx, queue, obj, {f: m for f, m in back.get(queue, {}).items()
                                                if (queue, f) not in audited})
        rolled, problem = _move(ctx, back, "rollback")
        reason = (f"recovered: the run was interrupted mid-apply; rolled back {len(rolled)} of {len(back)} queues "
                  "that had landed" + (f"; {'; '.join(foreign)}" if foreign else "")
                  + (f"; rollback stopped: {problem}" if problem else ""))
        out.append(_row(ctx, PLAN_ACTION, "Cohort", intent.name, Outcome.failed, reason))
    return out


def _audit_unanswered(ctx: _Ctx, queue: str, obj: Mapping[str, Any], moves: Mapping[str, tuple[int, int]]) -> None:
    """The change row of a patch that landed but whose run died before writing it (killed with the answer
    in flight). Without it the rollback's row alone would read as a net move gpuaas made, and the
    no-reversal rule would steer the next plan away from a fault-free run's."""
    if not moves:
        return
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    _row(ctx, CHANGE_ACTION, KIND, queue, Outcome.applied,
         "recovered: this patch had landed before the interruption (its answer and audit row never came): "
         + ", ".join(f"{f} {frm} -> {to}" for f, (to, frm) in moves.items()),
         before={f: frm for f, (_, frm) in moves.items()},
         after={**{f: to for f, (to, _) in moves.items()}, "resourceVersion": rv})


def undo_quota_plan(store: Store, writer: KubeWriter, intent: AuditEntry, flow_run_id: str | None) -> Undone:
    """The undoer of ``quota-plan``: restore every queue of the plan, or none (naming who changed).

    Every undo that reaches the queues leaves a ``restore`` row referring to the plan: ``restored``, ``failed``
    (stopped mid-way), or ``skipped`` (refused: a queue changed since or deleted)."""
    later = store.audit(refers_to=[int(intent.id or 0)], limit=None)
    if any(r.action == "restore" and r.outcome == Outcome.restored for r in later):
        return Undone(Outcome.no_op, "already restored")
    if intent.mode != Mode.apply.value:
        return Undone(Outcome.no_op, "a dry-run plan: nothing was changed")
    closing = [r for r in later if r.action == PLAN_ACTION]
    if not closing or closing[-1].outcome != Outcome.applied:
        return Undone(Outcome.no_op, "the plan was not applied (or was rolled back): nothing to restore")
    gpu = _gpu_resources_of(intent)
    ctx = _Ctx(store, writer, int(intent.id or 0), intent.name, flow_run_id, gpu, False)
    # An undo cut off by a crash restored some queues already: those are done, not "changed since".
    resumed = {(r.name, f) for r in later if r.action == CHANGE_ACTION and r.outcome == Outcome.restored
               and r.reason.startswith("undo") for f in (r.before or {})}

    def refuse(message: str) -> Undone:
        """The undo's completion row when it restores nothing: a refused undo is audited like a done one (a later
        undo, once the quota is put back, is not blocked by it: only a ``restored`` row ends the plan's undo)."""
        row = _row(ctx, "restore", "Cohort", intent.name, Outcome.skipped, f"undo of plan #{intent.id} refused: {message}",
                   key=f"restore/{intent.id}")
        return Undone(Outcome.skipped, message, row.id)

    back: Moves = {}
    for queue, flavors in (intent.after or {}).items():
        try:
            live = gpu_nominal(writer.get_cluster_scoped(KIND, queue), gpu)
        except NotFound:
            return refuse(f"{queue}: ClusterQueue deleted; nothing restored")
        for f, to in flavors.items():
            frm = (intent.before or {}).get(queue, {}).get(f)
            if frm == to or ((queue, f) in resumed and live.get(f) == frm):
                continue
            if live.get(f) != to:
                return refuse(f"{queue}: {f} quota is {live.get(f)}, not the plan's {to}: someone changed a quota "
                              "since; nothing restored")
            back.setdefault(queue, {})[f] = (to, frm)
    rolled, problem = _move(ctx, back, "undo")
    if problem:
        row = _row(ctx, "restore", "Cohort", intent.name, Outcome.failed, f"undo stopped after {len(rolled)}: {problem}")
        return Undone(Outcome.failed, row.reason, row.id)
    row = _row(ctx, "restore", "Cohort", intent.name, Outcome.restored, f"undo of plan #{intent.id}: {len(rolled)} queues",
               key=f"restore/{intent.id}")
    return Undone(Outcome.restored, f"restored {len(rolled)} ClusterQueues ({', '.join(rolled)})", row.id)


def _gpu_resources_of(intent: AuditEntry) -> list[str]:
    return list((intent.evidence or {}).get("gpu_resources") or ["nvidia.com/gpu"])


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
        if row.outcome == Outcome.applied or (row.outcome == Outcome.restored and row.reason.startswith("rollback")):
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
