"""The patch loop of a quota plan, shared by its apply, its rollback, the recovery and the undo.

Each step re-reads its queue, refuses a queue someone else changed (its nominal quota, or one of
the recorded entries: a limit), patches with the resourceVersion just read and audits the write as a
``quota-change`` row. Where the intent recorded the queue's entries (``_quota_record``), an apply
writes the recorded ``after`` over a queue still at ``before`` and every restore writes ``before``
over a queue still at ``after``, the prior ``gpuaas.io/quota-plan`` with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from gpuaas.actions._events import EventReason
from gpuaas.actions._kube_writer import KubeWriter
from gpuaas.actions._quota_patches import Difference, entries_patch, gpu_nominal, only, plan_mark, quota_patch
from gpuaas.actions._quota_record import QueueRecord
from gpuaas.errors import Conflict, Forbidden, GpuaasError, NotFound
from gpuaas.models import Outcome
from gpuaas.permissions import ROLES, bind_command
from gpuaas.store import AuditEntry, Store

__all__ = ["CHANGE_ACTION", "FLOW", "KIND", "PLAN_ACTION", "Ctx", "Moves", "Why", "audit_row", "changed_words",
           "landed", "move", "moved_for", "refused"]

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


def audit_row(ctx: Ctx, action: str, kind: str, name: str, outcome: str, reason: str, *, mode: str = "apply",
              before: dict[str, Any] | None = None, after: dict[str, Any] | None = None,
              evidence: dict[str, Any] | None = None, key: str | None = None) -> AuditEntry:
    return ctx.store.append(AuditEntry(
        flow=FLOW, flow_run_id=ctx.flow_run_id, action=action, kind=kind, name=name, mode=mode, outcome=outcome,
        reason=reason[:2000], evidence=evidence or {}, before=before, after=after, idempotency_key=key,
        refers_to=ctx.plan_id or None))


def refused(exc: GpuaasError) -> str:
    """The error as the audit row says it; a 403 also names the role that grants the rebalance's accesses."""
    words = str(exc)[:500]
    if isinstance(exc, Forbidden) and exc.status == 403:
        words += f"; {bind_command(ROLES[FLOW])}"
    return words


def changed_words(diffs: Sequence[Difference], expected_as: str) -> tuple[str, str]:
    """(``limits`` or ``quota``: what someone changed, each difference in words)."""
    what = "quota" if any(d.field == "nominalQuota" for d in diffs) else "limits"
    return what, ", ".join(d.says(expected_as) for d in diffs)


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


def move(ctx: Ctx, moves: Moves, why: Why) -> tuple[list[str], str | None]:
    """Patch in the safe order; (queues patched, or the reason it stopped). Each step audited."""
    done: list[str] = []
    for queue, step in ordered(moves):
        for attempt in (1, 2):
            try:
                obj = ctx.writer.get_cluster_scoped(KIND, queue)
            except NotFound:
                return done, f"{queue}: ClusterQueue deleted"
            except GpuaasError as exc:  # the read before the patch is part of the write: stop as a refused patch does
                return done, f"{queue}: {refused(exc)}"
            now = gpu_nominal(obj, ctx.gpu_resources)
            moved = {f: now.get(f) for f, (frm, _) in step.items() if now.get(f) != frm}
            if moved:
                words = ", ".join(f"{f} is {v}, expected {step[f][0]}" for f, v in moved.items())
                return done, f"{queue}: quota changed by someone else ({words}); not overwritten"
            prepared = _step_patch(ctx, queue, obj, step, why)
            if isinstance(prepared, str):
                return done, prepared
            body, evidence = prepared
            try:
                patched = ctx.writer.patch_cluster_scoped(KIND, queue, body)
            except Conflict:
                if attempt == 2:
                    return done, f"{queue}: 409 Conflict twice; not overwritten"
                continue
            except GpuaasError as exc:
                return done, f"{queue}: {refused(exc)}"
            _record(ctx, queue, patched, step, why, evidence)
            done.append(queue)
            break
    return done, None


def _record(ctx: Ctx, queue: str, patched: dict[str, Any], step: Mapping[str, tuple[int, int]], why: Why,
            evidence: dict[str, Any]) -> None:
    """The Event on the queue and the ``quota-change`` row of a patch that landed."""
    rv = (patched.get("metadata") or {}).get("resourceVersion")
    changes = ", ".join(f"{f} {a} -> {b}" for f, (a, b) in step.items())
    if why is Why.apply:
        ctx.writer.record_event(patched, EventReason.quota_moved, f"Nominal GPU quota moved by gpuaas "
                                f"rebalance: {changes}. Plan #{ctx.plan_id}; to reverse it: gpuaas undo "
                                f"{ctx.plan_id}")
    else:
        ctx.writer.record_event(patched, EventReason.quota_restored, f"Nominal GPU quota restored by "
                                f"gpuaas ({why.value} of plan #{ctx.plan_id}): {changes}")
    audit_row(ctx, CHANGE_ACTION, KIND, queue, Outcome.applied if why is Why.apply else Outcome.restored,
              f"{why.value}: {changes}", before={f: a for f, (a, _) in step.items()},
              after={**{f: b for f, (_, b) in step.items()}, "resourceVersion": rv},
              evidence={**evidence, "why": why.value})
