"""The newest audit row of each object a flow wrote lately: what a run compares its unchanged skips with.

A part of ``Store`` (``Sessions``): the store hands out the sessions.

A reclaim run that would skip an object for the same cause as the last run points at that run's row instead of
appending another (``gpuaas.policies.reclaim.unchanged_since``). It needs, per object, the newest row of the
last interval, and of that row only its id, time, uid, mode, outcome and ``evidence["cause"]``: one query on
the (flow, created_at, id) index, reading those columns alone, never the evidence of every row of the log.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from sqlalchemy import select
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
