"""What a gpuaas database holds, for ``gpuaas db status``: rows per kind, the oldest audit entry, size on disk.

Why an operator needs it: a collect prunes the snapshots and the fleet history to ``collect.retention_days``, but the
audit log is never pruned (it is the record of every decision and the undo chain), so it is the one part that grows
for as long as gpuaas runs: about 4,000 rows (9 MB) a day on a 2,000-GPU fleet reclaimed every 10 minutes. Growth is
watched, not discovered when the disk is full; only ``gpuaas db archive`` moves old rows out, and the row it appends
says when and up to when, which the status repeats. One count per table, one size query and one look at the newest
archive row (through the (flow, created_at) index): cheap at any size.

A SQLite file does not shrink when rows go: their pages join its free list, which new rows reuse, and only ``VACUUM``
gives them back. So after an archive the file is as large as before, and the status says so where the free pages are
a large part of it (``vacuum_hint``): ``PRAGMA freelist_count`` times ``PRAGMA page_size``, read from the header.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, text
from sqlalchemy.exc import DBAPIError
from sqlmodel import col, select

from gpuaas.models import Outcome
from gpuaas.store._archive_names import ARCHIVE_ACTION, ARCHIVE_FLOW
from gpuaas.store._database import sqlite_file
from gpuaas.store._models import AuditEntry, QueueSample, SnapshotRecord, TenantSample, as_utc

if TYPE_CHECKING:
    from gpuaas.store._store import Store

__all__ = ["Holdings", "holdings"]

VACUUM_SHARE = 0.25
"""The share of a SQLite file in free pages from which the status suggests ``VACUUM``. Each collect prunes the
snapshots and fleet history older than ``collect.retention_days`` (14 by default), so about a fourteenth of them is
free at any time and reused by the next rows: a hint then would be said after every collect and mean nothing. A
quarter is beyond that churn: rows archived, or the retention shortened."""
VACUUM_BYTES = 50_000_000
"""And at least this much free (50 MB): ``VACUUM`` rewrites the whole file while the runs are paused, which a few
megabytes on a disk are not worth."""


@dataclass(frozen=True)
class Holdings:
    """Rows per kind, when the audit log starts, and the database's size in bytes (None where it cannot be read)."""

    audit: int
    oldest_audit: datetime | None
    snapshots: int
    history: int
    size_bytes: int | None
    archived: tuple[datetime, datetime] | None = None
    """When the audit log was last archived, and the cutoff of that archive; None before the first."""
    free_bytes: int | None = None
    """A SQLite file's free pages, in bytes (its space that ``VACUUM`` would give back); None on PostgreSQL."""

    def words(self) -> str:
        """``holds 359,899 audit entries since 2026-09-08 (never pruned), 4,033 snapshots and 387,168 fleet-history
        rows (pruned to collect.retention_days); 895 MB on disk``; after an archive ``(last archived on 2026-12-09,
        up to 2026-09-01)`` in place of ``(never pruned)``."""
        since = f" since {self.oldest_audit:%Y-%m-%d}" if self.oldest_audit is not None else ""
        size = f"; {_size(self.size_bytes)} on disk" if self.size_bytes is not None else ""
        pruned = "never pruned" if self.archived is None else (
            f"last archived on {self.archived[0]:%Y-%m-%d}, up to {self.archived[1]:%Y-%m-%d}")
        return (f"holds {self.audit:,} audit entries{since} ({pruned}), {self.snapshots:,} snapshots and "
                f"{self.history:,} fleet-history rows (pruned to collect.retention_days){size}")

    def vacuum_hint(self) -> str | None:
        """``224.9 MB of the file (75%) is free space ...``: the SQLite file's free pages where they are at least
        ``VACUUM_SHARE`` of it and ``VACUUM_BYTES``, with what gives them back; None otherwise (and on PostgreSQL,
        whose autovacuum reuses the space itself)."""
        free, size = self.free_bytes, self.size_bytes
        if free is None or not size or free < VACUUM_BYTES or free < VACUUM_SHARE * size:
            return None
        return (f"{_size(free)} of the file ({free / size:.0%}) is free space that SQLite reuses for new rows but "
                "does not give back to the disk by itself: to shrink the file, run VACUUM on it while the flows are "
                "paused (docs/deploying.md).")


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n} bytes"


def holdings(store: Store) -> Holdings:
    """Count what ``store`` holds; its size is the SQLite file's (with its write-ahead log) or PostgreSQL's
    ``pg_database_size`` (None where the role may not read it)."""
    with store.session() as session:
        audit = int(session.exec(select(func.count()).select_from(AuditEntry)).one())
        oldest = session.exec(select(func.min(AuditEntry.created_at))).one()
        snapshots = int(session.exec(select(func.count()).select_from(SnapshotRecord)).one())
        history = sum(int(session.exec(select(func.count()).select_from(model)).one())
                      for model in (QueueSample, TenantSample))
        size: int | None = None
        free: int | None = None
        file = sqlite_file(store.url)
        if file is not None:
            size = sum(p.stat().st_size for p in (file, file.with_name(file.name + "-wal")) if p.is_file())
            free = (int(session.execute(text("PRAGMA freelist_count")).scalar_one())
                    * int(session.execute(text("PRAGMA page_size")).scalar_one()))
        elif store.engine.dialect.name == "postgresql":
            try:
                with session.begin_nested():
                    size = int(session.execute(text("SELECT pg_database_size(current_database())")).scalar_one())
            except DBAPIError:  # a size the role may not read is left out, never a failed status
                size = None
        archived = _last_archive(session.exec(select(AuditEntry.created_at, AuditEntry.evidence).where(
            col(AuditEntry.flow) == ARCHIVE_FLOW, col(AuditEntry.action) == ARCHIVE_ACTION,
            col(AuditEntry.outcome) == Outcome.applied).order_by(col(AuditEntry.created_at).desc()).limit(1)).first())
    return Holdings(audit, as_utc(oldest) if oldest is not None else None, snapshots, history, size, archived, free)


def _last_archive(row: tuple[datetime, Mapping[str, Any]] | None) -> tuple[datetime, datetime] | None:
    """(when, up to when) from the newest archive row; its cutoff is the evidence's ``before``."""
    if row is None:
        return None
    at, evidence = row
    try:
        return as_utc(at), as_utc(datetime.fromisoformat(str((evidence or {}).get("before"))))
    except ValueError:  # a row whose evidence says no cutoff: when it ran is still worth saying
        return as_utc(at), as_utc(at)
