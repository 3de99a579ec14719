"""``gpuaas undo PLAN_ID`` of a quota plan: every change of the plan still in place put back, or none.

What is in place comes from the plan's ``quota-change`` rows, whatever outcome closed the plan: each
(queue, flavor) its apply moved that no rollback or undo has put back since. A plan that stopped
mid-way and whose rollback stopped too is closed ``failed`` with a queue still moved: its undo puts
that queue back, and only an undo with nothing in place answers "nothing to restore".

Each queue must still be as the plan left it: its nominal quota at the plan's ``after`` and, where
the intent recorded the entries, each moved entry (limits included) at the plan's ``after``.
Otherwise someone changed it since and the undo refuses, naming the queue, and writes nothing.

An undo writes its intent before its first patch (``restore``, ``planned``, ``refers_to`` the plan,
``before`` the values it overwrites, ``after`` the ones it puts back, key ``restore/<plan id>``); its
completion (``restored`` or ``failed``) refers to that intent. An undo cut off between the two (the
process killed, or a patch's answer lost and the queue not readable) leaves the intent open: the next
undo resumes it, and a queue of it found back at the plan's ``before`` is one the cut-off undo put
back (its row is written then), not someone else's change. A refusal (``skipped``, referring to the
plan) does not close an open intent. A plan still open itself (its apply was cut off) is not undone:
the next rebalance run's recovery rolls back what landed, from the objects.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuaas.actions._kube_writer import KubeWriter
from gpuaas.actions._quota_moves import (
    CHANGE_ACTION,
    KIND,
    PLAN_ACTION,
    Ctx,
    Moves,
    Why,
    audit_found,
    audit_row,
    changed_words,
    holds,
    move,
    moved_for,
    refused,
)
from gpuaas.actions._quota_patches import gpu_nominal
from gpuaas.actions._quota_record import records_of
from gpuaas.actions._undoing import Undone
from gpuaas.errors import GpuaasError, NotFound
from gpuaas.models import Outcome, bounded_key
from gpuaas.policy import Mode
from gpuaas.store import AuditEntry, Store

__all__ = ["UNDO_ACTION", "gpu_resources_of", "live_changes", "undo_key", "undo_quota_plan"]

UNDO_ACTION = "restore"


def undo_key(plan_id: int) -> str:
    """The idempotency key of every row of a plan's undos (intent, completion, refusal)."""
    return bounded_key(f"restore/{plan_id}")


def gpu_resources_of(intent: AuditEntry) -> list[str]:
    return list((intent.evidence or {}).get("gpu_resources") or ["nvidia.com/gpu"])


def live_changes(rows: Sequence[AuditEntry]) -> Moves:
    """queue -> flavor -> (before, after) of each change a plan's rows (oldest first) say is in place: moved by
    its apply and put back by no rollback or undo since."""
    out: Moves = {}
    for row in rows:
        if row.action != CHANGE_ACTION:
            continue
        for flavor, before in (row.before or {}).items():
            after = (row.after or {}).get(flavor)
            if not isinstance(before, int) or not isinstance(after, int):
                continue
            if row.outcome == Outcome.applied and moved_for(row) is Why.apply:
                out.setdefault(row.name, {})[flavor] = (before, after)
            elif row.outcome == Outcome.restored:
                out.get(row.name, {}).pop(flavor, None)
    return {queue: flavors for queue, flavors in out.items() if flavors}


def undo_quota_plan(store: Store, writer: KubeWriter, intent: AuditEntry, flow_run_id: str | None) -> Undone:
    """The undoer of ``quota-plan``: put back every change of the plan still in place, or none (naming who changed).

    Every undo that reaches the queues leaves a row: its completion (``restored``, ``failed``: stopped mid-way),
    a ``skipped`` refusal (a queue changed since or deleted, the plan still open), or, when a patch's answer was
    lost and not read back, its intent left open (``unknown``) for the next undo to settle."""
    plan_id = int(intent.id or 0)
    later = store.audit(refers_to=[plan_id], limit=None)
    undos = [r for r in store.audit(idempotency_key=undo_key(plan_id), limit=None) if r.action == UNDO_ACTION]
    if any(r.action == UNDO_ACTION and r.outcome == Outcome.restored for r in later + undos):
        return Undone(Outcome.no_op, "already restored")
    if intent.mode != Mode.apply.value:
        return Undone(Outcome.no_op, "a dry-run plan: nothing was changed")
    gpu = gpu_resources_of(intent)
    # Without recorded entries (an older intent) only the nominal quota is restored, the limits left to the rule.
    ctx = Ctx(store, writer, plan_id, intent.name, flow_run_id, gpu, False, records_of(intent))
    closed = {r.refers_to for r in undos if r.outcome != Outcome.planned}
    cut_off = [r for r in undos if r.outcome == Outcome.planned and r.id not in closed]
    resumed = cut_off[-1] if cut_off else None
    covered = {(q, f) for r in cut_off for q, flavors in (r.after or {}).items() for f in flavors}

    def refuse(message: str, outcome: Outcome = Outcome.skipped) -> Undone:
        """The row of an undo that restores nothing: a refused undo is audited like a done one (a later undo, once
        the quota is put back, is not blocked by it: only a ``restored`` row ends the plan's undo); ``failed``
        where a queue could not be read."""
        words = "refused" if outcome == Outcome.skipped else "failed"
        row = audit_row(ctx, UNDO_ACTION, "Cohort", intent.name, outcome,
                        f"undo of plan #{plan_id} {words}: {message}", key=undo_key(plan_id))
        return Undone(outcome, message, row.id)

    def finish(outcome: Outcome, message: str) -> AuditEntry:
        """The completion of the undo's intent (the one resumed, or the one this undo wrote)."""
        return audit_row(ctx, UNDO_ACTION, "Cohort", intent.name, outcome, message, key=undo_key(plan_id),
                         refers_to=resumed.id if resumed is not None else None)

    if not any(r.action == PLAN_ACTION for r in later):
        return refuse("the plan is still open (its apply was cut off, or a write's answer was lost and not read "
                      "back): the next rebalance run's recovery rolls back what landed; nothing restored")
    live = live_changes(later)
    if not live:
        return Undone(Outcome.no_op, "none of the plan's changes is in place (it was not applied, or was rolled "
                                     "back): nothing to restore")
    back: Moves = {}
    found: list[str] = []
    for queue, flavors in live.items():
        try:
            obj = writer.get_cluster_scoped(KIND, queue)
        except NotFound:
            return refuse(f"{queue}: ClusterQueue deleted; nothing restored")
        except GpuaasError as exc:  # read before any patch of this undo: nothing is half-done
            return refuse(f"{queue}: {refused(exc)}; nothing restored", Outcome.failed)
        step = {f: (to, frm) for f, (frm, to) in flavors.items()}
        home = {f: m for f, m in step.items()
                if (queue, f) in covered and not holds(ctx, queue, obj, {f: m}, Why.undo, target=True)}
        if home and resumed is not None:  # put back by the undo cut off before: its row never came
            audit_found(ctx, queue, obj, home, Why.undo, f"; recovered: the undo of intent #{resumed.id} had put it "
                        "back before it was cut off (its answer or audit row never came)")
            found.append(queue)
        live_now = gpu_nominal(obj, gpu)
        record = ctx.records.get(queue)
        for f, (to, frm) in step.items():
            if f in home:
                continue
            if live_now.get(f) != to:
                return refuse(f"{queue}: {f} quota is {live_now.get(f)}, not the plan's {to}: someone changed a quota "
                              "since; nothing restored")
            diffs = record.differences(obj, gpu, [f], landed=True) if record and record.covers([f]) else []
            if diffs:
                what, words = changed_words(diffs, "not the plan's")
                return refuse(f"{queue}: {words}: someone changed {'a limit' if what == 'limits' else 'a quota'} "
                              "since; nothing restored")
            back.setdefault(queue, {})[f] = (to, frm)
    if back and resumed is None:
        resumed = audit_row(ctx, UNDO_ACTION, "Cohort", intent.name, Outcome.planned,
                            f"undo of plan #{plan_id}: puts back " + "; ".join(
                                f"{q} {f} {to} -> {frm}" for q, fl in back.items() for f, (to, frm) in fl.items()),
                            before={q: {f: to for f, (to, _) in fl.items()} for q, fl in back.items()},
                            after={q: {f: frm for f, (_, frm) in fl.items()} for q, fl in back.items()},
                            key=undo_key(plan_id))
    went = move(ctx, back, Why.undo)
    restored = found + [q for q in went.done if q not in found]
    if went.unsettled:
        return Undone(Outcome.unknown, f"undo stopped after {len(went.done)}: {went.stopped}; the undo stays open: "
                                       "the next undo reads the queues back and finishes it")
    if went.stopped:
        row = finish(Outcome.failed, f"undo stopped after {len(went.done)}: {went.stopped}")
        return Undone(Outcome.failed, row.reason, row.id)
    row = finish(Outcome.restored, f"undo of plan #{plan_id}: {len(restored)} queues"
                 + (f" ({', '.join(found)} put back by the undo cut off before)" if found else ""))
    return Undone(Outcome.restored, f"restored {len(restored)} ClusterQueues ({', '.join(restored)})", row.id)
