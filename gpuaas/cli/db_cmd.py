"""``gpuaas db``: the schema of the audit/snapshot database."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpuaas.cli._common import console, fail, settings_or_exit
from gpuaas.cli._progress import progress
from gpuaas.errors import GpuaasError
from gpuaas.store import (
    WRITES_LOCK,
    HeldLock,
    Holdings,
    Store,
    before_upgrade,
    copy_database,
    holdings,
    redact_url,
    schema_problem,
    sqlite_file,
)

__all__ = ["copy", "status", "upgrade"]


def upgrade() -> None:
    """Create the database if needed and migrate it to the newest schema, in place. The one way to migrate a shared
    (PostgreSQL) database, which flow runs leave as it is: with the scheduled runs paused, then roll this version
    out. Refused while a run holds the cluster writes. A SQLite file is copied beside itself first."""
    settings = settings_or_exit()
    store = Store(settings.database_url_value, migrate=False)
    try:
        busy = _writes_held(store)
        if busy is not None:
            raise fail(f"{redact_url(settings.database_url_value)}: {busy.holder} holds the cluster writes until "
                       f"{busy.expires_at:%Y-%m-%d %H:%M:%S} UTC: pause the scheduled runs and let it finish first; "
                       "nothing was migrated")
        before, after = store.upgrade()
    except GpuaasError as exc:  # a newer schema, a migration the database refused: one line, no traceback
        raise fail(str(exc)) from exc
    finally:
        store.close()
    url = redact_url(settings.database_url_value)
    if before == after:
        console.print(f"{url}: already at schema {after}", highlight=False)
        return
    kept = before_upgrade(settings.database_url_value, before) if before is not None else None
    console.print(f"{url}: upgraded schema {before or '(empty)'} -> {after}"
                  + (f" (the file as it was: {kept})" if kept is not None else ""),
                  highlight=False, markup=False, soft_wrap=True)


def _writes_held(store: Store) -> HeldLock | None:
    """Who holds the cluster writes unexpired, and until when; None where nobody does. Read at any schema that has
    the locks' table (a database behind this gpuaas too: before an upgrade is when it matters)."""
    try:
        return store.held_lock(WRITES_LOCK) if store.current_revision() is not None else None
    except GpuaasError:  # no locks' table yet (an empty database, or one from before the locks)
        return None


def _holdings(store: Store) -> Holdings | None:
    """What the store holds, or None where it cannot be counted: the status still says the schema and the lock."""
    try:
        return holdings(store)
    except GpuaasError:
        return None


def status() -> None:
    """Show the database URL (password hidden), its schema version, what it holds (the audit log, never pruned, grows
    for as long as gpuaas runs) and who holds the cluster writes. Exit 0 when it
    is at the schema this gpuaas reads, or when there is no database yet (the first flow creates it); 1 when it is
    behind (run gpuaas db upgrade) or newer (upgrade gpuaas), or cannot be read, so that a health check can run it."""
    settings = settings_or_exit()
    url = redact_url(settings.database_url_value)
    file = sqlite_file(settings.database_url_value)
    if file is not None and not file.is_file():  # say so, rather than create one at a mistyped path
        console.print(f"{url}: no database there yet; the first flow or 'gpuaas db upgrade' creates it",
                      highlight=False, markup=False, soft_wrap=True)
        return
    store = Store(settings.database_url_value, migrate=False, read_only=True)
    held_now: Holdings | None = None
    try:
        current, head = store.current_revision(), store.head_revision()
        held = _writes_held(store)
        if current is not None and current == head:
            held_now = _holdings(store)
    finally:
        store.close()
    if current is None:
        console.print(f"{url}: no gpuaas schema yet; the first flow or 'gpuaas db upgrade' creates it",
                      highlight=False, markup=False, soft_wrap=True)
        return
    problem = schema_problem(settings.database_url_value, current, head)
    if problem is None:
        console.print(f"{url}: schema {current}, up to date", highlight=False, markup=False, soft_wrap=True)
        if held_now is not None:
            console.print(f"It {held_now.words()}.", highlight=False, markup=False, soft_wrap=True)
    # Said at any schema: before an upgrade, who still writes is what the operator must know.
    writes = "free" if held is None else (
        f"held by {held.holder} until {held.expires_at:%Y-%m-%d %H:%M:%S} UTC unless it renews it (a run killed "
        "holding it keeps it until then)")
    console.print(f"cluster writes ({WRITES_LOCK!r} lock): {writes}", highlight=False, markup=False, soft_wrap=True)
    if problem is not None:
        raise fail(problem)


def copy(
    source: Annotated[str, typer.Option("--from", metavar="URL|FILE", help=(
        "The database to copy: a SQLAlchemy URL, or the path of a SQLite file (the trial's "
        "~/.local/share/gpuaas/gpuaas.db). Only read."))],
) -> None:
    """Copy the audit log, snapshots and fleet history of another gpuaas database into this one (GPUAAS_DATABASE_URL),
    which must hold none yet: moving from a trial's SQLite file to a shared PostgreSQL. Audit ids are kept, so
    `gpuaas undo ID` and the ids in the cluster's Events still name the same rows. Stop the flows first; the copy is
    one transaction, and a row the database refuses leaves it empty."""
    settings = settings_or_exit()
    url = source if "://" in source else f"sqlite:///{_copy_source_file(source)}"
    try:
        with Store(url, migrate=False, read_only=True) as reading, \
                Store(settings.database_url_value, migrate=False) as writing, \
                progress("copying the gpuaas database") as step:
            copied = copy_database(reading, writing, step)
    except GpuaasError as exc:
        raise fail(str(exc)) from exc
    console.print(f"Copied {copied.audit:,} audit entries, {copied.snapshots:,} snapshots and "
                  f"{copied.queue_history + copied.tenant_history:,} fleet-history rows from {redact_url(url)} into "
                  f"{redact_url(settings.database_url_value)}; audit ids kept, so `gpuaas undo ID` and the ids in "
                  "the cluster's Events name the same rows.", highlight=False, markup=False, soft_wrap=True)


def _copy_source_file(source: str) -> Path:
    """The SQLite file ``--from`` names, resolved; a path that holds no file is refused naming ``--from``: the
    store's own words for a missing file point at GPUAAS_DATABASE_URL and GPUAAS_DATA_DIR, which name the target."""
    file = Path(source).expanduser().resolve()
    if file.is_dir():
        raise fail(f"--from {source}: a directory, not a SQLite file (a trial's database is "
                   "~/.local/share/gpuaas/gpuaas.db, or gpuaas.db in the GPUAAS_DATA_DIR it ran with)")
    if not file.exists():
        raise fail(f"--from {source}: no such file (a trial's database is ~/.local/share/gpuaas/gpuaas.db, or "
                   "gpuaas.db in the GPUAAS_DATA_DIR it ran with)")
    return file
