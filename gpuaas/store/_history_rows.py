"""The fleet history tables of the store: per queue and per tenant, one row per cycle (``gpuaas.fleet_history``).

A part of ``Store`` (``Sessions``): the store hands out the sessions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import pandas as pd
from sqlalchemy import delete, insert
from sqlmodel import col, select

from gpuaas.store._database import Sessions
from gpuaas.store._models import QueueSample, TenantSample, as_utc, utc_now

__all__ = ["HistoryRows"]


class HistoryRows(Sessions):
    """Save, read and prune the per-queue and per-tenant aggregates of every cycle."""

    def save_history(self, collected_at: datetime, queues: Sequence[Mapping[str, Any]],
                     tenants: Sequence[Mapping[str, Any]]) -> None:
        """One cycle's aggregates (``gpuaas.fleet_history``), in one transaction. They replace any the store holds for
        the same instant: a collect step retried after this write (its snapshot row failed) writes the cycle once."""
        at = as_utc(collected_at)
        with self.session() as session:
            for table, rows in ((QueueSample, queues), (TenantSample, tenants)):
                session.execute(delete(table).where(col(table.collected_at) == at))
                if rows:
                    session.execute(insert(table), [{**_plain(r), "collected_at": at} for r in rows])
            session.commit()

    def queue_history(self, since: datetime, until: datetime, *, cluster_queues: Sequence[str] | None = None,
                      cohort: str | None = None) -> pd.DataFrame:
        """Per-queue history over ``[since, until)``, oldest first: ``collected_at`` plus
        ``gpuaas.fleet_history.QUEUE_HISTORY_COLUMNS``, one row per queue, flavor and cycle."""
        query = select(QueueSample).where(col(QueueSample.collected_at) >= as_utc(since),
                                          col(QueueSample.collected_at) < as_utc(until))
        if cluster_queues is not None:
            query = query.where(col(QueueSample.cluster_queue).in_(list(cluster_queues)))
        if cohort is not None:
            query = query.where(QueueSample.cohort == cohort)
        query = query.order_by(col(QueueSample.collected_at), col(QueueSample.cluster_queue),
                               col(QueueSample.flavor))
        return self._frame(query, QueueSample)

    def tenant_history(self, since: datetime, until: datetime, *,
                       tenants: Sequence[str] | None = None) -> pd.DataFrame:
        """Per-tenant history over ``[since, until)``, oldest first (``TENANT_HISTORY_COLUMNS``)."""
        query = select(TenantSample).where(col(TenantSample.collected_at) >= as_utc(since),
                                           col(TenantSample.collected_at) < as_utc(until))
        if tenants is not None:
            query = query.where(col(TenantSample.tenant).in_(list(tenants)))
        query = query.order_by(col(TenantSample.collected_at), col(TenantSample.tenant))
        return self._frame(query, TenantSample)

    def prune_history(self, older_than: timedelta, now: datetime | None = None) -> int:
        """Delete aggregates collected before ``now - older_than``; returns how many rows."""
        cutoff = as_utc(now or utc_now()) - older_than
        removed = 0
        with self.session() as session:
            for table in (QueueSample, TenantSample):
                result = session.execute(delete(table).where(col(table.collected_at) < cutoff))
                removed += int(getattr(result, "rowcount", 0) or 0)
            session.commit()
        return removed

    def _frame(self, query: Any, table: type[QueueSample] | type[TenantSample]) -> pd.DataFrame:
        columns = [c for c in table.model_fields if c != "id"]
        with self.session() as session:
            rows = [{c: getattr(r, c) for c in columns} for r in session.exec(query)]
        frame = pd.DataFrame(rows, columns=columns)
        frame["collected_at"] = pd.to_datetime(frame["collected_at"], utc=True)
        return frame


def _plain(row: Mapping[str, Any]) -> dict[str, Any]:
    """Python scalars for the driver: NaN becomes NULL, numpy numbers become floats and ints."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if value is None or (not isinstance(value, str) and bool(pd.isna(value))):
            out[key] = None
        else:
            out[key] = value.item() if hasattr(value, "item") else value
    return out
