"""The newest audit rows a run compares with: each object's newest row lately, and one object's last rows.

A part of ``Store`` (``Sessions``): the store hands out the sessions.

A reclaim run that would skip an object for the same cause as the last run points at that run's row instead of
appending another (``gpuaas.policies.reclaim.unchanged_since``). It needs, per object, the newest row of the
last interval, and of that row only its id, time, uid, mode, outcome and ``evidence["cause"]``: one query on
the (flow, created_at, id) index, reading those columns alone, never the evidence of every row of the log.

A stop about to be made asks whether the same stop failed to hold before (``gpuaas.actions._stop_guards``):
that needs the newest rows about that one object, found through the ``name`` index, not the object filter of
``Store.audit``, which also reads every row's evidence for the owner a reclaim stopped through it.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from sqlalchemy import or_, select
from sqlmodel import col

from gpuaas.store._database import Sessions
from gpuaas.store._models import AuditEntry, as_utc

__all__ = ["NewestRow", "NewestRows"]


class NewestRow(NamedTuple):
    """An object's newest row of the interval, in the columns a comparison needs."""

    audit_id: int
    created_at: datetime
    action: str
    uid: str | None
    mode: str
    outcome: str
    cause: str | None
    """``evidence["cause"]``: None where the row carries none."""


class NewestRows(Sessions):
    """Per object, the newest row a flow wrote since an instant."""

    def newest_rows(self, *, flow: str, since: datetime) -> dict[tuple[str, str, str], NewestRow]:
        """(kind, namespace, name) -> the newest row ``flow`` wrote about it at or after ``since`` (time, then id:
        the order ``Store.audit`` lists them in). A cluster-scoped object's namespace is ``""``."""
        cause = AuditEntry.evidence["cause"].as_string()
        columns = (col(AuditEntry.id), col(AuditEntry.created_at), col(AuditEntry.kind), col(AuditEntry.namespace),
                   col(AuditEntry.name), col(AuditEntry.action), col(AuditEntry.uid), col(AuditEntry.mode),
                   col(AuditEntry.outcome), cause)
        query = select(*columns).where(
            col(AuditEntry.flow) == flow, col(AuditEntry.created_at) >= as_utc(since)).order_by(
            col(AuditEntry.created_at), col(AuditEntry.id))
        out: dict[tuple[str, str, str], NewestRow] = {}
        with self.session() as session:
            for audit_id, at, kind, namespace, name, action, uid, mode, outcome, said in session.execute(query):
                out[(str(kind), str(namespace or ""), str(name))] = NewestRow(
                    int(audit_id or 0), as_utc(at), str(action), uid, str(mode), str(outcome),
                    None if said is None else str(said))
        return out

    def object_rows(self, *, flow: str, action: str, kind: str, namespace: str | None, name: str,
                    uid: str | None, limit: int = 20) -> list[AuditEntry]:
        """The last ``limit`` rows of ``action`` that ``flow`` wrote about the object itself (its kind, namespace,
        name and uid), oldest first; a cluster-scoped object's namespace is None or ``""``.

        In the order they were written (by id), not by the worker's clock: one object's rows are written one after
        the other by the run that decides it, and the order lets SQLite walk the name index backwards (it holds the
        id) instead of the flow's rows by time, as it would choose before it has statistics."""
        ns = col(AuditEntry.namespace)
        query = select(AuditEntry).where(
            col(AuditEntry.name) == name, col(AuditEntry.kind) == kind, col(AuditEntry.flow) == flow,
            col(AuditEntry.action) == action, col(AuditEntry.uid) == uid,
            ns == namespace if namespace else or_(ns.is_(None), ns == "")).order_by(
            col(AuditEntry.id).desc()).limit(limit)
        with self.session() as session:
            return list(session.scalars(query))[::-1]
