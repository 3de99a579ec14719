"""Recovery of interrupted writes: the first step of every reclaim run in apply mode.

A run (or an undo) that dies between its audit intent and the completion row leaves a
dangling intent. Each is closed by looking at the object, never by writing to it again:

* a reclaim intent: the object carrying the ``gpuaas.io/reclaimed`` annotation with that
  audit id means the stop landed (``applied``), otherwise it did not (``failed``);
* a restore intent: see ``gpuaas.actions._restore`` (the annotation still there: ``failed``;
  gone with the prior state in place: ``restored``).

An object that cannot be read leaves its intent open for the next run.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import NamedTuple

from gpuaas.actions._kube_writer import KubeWriter
from gpuaas.actions._restore import recover_restores
from gpuaas.actions.reclaim import FLOW, RECOVERY_LOOKBACK, settle_reclaim
from gpuaas.audit_subject import owners, subject
from gpuaas.models import Outcome
from gpuaas.policy import Mode
from gpuaas.store import AuditEntry, Store

__all__ = ["Settled", "recover_interrupted", "settled_writes"]


class Settled(NamedTuple):
    """A write an interrupted run left open, as the recovery closed it from the object: what this run's own
    counts leave out, so its headline says it (a killed run's stop is otherwise seen only in the audit log)."""

    action: str
    """``reclaim`` (a stop) or ``restore`` (an undo)."""
    outcome: Outcome
    """``applied`` / ``restored`` where the write had reached the object, else what the recovery recorded."""
    intent_id: int
    """The open intent it closed: for a stop, the id ``gpuaas undo`` takes."""
    target: str
    """``RayCluster team-a/train (Workload raycluster-train-1a2b3)``, or the object alone where no owner is known."""


def settled_writes(rows: list[AuditEntry], lookup: Callable[[int], AuditEntry | None]) -> list[Settled]:
    """The completion rows ``recover_interrupted`` appended, as a run reports them: each named as ``audit list``
    names it, a stop by the owner it stopped (found up ``refers_to`` with ``lookup``, ``Store.get_audit``)."""
    owner = owners(rows, lookup)
    return [Settled(r.action, Outcome(r.outcome), int(r.refers_to or 0),
                    subject(r.kind, r.namespace, r.name, owner.get(int(r.id or 0)))) for r in rows]


def _recover_reclaims(store: Store, writer: KubeWriter, flow_run_id: str | None, now: datetime) -> list[AuditEntry]:
    # Closed by a reclaim completion; a restore intent (the undo found the stop's mark) says the stop landed. A
    # refused or failed undo (its row refers to the reclaim too) closes nothing. The store returns only the intents
    # still open: reading the whole lookback would load every decision of a week to find none.
    intents = store.open_intents(flow=FLOW, action="reclaim", mode=Mode.apply.value, since=now - RECOVERY_LOOKBACK,
                                 closed_by=[("reclaim", None), ("restore", Outcome.planned.value)])
    appended = []
    for intent in intents:
        closed = settle_reclaim(store, writer, intent, flow_run_id)
        if closed is not None:
            appended.append(closed)
    return appended


def recover_interrupted(store: Store, writer: KubeWriter, *, flow_run_id: str | None,
                        now: datetime) -> list[AuditEntry]:
    """Close every apply intent, reclaim or restore, that has no completion row; returns the rows appended."""
    return (_recover_reclaims(store, writer, flow_run_id, now)
            + recover_restores(store, writer, flow_run_id=flow_run_id, now=now))
