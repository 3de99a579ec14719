"""Persistence: the append-only audit log, stored snapshots and run locks (SQLite or PostgreSQL)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuaas.store._models import AuditEntry, Outcome, RunLock, SnapshotRecord, utc_now
from gpuaas.store._store import Store, redact_url

__all__ = ["AuditEntry", "Outcome", "RunLock", "SnapshotRecord", "Store", "open_store", "redact_url", "utc_now"]


if TYPE_CHECKING:
    from gpuaas.settings import GpuaasSettings


def open_store(settings: GpuaasSettings) -> Store:
    """The store the settings point at, migrated to the newest schema."""
    return Store(settings.database_url_value)
