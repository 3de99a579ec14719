"""Undo a reclaim: put back exactly the prior state recorded in its audit row.

The restore re-reads the object and patches with its *current* resourceVersion (gpuaas is
putting back its own change, not deciding on stale evidence), sets the recorded prior values
and removes the ``gpuaas.io/reclaimed`` annotation. It refuses when the object no longer
carries the annotation of that audit row: someone else changed it, and their change wins.
Every restore is audited (``action="restore"``, ``refers_to`` the reclaim's intent row); an
audit id that was already restored, a dry-run decision or a reclaim that never reached the
object is a no-op with a message.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpuaas.actions._kube_writer import KubeWriter
from gpuaas.actions._patches import reclaimed_by, restore_patch
from gpuaas.actions.reclaim import FLOW
from gpuaas.errors import Conflict, GpuaasError, NotFound
from gpuaas.store import AuditEntry, Store

__all__ = ["UndoResult", "undo_reclaims"]


@dataclass(frozen=True)
class UndoResult:
    audit_id: int
    result: str
    """restored | no-op | skipped | failed"""
    message: str
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    restore_audit_id: int | None = None


def _intent(store: Store, audit_id: int) -> AuditEntry | str:
    row = store.get_audit(audit_id)
    if row is None:
        return f"no audit row #{audit_id}"
    if row.action == "reclaim" and row.refers_to is not None:
        row = store.get_audit(row.refers_to) or row
    if row.action != "reclaim" or row.outcome != "planned":
        return f"audit #{audit_id} is not a reclaim action ({row.action}, {row.outcome}): nothing to undo"
    return row


def _undo_one(store: Store, writer: KubeWriter, audit_id: int, flow_run_id: str | None) -> UndoResult:
    found = _intent(store, audit_id)
    if isinstance(found, str):
        return UndoResult(audit_id, "no-op", found)
    row = found

    def out(result: str, message: str, restore_audit_id: int | None = None) -> UndoResult:
        return UndoResult(audit_id, result, message, row.kind, row.namespace, row.name, restore_audit_id)

    later = store.audit(refers_to=[int(row.id or 0)], limit=None)
    restored = [r for r in later if r.action == "restore" and r.outcome == "restored"]
    if restored:
        return out("no-op", f"already restored by audit #{restored[0].id}")
    if row.mode != "apply":
        return out("no-op", "a dry-run decision: nothing was changed")
    if any(r.outcome in ("skipped", "failed") for r in later) and not any(r.outcome == "applied" for r in later):
        return out("no-op", "the reclaim never reached the object: nothing to restore")
    for attempt in (1, 2):
        try:
            obj = writer.get(row.kind, row.namespace or "", row.name)
        except NotFound:
            return out("skipped", "object deleted")
        mark = reclaimed_by(obj)
        if mark is None or mark.get("audit_id") != row.id:
            return out("skipped", f"the object no longer carries the gpuaas.io/reclaimed annotation of "
                              f"audit #{row.id}: changed by someone else, not overwritten")
        try:
            patched = writer.patch(row.kind, row.namespace or "", row.name, restore_patch(row.before or {}, obj))
            break
        except Conflict:
            if attempt == 2:
                return out("failed", "409 Conflict twice: the object keeps changing; try again")
        except GpuaasError as exc:
            return out("failed", str(exc)[:500])
    entry = store.append(AuditEntry(
        flow=FLOW, flow_run_id=flow_run_id, action="restore", kind=row.kind, namespace=row.namespace, name=row.name,
        uid=row.uid, mode="apply", outcome="restored", reason=f"undo of audit #{row.id}", evidence={},
        before={"resourceVersion": obj["metadata"].get("resourceVersion")}, after=row.before,
        idempotency_key=f"restore/{row.id}", refers_to=row.id,
    ))
    message = f"restored (resourceVersion {patched['metadata'].get('resourceVersion')})"
    return out("restored", message, restore_audit_id=entry.id)


def undo_reclaims(store: Store, writer: KubeWriter, audit_ids: Iterable[int], *,
                  flow_run_id: str | None = None) -> list[UndoResult]:
    """Restore each reclaim named by its audit id (the intent row, or its completion row)."""
    return [_undo_one(store, writer, int(audit_id), flow_run_id) for audit_id in audit_ids]
