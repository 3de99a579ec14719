"""Persistence: the append-only audit log, stored snapshots and run locks (SQLite or PostgreSQL)."""

from gpuaas.store._models import AuditEntry, Outcome, RunLock, SnapshotRecord, utc_now
from gpuaas.store._store import Store, redact_url

__all__ = ["AuditEntry", "Outcome", "RunLock", "SnapshotRecord", "Store", "open_store", "redact_url", "utc_now"]


def open_store(settings: "GpuaasSettings") -> Store:  # noqa: F821 - avoids an import cycle at module load
    """The store the settings point at, migrated to the newest schema."""
    return Store(settings.database_url_value)
