"""Persistence: the append-only audit log, stored snapshots, fleet history and run locks (SQLite or PostgreSQL)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuaas.store._archive import MIN_AGE, Archived, ArchivePlan, archive_audit, cutoff_problem, plan_archive
from gpuaas.store._archive_file import read_archive
from gpuaas.store._archive_keep import KeptBack
from gpuaas.store._audit_object import parse_object_ref
from gpuaas.store._copy import Copied, copy_database
from gpuaas.store._database import known_revisions, redact_url, sqlite_file
from gpuaas.store._holdings import Holdings, holdings
from gpuaas.store._models import AuditEntry, Outcome, QueueSample, RunLock, SnapshotRecord, TenantSample, utc_now
from gpuaas.store._newest_rows import NewestRow
from gpuaas.store._recent import load_snapshot, remember_snapshot
from gpuaas.store._run_locks import WRITES_LOCK, HeldLock
from gpuaas.store._schema import before_upgrade, schema_problem
from gpuaas.store._store import Store

__all__ = [
    "MIN_AGE", "WRITES_LOCK", "ArchivePlan", "Archived", "AuditEntry", "Copied", "HeldLock", "Holdings", "KeptBack", "NewestRow", "Outcome", "QueueSample", "RunLock", "SnapshotRecord", "Store",
    "TenantSample", "archive_audit", "before_upgrade", "copy_database", "cutoff_problem", "holdings", "known_revisions", "load_snapshot", "open_store",
    "parse_object_ref", "plan_archive", "read_archive", "redact_url", "remember_snapshot", "schema_problem", "sqlite_file", "utc_now",
]


if TYPE_CHECKING:
    from gpuaas.settings import GpuaasSettings


def open_store(settings: GpuaasSettings, *, read_only: bool = False) -> Store:
    """The store the settings point at, opened as a flow run opens it (an empty one created, a SQLite file behind
    upgraded, any other schema refused); ``read_only``: only one that is there, at that schema, left as it is
    (:class:`Store`)."""
    return Store(settings.database_url_value, read_only=read_only)
