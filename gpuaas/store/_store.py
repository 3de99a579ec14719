"""The store: one object that owns the database connection and its schema version.

The same code runs on SQLite (the default, a file in the data directory) and PostgreSQL (a
shared deployment): only the URL differs. Opening a store migrates it to the newest schema,
so a fresh data directory just works and an old database upgrades in place. There is
deliberately no method that updates or deletes an audit row.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, delete, event, or_
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlmodel import Session, col, select

from gpuaas.errors import StoreError
from gpuaas.store._models import AuditEntry, RunLock, SnapshotRecord, utc_now

__all__ = ["Store", "redact_url"]

_MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def redact_url(url: str) -> str:
    """The URL with its password replaced, for messages and logs."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - an unparsable URL is reported by create_engine itself
        return "<unparsable database URL>"


def _as_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Store:
    """Audit log, snapshots and run locks in one SQL database."""

    def __init__(self, url: str, *, migrate: bool = True) -> None:
        self.url = url
        if url.startswith("sqlite:///"):
            directory = Path(url.removeprefix("sqlite:///")).expanduser().parent
            try:
                directory.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the data directory {directory}: {exc.strerror or exc} "
                                 "(set GPUAAS_DATA_DIR to a writable directory)") from exc
        try:
            self.engine: Engine = create_engine(url, pool_pre_ping=True)
        except (SQLAlchemyError, ValueError, ImportError) as exc:
            raise StoreError(f"cannot open database {redact_url(url)}: {exc}") from exc
        if self.engine.dialect.name == "sqlite":
            event.listen(self.engine, "connect", _sqlite_pragmas)
        if migrate:
            self.upgrade()

    # -- schema -------------------------------------------------------------------------

    def _alembic(self) -> Config:
        config = Config()
        config.set_main_option("script_location", str(_MIGRATIONS))
        return config

    def head_revision(self) -> str:
        head = ScriptDirectory.from_config(self._alembic()).get_current_head()
        assert head is not None
        return head

    def current_revision(self) -> str | None:
        try:
            with self.engine.connect() as conn:
                return MigrationContext.configure(conn).get_current_revision()
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot read schema version of {redact_url(self.url)}: {exc}") from exc

    def upgrade(self, revision: str = "head") -> tuple[str | None, str | None]:
        """Migrate to ``revision``; returns (before, after). Safe to call on an up-to-date database."""
        before = self.current_revision()
        config = self._alembic()
        try:
            with self.engine.begin() as conn:
                config.attributes["connection"] = conn
                command.upgrade(config, revision)
        except SQLAlchemyError as exc:
            raise StoreError(f"migrating {redact_url(self.url)} failed: {exc}") from exc
        return before, self.current_revision()

    @contextmanager
    def session(self) -> Iterator[Session]:
        with Session(self.engine, expire_on_commit=False) as session:
            yield session

    def close(self) -> None:
        self.engine.dispose()

    # -- audit log (append-only) --------------------------------------------------------

    def append(self, entry: AuditEntry) -> AuditEntry:
        """Add one row and return it with its id. The only write path to the audit log."""
        with self.session() as session:
            session.add(entry)
            session.commit()
            session.refresh(entry)
        return entry

    def get_audit(self, audit_id: int) -> AuditEntry | None:
        with self.session() as session:
            return session.get(AuditEntry, audit_id)

    def audit(
        self,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        flow: str | None = None,
        obj: str | None = None,
        idempotency_key: str | None = None,
        refers_to: Sequence[int] | None = None,
        limit: int | None = 1000,
    ) -> list[AuditEntry]:
        """Rows oldest first. ``obj`` matches ``name``, ``namespace/name`` or ``Kind/namespace/name``."""
        query = select(AuditEntry)
        if since is not None:
            query = query.where(col(AuditEntry.created_at) >= _as_utc(since))
        if until is not None:
            query = query.where(col(AuditEntry.created_at) < _as_utc(until))
        if flow:
            query = query.where(AuditEntry.flow == flow)
        if idempotency_key:
            query = query.where(AuditEntry.idempotency_key == idempotency_key)
        if refers_to is not None:
            query = query.where(col(AuditEntry.refers_to).in_(list(refers_to)))
        if obj:
            query = query.where(*_object_filter(obj))
        query = query.order_by(col(AuditEntry.created_at), col(AuditEntry.id))
        if limit is not None:
            query = query.limit(limit)
        with self.session() as session:
            return list(session.exec(query))

    # -- snapshots ------------------------------------------------------------------------

    def save_snapshot(
        self, collected_at: datetime, summary: dict[str, Any], payload: dict[str, Any]
    ) -> SnapshotRecord:
        record = SnapshotRecord(collected_at=_as_utc(collected_at), summary=summary, payload=payload)
        with self.session() as session:
            session.add(record)
            session.commit()
            session.refresh(record)
        return record

    def get_snapshot(self, snapshot_id: int) -> SnapshotRecord | None:
        with self.session() as session:
            return session.get(SnapshotRecord, snapshot_id)

    def latest_snapshot(self) -> SnapshotRecord | None:
        query = select(SnapshotRecord).order_by(col(SnapshotRecord.collected_at).desc()).limit(1)
        with self.session() as session:
            return session.exec(query).first()

    def prune_snapshots(self, older_than: timedelta, now: datetime | None = None) -> int:
        """Delete snapshots collected before ``now - older_than``; returns how many."""
        cutoff = _as_utc(now or utc_now()) - older_than
        with self.session() as session:
            result = session.execute(delete(SnapshotRecord).where(col(SnapshotRecord.collected_at) < cutoff))
            session.commit()
            return int(getattr(result, "rowcount", 0) or 0)

    # -- run locks ------------------------------------------------------------------------

    def acquire_lock(self, name: str, holder: str, ttl: timedelta, now: datetime | None = None) -> bool:
        """Take the named lock unless someone else holds an unexpired one."""
        now = _as_utc(now or utc_now())
        with self.session() as session:
            session.execute(delete(RunLock).where(col(RunLock.name) == name, col(RunLock.expires_at) < now))
            session.add(RunLock(name=name, holder=holder, acquired_at=now, expires_at=now + ttl))
            try:
                session.commit()
            except IntegrityError:
                session.rollback()
                held = session.get(RunLock, name)
                return held is not None and held.holder == holder
        return True

    def lock_holder(self, name: str, now: datetime | None = None) -> str | None:
        """Who holds the named lock unexpired (for the message of a run that has to give up)."""
        now = _as_utc(now or utc_now())
        with self.session() as session:
            held = session.get(RunLock, name)
            return held.holder if held is not None and _as_utc(held.expires_at) >= now else None

    def release_lock(self, name: str, holder: str) -> None:
        with self.session() as session:
            session.execute(delete(RunLock).where(col(RunLock.name) == name, col(RunLock.holder) == holder))
            session.commit()


def _object_filter(obj: str) -> list[Any]:
    parts = obj.split("/")
    name = col(AuditEntry.name)
    if len(parts) == 1:
        return [name == parts[0]]
    namespace = col(AuditEntry.namespace)
    if len(parts) == 2:
        return [namespace == parts[0], name == parts[1]]
    kind, ns = parts[0], parts[1]
    # ``Kind//name``: a cluster-scoped object (no namespace).
    same_ns = namespace == ns if ns else or_(namespace.is_(None), namespace == "")
    return [col(AuditEntry.kind) == kind, same_ns, name == "/".join(parts[2:])]


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    """WAL lets the CLI read while a flow writes; a busy timeout rides out short locks."""
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()
