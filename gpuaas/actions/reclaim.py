"""Carry out reclaim decisions: audit the intent, then patch, then audit the result.

Order per planned decision: GET the live object (a 404 is "object deleted"); skip it unless
its uid and resourceVersion are the ones the snapshot saw (a Workload deleted and recreated
under the same name, or edited since, is never touched), when it is being deleted or already
stopped; build the stop from the live object; skip it when a GitOps controller would set it
back, when someone started it again after a gpuaas stop less than one window ago, or when an
earlier stop of it did not hold and its spec is unchanged since (``gpuaas.actions._stop_guards``), recording the
resourceVersion it judged (``evidence["judged_version"]``: while the object keeps it, later plans skip it before
the cap, ``gpuaas.operations.reclaim.hold_unchanged``);
append the *intent* row (outcome ``planned``, the prior
state in ``before``, what the stop leaves in ``after``); in apply mode, one merge patch with
the resourceVersion read sets the stop fields and the ``gpuaas.io/reclaimed`` annotation
(``{"audit_id": <intent id>, "before": ...}``); append the completion row (``applied``,
``skipped`` or ``failed``, ``refers_to`` the intent, same idempotency key). Dry-run stops
after the intent row: GETs only, no writes. Kueue objects are read and written at the API
version the snapshot's reader negotiated.

A 200 is not taken on trust: when the answer does not show what the stop leaves (a mutating webhook set
``replicas`` back, a schema dropped the field; its ``Warning`` headers are quoted), the completion is ``failed``
with the cause ``stop-not-held``, no Event tells the team it was stopped, and the mark it carries is stale (the
object runs, ``still_stopped`` is False). While its ``metadata.generation`` stays the one that answer showed, later
runs skip it with the same cause instead of patching again. A field the schema refuses under strict validation
(``fieldValidation=Strict``) is the same, said by the API server as a 4xx.

A 409 means someone changed the object between the GET and the PATCH: it is re-read and
decided again, and since it no longer is the object the evidence was about, the decision is
"skipped, decided again next run" — never a forced write.

A PATCH whose answer is lost (timeout, connection reset, a 5xx, a body that is not JSON) may have landed: the object
is read back, and its annotation says which (this audit id: ``applied``; absent: ``failed``).
When the read-back fails too, no completion is written (the result is ``unknown``): a
"failed" row for an object that is in fact stopped would hide it from undo.

Every row that decides a key (the intent, a skip, a deferral) goes through ``Store.append_decision``: one
row per decision and attempt whatever the interleaving, so overlapping dry-runs of one window record it
once and an apply whose intent an overlapping run already holds does not write. A re-run of a decided
window (``Decision.decided_by``) records nothing new.

A skip or deferral that an earlier run already recorded unchanged (same uid, mode, outcome and ``SkipCause``,
less than ``reclaim.record_skips_every_minutes`` ago, nothing else recorded about the object since) is not
appended again: its result points at that row (``ActionResult.unchanged_since``). One read of the store per run,
the newest row of each object of the interval (``Store.newest_rows``), answers it for every decision.

A run that dies between the intent and its completion leaves a dangling intent.
``recover_interrupted`` (``gpuaas.actions._recovery``, run first, under the same lock) closes
each one the same way, by looking at the object; either way the object is acted on at most once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from gpuaas.actions._drift import Drift, drift
from gpuaas.actions._events import EventReason
from gpuaas.actions._kube_writer import INDEFINITE, KubeWriter, unknown_fields
from gpuaas.actions._patches import (
    StopMethod,
    StopPlan,
    live_values,
    reclaimed_by,
    stop_patch,
    stop_plan,
    stopped_reason,
)
from gpuaas.actions._stop_guards import being_deleted, held_back, not_held
from gpuaas.errors import Conflict, GpuaasError, Invalid, NotFound, error_line
from gpuaas.models import Outcome
from gpuaas.policies.reclaim import (
    KEPT_BY_THE_OBJECT,
    Decision,
    LastRow,
    SkipCause,
    unchanged_phrase,
    unchanged_since,
)
from gpuaas.policy import FreeGoal, Mode
from gpuaas.store import AuditEntry, NewestRow, Store, utc_now

__all__ = ["FLOW", "ActionResult", "already_decided", "execute_decisions", "last_row", "read_back_stop",
           "recently_restored", "settle_reclaim"]

FLOW = "reclaim"
RECOVERY_LOOKBACK = timedelta(days=7)


@dataclass(frozen=True)
class ActionResult:
    """What became of one decision; ``audit_id`` is the row to pass to ``undo``."""

    decision: Decision
    result: Outcome
    reason: str
    audit_id: int | None
    method: StopMethod | None = None
    frees: FreeGoal | None = None
    cause: SkipCause | None = None
    """Why it was skipped or deferred, as a type (the decision's, or the action's own: ``object-deleted``, ...)."""
    unchanged_since: datetime | None = None
    """Set when this run recorded nothing: the skip is unchanged since ``audit_id``, written at this time."""


class _Audit:
    def __init__(self, store: Store, flow_run_id: str | None, clock: Callable[[], datetime],
                 newest: Mapping[tuple[str, str, str], NewestRow], every: timedelta) -> None:
        self.store, self.flow_run_id, self.clock = store, flow_run_id, clock
        self.newest, self.every, self.started = newest, every, clock()

    def _entry(self, d: Decision, outcome: str, reason: str, refers_to: int | None,
               before: dict[str, Any] | None, after: dict[str, Any] | None,
               cause: SkipCause | None = None, version: str | None = None) -> AuditEntry:
        """``version``: the resourceVersion a guard judged, which a later plan compares (``still_held_back``)."""
        evidence = d.evidence if cause is None else {**d.evidence, "cause": str(cause)}
        if version is not None:
            evidence = {**evidence, "judged_version": str(version)}
        return AuditEntry(
            created_at=self.clock(), flow=FLOW, flow_run_id=self.flow_run_id, action="reclaim", kind=d.kind,
            namespace=d.namespace, name=d.name, uid=d.uid, mode=d.mode, outcome=outcome, reason=reason[:2000],
            evidence=evidence, before=before, after=after, idempotency_key=d.idempotency_key, refers_to=refers_to,
        )

    def unchanged(self, d: Decision, outcome: str, cause: SkipCause | None,
                  version: str | None = None) -> LastRow | None:
        """The row an earlier run recorded this skip or deferral in, unchanged since (``unchanged_since``; ``version``:
        the resourceVersion a guard judged), or None."""
        row = self.newest.get((d.kind, d.namespace, d.name))
        last = None if row is None else last_row(row)
        return unchanged_since(last, uid=d.uid, mode=d.mode, outcome=outcome, cause=cause, at=self.started,
                               every=self.every, version=version)

    def skip(self, d: Decision, cause: SkipCause, why: str, version: str | None = None) -> ActionResult:
        """A planned decision the action itself skips before any write: recorded, or pointed at where unchanged."""
        last = self.unchanged(d, Outcome.skipped, cause, version)
        if last is not None:
            return ActionResult(d, Outcome.skipped, f"{why} ({unchanged_phrase(last)})", last.audit_id, cause=cause,
                                unchanged_since=last.at)
        row = self.store.append_decision(self._entry(d, Outcome.skipped, why, None, None, None, cause, version))[0]
        return ActionResult(d, Outcome.skipped, why, row.id, cause=cause)

    def decision(self, d: Decision, outcome: str, reason: str, *, before: dict[str, Any] | None = None,
                 after: dict[str, Any] | None = None) -> tuple[AuditEntry, bool]:
        """The row deciding ``d`` for its window, recorded once (``Store.append_decision``): (row, new)."""
        return self.store.append_decision(self._entry(d, outcome, reason, None, before, after))

    def decisions(self, ds: Sequence[Decision]) -> list[tuple[AuditEntry, bool]]:
        """``decision`` for many decisions at their own outcome, reason and cause, in one transaction; a skip the plan
        repeated for an unchanged object (``hold_unchanged``) records the resourceVersion again, for the next plan."""
        return self.store.append_decisions([self._entry(d, d.outcome, d.reason, None, None, None, d.cause,
                                                        _judged(d)) for d in ds])

    def row(self, d: Decision, outcome: str, reason: str, *, refers_to: int | None = None,
            before: dict[str, Any] | None = None, after: dict[str, Any] | None = None,
            cause: SkipCause | None = None, version: str | None = None) -> AuditEntry:
        """A completion of the decision ``refers_to``."""
        return self.store.append(self._entry(d, outcome, reason, refers_to, before, after, cause, version))


def last_row(row: NewestRow) -> LastRow:
    """The store's newest row of an object as the pure skip rules read it (``unchanged_since``, ``still_held_back``)."""
    return LastRow(row.audit_id, row.created_at, row.uid, row.mode, row.outcome, row.cause, row.version,
                   row.reason or "", row.refers_to)


def _judged(d: Decision) -> str | None:
    """The resourceVersion a skip the plan repeated for an unchanged object was judged on (``hold_unchanged``)."""
    return d.resource_version if d.cause in KEPT_BY_THE_OBJECT else None


def already_decided(store: Store, keys: Iterable[str]) -> dict[str, int]:
    """Keys whose latest audit row is ``planned`` or ``applied``, mapped to their first row's id."""
    rows: dict[str, list[AuditEntry]] = {}
    for row in store.audit(idempotency_keys=list(keys), limit=None):  # oldest first
        rows.setdefault(str(row.idempotency_key), []).append(row)
    return {key: int(held[0].id or 0) for key, held in rows.items() if held[-1].outcome in (Outcome.planned, Outcome.applied)}


def recently_restored(store: Store, since: datetime) -> dict[tuple[str, str, str], tuple[int, datetime]]:
    """(kind, namespace, name) -> (audit id, time) of the latest restore since ``since``.

    ``finalize_decisions`` skips these: a window that reaches back before the restore saw the
    object stopped by gpuaas itself, which is no evidence that its team left it idle.
    """
    out: dict[tuple[str, str, str], tuple[int, datetime]] = {}
    for row in store.audit(flow=FLOW, since=since, limit=None):
        if row.action == "restore" and row.outcome == Outcome.restored:
            out[(row.kind, row.namespace or "", row.name)] = (int(row.id or 0), row.created_at)
    return out


_DRIFT_CAUSE = {Drift.unknown: SkipCause.no_uid, Drift.recreated: SkipCause.recreated, Drift.edited: SkipCause.changed}


def _changed(d: Decision, obj: dict[str, Any]) -> tuple[SkipCause, str] | None:
    """Why the live ``obj`` is not to be stopped as the snapshot's object (``drift``), being deleted or already
    stopped; None when it is to be."""
    moved = drift(d.uid, d.resource_version, obj)
    if moved is not None and moved[0] is not Drift.edited:
        return _DRIFT_CAUSE[moved[0]], moved[1]
    if (deleting := being_deleted(obj)) is not None:  # before the edit: the deletion itself changed the resourceVersion
        return SkipCause.being_deleted, deleting
    if moved is not None:
        return _DRIFT_CAUSE[moved[0]], moved[1]
    stopped = stopped_reason(d.kind, obj)
    return None if stopped is None else (SkipCause.found_stopped, stopped)


def read_back_stop(writer: KubeWriter, kind: str, namespace: str, name: str, audit_id: int,
                   version: str | None = None) -> tuple[Outcome, str, dict[str, Any] | None] | None:
    """Did the stop of intent ``audit_id`` land? (outcome, why, the object read) from the object, or None when it
    cannot be read."""
    try:
        obj = writer.get(kind, namespace, name, version=version)
    except NotFound:
        return Outcome.failed, "the object is gone", None
    except GpuaasError:
        return None
    mark = reclaimed_by(obj)
    if mark is not None and mark.get("audit_id") == audit_id:
        return Outcome.applied, f"the object carries the gpuaas.io/reclaimed annotation of audit #{audit_id}", obj
    return Outcome.failed, "the object does not carry its gpuaas.io/reclaimed annotation: not changed", obj


def settle_reclaim(store: Store, writer: KubeWriter, intent: AuditEntry, flow_run_id: str | None) -> AuditEntry | None:
    """Close the apply intent ``intent`` that has no completion (a run killed between the two) from the object:
    ``applied`` when it carries the intent's annotation, else ``failed``; None (left open) when it cannot be read."""
    settled = read_back_stop(writer, intent.kind, intent.namespace or "", intent.name, int(intent.id or 0),
                             (intent.after or {}).get("api_version"))
    if settled is None:
        return None
    outcome, why, _ = settled
    reason = (f"recovered: the patch had reached the object before the interruption; {why}"
              if outcome == Outcome.applied else f"recovered: the interruption came before the patch landed; {why}")
    return store.append(AuditEntry(
        flow=FLOW, flow_run_id=flow_run_id, action="reclaim", kind=intent.kind, namespace=intent.namespace,
        name=intent.name, uid=intent.uid, mode=intent.mode, outcome=outcome, reason=reason,
        evidence=intent.evidence, before=intent.before, after=intent.after,
        idempotency_key=intent.idempotency_key, refers_to=intent.id,
    ))


def _frees(plan_frees: FreeGoal) -> str:
    return "compute, the reservation is kept" if plan_frees is FreeGoal.compute else "quota"


def _act(d: Decision, audit: _Audit, writer: KubeWriter, mode: Mode, now: datetime) -> ActionResult:
    try:
        obj = writer.get(d.kind, d.namespace, d.name, version=d.api_version)
    except NotFound:
        return audit.skip(d, SkipCause.object_deleted, "object deleted")
    changed = _changed(d, obj)
    if changed:
        return audit.skip(d, *changed)
    plan = stop_plan(d.kind, obj, d.free, now)
    # The live object is the snapshot's (``_changed``): a guard judges it at d.resource_version, recorded for the plans.
    if (held := held_back(d, obj, plan, audit.store, now, FLOW)) is not None:
        return audit.skip(d, *held, version=d.resource_version)
    after: dict[str, Any] = {**plan.after(), "frees": plan.frees}
    if d.api_version:
        after["api_version"] = d.api_version
    intent, new = audit.decision(d, Outcome.planned, d.reason, before=plan.before(), after=after)
    if not new:  # an overlapping run recorded this decision first: it is that run's to carry out
        why = f"already decided for this window (audit #{intent.id}, an overlapping run)"
        return ActionResult(d, Outcome.skipped, why, intent.id, cause=SkipCause.already_decided)
    result = ActionResult(d, Outcome.planned, d.reason, intent.id, plan.method, plan.frees)
    if mode is not Mode.apply:
        return result
    reason = f"{plan.method}: frees {_frees(plan.frees)}"
    try:
        patched = writer.patch(d.kind, d.namespace, d.name, stop_patch(plan, obj, int(intent.id or 0)),
                               version=d.api_version)
    except Conflict:
        why = _redecide_after_conflict(d, writer)
        audit.row(d, Outcome.skipped, why, refers_to=intent.id)
        return ActionResult(d, Outcome.skipped, why, intent.id, plan.method, plan.frees)
    except NotFound:
        audit.row(d, Outcome.skipped, "object deleted", refers_to=intent.id)
        return ActionResult(d, Outcome.skipped, "object deleted", intent.id, plan.method, plan.frees)
    except INDEFINITE as exc:  # a lost answer or a 5xx can hide a write that landed: read the object back
        return _settle(d, audit, writer, intent, plan, after, reason, str(exc)[:300])
    except Invalid as exc:
        if not unknown_fields(exc):
            return _failed(d, audit, intent, plan, exc)
        # Refused whole (strict validation): as a stop that did not hold, not tried again on the same spec.
        return _not_held(d, audit, intent, plan, after, obj, f"{exc}; nothing changed")
    except GpuaasError as exc:
        return _failed(d, audit, intent, plan, exc)
    warned = writer.last_warnings
    if missing := not_held(plan, patched):
        return _not_held(d, audit, intent, plan, after, patched, _not_held_words(missing, warned))
    if warned:
        reason += f" (the API server warned: {'; '.join(warned)})"
    done = {**after, "resourceVersion": patched["metadata"].get("resourceVersion")}
    audit.row(d, Outcome.applied, reason, refers_to=intent.id, before=plan.before(), after=done)
    _stopped_event(writer, patched, d, reason, intent)
    return ActionResult(d, Outcome.applied, reason, intent.id, plan.method, plan.frees)


def _failed(d: Decision, audit: _Audit, intent: AuditEntry, plan: StopPlan, exc: GpuaasError) -> ActionResult:
    """A refused or failed write: the whole error in the audit row; in the result, cut as every result line is, but an
    admission denial whole (``error_line``: which rule refused it, and why, is its point)."""
    audit.row(d, Outcome.failed, str(exc), refers_to=intent.id)
    return ActionResult(d, Outcome.failed, error_line(exc), intent.id, plan.method, plan.frees)


def _not_held_words(missing: list[str], warned: tuple[str, ...]) -> str:
    warning = f"; the API server warned: {'; '.join(warned)}" if warned else ""
    return (f"the stop did not hold: the API server answered 200 but {', '.join(missing)}{warning} (a mutating "
            "admission webhook or policy, or a schema without the field); nothing freed")


def _not_held(d: Decision, audit: _Audit, intent: AuditEntry, plan: StopPlan, after: dict[str, Any],
              seen: dict[str, Any], words: str) -> ActionResult:
    """A stop the object does not show: ``failed``, no Event, and the generation it was tried on, which later
    runs compare (``stop_not_held_before``) so that the same refused stop is not made again every run; and the
    resourceVersion the object was left at, which a later plan compares (``still_held_back``)."""
    meta = seen.get("metadata") or {}
    why = f"{words}; not tried again while its spec is unchanged (generation {meta.get('generation')})"
    done = {**after, "resourceVersion": meta.get("resourceVersion"), "generation": meta.get("generation"),
            "answer": live_values(plan.after(), seen)}
    audit.row(d, Outcome.failed, why, refers_to=intent.id, before=plan.before(), after=done,
              cause=SkipCause.stop_not_held, version=meta.get("resourceVersion"))
    return ActionResult(d, Outcome.failed, why[:500], intent.id, plan.method, plan.frees,
                        cause=SkipCause.stop_not_held)


def _stopped_event(writer: KubeWriter, obj: dict[str, Any], d: Decision, reason: str, intent: AuditEntry) -> None:
    """The Event its team sees in ``kubectl describe``: why it was stopped, and how to restore it."""
    writer.record_event(obj, EventReason.reclaimed, f"Stopped by gpuaas: {d.reason}; {reason}. "
                                                    f"Audit #{intent.id}; to restore it: gpuaas undo {intent.id}")


def _settle(d: Decision, audit: _Audit, writer: KubeWriter, intent: AuditEntry, plan: StopPlan,
            after: dict[str, Any], reason: str, error: str) -> ActionResult:
    """The PATCH raised without a definite answer: the object says whether the stop landed."""
    settled = read_back_stop(writer, d.kind, d.namespace, d.name, int(intent.id or 0), d.api_version)
    if settled is None:
        why = (f"the PATCH got no usable answer ({error}) and the read-back failed: the intent stays open, "
               "the next run settles it from the object")
        return ActionResult(d, Outcome.unknown, why, intent.id, plan.method, plan.frees)
    outcome, seen, obj = settled
    if outcome == Outcome.applied and obj is not None and (missing := not_held(plan, obj)):
        return _not_held(d, audit, intent, plan, after, obj, f"the stop did not hold: the answer was lost ({error}) "
                                                             f"and the object read back shows {', '.join(missing)}")
    why = (f"{reason} (the response was lost: {error}; read back: {seen})" if outcome == Outcome.applied
           else f"{error} (read back: {seen})")
    audit.row(d, outcome, why, refers_to=intent.id, before=plan.before(), after=after)
    if outcome == Outcome.applied and obj is not None:  # it landed: its team is told as if the answer had come
        _stopped_event(writer, obj, d, reason, intent)
    return ActionResult(d, outcome, why[:500], intent.id, plan.method, plan.frees)


def _redecide_after_conflict(d: Decision, writer: KubeWriter) -> str:
    """409: re-read and decide again on what is there now; a changed object is never overwritten."""
    try:
        obj = writer.get(d.kind, d.namespace, d.name, version=d.api_version)
    except NotFound:
        return "409 Conflict, then the object was deleted"
    rv = obj["metadata"].get("resourceVersion")
    now_stopped = stopped_reason(d.kind, obj)
    state = f"now {now_stopped}" if now_stopped else "still running"
    return (f"409 Conflict: changed by someone else while acting; re-read resourceVersion {rv} ({state}): "
            "not overwritten, decided again next run")


def execute_decisions(decisions: Sequence[Decision], store: Store, writer: KubeWriter, *, mode: Mode,
                      flow_run_id: str | None, now: datetime, record_skips_every: timedelta = timedelta(0),
                      clock: Callable[[], datetime] = utc_now) -> list[ActionResult]:
    """Audit every decision; act on the planned ones (write only in apply mode). The rows that
    decide without acting (deferrals over the cap, skips) are appended first, in one transaction.

    ``record_skips_every`` (``reclaim.record_skips_every_minutes``): a skip or deferral unchanged since a row of
    that age or less is not appended again, its result names that row; zero records every run. ``clock`` stamps
    the rows and measures that age (the wall clock; ``now`` is the instant the decisions were made for).
    """
    newest = (store.newest_rows(flow=FLOW, since=clock() - record_skips_every, detail=KEPT_BY_THE_OBJECT)
              if record_skips_every > timedelta(0) and decisions else {})
    audit = _Audit(store, flow_run_id, clock, newest, record_skips_every)
    unacted = [d for d in decisions if d.decided_by is None and d.outcome != Outcome.planned]
    earlier = {id(d): last for d in unacted
               if (last := audit.unchanged(d, d.outcome, d.cause, _judged(d))) is not None}
    new = [d for d in unacted if id(d) not in earlier]
    recorded = {id(d): row.id for d, (row, _) in zip(new, audit.decisions(new), strict=True)}
    results = []
    for d in decisions:
        if d.decided_by is not None:  # a re-run of a decided window records nothing new
            results.append(ActionResult(d, d.outcome, d.reason, d.decided_by, cause=d.cause))
        elif (last := earlier.get(id(d))) is not None:  # unchanged since an earlier run's row: that row holds it
            results.append(ActionResult(d, d.outcome, f"{d.reason} ({unchanged_phrase(last)})", last.audit_id,
                                        cause=d.cause, unchanged_since=last.at))
        elif d.outcome != Outcome.planned:
            results.append(ActionResult(d, d.outcome, d.reason, recorded[id(d)], cause=d.cause))
        else:
            results.append(_act(d, audit, writer, mode, now))
    return results
