"""The patch loop of a quota plan, shared by its apply, its rollback, the recovery and the undo.

Each step re-reads its queue, refuses a queue someone else changed (its nominal quota, or one of
the recorded entries: a limit), patches with the resourceVersion just read and audits the write as a
``quota-change`` row. Where the intent recorded the queue's entries (``_quota_record``), an apply
writes the recorded ``after`` over a queue still at ``before`` and every restore writes ``before``
over a queue still at ``after``, the prior ``gpuaas.io/quota-plan`` with it.

A patch whose answer is lost (no answer, a 5xx, a body that is not JSON: ``INDEFINITE``) may have
landed all the same, so the queue is read back: at the step's target it landed (audited, and part of
what a rollback puts back), at its start it did not (the loop stops), anything else is someone else's
change (the loop stops). A read-back that fails too leaves the outcome unknown: the loop stops
``unsettled`` and audits that, and its caller leaves its intent open for whoever settles it from the
objects (the next run's recovery, the next undo) instead of closing it on a guess.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

from gpuaas.actions._events import EventReason
from gpuaas.actions._kube_writer import INDEFINITE, KubeWriter
from gpuaas.actions._quota_patches import Difference, entries_patch, gpu_nominal, only, plan_mark, quota_patch
from gpuaas.actions._quota_record import QueueRecord
from gpuaas.errors import Conflict, Forbidden, GpuaasError, NotFound, error_line
from gpuaas.models import Outcome
from gpuaas.permissions import ROLES, bind_command
from gpuaas.store import AuditEntry, Store

__all__ = ["CHANGE_ACTION", "FLOW", "KIND", "PLAN_ACTION", "Ctx", "Moved", "Moves", "Why", "audit_found", "audit_row",
           "changed_words", "holds", "landed", "move", "moved_for", "refused"]

FLOW = "rebalance"
PLAN_ACTION = "quota-plan"
CHANGE_ACTION = "quota-change"
KIND = "ClusterQueue"
Moves = dict[str, dict[str, tuple[int, int]]]
"""queue -> flavor -> (from, to)."""


class Why(StrEnum):
    """Why a step is patched: a plan applied, or one of the three ways it is put back. Kept in each change
    row's evidence (``why``): the day's cap counts an apply and a rollback, an undo's resumption its own rows."""

    apply = "apply"
    rollback = "rollback"
    undo = "undo"


def moved_for(row: AuditEntry) -> Why | None:
    """What a ``quota-change`` row was written for: its evidence's ``why``, or, in a row written before
    that was kept, ``apply`` when it is ``applied`` (only an apply is) and else the word its reason starts with."""
    recorded = (row.evidence or {}).get("why")
    if isinstance(recorded, str) and recorded in Why.__members__:
        return Why(recorded)
    if row.outcome == Outcome.applied:
        return Why.apply
    word = row.reason.split(":", 1)[0]
    return Why(word) if word in Why.__members__ else None


@dataclass(frozen=True)
class Ctx:
    store: Store
    writer: KubeWriter
    plan_id: int
    cohort: str
    flow_run_id: str | None
    gpu_resources: Sequence[str]
    manage_limits: bool
    """The rule for a queue the intent recorded no entries of (an intent written before they were)."""
    records: Mapping[str, QueueRecord] = field(default_factory=dict)


def ordered(moves: Moves) -> list[tuple[str, dict[str, tuple[int, int]]]]:
    """Per queue its decreases as one step, its increases as another; every decrease first."""
    down = [(q, {f: m for f, m in fl.items() if m[1] < m[0]}) for q, fl in sorted(moves.items())]
    up = [(q, {f: m for f, m in fl.items() if m[1] > m[0]}) for q, fl in sorted(moves.items())]
    return [(q, step) for q, step in down + up if step]


def landed(moves: Moves, steps_done: int) -> Moves:
    """The reverse of the first ``steps_done`` steps of ``moves`` in patch order (what to roll back)."""
    back: Moves = {}
    for queue, step in ordered(moves)[:steps_done]:
        for f, (a, b) in step.items():
            back.setdefault(queue, {})[f] = (b, a)
    return back


class Moved(NamedTuple):
    """What a patch loop did: the queues patched (in order), why it stopped (None: it went through)."""

    done: list[str]
    stopped: str | None = None
    unsettled: bool = False
    """The last patch got no usable answer and its queue could not be read back: whether it landed is unknown,
    so nothing may be closed or rolled back on a guess (the caller leaves its intent open)."""


def audit_row(ctx: Ctx, action: str, kind: str, name: str, outcome: str, reason: str, *, mode: str = "apply",
              before: dict[str, Any] | None = None, after: dict[str, Any] | None = None,
              evidence: dict[str, Any] | None = None, key: str | None = None,
              refers_to: int | None = None) -> AuditEntry:
    """One row of the plan (``refers_to``: another row instead, an undo's completion its undo's intent)."""
    return ctx.store.append(AuditEntry(
        flow=FLOW, flow_run_id=ctx.flow_run_id, action=action, kind=kind, name=name, mode=mode, outcome=outcome,
        reason=reason[:2000], evidence=evidence or {}, before=before, after=after, idempotency_key=key,
        refers_to=refers_to or ctx.plan_id or None))


def refused(exc: GpuaasError) -> str:
    """The error as the audit row says it (an admission denial whole: ``error_line``); RBAC's 403 also names the role
    that grants the rebalance's accesses, never a webhook's or a policy's (``AdmissionDenied``, not ``Forbidden``):
    no role lets that write through."""
    words = error_line(exc)
    if isinstance(exc, Forbidden) and exc.status == 403:
        words += f"; {bind_command(ROLES[FLOW])}"
    return words


def changed_words(diffs: Sequence[Difference], expected_as: str) -> tuple[str, str]:
    """(``limits`` or ``quota``: what someone changed, each difference in words)."""
    what = "quota" if any(d.field == "nominalQuota" for d in diffs) else "limits"
    return what, ", ".join(d.says(expected_as) for d in diffs)


def holds(ctx: Ctx, queue: str, obj: Mapping[str, Any], step: Mapping[str, tuple[int, int]], why: Why, *,
          target: bool) -> list[str]:
    """How ``obj`` differs from the step's target (``target``) or from its start, in words; [] when it holds it.

    The nominal quota of each flavor and, where the intent recorded the queue, each moved entry (limits
    included): an apply goes from the recorded ``before`` to ``after``, every restore the other way."""
    now = gpu_nominal(obj, ctx.gpu_resources)
    at = 1 if target else 0
    words = [f"{f} is {now.get(f)}, expected {m[at]}" for f, m in step.items() if now.get(f) != m[at]]
    record = ctx.records.get(queue)
    if words or record is None or not record.covers(step):
        return words
    diffs = record.differences(obj, ctx.gpu_resources, step, landed=(why is Why.apply) == target)
    return [d.says("expected") for d in diffs]


def _step_patch(ctx: Ctx, queue: str, obj: Mapping[str, Any], step: Mapping[str, tuple[int, int]],
                why: Why) -> tuple[dict[str, Any], dict[str, Any]] | str:
    """The step's patch and its change row's evidence, or why it is not written (a recorded entry moved)."""
    record = ctx.records.get(queue)
    if record is None or not record.covers(step):
        target = {f: to for f, (_, to) in step.items()}
        return quota_patch(obj, target, ctx.plan_id, ctx.gpu_resources, manage_limits=ctx.manage_limits,
                           restore=why is not Why.apply), {}
    applying = why is Why.apply
    diffs = record.differences(obj, ctx.gpu_resources, step, landed=not applying)
    if diffs:
        what, words = changed_words(diffs, "expected")
        return f"{queue}: {what} changed by someone else ({words}); not overwritten"
    expected, wanted = (record.before, record.after) if applying else (record.after, record.before)
    mark = plan_mark(ctx.plan_id, record.before) if applying else record.restored_mark(obj, ctx.plan_id)
    return (entries_patch(obj, only(wanted, step), mark),
            {"entries": {"before": only(expected, step), "after": only(wanted, step)}})


def move(ctx: Ctx, moves: Moves, why: Why) -> Moved:
    """Patch in the safe order; the queues patched, or why it stopped. Each step audited."""
    done: list[str] = []
    for queue, step in ordered(moves):
        for attempt in (1, 2):
            try:
                obj = ctx.writer.get_cluster_scoped(KIND, queue)
            except NotFound:
                return Moved(done, f"{queue}: ClusterQueue deleted")
            except GpuaasError as exc:  # the read before the patch is part of the write: stop as a refused patch does
                return Moved(done, f"{queue}: {refused(exc)}")
            now = gpu_nominal(obj, ctx.gpu_resources)
            moved = {f: now.get(f) for f, (frm, _) in step.items() if now.get(f) != frm}
            if moved:
                words = ", ".join(f"{f} is {v}, expected {step[f][0]}" for f, v in moved.items())
                return Moved(done, f"{queue}: quota changed by someone else ({words}); not overwritten")
            prepared = _step_patch(ctx, queue, obj, step, why)
            if isinstance(prepared, str):
                return Moved(done, prepared)
            body, evidence = prepared
            try:
                patched = ctx.writer.patch_cluster_scoped(KIND, queue, body)
            except Conflict:
                if attempt == 2:
                    return Moved(done, f"{queue}: 409 Conflict twice; not overwritten")
                continue
            except INDEFINITE as exc:  # the patch may have landed all the same: the object says whether
                found = _read_back(ctx, queue, step, why, evidence, refused(exc))
                if found is not None:
                    return found._replace(done=done)
                done.append(queue)
                break
            except GpuaasError as exc:
                return Moved(done, f"{queue}: {refused(exc)}")
            _record(ctx, queue, patched, step, why, evidence)
            done.append(queue)
            break
    return Moved(done)


def _read_back(ctx: Ctx, queue: str, step: Mapping[str, tuple[int, int]], why: Why, evidence: dict[str, Any],
               error: str) -> Moved | None:
    """After a patch whose answer was lost: None when the queue holds the step's target (the patch landed: its
    change row is written here), else why the loop stops (``unsettled`` when the queue cannot be read either)."""
    lost = f"{queue}: the PATCH got no usable answer ({error})"
    try:
        obj = ctx.writer.get_cluster_scoped(KIND, queue)
    except NotFound:
        return Moved([], f"{lost}; read back, the ClusterQueue is deleted")
    except GpuaasError as exc:
        changes = ", ".join(f"{f} {a} -> {b}" for f, (a, b) in step.items())
        reason = (f"{why.value}: {changes}: the PATCH got no usable answer ({error}) and the read-back failed "
                  f"({refused(exc)}): whether it landed is unknown; left for the objects to settle")
        # No before/after: a change not known to have landed is no move (the day's cap, the undo count moves).
        audit_row(ctx, CHANGE_ACTION, KIND, queue, Outcome.unknown, reason,
                  evidence={**evidence, "why": why.value, "step": {f: list(m) for f, m in step.items()}})
        return Moved([], f"{lost} and the read-back failed ({refused(exc)}): whether it landed is unknown",
                     unsettled=True)
    if not holds(ctx, queue, obj, step, why, target=True):
        _record(ctx, queue, obj, step, why, evidence, note=f" (the PATCH's answer was lost: {error}; read back, "
                                                            "it had landed)")
        return None
    if not holds(ctx, queue, obj, step, why, target=False):
        return Moved([], f"{lost}; read back, it had not landed")
    words = "; ".join(holds(ctx, queue, obj, step, why, target=True))
    return Moved([], f"{lost}; read back, the queue holds neither the plan's values nor the ones before ({words}): "
                     "changed by someone else, not overwritten")


def audit_found(ctx: Ctx, queue: str, obj: dict[str, Any], step: Mapping[str, tuple[int, int]], why: Why,
                note: str) -> None:
    """The ``quota-change`` row of a patch found landed on ``obj`` by reading it (its run died before the answer
    or the row came): what a rollback and the undo count as put back, and the day's cap as moved."""
    record = ctx.records.get(queue)
    evidence: dict[str, Any] = {}
    if record is not None and record.covers(step):
        expected, wanted = (record.before, record.after) if why is Why.apply else (record.after, record.before)
        evidence = {"entries": {"before": only(expected, step), "after": only(wanted, step)}}
    _record(ctx, queue, obj, step, why, evidence, note=note, event=False)


def _record(ctx: Ctx, queue: str, patched: dict[str, Any], step: Mapping[str, tuple[int, int]], why: Why,
            evidence: dict[str, Any], *, note: str = "", event: bool = True) -> None:
    """The Event on the queue (``event``) and the ``quota-change`` row of a patch that landed (``note``: how that
    is known, when not from the patch's own answer)."""
    rv = (patched.get("metadata") or {}).get("resourceVersion")
    changes = ", ".join(f"{f} {a} -> {b}" for f, (a, b) in step.items())
    if event and why is Why.apply:
        ctx.writer.record_event(patched, EventReason.quota_moved, f"Nominal GPU quota moved by gpuaas "
                                f"rebalance: {changes}. Plan #{ctx.plan_id}; to reverse it: gpuaas undo "
                                f"{ctx.plan_id}")
    elif event:
        ctx.writer.record_event(patched, EventReason.quota_restored, f"Nominal GPU quota restored by "
                                f"gpuaas ({why.value} of plan #{ctx.plan_id}): {changes}")
    audit_row(ctx, CHANGE_ACTION, KIND, queue, Outcome.applied if why is Why.apply else Outcome.restored,
              f"{why.value}: {changes}{note}", before={f: a for f, (a, _) in step.items()},
              after={**{f: b for f, (_, b) in step.items()}, "resourceVersion": rv},
              evidence={**evidence, "why": why.value})
