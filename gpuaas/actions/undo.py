"""Undo: reverse audited actions, each by the undoer of its action kind.

``undo_entries`` takes audit ids (an action's intent row or its completion row), resolves
each to the intent, and dispatches on the row's ``action`` through ``UNDOERS``: ``reclaim``
-> ``restore_reclaim`` (``gpuaas.actions._restore``: restore the recorded prior state,
never over a later change). Another writer adds its own kind there (an ``Undoer``). A
``quota-change`` row (the row ``audit list`` shows for a ClusterQueue a plan moved) is one
step of its plan, and is undone as that plan. A dry-run decision, a decision never carried
out, or an action already undone is a no-op with a message: nothing it did is in place. Any
other id (a restore, a release, a row of no change at all) is refused (``skipped``, so the
command exits 1) with what the row is and the id to undo instead where there is one: a
script that undoes the wrong id must not read success while the change stays. The undoers
audit what they write.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpuaas.actions._kube_writer import KubeWriter
from gpuaas.actions._quota_moves import CHANGE_ACTION
from gpuaas.actions._restore import restore_reclaim
from gpuaas.actions._undoing import Undoer, Undone
from gpuaas.actions.deadline_holds import undo_hold
from gpuaas.actions.quotas import undo_quota_plan
from gpuaas.audit_subject import owners, subject
from gpuaas.models import Outcome
from gpuaas.store import AuditEntry, Store

__all__ = ["UNDOERS", "UndoResult", "undo_entries"]

UNDOERS: dict[str, Undoer] = {"reclaim": restore_reclaim, "deadline-hold": undo_hold, "deadline-demote": undo_hold,
                          "quota-plan": undo_quota_plan}
"""Audit ``action`` -> the function that reverses it."""


@dataclass(frozen=True)
class UndoResult:
    audit_id: int
    result: Outcome
    """restored | no-op | skipped | failed | unknown"""
    message: str
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    restore_audit_id: int | None = None
    """The audit row that completes the undo."""
    action: str | None = None
    """The audit ``action`` undone (``reclaim``, ``quota-plan``, ``deadline-hold``...), so that what reports the
    undo can say what was restored; none for an id that names nothing undoable."""
    subject: str | None = None
    """The object as the command that decided it named it: the owner first, where a reclaim stopped one through
    its Workload (``gpuaas.audit_subject``); none for an id that names nothing undoable."""


_CHAIN_DEPTH = 4
"""``refers_to`` hops from a row to the change it belongs to: a restore's completion -> its intent -> the reclaim."""


def _belongs_to(store: Store, row: AuditEntry) -> AuditEntry | None:
    """The intent of the undoable change ``row`` refers to, following ``refers_to``; None when it leads to none."""
    seen = {row.id}
    for _ in range(_CHAIN_DEPTH):
        if row.refers_to is None or row.refers_to in seen:
            return None
        parent = store.get_audit(row.refers_to)
        if parent is None:
            return None
        if parent.action in UNDOERS and parent.outcome == Outcome.planned:
            return parent
        seen.add(parent.id)
        row = parent
    return None


def _intent(store: Store, audit_id: int) -> AuditEntry | Undone:
    """The intent row to undo for ``audit_id``, or what the undo answers without writing: a no-op where nothing the
    row decided is in place, a refusal (``skipped``) where the id names no change gpuaas can undo."""
    row = store.get_audit(audit_id)
    if row is None:
        return Undone(Outcome.skipped, f"no audit row #{audit_id}: nothing undone")
    if row.action in UNDOERS and row.outcome == Outcome.planned:
        return row
    owner = _belongs_to(store, row)
    if owner is not None and (owner.action == row.action or row.action == CHANGE_ACTION):
        return owner  # a completion row of the action, or one queue of a quota plan: the plan is undone
    if row.action in UNDOERS:  # a decision never carried out (skipped, deferred, refused before any write)
        return Undone(Outcome.no_op, f"audit #{audit_id} is a {row.action} decision that was never carried out "
                                     f"({row.outcome}): nothing to undo")
    what = f"audit #{audit_id} is a {row.action} row ({row.outcome})"
    if owner is not None:
        return Undone(Outcome.skipped, f"{what} of the {owner.action} #{owner.id}, not a change gpuaas can undo: "
                                       f"nothing undone; the change it belongs to is #{owner.id} (gpuaas undo "
                                       f"{owner.id})")
    return Undone(Outcome.skipped, f"{what}, not a change gpuaas can undo: nothing undone; gpuaas undo takes the id "
                                   "of a reclaim, a quota plan or a deadline hold or demotion (gpuaas audit list)")


def undo_entries(store: Store, writer: KubeWriter, audit_ids: Iterable[int], *,
                 flow_run_id: str | None = None) -> list[UndoResult]:
    """Undo each action named by its audit id, in order."""
    results = []
    for audit_id in (int(i) for i in audit_ids):
        row = _intent(store, audit_id)
        if isinstance(row, Undone):
            results.append(UndoResult(audit_id, row.result, row.message))
            continue
        done = UNDOERS[row.action](store, writer, row, flow_run_id)
        owner = owners([row], store.get_audit).get(int(row.id or 0))
        results.append(UndoResult(audit_id, done.result, done.message, row.kind, row.namespace, row.name,
                                  done.audit_id, row.action, subject(row.kind, row.namespace, row.name, owner)))
    return results
