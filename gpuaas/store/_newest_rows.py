"""The newest audit rows a run compares with: each object's newest row lately, and one object's last rows.

A part of ``Store`` (``Sessions``): the store hands out the sessions.

A reclaim run that would skip an object for the same cause as the last run points at that run's row instead of
appending another (``gpuaas.policies.reclaim.unchanged_since``). It needs, per object, the newest row of the
last interval, and of that row only its id, time, uid, mode, outcome and ``evidence["cause"]``: one query on
the (flow, created_at, id) index, reading those columns alone, never the evidence of every row of the log. A plan
that skips what a guard found unchanged asks the same, and for the rows of the causes it names (``detail``) also
their ``evidence["judged_version"]``, reason and ``refers_to``, in the same query.

A stop about to be made asks whether the same stop failed to hold before (``gpuaas.actions._stop_guards``):
that needs the newest rows about that one object, found through the ``name`` index, not the object filter of
``Store.audit``, which also reads every row's evidence for the owner a reclaim stopped through it.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import case, or_, select
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
    version: str | None = None
    """``evidence["judged_version"]`` of a row of a ``detail`` cause: the resourceVersion its guard judged."""
    reason: str | None = None
    """The reason of a row of a ``detail`` cause; None on the others."""
    refers_to: int | None = None
    """The intent a completion of a ``detail`` cause refers to; None on the others."""


class NewestRows(Sessions):
    """Per object, the newest row a flow wrote since an instant."""

    def newest_rows(self, *, flow: str, since: datetime,
                    detail: Collection[str] = ()) -> dict[tuple[str, str, str], NewestRow]:
        """(kind, namespace, name) -> the newest row ``flow`` wrote about it at or after ``since`` (time, then id:
        the order ``Store.audit`` lists them in). A cluster-scoped object's namespace is ``""``. A row whose cause is
        in ``detail`` also brings its ``version``, ``reason`` and ``refers_to`` (read for those rows only)."""
        cause = AuditEntry.evidence["cause"].as_string()
        columns: list[Any] = [
            col(AuditEntry.id), col(AuditEntry.created_at), col(AuditEntry.kind), col(AuditEntry.namespace),
            col(AuditEntry.name), col(AuditEntry.action), col(AuditEntry.uid), col(AuditEntry.mode),
            col(AuditEntry.outcome), cause]
        if detail:
            kept = cause.in_(sorted(detail))
            columns += [case((kept, AuditEntry.evidence["judged_version"].as_string())),
                        case((kept, col(AuditEntry.reason))), case((kept, col(AuditEntry.refers_to)))]
        query = select(*columns).where(
            col(AuditEntry.flow) == flow, col(AuditEntry.created_at) >= as_utc(since)).order_by(
            col(AuditEntry.created_at), col(AuditEntry.id))
        out: dict[tuple[str, str, str], NewestRow] = {}
        with self.session() as session:
            for audit_id, at, kind, namespace, name, action, uid, mode, outcome, said, *more in session.execute(query):
                version, reason, refers_to = more or (None, None, None)
                out[(str(kind), str(namespace or ""), str(name))] = NewestRow(
                    int(audit_id or 0), as_utc(at), str(action), uid, str(mode), str(outcome),
                    None if said is None else str(said), None if version is None else str(version), reason,
                    None if refers_to is None else int(refers_to))
        return out

    def object_rows(self, *, flow: str, action: str, kind: str, namespace: str | None, name: str,
                    uid: str | None, outcomes: Collection[str] | None = None, limit: int = 20) -> list[AuditEntry]:
        """The last ``limit`` rows of ``action`` that ``flow`` wrote about the object itself (its kind, namespace,
        name and uid), oldest first, of ``outcomes`` only when given; a cluster-scoped object's namespace is None or
        ``""``. The outcomes are asked in the query, so skips recorded since do not push the rows sought out of it.

        In the order they were written (by id), not by the worker's clock: one object's rows are written one after
        the other by the run that decides it, and the order lets SQLite walk the name index backwards (it holds the
        id) instead of the flow's rows by time, as it would choose before it has statistics."""
        ns = col(AuditEntry.namespace)
        query = select(AuditEntry).where(
            col(AuditEntry.name) == name, col(AuditEntry.kind) == kind, col(AuditEntry.flow) == flow,
            col(AuditEntry.action) == action, col(AuditEntry.uid) == uid,
            ns == namespace if namespace else or_(ns.is_(None), ns == ""),
            *([col(AuditEntry.outcome).in_(sorted(outcomes))] if outcomes is not None else [])).order_by(
            col(AuditEntry.id).desc()).limit(limit)
        with self.session() as session:
            return list(session.scalars(query))[::-1]
