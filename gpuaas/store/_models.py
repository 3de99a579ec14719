"""Tables: the audit log, stored snapshots, and run locks.

The audit log is the record an operator reads after an incident ("what did gpuaas do
between 02:00 and 03:00, and why"), so each row carries the object, the decision, the
evidence and the state before and after. Rows are never changed: a later step (an apply
completing a plan, an undo) is a new row that ``refers_to`` the earlier one. The database
enforces this with triggers (see the first migration), not only the code.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Column, DateTime, Dialect, Index, LargeBinary
from sqlalchemy.types import TypeDecorator
from sqlmodel import Field, SQLModel

from gpuaas.models import KEY_MAX_LENGTH, Outcome

__all__ = ["AuditEntry", "Outcome", "QueueSample", "RunLock", "SnapshotRecord", "TenantSample", "UTCDateTime", "as_utc",
           "utc_now"]


def utc_now() -> datetime:
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """``value`` in UTC; a time without a zone is taken as UTC (every time gpuaas stores is)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC on the way in and out; SQLite would otherwise hand back naive values."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _utc_column(index: bool = False) -> Any:
    return Field(default_factory=utc_now, sa_column=Column(UTCDateTime(), nullable=False, index=index))


class AuditEntry(SQLModel, table=True):
    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_log_flow_created_at_id", "flow", "created_at", "id"),)
    """A flow's rows of a window in the order ``Store.audit`` lists them (migration 0005); it also serves a lookup by
    ``flow`` alone, and the unique (idempotency_key, decision) index one by ``idempotency_key``."""

    id: int | None = Field(default=None, primary_key=True)
    created_at: datetime = _utc_column(index=True)
    flow: str = Field(max_length=64)
    """Which flow (or ``cli``) wrote the row: collect, reclaim, rebalance, undo, ..."""
    flow_run_id: str | None = Field(default=None, max_length=64)
    action: str = Field(max_length=64)
    """What was decided: reclaim, restore, quota-change, ..."""
    kind: str = Field(max_length=64)
    namespace: str | None = Field(default=None, max_length=253, index=True)
    name: str = Field(max_length=253, index=True)
    uid: str | None = Field(default=None, max_length=64)
    mode: str = Field(max_length=16)
    outcome: str = Field(max_length=16)
    reason: str = Field(default="", max_length=2000)
    evidence: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    before: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    after: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    idempotency_key: str | None = Field(default=None, max_length=KEY_MAX_LENGTH)
    """Same key, same decision: lets a re-run of the same window act once. Built with ``gpuaas.models.bounded_key``:
    PostgreSQL refuses a longer one (SQLite would keep it)."""
    refers_to: int | None = Field(default=None, index=True)
    """An earlier row this one completes (apply after plan) or reverses (restore)."""
    decision: str | None = Field(default=None, max_length=40)
    """On the row that decides ``idempotency_key``: its outcome and attempt (``planned#0``), unique
    with the key (``Store.append_decision``); NULL on completions and other rows."""

    @property
    def object_ref(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"


class SnapshotRecord(SQLModel, table=True):
    __tablename__ = "snapshots"

    id: int | None = Field(default=None, primary_key=True)
    collected_at: datetime = _utc_column(index=True)
    summary: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    payload: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    compressed: bytes | None = Field(default=None, sa_column=Column(LargeBinary, nullable=True))
    """The snapshot document, zlib-compressed (``Store`` puts it back into ``payload["snapshot"]``)."""


class RunLock(SQLModel, table=True):
    """Mutual exclusion between flows that write to the cluster (reclaim vs rebalance)."""

    __tablename__ = "run_locks"

    name: str = Field(primary_key=True, max_length=64)
    holder: str = Field(max_length=200)
    acquired_at: datetime = _utc_column()
    expires_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))


class QueueSample(SQLModel, table=True):
    """One ClusterQueue and GPU flavor at one collect (``gpuaas.fleet_history.queue_aggregates``)."""

    __tablename__ = "queue_history"

    id: int | None = Field(default=None, primary_key=True)
    collected_at: datetime = _utc_column(index=True)
    cluster_queue: str = Field(max_length=253, index=True)
    flavor: str = Field(default="", max_length=253)
    cohort: str | None = Field(default=None, max_length=253)
    tenant: str | None = Field(default=None, max_length=253)
    nominal_gpus: float = 0.0
    usage_gpus: float = 0.0
    reserved_gpus: float = 0.0
    borrowed_gpus: float = 0.0
    borrowing_limit_gpus: float | None = None
    pending_workloads: int = 0
    pending_gpus: float = 0.0
    oldest_pending_seconds: float | None = None
    admitted_workloads: int = 0


class TenantSample(SQLModel, table=True):
    """One tenant at one collect (``gpuaas.fleet_history.tenant_aggregates``)."""

    __tablename__ = "tenant_history"

    id: int | None = Field(default=None, primary_key=True)
    collected_at: datetime = _utc_column(index=True)
    tenant: str = Field(max_length=253, index=True)
    workloads: int = 0
    allocated_gpus: float = 0.0
    idle_gpus: float = 0.0
    unknown_gpus: float = 0.0
    pending_gpus: float = 0.0
