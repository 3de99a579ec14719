"""Copy one gpuaas database into another, empty one: the SQLite file of a trial into the PostgreSQL of a shared
deployment, or one PostgreSQL into another.

The audit log's ids are kept. ``gpuaas undo ID``, the ``refers_to`` chains that tie a completion to its intent and
an undo to its reclaim, and the ids a reclaim wrote into the Events and annotations of the objects it stopped all
name rows by id; a copy that numbered them afresh would make an old hint undo another row. So the target must be
empty (nothing to collide with) and, on PostgreSQL, each table's id sequence is moved past the copied ids, or the
next flow run's insert would collide with a copied row.

One transaction on the target: a row it refuses (a value longer than a PostgreSQL column takes, which SQLite
kept) leaves it as empty as it was. The source is only read. Run locks are not copied: they belong to the runs
in progress on the source, and no run should be in progress while it is copied.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from sqlalchemy import Table, func, insert, inspect, select, text
from sqlalchemy.exc import DBAPIError

from gpuaas.errors import StoreError
from gpuaas.store._database import in_words, redact_url, sqlite_file
from gpuaas.store._models import AuditEntry, QueueSample, RunLock, SnapshotRecord, TenantSample
from gpuaas.store._run_locks import WRITES_LOCK
from gpuaas.store._schema import schema_problem
from gpuaas.store._store import Store

__all__ = ["Copied", "copy_database"]

BATCH = 1000
"""Rows read and inserted at a time: a long log is never held whole (a snapshot row holds a compressed fleet)."""

_TABLES: tuple[tuple[str, Table], ...] = (
    ("audit entries", AuditEntry.__table__), ("snapshots", SnapshotRecord.__table__),  # type: ignore[attr-defined]
    ("queue history rows", QueueSample.__table__),  # type: ignore[attr-defined]
    ("tenant history rows", TenantSample.__table__))  # type: ignore[attr-defined]


class Copied(NamedTuple):
    """How many rows of each table a copy wrote."""

    audit: int
    snapshots: int
    queue_history: int
    tenant_history: int


def copy_database(source: Store, target: Store, progress: Callable[[str], None] = lambda _: None) -> Copied:
    """Copy every audit entry, snapshot and fleet-history row of ``source`` into ``target``, ids kept.

    Raises ``StoreError`` (one line naming the database) and changes nothing when both are one database, when
    ``source`` is not at this gpuaas's schema (it is left as it is: ``gpuaas db upgrade`` it first), when a run
    holds the cluster writes on either (the flows are not stopped: rows written meanwhile would be left behind),
    when ``target`` already holds any of those rows (checked before anything is migrated: a live shared database
    named by mistake keeps its schema), is at a newer schema, or refuses a row. An empty ``target`` is created or
    migrated to this gpuaas's schema first, as ``gpuaas db upgrade`` would. ``progress`` hears one line per table.
    """
    _not_the_same(source, target)
    problem = schema_problem(source.url, source.current_revision(), source.head_revision())
    if problem is not None:
        raise StoreError(f"the database to copy from: {problem}")
    held = _held(target, _tables(target))
    if held:
        raise StoreError(f"{redact_url(target.url)} already holds {held}: copy into an empty database, so that "
                         "every audit id keeps naming the row it named")
    for store in (source, target):
        busy = store.held_lock(WRITES_LOCK) if RunLock.__tablename__ in _tables(store) else None
        if busy is not None:
            raise StoreError(f"{busy.holder} holds the cluster writes on {redact_url(store.url)} until "
                             f"{busy.expires_at:%Y-%m-%d %H:%M:%S} UTC: stop the flows first, so that no row is "
                             "written while the database is copied")
    target.upgrade()
    counts: list[int] = []
    at = ""  # the rows being written, for the line that says which the target refused
    try:
        with source.engine.connect() as reading, target.engine.begin() as writing:
            for noun, table in _TABLES:
                copied = 0
                rows = reading.execution_options(yield_per=BATCH).execute(select(table).order_by(table.c.id))
                for part in rows.partitions():
                    at = f"{noun} with ids {part[0].id} to {part[-1].id}: "
                    writing.execute(insert(table), [dict(row._mapping) for row in part])
                    copied += len(part)
                counts.append(copied)
                progress(f"{copied:,} {noun}")
            at = ""
            if writing.dialect.name == "postgresql":
                for _, table in _TABLES:  # the next insert numbers past the copied ids
                    writing.execute(text(f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'), "
                                         f"COALESCE((SELECT MAX(id) FROM {table.name}), 0) + 1, false)"))
    except DBAPIError as exc:
        raise StoreError(f"nothing copied into {redact_url(target.url)}: {at}{in_words(exc)}") from exc
    return Copied(*counts)


def _not_the_same(source: Store, target: Store) -> None:
    """Refuse a copy of a database into itself (it holds rows, and would be read while written)."""
    files = sqlite_file(source.url), sqlite_file(target.url)
    if files[0] is not None and files[1] is not None:
        same = files[0].resolve() == files[1].resolve()
    else:
        same = source.engine.url == target.engine.url
    if same:
        raise StoreError(f"{redact_url(target.url)} is the database to copy from: give --from another database")


def _tables(store: Store) -> set[str]:
    """The tables ``store``'s database has yet (an empty database, or one at an older schema, lacks some)."""
    try:
        with store.engine.connect() as connection:
            return set(inspect(connection).get_table_names())
    except DBAPIError as exc:
        raise StoreError(f"cannot read the gpuaas database at {redact_url(store.url)}: {in_words(exc)}") from exc


def _held(store: Store, tables: set[str]) -> str:
    """What ``store`` already holds of the copied tables among its ``tables``, in words (``12 audit entries, 3
    snapshots``); empty if nothing. Read before any migration: on a database with rows, none is made."""
    held: list[str] = []
    present = [(noun, table) for noun, table in _TABLES if table.name in tables]
    with store.engine.connect() as connection:
        for noun, table in present:
            count: Any = connection.execute(select(func.count()).select_from(table)).scalar_one()
            if count:
                held.append(f"{int(count):,} {noun}")
    return ", ".join(held)
