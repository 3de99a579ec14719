"""``gpuaas db``: the schema of the audit/snapshot database."""

from __future__ import annotations

from gpuaas.cli._common import console, settings_or_exit
from gpuaas.store import Store, redact_url, sqlite_file

__all__ = ["status", "upgrade"]


def upgrade() -> None:
    """Create the database if needed and migrate it to the newest schema, in place."""
    settings = settings_or_exit()
    store = Store(settings.database_url_value, migrate=False)
    try:
        before, after = store.upgrade()
    finally:
        store.close()
    url = redact_url(settings.database_url_value)
    if before == after:
        console.print(f"{url}: already at schema {after}", highlight=False)
    else:
        console.print(f"{url}: upgraded schema {before or '(empty)'} -> {after}", highlight=False)


def status() -> None:
    """Show the database URL (password hidden) and its schema version."""
    settings = settings_or_exit()
    file = sqlite_file(settings.database_url_value)
    if file is not None and not file.is_file():  # say so, rather than create one at a mistyped path
        console.print(f"{redact_url(settings.database_url_value)}: no database there yet; the first flow or "
                      "'gpuaas db upgrade' creates it", highlight=False, markup=False, soft_wrap=True)
        return
    store = Store(settings.database_url_value, migrate=False, read_only=True)
    try:
        current, head = store.current_revision(), store.head_revision()
    finally:
        store.close()
    state = "up to date" if current == head else f"behind (newest is {head}); run 'gpuaas db upgrade'"
    console.print(f"{redact_url(settings.database_url_value)}: schema {current or '(empty)'}, {state}", highlight=False)
