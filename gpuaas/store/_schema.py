"""The store's schema: which revision a database is at, whether this gpuaas may use it, and who may migrate it.

A part of ``Store``. Three ways in, three rules:

- ``gpuaas db upgrade`` migrates any database behind this gpuaas (``upgrade``): an operator's explicit act;
- a flow run (a store opened with ``migrate``) creates an empty database, so a fresh deployment just works, and
  upgrades a SQLite file that is behind (it is this machine's own) saying so in one line; either way a SQLite
  file is copied beside itself first (``before_upgrade``), the way back to the older gpuaas; a shared database
  (PostgreSQL) that is behind it leaves as it is and refuses, because the workers still on the older gpuaas
  would all fail on the schema one run from a newer one had migrated;
- a reader (``read_only``) changes nothing and refuses any other schema than its own.

A database at a revision this gpuaas has no migration for was migrated by a newer gpuaas: every way in refuses
it in the same line, which names the database and says to upgrade gpuaas.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, inspect, text
from sqlalchemy.exc import SQLAlchemyError

from gpuaas.errors import SchemaMismatch, StoreError
from gpuaas.store._database import MIGRATIONS, head_revision, in_words, known_revisions, redact_url, sqlite_file

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = ["SchemaVersions", "before_upgrade", "schema_problem"]

log = logging.getLogger("gpuaas.store")
"""Where a flow's upgrade of a SQLite file is said (the command line prints its warnings after a run)."""


def _create_with_mode_of(copy: Path, file: Path) -> None:
    """``copy``, empty, with ``file``'s permissions: a copy of the audit log is readable by whom the database is
    and no one else (a database kept 0600 must not leave a 0644 copy beside it, as the umask would make it).
    Created 0600 first, so that it is never more open than the database for a moment; one already there (an
    earlier attempt's) is given the mode too."""
    import os
    import stat

    os.close(os.open(copy, os.O_WRONLY | os.O_CREAT, 0o600))
    os.chmod(copy, stat.S_IMODE(file.stat().st_mode))


def schema_problem(url: str, current: str | None, head: str) -> str | None:
    """Why a database at ``current`` is not one this gpuaas reads as it is, in one line naming it; None when it is
    at ``head``. An empty database (``current`` None) is a problem for a reader only: a flow creates the schema."""
    where = redact_url(url)
    if current == head:
        return None
    if current is None:
        return (f"{where} holds no gpuaas schema: nothing has been recorded there (the first flow or "
                "`gpuaas db upgrade` creates it)")
    if current not in known_revisions():
        return f"{where} is at schema {current}, newer than the {head} this gpuaas reads: upgrade gpuaas"
    then = "(or let the next flow run upgrade it)" if _local(url) else (
        "with the scheduled runs paused, then roll this version out to every worker")
    return f"{where} is at schema {current}, behind the {head} this gpuaas reads: run `gpuaas db upgrade` {then}"


def before_upgrade(url: str, revision: str) -> Path | None:
    """Where a SQLite file's copy from before its migration from ``revision`` is kept: beside it,
    ``gpuaas.db.schema-0003.bak``. None for another database."""
    file = sqlite_file(url)
    return None if file is None else file.with_name(f"{file.name}.schema-{revision}.bak")


def _local(url: str) -> bool:
    """Whether a flow run may upgrade the database: a SQLite file, which only the processes of this machine share."""
    return sqlite_file(url) is not None


class SchemaVersions:
    """Read the schema's revision, check it, migrate it."""

    url: str
    engine: Engine

    def close(self) -> None:
        raise NotImplementedError

    def _alembic(self) -> Config:
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        return config

    def head_revision(self) -> str:
        """The newest schema's revision (what ``upgrade()`` migrates to)."""
        return head_revision()

    def current_revision(self) -> str | None:
        """The database's schema revision (Alembic's version table), None before the first migration."""
        try:
            with self.engine.connect() as conn:
                if not inspect(conn).has_table("alembic_version"):
                    return None
                return conn.execute(text("SELECT version_num FROM alembic_version")).scalars().first()
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot read the gpuaas database at {redact_url(self.url)}: {in_words(exc)}") from exc

    def _refuse(self, problem: str) -> SchemaMismatch:
        """The store closed, and the error to raise: nothing may be read or written at a schema it does not know."""
        self.close()
        return SchemaMismatch(problem)

    def _check_schema(self) -> None:
        """A reader's stand-in for the migration: the schema is this code's, or the store closes and says why."""
        problem = schema_problem(self.url, self.current_revision(), self.head_revision())
        if problem is not None:
            raise self._refuse(problem)

    def _open_for_a_run(self) -> None:
        """A flow's opening (``Store(url)``): create an empty database, upgrade a SQLite file that is behind and say
        so; refuse a newer schema, and a shared database that is behind (``gpuaas db upgrade`` migrates that one)."""
        current, head = self.current_revision(), self.head_revision()
        if current == head:
            return
        if current is not None and current not in known_revisions():
            raise self._refuse(str(schema_problem(self.url, current, head)))
        if current is not None and not _local(self.url):  # a shared database behind: the run's settings name it
            raise self._refuse(f"GPUAAS_DATABASE_URL: {redact_url(self.url)} is at schema {current}, behind the {head} "
                               "this gpuaas reads, and a flow run does not migrate a shared database (the workers "
                               "still on the older gpuaas would fail on it): with the scheduled runs paused, run "
                               "`gpuaas db upgrade`, then roll this version out to every worker")
        before, after = self.upgrade()
        if before is not None:
            log.warning("upgraded the database %s from schema %s to %s (the file as it was: %s)",
                        sqlite_file(self.url), before, after, before_upgrade(self.url, before))

    def _keep_a_copy(self, before: str) -> None:
        """A SQLite file's copy as it was before a migration (``before_upgrade``), taken with SQLite's online backup,
        so that a migration that goes wrong, or a version rolled back, has its file to return to. A PostgreSQL
        database is backed up by its owners (``pg_dump``): a shared database is migrated by hand, never by a run."""
        file, copy = sqlite_file(self.url), before_upgrade(self.url, before)
        if file is None or copy is None:
            return
        try:
            _create_with_mode_of(copy, file)
            source, target = sqlite3.connect(file), sqlite3.connect(copy)
            try:
                source.backup(target)
            finally:
                target.close()
                source.close()
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"migrating {redact_url(self.url)} refused: its copy {copy} could not be written "
                             f"({exc}); nothing was migrated") from exc

    def upgrade(self, revision: str = "head") -> tuple[str | None, str | None]:
        """Migrate to ``revision``; returns (before, after). Safe to call on an up-to-date database; a database at a
        schema newer than this gpuaas is refused in the line a reader gives, before Alembic is asked."""
        from alembic import command
        from alembic.util.exc import CommandError

        before = self.current_revision()
        if before is not None and before not in known_revisions():
            raise SchemaMismatch(str(schema_problem(self.url, before, self.head_revision())))
        config = self._alembic()
        if before is not None and before != self.head_revision():
            self._keep_a_copy(before)
        try:
            with self.engine.begin() as conn:
                config.attributes["connection"] = conn
                command.upgrade(config, revision)
        except SQLAlchemyError as exc:
            raise StoreError(f"migrating {redact_url(self.url)} failed: {in_words(exc)}") from exc
        except CommandError as exc:  # a revision that is no migration of this gpuaas (``upgrade("9999")``)
            raise StoreError(f"migrating {redact_url(self.url)} failed: {exc}") from exc
        return before, self.current_revision()
