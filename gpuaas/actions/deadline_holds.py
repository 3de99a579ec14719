"""Carry out deadline nudges on Kueue Workloads: hold (``spec.active: false``), demote (``spec.priority``
one lower) and release (either undone).

Order per hold, as for reclaim: GET the live Workload; refuse it unless its uid and resourceVersion are
the ones the snapshot saw (a Workload recreated under the same name, or edited since the plan was made
on it, is ``changed``: decided again next run, never touched); refuse when it is no longer a pending,
active Workload without a hold (admitted, deactivated by someone, held; a mark the plan found gpuaas did not
record, ``Nudge.over_mark``, is no hold and is written over); append the intent row (the
prior ``spec.active`` in ``before``, the plan in ``evidence``); in apply mode one merge patch with that
resourceVersion sets ``spec.active: false`` and the ``gpuaas.io/deadline-hold`` annotation
(``{"audit_id", "release_at", "before"}``); append the completion row. A 409 is never overwritten:
decided again next run. A demotion is written the same way, with the prior ``spec.priority`` in
``before`` and in the annotation.

A release puts the recorded ``spec.active`` (or ``spec.priority``) back and removes the annotation, and only
where the mark is one gpuaas recorded (``_hold_records``: it names this object's hold or demotion in the audit
log, with the same ``before``, landed and not released yet); any other mark is left as it is, ``skipped`` once.
Releases are gpuaas undoing its own change, so they run in dry-run too (a policy switched back to
dry-run must not strand a held Workload), are never capped, and re-read once on a 409 (the patch
carries the version read then). Audited like a hold: the intent row (the live ``spec.active`` and
``spec.priority``, the hold) before the patch, a completion row whatever the outcome (``released``,
``skipped``, ``failed``), so that a refused release is in ``gpuaas audit list`` too. A patch whose
answer is lost is settled by reading the object back. ``release_due`` finds the held Workloads from
the API alone — no snapshot, no plan — so it runs first in every flow run, after
``recover_releases`` has closed the release intents a crash left open, from the objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from gpuaas.actions._events import EventReason
from gpuaas.actions._hold_records import HoldRecords, mark_id, record_refusal
from gpuaas.actions._hold_rules import (
    changed_since,
    hold_patch,
    not_holdable,
    prior_state,
    release_patch,
    unholdable,
)
from gpuaas.actions._kube_writer import INDEFINITE, KubeWriter
from gpuaas.actions._undoing import Undone
from gpuaas.errors import Conflict, GpuaasError, NotFound, error_line
from gpuaas.models import Outcome
from gpuaas.policies.deadlines import HOLD_ANNOTATION, Nudge, NudgeAction, RecordedHolds, due_release, parse_hold
from gpuaas.policy import Mode
from gpuaas.store import AuditEntry, Store

__all__ = ["FLOW", "NUDGE_ACTIONS", "RELEASE_ACTION", "NudgeResult", "apply_nudges", "changed_since", "due_releases",
           "hold_patch", "not_holdable", "prior_state", "recorded_holds", "recover_releases", "release_due", "release_patch",
           "undo_hold", "undo_holds"]

FLOW = "deadlines"
KIND = "Workload"
NUDGE_ACTIONS = ("deadline-hold", "deadline-demote")
"""The audit actions ``gpuaas undo`` reverses with a release."""
RELEASE_ACTION = "deadline-release"
SETTLE_AFTER = timedelta(minutes=10)
"""A release intent younger than this may still be in flight in an overlapping run (the sweep takes no lock), so
recovery leaves it alone; a release's GET and PATCH, re-read once, end well within it."""
SETTLE_LOOKBACK = timedelta(days=1)
"""How far back recovery looks for open release intents: every run's sweep tries each (96 a day), and the flow
audits every nudge of every run, so a longer look would read many rows for nothing."""


@dataclass(frozen=True)
class NudgeResult:
    """What became of one nudge; ``audit_id``: a hold's or demotion's intent row (what ``undo`` takes), a
    release's last row (how it ended)."""

    nudge: Nudge
    result: Outcome
    """planned | applied | released | deferred | skipped | changed | failed | unknown"""
    reason: str
    audit_id: int | None


def _entry(n: Nudge, outcome: str, reason: str, mode: Mode, flow_run_id: str | None, *,
           refers_to: int | None = None, before: dict[str, Any] | None = None,
           after: dict[str, Any] | None = None, uid: str | None = None) -> AuditEntry:
    return AuditEntry(
        flow=FLOW, flow_run_id=flow_run_id, action=f"deadline-{n.action}", kind=KIND, namespace=n.namespace,
        name=n.name, uid=uid or n.uid, mode=mode.value, outcome=outcome, reason=reason[:2000], evidence=n.evidence,
        before=before, after=after, idempotency_key=n.idempotency_key, refers_to=refers_to,
    )


def _row(store: Store, n: Nudge, outcome: str, reason: str, mode: Mode, flow_run_id: str | None, *,
         refers_to: int | None = None, before: dict[str, Any] | None = None,
         after: dict[str, Any] | None = None, uid: str | None = None) -> AuditEntry:
    return store.append(_entry(n, outcome, reason, mode, flow_run_id, refers_to=refers_to, before=before,
                               after=after, uid=uid))


def _hold(n: Nudge, store: Store, writer: KubeWriter, mode: Mode, run: str | None) -> NudgeResult:
    try:
        obj = writer.get(KIND, n.namespace, n.name)
    except NotFound:
        return NudgeResult(n, Outcome.skipped, "object deleted", _row(store, n, Outcome.skipped, "object deleted", mode, run).id)
    except GpuaasError as exc:  # unread: nothing written; the other nudges go on, and the next run decides again
        why = f"not read, nothing written: {str(exc)[:400]}"
        return NudgeResult(n, Outcome.failed, why, _row(store, n, Outcome.failed, why, mode, run).id)
    refused = changed_since(n, obj) or unholdable(n, obj)
    if refused:
        outcome, why = refused
        return NudgeResult(n, outcome, why, _row(store, n, outcome, why, mode, run).id)
    before = prior_state(obj, n.action)
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
    except INDEFINITE as exc:  # a lost answer or a 5xx can hide a hold that landed: read the object back
        outcome, why, landed = _hold_landed(writer, n, intent.id, str(exc)[:300])
        _row(store, n, outcome, why, mode, run, refers_to=intent.id, before=before, after=after)
        if landed is not None:  # its team is told as if the answer had come
            _held_event(writer, landed, n, intent, release_at)
        return NudgeResult(n, outcome, why, intent.id)
    except GpuaasError as exc:
        _row(store, n, Outcome.failed, str(exc), mode, run, refers_to=intent.id)
        return NudgeResult(n, Outcome.failed, error_line(exc), intent.id)
    done = {**after, "resourceVersion": patched["metadata"].get("resourceVersion")}
    _row(store, n, Outcome.applied, n.reason, mode, run, refers_to=intent.id, before=before, after=done)
    _held_event(writer, patched, n, intent, release_at)
    return NudgeResult(n, Outcome.applied, n.reason, intent.id)


def _held_event(writer: KubeWriter, obj: dict[str, Any], n: Nudge, intent: AuditEntry, release_at: str | None) -> None:
    """The Event its team sees in ``kubectl describe``: why it waits, until when, and how to release it now."""
    reason, done_by = ((EventReason.demoted, "Demoted one priority by gpuaas") if n.action is NudgeAction.demote
                       else (EventReason.held, f"Held by gpuaas until {release_at or 'its release'}"))
    writer.record_event(obj, reason, f"{done_by}: {n.reason}. Audit #{intent.id}; to release it now: "
                                     f"gpuaas undo {intent.id}")


def _hold_landed(writer: KubeWriter, n: Nudge, intent_id: int | None,
                 error: str) -> tuple[Outcome, str, dict[str, Any] | None]:
    """How a hold whose patch got no answer ended, from the object: held by this intent (and the object, held),
    or not; ``unknown`` when it cannot be read either (its annotation names the intent, so the release sweep and
    ``gpuaas undo`` find it whichever it was)."""
    try:
        obj = writer.get(KIND, n.namespace, n.name)
    except NotFound:
        return Outcome.skipped, f"{error}; object deleted since", None
    except GpuaasError as exc:
        return Outcome.unknown, f"{error}; not read back either ({str(exc)[:200]}): the object's annotation says", None
    if (_hold_on(obj) or {}).get("audit_id") == intent_id:
        return Outcome.applied, f"{n.reason} (the patch's answer was lost: {error}; read back, it landed)", obj
    return Outcome.failed, f"{error}; read back, the hold did not land", None


def _hold_on(obj: dict[str, Any]) -> dict[str, Any] | None:
    return parse_hold((obj["metadata"].get("annotations") or {}).get(HOLD_ANNOTATION))


def _given(read: dict[str, Any] | GpuaasError) -> dict[str, Any]:
    """An object read earlier, or the error its read raised, raised again where the read would have."""
    if isinstance(read, GpuaasError):
        raise read
    return read


def _records(store: Store, marks: Iterable[object] = ()) -> HoldRecords:
    """The audit rows about the holds ``marks`` (parsed or not) name, read in one query."""
    records = HoldRecords(store, FLOW, NUDGE_ACTIONS, RELEASE_ACTION)
    records.load(i for m in marks if isinstance(m, dict) and (i := mark_id(m)) is not None)
    return records


def recorded_holds(store: Store, marks: Iterable[tuple[str | None, dict[str, Any]]]) -> RecordedHolds:
    """Which ``marks`` (each with the uid of the Workload it is on) are holds or demotions gpuaas recorded and that
    still hold, by the rule a release proves (``HoldRecords.proven``): what the deadline plan counts as held."""
    return HoldRecords(store, FLOW, NUDGE_ACTIONS, RELEASE_ACTION).proven(marks)


def _release_intent(store: Store, n: Nudge, obj: dict[str, Any], hold: dict[str, Any], patch: dict[str, Any],
                    run: str | None) -> AuditEntry:
    """The row written before a release's patch: what the Workload holds now and the hold lifted, so that a
    release cut off by a crash, or refused, is on record with the state it would have overwritten."""
    spec, meta = obj.get("spec") or {}, obj["metadata"]
    before = {"active": spec.get("active"), "priority": spec.get("priority"),
              "resourceVersion": meta.get("resourceVersion"), "hold": hold}
    hold_id = hold.get("audit_id") if isinstance(hold.get("audit_id"), int) else None
    return _row(store, n, Outcome.planned, n.reason, Mode.apply, run, refers_to=hold_id, before=before,
                after=patch.get("spec", {}), uid=meta.get("uid"))


def _read_back(writer: KubeWriter, namespace: str, name: str, hold: object,
               uid: str | None) -> tuple[Outcome, str, dict[str, Any] | None] | None:
    """Did the release of ``hold`` land? (outcome, why, the object where it did) from the object; None when it
    cannot be read."""
    try:
        obj = writer.get(KIND, namespace, name)
    except NotFound:
        return Outcome.skipped, "object deleted", None
    except GpuaasError:
        return None
    if uid and obj["metadata"].get("uid") != uid:
        return Outcome.skipped, "object deleted (a different object now has this name)", None
    if _hold_on(obj) == hold:
        return Outcome.failed, "the object still carries the hold: the release did not land", None
    return Outcome.released, "the hold is gone from the object", obj


def _release(n: Nudge, store: Store, writer: KubeWriter, run: str | None, records: HoldRecords,
             first: dict[str, Any] | GpuaasError | None = None) -> NudgeResult:
    """Undo gpuaas's own hold, in any mode: the intent row, the patch (re-read once on a 409), a completion row
    whatever the outcome; ``audit_id`` is the row that says how it ended. Only a mark ``records`` proves gpuaas
    wrote is released; ``first``: the object as a batch read it (or why it could not), in place of the first GET."""
    intent: AuditEntry | None = None

    def finish(outcome: Outcome, reason: str, after: dict[str, Any] | None = None, *,
               shown: str | None = None) -> NudgeResult:
        """The completion row of the intent once there is one, else a row saying why nothing was written; the result
        says ``shown`` where given, else the reason cut to 500 characters."""
        row = _row(store, n, outcome, reason, Mode.apply, run, refers_to=intent.id if intent else None,
                   before=intent.before if intent else None, after=after, uid=intent.uid if intent else None)
        return NudgeResult(n, outcome, reason[:500] if shown is None else shown, row.id)

    for attempt in (1, 2):
        try:
            obj = _given(first) if attempt == 1 and first is not None else writer.get(KIND, n.namespace, n.name)
        except NotFound:
            return finish(Outcome.skipped, "object deleted")
        except GpuaasError as exc:
            return finish(Outcome.failed, f"not released, the Workload could not be read: {exc}")
        hold = _hold_on(obj)
        if hold is None:
            return finish(Outcome.skipped, "not held by gpuaas (no gpuaas.io/deadline-hold annotation)")
        if (fault := records.fault(hold, obj["metadata"].get("uid"))) is not None:
            why = (f"its gpuaas.io/deadline-hold mark is not one gpuaas recorded ({fault[1]}): not released, "
                   "nothing written")
            if intent is not None:  # the mark changed under a release already begun: closed, never written
                return finish(Outcome.skipped, why)
            entry = _entry(n, Outcome.skipped, why, Mode.apply, run, uid=obj["metadata"].get("uid"))
            return NudgeResult(n, Outcome.skipped, why[:500], record_refusal(store, entry, hold, fault[0]).id)
        patch = release_patch(obj, hold)
        intent = intent or _release_intent(store, n, obj, hold, patch, run)
        try:
            patched = writer.patch(KIND, n.namespace, n.name, patch)
        except Conflict:
            if attempt == 2:
                return finish(Outcome.failed, "409 Conflict twice: released next run")
            continue
        except NotFound:
            return finish(Outcome.skipped, "object deleted")
        except INDEFINITE as exc:  # a lost answer or a 5xx can hide a release that landed: read the object back
            error = str(exc)[:300]
            settled = _read_back(writer, n.namespace, n.name, hold, intent.uid)
            if settled is None:
                return NudgeResult(n, Outcome.unknown, f"the PATCH got no usable answer ({error}) and the read-back "
                                                       "failed: the intent stays open, the next sweep settles it",
                                   intent.id)
            outcome, why, released = settled
            result = finish(outcome, f"the response was lost ({error}); read back: {why}")
            if released is not None:  # its team is told as if the answer had come
                _released_event(writer, released, n, intent)
            return result
        except GpuaasError as exc:
            return finish(Outcome.failed, str(exc), shown=error_line(exc))
        done = {**patch.get("spec", {}), "resourceVersion": patched["metadata"].get("resourceVersion")}
        result = finish(Outcome.released, n.reason, done)
        _released_event(writer, patched, n, intent)
        return result
    raise AssertionError("unreachable")  # pragma: no cover


def _released_event(writer: KubeWriter, obj: dict[str, Any], n: Nudge, intent: AuditEntry) -> None:
    hold_id = intent.refers_to
    writer.record_event(obj, EventReason.released, f"Released by gpuaas: {n.reason}"
                                                   + (f" (the hold of audit #{hold_id})" if hold_id else ""))


def recover_releases(store: Store, writer: KubeWriter, *, flow_run_id: str | None,
                     now: datetime) -> list[AuditEntry]:
    """Close every release intent a crash (or a lost answer) left open, from the object; returns the rows appended.

    Never writes to the object: a hold still there is released again by the sweep or the plan, under an intent
    of its own. An object that cannot be read leaves its intent open for the next run.
    """
    now = now if now.tzinfo else now.replace(tzinfo=UTC)
    rows = store.audit(flow=FLOW, since=now - SETTLE_LOOKBACK, limit=None)
    closed = {r.refers_to for r in rows if r.action == RELEASE_ACTION and r.refers_to is not None}
    appended = []
    for intent in rows:
        if (intent.action != RELEASE_ACTION or intent.outcome != Outcome.planned or intent.id in closed
                or intent.created_at > now - SETTLE_AFTER):
            continue
        settled = _read_back(writer, intent.namespace or "", intent.name, (intent.before or {}).get("hold"),
                             intent.uid)
        if settled is None:
            continue
        outcome, why, _ = settled
        lead = {Outcome.released: "the release had reached the object before the interruption",
                Outcome.failed: "interrupted before the release reached the object"}.get(outcome)
        appended.append(store.append(AuditEntry(
            flow=FLOW, flow_run_id=flow_run_id, action=RELEASE_ACTION, kind=intent.kind, namespace=intent.namespace,
            name=intent.name, uid=intent.uid, mode=intent.mode, outcome=outcome,
            reason=f"recovered: {lead}; {why}" if lead else f"recovered: {why}", evidence=intent.evidence,
            before=intent.before, after=intent.after, idempotency_key=intent.idempotency_key, refers_to=intent.id,
        )))
    return appended


def apply_nudges(nudges: Sequence[Nudge], store: Store, writer: KubeWriter, *, mode: Mode,
                 flow_run_id: str | None) -> list[NudgeResult]:
    """Releases (any mode), then holds (written only in apply mode); deferred ones are audited."""
    reads: dict[int, dict[str, Any] | GpuaasError] = {}
    for i, n in enumerate(nudges):  # each release's object read first, so that one query proves all their marks
        if n.outcome == Outcome.planned and n.action is NudgeAction.release:
            try:
                reads[i] = writer.get(KIND, n.namespace, n.name)
            except GpuaasError as exc:
                reads[i] = exc
    records = _records(store, (_hold_on(r) for r in reads.values() if not isinstance(r, GpuaasError)))
    out = []
    for i, n in enumerate(nudges):
        if n.outcome != Outcome.planned:
            out.append(NudgeResult(n, n.outcome, n.reason, _row(store, n, n.outcome, n.reason, mode, flow_run_id).id))
        elif n.action is NudgeAction.release:
            out.append(_release(n, store, writer, flow_run_id, records, reads[i]))
        else:
            out.append(_hold(n, store, writer, mode, flow_run_id))
    return out


def release_due(workloads: Iterable[dict[str, Any]], store: Store, writer: KubeWriter, now: datetime, *,
                flow_run_id: str | None) -> list[NudgeResult]:
    """Release every held Workload whose ``release_at`` has come; needs no snapshot and no plan.

    One Workload at a time, each audited: one that cannot be released keeps no other held. Only holds gpuaas
    recorded are released (``_hold_records``); the rows about the ones listed are read in one query."""
    due = due_releases(workloads, now)
    records = _records(store, (n.evidence.get("hold") for n in due))
    return [_release(n, store, writer, flow_run_id, records) for n in due]


def due_releases(workloads: Iterable[dict[str, Any]], now: datetime) -> list[Nudge]:
    """The release sweep's rule: every Workload object held by gpuaas whose ``release_at`` has come."""
    metas = [obj.get("metadata") or {} for obj in workloads]
    due = (due_release(str(m.get("namespace", "")), str(m.get("name", "")), (m.get("annotations") or {}).get(HOLD_ANNOTATION),
                       now) for m in metas)
    return [n for n in due if n is not None]


def undo_hold(store: Store, writer: KubeWriter, row: AuditEntry, flow_run_id: str | None,
              records: HoldRecords | None = None) -> Undone:
    """The ``Undoer`` of a hold (``gpuaas undo ID``): release it, if it is still that hold (``records``: the rows
    about it, read for many undos at once; else read here)."""
    if row.mode != Mode.apply.value:
        return Undone(Outcome.no_op, "a dry-run decision: nothing was changed")
    n = Nudge(NudgeAction.release, row.namespace or "", row.name, f"undo of audit #{row.id}", evidence={"undo": row.id})
    try:
        obj = writer.get(KIND, n.namespace, n.name)
    except (NotFound, GpuaasError) as exc:
        outcome, why = ((Outcome.skipped, "object deleted") if isinstance(exc, NotFound)
                        else (Outcome.failed, f"not released, the Workload could not be read: {exc}"))
        written = _row(store, n, outcome, why, Mode.apply, flow_run_id, refers_to=row.id)
        return Undone(outcome, why, written.id)
    hold = _hold_on(obj)
    if not hold or hold.get("audit_id") != row.id:
        return Undone(Outcome.no_op, f"not held by audit #{row.id} any more: nothing to undo")
    done = _release(n, store, writer, flow_run_id, records or _records(store, [hold]), obj)
    return Undone(Outcome.restored if done.result == Outcome.released else done.result, done.reason, done.audit_id)


def undo_holds(store: Store, writer: KubeWriter, audit_ids: Iterable[int], *,
               flow_run_id: str | None = None) -> list[NudgeResult]:
    """Release the holds named by their audit ids (the intent row or its completion row)."""
    resolved: list[tuple[int, AuditEntry | None]] = []
    for audit_id in audit_ids:
        row = store.get_audit(int(audit_id))
        if row is not None and row.refers_to is not None and row.action in NUDGE_ACTIONS:
            row = store.get_audit(row.refers_to) or row
        resolved.append((int(audit_id), row))
    records = _records(store, [{"audit_id": row.id} for _, row in resolved if row is not None])
    out = []
    for audit_id, row in resolved:
        if row is None or row.action not in NUDGE_ACTIONS or row.outcome != Outcome.planned:
            n = Nudge(NudgeAction.release, "", "", f"audit #{audit_id} is not a deadline hold or demotion")
            out.append(NudgeResult(n, Outcome.no_op, n.reason, None))
            continue
        done = undo_hold(store, writer, row, flow_run_id, records)
        n = Nudge(NudgeAction.release, row.namespace or "", row.name, done.message)
        out.append(NudgeResult(n, Outcome.released if done.result == Outcome.restored else done.result, done.message,
                               done.audit_id))
    return out
