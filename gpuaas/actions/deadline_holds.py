"""Carry out deadline nudges on Kueue Workloads: hold (``spec.active: false``), demote (``spec.priority``
one lower) and release (either undone).

Order per hold, as for reclaim: GET the live Workload; refuse when it is no longer a pending,
active Workload without a hold (it was admitted, deactivated by someone, or changed); append the
intent row (the prior ``spec.active`` in ``before``, the plan in ``evidence``); in apply mode one
merge patch with the resourceVersion read sets ``spec.active: false`` and the
``gpuaas.io/deadline-hold`` annotation (``{"audit_id", "release_at", "before"}``); append the
completion row. A 409 is never overwritten: decided again next run. A demotion is written the same
way, with the prior ``spec.priority`` in ``before`` and in the annotation.

A release puts the recorded ``spec.active`` (or ``spec.priority``) back and removes the annotation. Releases are gpuaas
undoing its own change, so they run in dry-run too (a policy switched back to dry-run must not
strand a held Workload), are never capped, and re-read once on a 409. ``release_due`` finds the
held Workloads from the API alone — no snapshot, no plan — so it runs first in every flow run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gpuaas.actions._events import EventReason
from gpuaas.actions._kube_writer import KubeWriter
from gpuaas.actions._undoing import Undone
from gpuaas.errors import Conflict, GpuaasError, NotFound
from gpuaas.models import Outcome
from gpuaas.policies.deadlines import HOLD_ANNOTATION, Nudge, is_demotion, parse_hold, release_is_due
from gpuaas.policy import Mode
from gpuaas.store import AuditEntry, Store

__all__ = ["FLOW", "NUDGE_ACTIONS", "NudgeResult", "apply_nudges", "due_releases", "hold_patch", "not_holdable",
           "prior_state", "release_due", "release_patch", "undo_hold", "undo_holds"]

FLOW = "deadlines"
KIND = "Workload"
NUDGE_ACTIONS = ("deadline-hold", "deadline-demote")
"""The audit actions ``gpuaas undo`` reverses with a release."""
_LOWEST_PRIORITY = -(2**31)


@dataclass(frozen=True)
class NudgeResult:
    """What became of one nudge; ``audit_id`` (the hold's intent row) is what ``undo`` takes."""

    nudge: Nudge
    result: Outcome
    """planned | applied | released | deferred | skipped | failed"""
    reason: str
    audit_id: int | None


def _row(store: Store, n: Nudge, outcome: str, reason: str, mode: Mode, flow_run_id: str | None, *,
         refers_to: int | None = None, before: dict[str, Any] | None = None,
         after: dict[str, Any] | None = None) -> AuditEntry:
    return store.append(AuditEntry(
        flow=FLOW, flow_run_id=flow_run_id, action=f"deadline-{n.action}", kind=KIND, namespace=n.namespace,
        name=n.name, mode=mode.value, outcome=outcome, reason=reason[:2000], evidence=n.evidence, before=before,
        after=after, idempotency_key=n.idempotency_key[:200], refers_to=refers_to,
    ))


def _conditions(obj: dict[str, Any]) -> dict[str, str]:
    return {c.get("type", ""): c.get("status", "") for c in (obj.get("status") or {}).get("conditions") or []}


def not_holdable(obj: dict[str, Any]) -> str | None:
    if parse_hold((obj["metadata"].get("annotations") or {}).get(HOLD_ANNOTATION)) is not None:
        return "already held by gpuaas"
    if (obj.get("spec") or {}).get("active") is False:
        return "deactivated by someone else (spec.active: false): left alone"
    conds = _conditions(obj)
    for ctype in ("Finished", "Admitted", "QuotaReserved"):
        if conds.get(ctype) == "True":
            return f"no longer pending ({ctype}): decided again next run"
    return None


def prior_state(obj: dict[str, Any], action: str) -> dict[str, Any]:
    """What a hold (``spec.active``) or a demotion (``spec.priority``, Kueue's 0 when unset) changes, as it is now."""
    spec = obj.get("spec") or {}
    return {"priority": int(spec.get("priority") or 0)} if action == "demote" else {"active": spec.get("active")}


def hold_patch(obj: dict[str, Any], mark: dict[str, Any]) -> dict[str, Any]:
    """The merge patch of a hold or a demotion (the mark's ``before`` says which), at the version read."""
    before = mark.get("before") or {}
    spec = {"priority": int(before["priority"]) - 1} if is_demotion(mark) else {"active": False}
    return {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"],
                         "annotations": {HOLD_ANNOTATION: json.dumps(mark, sort_keys=True)}},
            "spec": spec}


def release_patch(obj: dict[str, Any], hold: dict[str, Any]) -> dict[str, Any]:
    """The merge patch of a release: the recorded ``spec.priority`` or ``spec.active`` back (true when unknown).

    A priority someone changed since the demotion is theirs: only the annotation goes.
    """
    before = hold.get("before") or {}
    if is_demotion(hold):
        prior = int(before["priority"])
        ours = int((obj.get("spec") or {}).get("priority") or 0) == prior - 1
        spec: dict[str, Any] = {"priority": prior} if ours else {}
    else:
        spec = {"active": True if before.get("active") is None else before["active"]}
    patch: dict[str, Any] = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"],
                                          "annotations": {HOLD_ANNOTATION: None}}}
    return patch | {"spec": spec} if spec else patch


def _hold(n: Nudge, store: Store, writer: KubeWriter, mode: Mode, run: str | None) -> NudgeResult:
    try:
        obj = writer.get(KIND, n.namespace, n.name)
    except NotFound:
        return NudgeResult(n, Outcome.skipped, "object deleted", _row(store, n, Outcome.skipped, "object deleted", mode, run).id)
    before = prior_state(obj, n.action)
    why = not_holdable(obj) or (None if before.get("priority", 0) > _LOWEST_PRIORITY else
                                "already at the lowest priority Kueue allows: left alone")
    if why:
        return NudgeResult(n, Outcome.skipped, why, _row(store, n, Outcome.skipped, why, mode, run).id)
    release_at = n.release_at.isoformat() if n.release_at else None
    after = {**hold_patch(obj, {"before": before})["spec"], "release_at": release_at}
    intent = _row(store, n, Outcome.planned, n.reason, mode, run, before=before, after=after)
    if mode is not Mode.apply:
        return NudgeResult(n, Outcome.planned, n.reason, intent.id)
    patch = hold_patch(obj, {"audit_id": intent.id, "release_at": release_at, "before": before})
    try:
        patched = writer.patch(KIND, n.namespace, n.name, patch)
    except Conflict:
        why = "409 Conflict: changed while acting; not overwritten, decided again next run"
        _row(store, n, Outcome.skipped, why, mode, run, refers_to=intent.id)
        return NudgeResult(n, Outcome.skipped, why, intent.id)
    except GpuaasError as exc:
        _row(store, n, Outcome.failed, str(exc), mode, run, refers_to=intent.id)
        return NudgeResult(n, Outcome.failed, str(exc)[:500], intent.id)
    done = {**after, "resourceVersion": patched["metadata"].get("resourceVersion")}
    _row(store, n, Outcome.applied, n.reason, mode, run, refers_to=intent.id, before=before, after=done)
    reason, done_by = ((EventReason.demoted, "Demoted one priority by gpuaas") if n.action == "demote"
                       else (EventReason.held, f"Held by gpuaas until {release_at or 'its release'}"))
    writer.record_event(patched, reason, f"{done_by}: {n.reason}. Audit #{intent.id}; to release it now: "
                                         f"gpuaas undo {intent.id}")
    return NudgeResult(n, Outcome.applied, n.reason, intent.id)


def _release(n: Nudge, store: Store, writer: KubeWriter, run: str | None) -> NudgeResult:
    """Undo gpuaas's own hold: in any mode, re-reading once on a 409."""
    for attempt in (1, 2):
        try:
            obj = writer.get(KIND, n.namespace, n.name)
        except NotFound:
            return NudgeResult(n, Outcome.skipped, "object deleted", None)
        hold = parse_hold((obj["metadata"].get("annotations") or {}).get(HOLD_ANNOTATION))
        if hold is None:
            return NudgeResult(n, Outcome.skipped, "not held by gpuaas (no gpuaas.io/deadline-hold annotation)", None)
        patch = release_patch(obj, hold)
        try:
            patched = writer.patch(KIND, n.namespace, n.name, patch)
        except Conflict:
            if attempt == 2:
                return NudgeResult(n, Outcome.failed, "409 Conflict twice: released next run", None)
            continue
        except GpuaasError as exc:
            return NudgeResult(n, Outcome.failed, str(exc)[:500], None)
        hold_id = hold.get("audit_id") if isinstance(hold.get("audit_id"), int) else None
        written = patch.get("spec", {})
        current = {key: (obj.get("spec") or {}).get(key) for key in written}
        row = _row(store, n, Outcome.released, n.reason, Mode.apply, run, refers_to=hold_id,
                   before={**current, "hold": hold},
                   after={**written, "resourceVersion": patched["metadata"].get("resourceVersion")})
        writer.record_event(patched, EventReason.released, f"Released by gpuaas: {n.reason}"
                                                           + (f" (the hold of audit #{hold_id})" if hold_id else ""))
        return NudgeResult(n, Outcome.released, n.reason, row.id)
    raise AssertionError("unreachable")  # pragma: no cover


def apply_nudges(nudges: Sequence[Nudge], store: Store, writer: KubeWriter, *, mode: Mode,
                 flow_run_id: str | None) -> list[NudgeResult]:
    """Releases (any mode), then holds (written only in apply mode); deferred ones are audited."""
    out = []
    for n in nudges:
        if n.outcome != Outcome.planned:
            out.append(NudgeResult(n, n.outcome, n.reason, _row(store, n, n.outcome, n.reason, mode, flow_run_id).id))
        elif n.action == "release":
            out.append(_release(n, store, writer, flow_run_id))
        else:
            out.append(_hold(n, store, writer, mode, flow_run_id))
    return out


def release_due(workloads: Iterable[dict[str, Any]], store: Store, writer: KubeWriter, now: datetime, *,
                flow_run_id: str | None) -> list[NudgeResult]:
    """Release every held Workload whose ``release_at`` has come; needs no snapshot and no plan."""
    return [_release(n, store, writer, flow_run_id) for n in due_releases(workloads, now)]


def due_releases(workloads: Iterable[dict[str, Any]], now: datetime) -> list[Nudge]:
    """The release sweep's rule: every Workload object held by gpuaas whose ``release_at`` has come."""
    due = []
    for obj in workloads:
        meta = obj.get("metadata") or {}
        hold = parse_hold((meta.get("annotations") or {}).get(HOLD_ANNOTATION))
        if hold is not None and release_is_due(hold, now):
            due.append(Nudge("release", str(meta.get("namespace", "")), str(meta.get("name", "")),
                             f"release time {hold.get('release_at', '(unreadable)')} has come", evidence={"hold": hold}))
    return due


def undo_hold(store: Store, writer: KubeWriter, row: AuditEntry, flow_run_id: str | None) -> Undone:
    """The ``Undoer`` of a hold (``gpuaas undo ID``): release it, if it is still that hold."""
    if row.mode != Mode.apply.value:
        return Undone(Outcome.no_op, "a dry-run decision: nothing was changed")
    n = Nudge("release", row.namespace or "", row.name, f"undo of audit #{row.id}", evidence={"undo": row.id})
    try:
        obj = writer.get(KIND, n.namespace, n.name)
    except NotFound:
        return Undone(Outcome.skipped, "object deleted")
    hold = parse_hold((obj["metadata"].get("annotations") or {}).get(HOLD_ANNOTATION))
    if not hold or hold.get("audit_id") != row.id:
        return Undone(Outcome.no_op, f"not held by audit #{row.id} any more: nothing to undo")
    done = _release(n, store, writer, flow_run_id)
    return Undone(Outcome.restored if done.result == Outcome.released else done.result, done.reason, done.audit_id)


def undo_holds(store: Store, writer: KubeWriter, audit_ids: Iterable[int], *,
               flow_run_id: str | None = None) -> list[NudgeResult]:
    """Release the holds named by their audit ids (the intent row or its completion row)."""
    out = []
    for audit_id in audit_ids:
        row = store.get_audit(int(audit_id))
        if row is not None and row.refers_to is not None and row.action in NUDGE_ACTIONS:
            row = store.get_audit(row.refers_to) or row
        if row is None or row.action not in NUDGE_ACTIONS or row.outcome != Outcome.planned:
            n = Nudge("release", "", "", f"audit #{audit_id} is not a deadline hold or demotion")
            out.append(NudgeResult(n, Outcome.no_op, n.reason, None))
            continue
        done = undo_hold(store, writer, row, flow_run_id)
        n = Nudge("release", row.namespace or "", row.name, done.message)
        out.append(NudgeResult(n, Outcome.released if done.result == Outcome.restored else done.result, done.message,
                               done.audit_id))
    return out
