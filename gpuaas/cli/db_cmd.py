"""``gpuaas db``: the schema of the audit/snapshot database."""

from __future__ import annotations

from gpuaas.cli._common import console, fail, settings_or_exit
from gpuaas.errors import GpuaasError
from gpuaas.store import Store, redact_url, schema_problem, sqlite_file

__all__ = ["status", "upgrade"]


def upgrade() -> None:
    """Create the database if needed and migrate it to the newest schema, in place. The one way to migrate a shared
    (PostgreSQL) database, which flow runs leave as it is: run it once every worker runs this version."""
    settings = settings_or_exit()
    store = Store(settings.database_url_value, migrate=False)
    try:
        before, after = store.upgrade()
    except GpuaasError as exc:  # a newer schema, a migration the database refused: one line, no traceback
        raise fail(str(exc)) from exc
    finally:
        store.close()
    url = redact_url(settings.database_url_value)
    if before == after:
        console.print(f"{url}: already at schema {after}", highlight=False)
    else:
        console.print(f"{url}: upgraded schema {before or '(empty)'} -> {after}", highlight=False)


def status() -> None:
    """Show the database URL (password hidden) and its schema version. Exit 0 when it is at the schema this gpuaas
    reads, or when there is no database yet (the first flow creates it); 1 when it is behind (run gpuaas db upgrade)
    or newer (upgrade gpuaas), or cannot be read, so that a health check can run it."""
    settings = settings_or_exit()
    url = redact_url(settings.database_url_value)
    file = sqlite_file(settings.database_url_value)
    if file is not None and not file.is_file():  # say so, rather than create one at a mistyped path
        console.print(f"{url}: no database there yet; the first flow or 'gpuaas db upgrade' creates it",
                      highlight=False, markup=False, soft_wrap=True)
        return
    store = Store(settings.database_url_value, migrate=False, read_only=True)
    try:
        current, head = store.current_revision(), store.head_revision()
    finally:
        store.close()
    if current is None:
        console.print(f"{url}: no gpuaas schema yet; the first flow or 'gpuaas db upgrade' creates it",
                      highlight=False, markup=False, soft_wrap=True)
        return
    problem = schema_problem(settings.database_url_value, current, head)
    if problem is not None:
        raise fail(problem)
    console.print(f"{url}: schema {current}, up to date", highlight=False, markup=False, soft_wrap=True)
