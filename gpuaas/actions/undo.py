"""Undo: reverse audited actions, each by the undoer of its action kind.

``undo_entries`` takes audit ids (an action's intent row or its completion row), resolves
each to the intent, and dispatches on the row's ``action`` through ``UNDOERS``: ``reclaim``
-> ``restore_reclaim`` (``gpuaas.actions._restore``: restore the recorded prior state,
never over a later change). Another writer adds its own kind there (an ``Undoer``). An id
that names nothing undoable, a dry-run decision or an action already undone is a no-op with
a message; the undoers audit what they write.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpuaas.actions._kube_writer import KubeWriter
from gpuaas.actions._restore import restore_reclaim
from gpuaas.actions._undoing import Undoer
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


def _intent(store: Store, audit_id: int) -> AuditEntry | str:
    row = store.get_audit(audit_id)
    if row is None:
        return f"no audit row #{audit_id}"
    if row.outcome != Outcome.planned and row.refers_to is not None:
        parent = store.get_audit(row.refers_to)
        if parent is not None and parent.action == row.action:
            row = parent
    if row.action not in UNDOERS or row.outcome != Outcome.planned:
        return f"audit #{audit_id} is not an action gpuaas can undo ({row.action}, {row.outcome}): nothing to undo"
    return row


def undo_entries(store: Store, writer: KubeWriter, audit_ids: Iterable[int], *,
                 flow_run_id: str | None = None) -> list[UndoResult]:
    """Undo each action named by its audit id, in order."""
    results = []
    for audit_id in (int(i) for i in audit_ids):
        row = _intent(store, audit_id)
        if isinstance(row, str):
            results.append(UndoResult(audit_id, Outcome.no_op, row))
            continue
        done = UNDOERS[row.action](store, writer, row, flow_run_id)
        owner = owners([row], store.get_audit).get(int(row.id or 0))
        results.append(UndoResult(audit_id, done.result, done.message, row.kind, row.namespace, row.name,
                                  done.audit_id, row.action, subject(row.kind, row.namespace, row.name, owner)))
    return results
