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

from datetime import datetime

from gpuaas.actions._kube_writer import KubeWriter
from gpuaas.actions._restore import recover_restores
from gpuaas.actions.reclaim import FLOW, RECOVERY_LOOKBACK, read_back_stop
from gpuaas.models import Outcome
from gpuaas.policy import Mode
from gpuaas.store import AuditEntry, Store

__all__ = ["recover_interrupted"]


def _recover_reclaims(store: Store, writer: KubeWriter, flow_run_id: str | None, now: datetime) -> list[AuditEntry]:
    rows = store.audit(flow=FLOW, since=now - RECOVERY_LOOKBACK, limit=None)
    completed = {r.refers_to for r in rows if r.refers_to is not None}
    appended = []
    for intent in rows:
        if intent.action != "reclaim" or intent.outcome != Outcome.planned or intent.mode != Mode.apply.value:
            continue
        if intent.id in completed:
            continue
        settled = read_back_stop(writer, intent.kind, intent.namespace or "", intent.name, int(intent.id or 0),
                                 (intent.after or {}).get("api_version"))
        if settled is None:
            continue
        outcome, why = settled
        reason = (f"recovered: the patch had reached the object before the interruption; {why}"
                  if outcome == Outcome.applied else f"recovered: the interruption came before the patch landed; {why}")
        appended.append(store.append(AuditEntry(
            flow=FLOW, flow_run_id=flow_run_id, action="reclaim", kind=intent.kind, namespace=intent.namespace,
            name=intent.name, uid=intent.uid, mode=intent.mode, outcome=outcome, reason=reason,
            evidence=intent.evidence, before=intent.before, after=intent.after,
            idempotency_key=intent.idempotency_key, refers_to=intent.id,
        )))
    return appended


def recover_interrupted(store: Store, writer: KubeWriter, *, flow_run_id: str | None,
                        now: datetime) -> list[AuditEntry]:
    """Close every apply intent, reclaim or restore, that has no completion row; returns the rows appended."""
    return (_recover_reclaims(store, writer, flow_run_id, now)
            + recover_restores(store, writer, flow_run_id=flow_run_id, now=now))
