"""``gpuaas undo PLAN_ID`` of a quota plan: every queue back to what the plan recorded before it wrote, or none.

Each queue must still be as the plan left it: its nominal quota at the plan's ``after`` and, where
the intent recorded the entries, each moved entry (limits included) at the plan's ``after``.
Otherwise someone changed it since and the undo refuses, naming the queue, and writes nothing.
"""

from __future__ import annotations

from gpuaas.actions._kube_writer import KubeWriter
from gpuaas.actions._quota_moves import (
    CHANGE_ACTION,
    KIND,
    PLAN_ACTION,
    Ctx,
    Moves,
    Why,
    audit_row,
    changed_words,
    move,
    moved_for,
)
from gpuaas.actions._quota_patches import gpu_nominal
from gpuaas.actions._quota_record import records_of
from gpuaas.actions._undoing import Undone
from gpuaas.errors import NotFound
from gpuaas.models import Outcome
from gpuaas.policy import Mode
from gpuaas.store import AuditEntry, Store

__all__ = ["gpu_resources_of", "undo_quota_plan"]


def gpu_resources_of(intent: AuditEntry) -> list[str]:
    return list((intent.evidence or {}).get("gpu_resources") or ["nvidia.com/gpu"])


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
    gpu = gpu_resources_of(intent)
    # Without recorded entries (an older intent) only the nominal quota is restored, the limits left to the rule.
    ctx = Ctx(store, writer, int(intent.id or 0), intent.name, flow_run_id, gpu, False, records_of(intent))
    # An undo cut off by a crash restored some queues already: those are done, not "changed since".
    resumed = {(r.name, f) for r in later if r.action == CHANGE_ACTION and r.outcome == Outcome.restored
               and moved_for(r) is Why.undo for f in (r.before or {})}

    def refuse(message: str) -> Undone:
        """The undo's completion row when it restores nothing: a refused undo is audited like a done one (a later
        undo, once the quota is put back, is not blocked by it: only a ``restored`` row ends the plan's undo)."""
        row = audit_row(ctx, "restore", "Cohort", intent.name, Outcome.skipped,
                        f"undo of plan #{intent.id} refused: {message}", key=f"restore/{intent.id}")
        return Undone(Outcome.skipped, message, row.id)

    back: Moves = {}
    for queue, flavors in (intent.after or {}).items():
        try:
            obj = writer.get_cluster_scoped(KIND, queue)
        except NotFound:
            return refuse(f"{queue}: ClusterQueue deleted; nothing restored")
        live = gpu_nominal(obj, gpu)
        record = ctx.records.get(queue)
        for f, to in flavors.items():
            frm = (intent.before or {}).get(queue, {}).get(f)
            if frm == to or ((queue, f) in resumed and live.get(f) == frm):
                continue
            if live.get(f) != to:
                return refuse(f"{queue}: {f} quota is {live.get(f)}, not the plan's {to}: someone changed a quota "
                              "since; nothing restored")
            diffs = record.differences(obj, gpu, [f], landed=True) if record and record.covers([f]) else []
            if diffs:
                what, words = changed_words(diffs, "not the plan's")
                return refuse(f"{queue}: {words}: someone changed {'a limit' if what == 'limits' else 'a quota'} "
                              "since; nothing restored")
            back.setdefault(queue, {})[f] = (to, frm)
    rolled, problem = move(ctx, back, Why.undo)
    if problem:
        row = audit_row(ctx, "restore", "Cohort", intent.name, Outcome.failed,
                        f"undo stopped after {len(rolled)}: {problem}")
        return Undone(Outcome.failed, row.reason, row.id)
    row = audit_row(ctx, "restore", "Cohort", intent.name, Outcome.restored,
                    f"undo of plan #{intent.id}: {len(rolled)} queues", key=f"restore/{intent.id}")
    return Undone(Outcome.restored, f"restored {len(rolled)} ClusterQueues ({', '.join(rolled)})", row.id)
