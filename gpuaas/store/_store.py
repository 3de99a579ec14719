"""The store: one object that owns the database connection and its schema version.

The same code runs on SQLite (the default, a file in the data directory) and PostgreSQL (a
shared deployment): only the URL differs. Opening a store for a flow run creates an empty
database, so a fresh data directory just works, and upgrades a SQLite file that is behind; a
shared database that is behind is left to ``gpuaas db upgrade`` (``gpuaas.store._schema``). One
already at the newest schema is recognised by a single query, without loading Alembic (which
costs a command line about a second). A store opened to read only (``read_only``) changes
nothing: it opens a database that is there, at this schema, or says why not. There is
deliberately no method that updates or deletes an audit row.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, and_, create_engine, delete, event, exists, func, or_, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select

from gpuaas.errors import StoreError
from gpuaas.models import Outcome
from gpuaas.store._audit_object import object_filter
from gpuaas.store._database import (
    connect_args,
    create_sqlite_file,
    engine_url,
    in_words,
    redact_url,
    sqlite_file,
    sqlite_optimize,
    sqlite_pragmas,
)
from gpuaas.store._history_rows import HistoryRows
from gpuaas.store._models import AuditEntry, SnapshotRecord, as_utc, utc_now
from gpuaas.store._newest_rows import NewestRows
from gpuaas.store._run_locks import RunLocks
from gpuaas.store._schema import SchemaVersions

__all__ = ["Store"]

_REOPENING = (Outcome.failed, Outcome.skipped)
"""Completion outcomes that leave a decided key open for another attempt (nothing was changed)."""
_IN_LIST = 500
"""Values per ``IN (...)`` list: well inside SQLite's and PostgreSQL's bound-parameter limits."""
CLUSTER_LOOK_BACK = 1440
"""Snapshot rows ``latest_cluster`` looks through for one that names its cluster: a day of collects at one a minute."""


def _chunks(items: Sequence[Any], size: int = _IN_LIST) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


class Store(HistoryRows, NewestRows, RunLocks, SchemaVersions):
    """Audit log, snapshots, fleet history and run locks in one SQL database."""

    def __init__(self, url: str, *, migrate: bool = True, read_only: bool = False) -> None:
        """Open the database at ``url``; ``migrate``: as a flow run opens it (``SchemaVersions._open_for_a_run``:
        an empty one created, a SQLite file behind upgraded, any other schema but this code's refused).

        ``read_only`` is for commands that only read: the database must be there, and nothing is
        created, migrated or switched to WAL. A SQLite file that is not there is an error naming it,
        where opening would create an empty database at a mistyped path and list nothing from it, as
        if nothing had happened. With ``migrate`` a schema behind or ahead of this code is an error
        saying which, where a read would migrate a shared database from wherever it was run.
        ``migrate=False`` opens it as it is: for ``gpuaas db`` and the checks that say what they found.
        """
        self.url = url
        file = sqlite_file(url)
        if file is not None and read_only and not file.is_file():
            if file.parent.exists() and not file.parent.is_dir():  # a data directory that is a file is a mistake
                raise StoreError(f"the data directory {file.parent} is a file, not a directory (set GPUAAS_DATA_DIR "
                                 "to a directory)")
            raise StoreError(f"no gpuaas database at {file}: nothing has been recorded there (check "
                             "GPUAAS_DATABASE_URL or GPUAAS_DATA_DIR; the first flow or `gpuaas db upgrade` creates it)")
        if file is not None and not read_only:
            directory = file.parent
            try:
                create_sqlite_file(file)  # the file 0600, a data directory it creates 0700
            except FileExistsError as exc:
                raise StoreError(f"the data directory {directory} is a file, not a directory (set GPUAAS_DATA_DIR "
                                 "to a directory)") from exc
            except OSError as exc:
                raise StoreError(f"cannot create the data directory {directory}: {exc.strerror or exc} "
                                 "(set GPUAAS_DATA_DIR to a writable directory)") from exc
        try:
            parsed = engine_url(url)
            self.engine: Engine = create_engine(parsed, pool_pre_ping=True, connect_args=connect_args(parsed))
        except (SQLAlchemyError, ValueError, ImportError) as exc:
            raise StoreError(f"cannot open database {redact_url(url)}: {exc}") from exc
        if self.engine.dialect.name == "sqlite":
            event.listen(self.engine, "connect", sqlite_pragmas(read_only=read_only))
            if not read_only:  # a reader leaves the file as it found it: statistics are written into it
                event.listen(self.engine, "close", sqlite_optimize)
        if migrate and read_only:
            self._check_schema()
        elif migrate:
            self._open_for_a_run()

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session on the database. What the database or its driver refuses in it (``DBAPIError``: locked, gone,
        full, read-only) leaves as a ``StoreError`` naming the database and the driver's words (``in_words``):
        SQLAlchemy's own text adds the statement, its parameters (a row's values) and a link on several lines, and
        names no database. What is caught within the block (a lock already taken) is the block's to handle; an
        error of SQLAlchemy itself (a misuse, not the database) stays as it is."""
        try:
            with Session(self.engine, expire_on_commit=False) as session:
                yield session
        except DBAPIError as exc:
            raise StoreError(f"the gpuaas database at {redact_url(self.url)}: {in_words(exc)}") from exc

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        """``with open_store(settings) as store:``: the pool is disposed however the block ends, so a
        failed task leaves no connection open on a shared PostgreSQL (its ``max_connections`` is small)."""
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- audit log (append-only) --------------------------------------------------------

    def append(self, entry: AuditEntry) -> AuditEntry:
        """Add one row and return it with its id. The only write path to the audit log."""
        with self.session() as session:
            session.add(entry)
            session.commit()
            session.refresh(entry)
        return entry

    def append_decision(self, entry: AuditEntry) -> tuple[AuditEntry, bool]:
        """Append the row that decides ``entry.idempotency_key``, unless the same decision is already
        recorded: returns (the row that holds it, whether it is ``entry``).

        Two overlapping runs that judge the same window both find the key undecided and both
        append; the unique (idempotency_key, decision) index and ``INSERT ... ON CONFLICT DO
        NOTHING`` (SQLite and PostgreSQL) let exactly one of them record it, whatever the
        interleaving. ``decision`` is the outcome and the attempt: a completion that closed an
        earlier decision without effect (``failed``, ``skipped``) opens the next attempt, so a
        re-run may try again after a failure but never records one decision twice.
        """
        return self.append_decisions([entry])[0]

    def append_decisions(self, entries: Sequence[AuditEntry]) -> list[tuple[AuditEntry, bool]]:
        """``append_decision`` for many rows in one transaction (a run defers thousands at 16,000 GPUs:
        one commit each took seconds); the answer is in the order of ``entries``."""
        if not all(e.idempotency_key for e in entries):
            raise ValueError("append_decision needs an idempotency key")
        keys = sorted({str(e.idempotency_key) for e in entries})
        dialect_insert = sqlite_insert if self.engine.dialect.name == "sqlite" else pg_insert
        with self.session() as session:
            attempts: dict[str, int] = {}
            for chunk in _chunks(keys):
                attempts.update((str(key), int(n)) for key, n in session.exec(
                    select(AuditEntry.idempotency_key, func.count()).where(
                        col(AuditEntry.idempotency_key).in_(chunk), col(AuditEntry.refers_to).is_not(None),
                        col(AuditEntry.outcome).in_(_REOPENING)).group_by(AuditEntry.idempotency_key)))
            rows = [{**e.model_dump(exclude={"id"}), "decision": f"{e.outcome}#{attempts.get(str(e.idempotency_key), 0)}"}
                    for e in entries]
            # One statement with many parameter sets: SQLAlchemy compiles it once and sends it in batches
            # ("insertmanyvalues"); a multi-row ``.values(rows)`` would be compiled anew per chunk.
            statement = dialect_insert(AuditEntry).on_conflict_do_nothing().returning(col(AuditEntry.id))
            new_ids = set(session.execute(statement, rows).scalars()) if rows else set()
            session.commit()
            held: dict[tuple[str, str], AuditEntry] = {}
            for chunk in _chunks(keys):
                for found in session.exec(select(AuditEntry).where(col(AuditEntry.idempotency_key).in_(chunk),
                                                                   col(AuditEntry.decision).is_not(None))):
                    held[(str(found.idempotency_key), str(found.decision))] = found
        holders = [held[(str(row["idempotency_key"]), row["decision"])] for row in rows]
        return [(holder, holder.id in new_ids) for holder in holders]

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
        idempotency_keys: Sequence[str] | None = None,
        refers_to: Sequence[int] | None = None,
        before: int | None = None,
        limit: int | None = 1000,
        newest: bool = False,
    ) -> list[AuditEntry]:
        """Rows oldest first. ``obj`` (``name``, ``namespace/name``, ``Kind/namespace/name`` or ``Kind//name``;
        :func:`parse_object_ref`) matches the object a row wrote or the owner a reclaim stopped through it
        (:func:`~gpuaas.store._audit_object.object_filter`); ``idempotency_keys`` any of those keys, ``refers_to`` any of
        those ids (one query per ``IN`` list of 500); ``before`` only the rows listed before that row, in the listing's
        own order (time, then id), so paging back from a listing's oldest row neither repeats nor skips a row where
        workers' clocks disagree with the order their rows were numbered in (none for an id no row has). ``limit`` keeps the oldest rows, or with ``newest`` the newest, still returned oldest first:
        the query itself asks for that many, so a look at the last few rows of a long log reads only those."""
        query = select(AuditEntry).where(*self._audit_filters(since, until, flow, obj, idempotency_key, before))
        listed: tuple[Any, list[Any]] | None = None  # the one long list, asked for one IN list of 500 at a time
        if idempotency_keys is not None:
            listed = (col(AuditEntry.idempotency_key), sorted(set(idempotency_keys)))
        if refers_to is not None:
            if listed is None:
                listed = (col(AuditEntry.refers_to), sorted(set(refers_to)))
            else:
                query = query.where(col(AuditEntry.refers_to).in_(list(refers_to)))
        order = (col(AuditEntry.created_at), col(AuditEntry.id))
        with self.session() as session:
            if listed is None and newest:
                return list(session.exec(query.order_by(*(c.desc() for c in order)).limit(limit)))[::-1]
            if listed is None:
                return list(session.exec(query.order_by(*order).limit(limit)))
            column, values = listed
            rows = [row for chunk in _chunks(values) for row in session.exec(query.where(column.in_(chunk)))]
        rows.sort(key=lambda r: (r.created_at, r.id or 0))
        if limit is None:
            return rows
        return rows[-limit:] if newest else rows[:limit]

    def count_audit(self, *, since: datetime | None = None, until: datetime | None = None, flow: str | None = None,
                    obj: str | None = None, before: int | None = None) -> int:
        """How many rows ``audit`` would return without a limit, in one ``COUNT`` query (what a cut listing says)."""
        query = select(func.count()).select_from(AuditEntry).where(
            *self._audit_filters(since, until, flow, obj, None, before))
        with self.session() as session:
            return int(session.exec(query).one())

    def open_intents(self, *, flow: str, action: str, since: datetime, mode: str | None = None,
                     closed_by: Sequence[tuple[str, str | None]] | None = None) -> list[AuditEntry]:
        """The ``planned`` rows of ``action`` that ``flow`` wrote since ``since`` (and in ``mode``) that no row of the
        window refers to, oldest first: the writes a killed run left open, which a recovery closes.

        ``closed_by`` names the rows that close an intent, as (action, outcome) pairs (outcome None: any); without it
        any row referring to the intent does. The database answers with those intents alone: a recovery that read the
        whole window would load every decision of the lookback, with its evidence, to keep the handful still open
        (normally none).

        The closing rows are found through the ``refers_to`` index, one probe an intent. They are not filtered by
        ``flow``: a row refers only to rows its own flow wrote, and a flow condition would let SQLite (which has no
        statistics before its first ``PRAGMA optimize``) probe the (flow, created_at) index instead, reading the whole
        window once per intent."""
        start = as_utc(since)
        closer = aliased(AuditEntry)
        closes: list[Any] = [col(closer.refers_to) == col(AuditEntry.id), col(closer.created_at) >= start]
        if closed_by is not None:
            closes.append(or_(*(col(closer.action) == act if outcome is None
                                else and_(col(closer.action) == act, col(closer.outcome) == outcome)
                                for act, outcome in closed_by)))
        query = select(AuditEntry).where(
            col(AuditEntry.flow) == flow, col(AuditEntry.created_at) >= start, col(AuditEntry.action) == action,
            col(AuditEntry.outcome) == Outcome.planned, ~exists().where(*closes))
        if mode is not None:
            query = query.where(col(AuditEntry.mode) == mode)
        with self.session() as session:
            return list(session.exec(query.order_by(col(AuditEntry.created_at), col(AuditEntry.id))))

    @staticmethod
    def _audit_filters(since: datetime | None, until: datetime | None, flow: str | None, obj: str | None,
                       idempotency_key: str | None, before: int | None) -> list[Any]:
        """The WHERE clauses of the audit filters given, shared by the listing and its count."""
        clauses: list[Any] = []
        if since is not None:
            clauses.append(col(AuditEntry.created_at) >= as_utc(since))
        if until is not None:
            clauses.append(col(AuditEntry.created_at) < as_utc(until))
        if flow:
            clauses.append(col(AuditEntry.flow) == flow)
        if idempotency_key:
            clauses.append(col(AuditEntry.idempotency_key) == idempotency_key)
        if before is not None:
            anchor = select(AuditEntry.created_at).where(col(AuditEntry.id) == before).scalar_subquery()
            clauses.append(or_(col(AuditEntry.created_at) < anchor,
                               and_(col(AuditEntry.created_at) == anchor, col(AuditEntry.id) < before)))
        if obj:
            clauses.extend(object_filter(obj))
        return clauses

    # -- snapshots ------------------------------------------------------------------------

    def save_snapshot(
        self, collected_at: datetime, summary: dict[str, Any], payload: dict[str, Any]
    ) -> SnapshotRecord:
        """Store one snapshot; a ``payload["snapshot"]`` document is kept zlib-compressed.

        The JSON of a snapshot repeats every column name on every row, so it compresses
        about tenfold; readers get it back as text from ``get_snapshot``/``latest_snapshot``.
        """
        document = payload.get("snapshot")
        compressed = None
        if isinstance(document, str):
            compressed = zlib.compress(document.encode(), 6)
            payload = {k: v for k, v in payload.items() if k != "snapshot"}
        record = SnapshotRecord(collected_at=as_utc(collected_at), summary=summary, payload=payload,
                                compressed=compressed)
        with self.session() as session:
            session.add(record)
            session.commit()
            session.refresh(record)
        if isinstance(document, str):  # the caller's text, not a second copy inflated from the bytes
            record.payload, record.compressed = {**record.payload, "snapshot": document}, None
        return record

    def get_snapshot(self, snapshot_id: int) -> SnapshotRecord | None:
        with self.session() as session:
            record = session.get(SnapshotRecord, snapshot_id)
        return _inflated(record) if record is not None else None

    def latest_snapshot(self, *, full: bool = False) -> SnapshotRecord | None:
        """The newest snapshot row; ``full``: the newest that still has its full document (most
        rows have none, see ``store.full_snapshot_every_minutes``)."""
        query = select(SnapshotRecord)
        if full:
            query = query.where(col(SnapshotRecord.compressed).is_not(None))
        query = query.order_by(col(SnapshotRecord.collected_at).desc()).limit(1)
        with self.session() as session:
            record = session.exec(query).first()
        return _inflated(record) if record is not None else None

    def latest_cluster(self, look_back: int = CLUSTER_LOOK_BACK) -> tuple[str, datetime] | None:
        """The cluster the newest snapshot row that names one was read from, and when; None before the first.

        A row whose cluster could not be read (the Kubernetes API was down that cycle) names none and is
        passed over: the guard must still know whose history this is when the API comes back. Among the
        newest ``look_back`` rows only. The database walks the rows newest first and stops at the first that names a
        cluster (normally the newest), handing back that name alone: decoding a day of summaries to keep one cost
        every collect a second at a fleet's size."""
        if look_back < 1:
            return None
        newest_first = (col(SnapshotRecord.collected_at).desc(), col(SnapshotRecord.id).desc())
        oldest_looked_at = select(SnapshotRecord.collected_at).order_by(*newest_first).offset(
            look_back - 1).limit(1).scalar_subquery()  # NULL while the store holds fewer rows
        cluster = SnapshotRecord.summary["cluster"].as_string()
        query = select(cluster, SnapshotRecord.collected_at).where(
            or_(oldest_looked_at.is_(None), col(SnapshotRecord.collected_at) >= oldest_looked_at),
            cluster.is_not(None), cluster != "").order_by(*newest_first).limit(1)
        with self.session() as session:
            found = session.exec(query).first()
        return None if found is None else (str(found[0]), as_utc(found[1]))

    def wants_full_snapshot(self, collected_at: datetime, every: timedelta) -> bool:
        """Whether a snapshot collected at ``collected_at`` should be stored in full: no full one
        was collected in ``(collected_at - every, collected_at]`` (``store.full_snapshot_every_minutes``)."""
        if every <= timedelta(0):
            return True
        at = as_utc(collected_at)
        query = select(SnapshotRecord.id).where(col(SnapshotRecord.compressed).is_not(None),
                                                col(SnapshotRecord.collected_at) > at - every,
                                                col(SnapshotRecord.collected_at) <= at).limit(1)
        with self.session() as session:
            return session.exec(query).first() is None

    def prune_snapshots(self, older_than: timedelta, now: datetime | None = None,
                        keep_latest: int | None = None, keep: int | None = None) -> int:
        """Delete snapshots collected before ``now - older_than``, but the row ``keep``, and drop the full
        document of all but the newest ``keep_latest`` that have one; returns how many rows changed.

        A snapshot row (its id, instant and summary) stays for the whole retention, so an id a
        run holds never vanishes under it; only the bulky document is thinned, and the reclaim
        flow decides on its collect's snapshot in memory, not on a read-back. ``keep``: the collect's own row,
        which a collect for an instant older than the retention would otherwise delete as it reports its id;
        the next collect's pruning takes it, and its full document with it: the newest ``keep_latest`` are the newest
        by instant, which an old instant's is not.
        """
        cutoff = as_utc(now or utc_now()) - older_than
        with self.session() as session:
            result = session.execute(delete(SnapshotRecord).where(col(SnapshotRecord.collected_at) < cutoff,
                                                                  col(SnapshotRecord.id) != (keep or 0)))
            removed = int(getattr(result, "rowcount", 0) or 0)
            if keep_latest is not None:
                full = col(SnapshotRecord.compressed).is_not(None)
                newest = select(SnapshotRecord.id).where(full).order_by(
                    col(SnapshotRecord.collected_at).desc(), col(SnapshotRecord.id).desc()).limit(keep_latest)
                kept = [int(i) for i in session.exec(newest) if i is not None]
                result = session.execute(update(SnapshotRecord).where(full, col(SnapshotRecord.id).not_in(
                    [*kept, keep or 0])).values(compressed=None))
                removed += int(getattr(result, "rowcount", 0) or 0)
            session.commit()
            return removed


def _inflated(record: SnapshotRecord) -> SnapshotRecord:
    """The record as readers expect it: the snapshot document back in ``payload["snapshot"]``."""
    if record.compressed is not None:
        record.payload = {**record.payload, "snapshot": zlib.decompress(record.compressed).decode()}
        record.compressed = None
    return record
