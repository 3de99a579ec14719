"""Undo of one reclaim: put back exactly the prior state recorded in its intent row.

Audited like the reclaim itself: an *intent* row (``action="restore"``, ``planned``,
``refers_to`` the reclaim's intent, ``before`` the live values it is about to overwrite,
``after`` the prior state it puts back), then the write, then a completion row
(``restored``, ``skipped`` or ``failed``, ``refers_to`` the restore intent, the same
idempotency key ``restore/<reclaim id>``).

It never overwrites a later change. The restore re-reads the object and refuses unless it
is the same object (uid), still carries the ``gpuaas.io/reclaimed`` annotation of that
reclaim, and every field it would restore (replicas, suspend, active, stop annotations,
worker counts) still holds what the reclaim left: a team that scaled back up to 5 by hand
keeps its 5, and the skip names the field and its value. The write itself carries the
object's *current* resourceVersion (gpuaas is putting back its own change, not deciding on
stale evidence); a 409 is re-read and checked again once.

A restore whose answer is lost, or that a crash cut off between its intent and its
completion, is settled from the object: the annotation of the reclaim still there means the
restore did not land (``failed``); gone, with the recorded prior state in place, means it
did (``restored``). ``settle_restore`` does that for the next undo of the same reclaim and,
through ``recover_restores``, for the next reclaim run.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from gpuaas.actions._events import EventReason
from gpuaas.actions._kube_writer import INDEFINITE, KubeWriter
from gpuaas.actions._patches import differences, left_by_stop, live_values, reclaimed_by, restore_patch
from gpuaas.actions._undoing import Undone
from gpuaas.actions.reclaim import FLOW, RECOVERY_LOOKBACK, settle_reclaim
from gpuaas.errors import Conflict, GpuaasError, NotFound, error_line
from gpuaas.models import Outcome, bounded_key
from gpuaas.store import AuditEntry, Store

__all__ = ["recover_restores", "restore_key", "restore_reclaim", "settle_restore"]


def restore_key(reclaim_id: int) -> str:
    """One key per reclaim undone: its restores are one decision, retried (bounded as every key is)."""
    return bounded_key(f"restore/{reclaim_id}")


def _append(store: Store, reclaim: AuditEntry, outcome: str, reason: str, flow_run_id: str | None, *,
            refers_to: int | None, before: dict[str, Any] | None = None,
            after: dict[str, Any] | None = None) -> AuditEntry:
    return store.append(AuditEntry(
        flow=FLOW, flow_run_id=flow_run_id, action="restore", kind=reclaim.kind, namespace=reclaim.namespace,
        name=reclaim.name, uid=reclaim.uid, mode="apply", outcome=outcome, reason=reason[:2000], evidence={},
        before=before, after=after, idempotency_key=restore_key(int(reclaim.id or 0)), refers_to=refers_to,
    ))


def _read_back(writer: KubeWriter, reclaim: AuditEntry) -> tuple[Outcome, str, dict[str, Any] | None] | None:
    """Did a restore of ``reclaim`` land? (outcome, why, the object where it did) from the object; None when it
    cannot be read."""
    try:
        obj = writer.get(reclaim.kind, reclaim.namespace or "", reclaim.name)
    except NotFound:
        return Outcome.failed, "the object is gone", None
    except GpuaasError:
        return None
    uid = obj["metadata"].get("uid")
    if reclaim.uid and uid != reclaim.uid:  # recreated since: its state says nothing of this restore
        return Outcome.failed, f"the object is gone: a different object now has this name (uid {uid})", None
    mark = reclaimed_by(obj)
    if mark is not None and mark.get("audit_id") == reclaim.id:
        return (Outcome.failed, f"the object still carries the annotation of audit #{reclaim.id}: the restore did "
                                "not land", None)
    changed = differences(reclaim.before or {}, obj, "the restore sets")
    if changed:
        return Outcome.skipped, (f"the annotation of audit #{reclaim.id} is gone but {'; '.join(changed)}: "
                                 "changed by someone else, not restored again"), None
    return Outcome.restored, "the object holds the recorded prior state", obj


def _restored_event(writer: KubeWriter, obj: dict[str, Any], reclaim_id: int) -> None:
    writer.record_event(obj, EventReason.restored, f"Restored by gpuaas: the undo of audit #{reclaim_id} put back the "
                                                   "state it had before it was stopped")


def settle_restore(store: Store, writer: KubeWriter, reclaim: AuditEntry,
                   flow_run_id: str | None) -> list[AuditEntry]:
    """Complete the restore intents of ``reclaim`` that have no completion row (a crash, a lost answer)."""
    rows = store.audit(idempotency_key=restore_key(int(reclaim.id or 0)), limit=None)
    completed = {r.refers_to for r in rows}
    appended = []
    for intent in rows:
        if intent.outcome != Outcome.planned or intent.id in completed:
            continue
        settled = _read_back(writer, reclaim)
        if settled is None:
            continue  # still unreadable: the next undo or run tries again
        outcome, why, _ = settled
        reason = (f"recovered: interrupted before the restore reached the object; {why}" if outcome == Outcome.failed
                  else f"recovered: the restore had reached the object before the interruption; {why}"
                  if outcome == Outcome.restored else f"recovered: {why}")
        appended.append(_append(store, reclaim, outcome, reason, flow_run_id, refers_to=intent.id,
                                before=intent.before, after=intent.after))
    return appended


def recover_restores(store: Store, writer: KubeWriter, *, flow_run_id: str | None,
                     now: datetime, lookback: timedelta = RECOVERY_LOOKBACK) -> list[AuditEntry]:
    """Settle every dangling restore intent of the lookback window (the reclaim run's recovery step)."""
    # Only the restore intents no row refers to yet, from the store: not the whole window's decisions.
    intents = store.open_intents(flow=FLOW, action="restore", since=now - lookback)
    appended: list[AuditEntry] = []
    for reclaim_id in sorted({r.refers_to for r in intents if r.refers_to is not None}):
        reclaim = store.get_audit(reclaim_id)
        if reclaim is not None:
            appended.extend(settle_restore(store, writer, reclaim, flow_run_id))
    return appended


def _refusal(reclaim: AuditEntry, obj: dict[str, Any], completions: list[AuditEntry]) -> tuple[Outcome, str] | None:
    """Why this object must not be restored now: (result, message), or None when it may."""
    uid = obj["metadata"].get("uid")
    if reclaim.uid and uid != reclaim.uid:
        return Outcome.skipped, (f"a different object now has this name (uid {reclaim.uid} when reclaimed, {uid} now): "
                                 "not touched")
    mark = reclaimed_by(obj)
    if mark is None or mark.get("audit_id") != reclaim.id:
        if any(r.outcome in (Outcome.skipped, Outcome.failed) for r in completions) and not any(
                r.outcome == Outcome.applied for r in completions):
            return Outcome.no_op, "the reclaim never reached the object: nothing to restore"
        return Outcome.skipped, (f"the object no longer carries the gpuaas.io/reclaimed annotation of audit #{reclaim.id}: "
                                 "changed by someone else, not overwritten")
    if not differences(reclaim.before or {}, obj):
        return None  # started again by its team: back in its prior state, the restore only removes the mark
    changed = differences(left_by_stop(reclaim.after, reclaim.before or {}), obj, "the reclaim left")
    if changed:
        return Outcome.skipped, f"{'; '.join(changed)}: changed after the reclaim, not overwritten"
    return None


JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
SCALE_DOWN_PENDING = "workload from previous scale-down is still being deleted"


def _left_behind(writer: KubeWriter, reclaim: AuditEntry, obj: dict[str, Any], refusal: str) -> str:
    """What to do when Kueue refuses a StatefulSet's scale back up because the Workload of its scale to
    zero still exists and nothing will delete it: "" otherwise.

    How Kueue comes to leave such a Workload: ``gpuaas.policies.reclaim.idle._left_without_owner``, which
    lists it in every reclaim run. gpuaas deletes nothing; it names the Workload and the command.
    Read-only, and silent when the read fails: the refusal stands as it is."""
    if reclaim.kind != "StatefulSet" or SCALE_DOWN_PENDING not in refusal:
        return ""
    namespace, uid = reclaim.namespace or "", obj["metadata"].get("uid")
    try:
        found = writer.list("Workload", namespace, label_selector=f"{JOB_UID_LABEL}={uid}")
    except GpuaasError:
        return ""
    ownerless = [w["metadata"]["name"] for w in found if not w["metadata"].get("ownerReferences")]
    if not ownerless:
        return ""
    return (f"; Kueue left the set's Workload {namespace}/{ownerless[0]} without an owner after the scale to zero, "
            f"so nothing will delete it and it keeps its quota: delete it (kubectl delete workload -n {namespace} "
            f"{ownerless[0]}), then undo again")


def restore_reclaim(store: Store, writer: KubeWriter, reclaim: AuditEntry, flow_run_id: str | None) -> Undone:
    """Undo one reclaim (its intent row); see the module docstring for the order and the refusals."""
    reclaim_id = int(reclaim.id or 0)
    settle_restore(store, writer, reclaim, flow_run_id)
    rows = store.audit(idempotency_key=restore_key(reclaim_id), limit=None)
    done = [r for r in rows if r.outcome == Outcome.restored]
    if done:
        return Undone(Outcome.no_op, f"already restored by audit #{done[0].id}")
    if reclaim.mode != "apply":
        return Undone(Outcome.no_op, "a dry-run decision: nothing was changed")
    completions = [r for r in store.audit(refers_to=[reclaim_id], limit=None) if r.action == "reclaim"]
    if not completions:  # a reclaim run killed before its completion: settled from the object first, as its recovery
        closed = settle_reclaim(store, writer, reclaim, flow_run_id)  # would; an undo's rows would hide it from that
        completions = [closed] if closed is not None else []
    intent: AuditEntry | None = None

    def finish(outcome: Outcome, message: str) -> Undone:
        """The completion row: of the intent once there is one, else a bare refusal of the undo."""
        row = _append(store, reclaim, outcome, message, flow_run_id,
                      refers_to=intent.id if intent is not None else reclaim_id,
                      before=intent.before if intent is not None else None, after=reclaim.before)
        return Undone(outcome, message, row.id)

    for _attempt in (1, 2):  # a 409 is re-read and checked again once
        try:
            obj = writer.get(reclaim.kind, reclaim.namespace or "", reclaim.name)
        except NotFound:
            return finish(Outcome.skipped, "object deleted")
        except GpuaasError as exc:  # nothing written since the last read: this undo fails, the next one may not
            return finish(Outcome.failed, f"not restored, the object could not be read: {str(exc)[:400]}")
        refused = _refusal(reclaim, obj, completions)
        if refused is not None:
            return Undone(*refused) if refused[0] == Outcome.no_op else finish(*refused)
        if intent is None:
            state = {**live_values(reclaim.before or {}, obj), "resourceVersion": obj["metadata"].get("resourceVersion")}
            intent = _append(store, reclaim, Outcome.planned, f"undo of audit #{reclaim_id}", flow_run_id,
                             refers_to=reclaim_id, before=state, after=reclaim.before)
        try:
            patched = writer.patch(reclaim.kind, reclaim.namespace or "", reclaim.name,
                                   restore_patch(reclaim.before or {}, obj))
        except Conflict:
            continue
        except NotFound:
            return finish(Outcome.skipped, "object deleted")
        except INDEFINITE as exc:  # no answer, or a 5xx: the restore may have landed all the same
            settled = _read_back(writer, reclaim)
            if settled is None:
                return Undone(Outcome.unknown, f"the PATCH got no usable answer ({str(exc)[:300]}) and the read-back "
                                               "failed: the next undo or reclaim run settles it from the object")
            outcome, why, restored = settled
            if restored is not None:  # its team is told as if the answer had come
                _restored_event(writer, restored, reclaim_id)
            return finish(outcome, f"the response was lost ({str(exc)[:300]}); read back: {why}")
        except GpuaasError as exc:
            return finish(Outcome.failed, error_line(exc) + _left_behind(writer, reclaim, obj, str(exc)))
        _restored_event(writer, patched, reclaim_id)
        return finish(Outcome.restored, f"restored (resourceVersion {patched['metadata'].get('resourceVersion')})")
    return finish(Outcome.failed, "409 Conflict twice: the object keeps changing; try again")
