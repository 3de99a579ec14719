"""The database a URL names: its file, its name in messages, the newest schema, the SQLite settings.

What the store needs to know about a database before and around opening it, kept apart from what
it keeps there.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote_plus

from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session

from gpuaas.errors import StoreError

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

__all__ = ["MIGRATIONS", "Sessions", "create_sqlite_file", "engine_url", "head_revision", "in_words", "known_revisions",
           "redact_url", "sqlite_file", "sqlite_optimize", "sqlite_pragmas"]


class Sessions:
    """What a part of the store needs of the whole: sessions on its database (``Store.session``). The parts (its
    fleet history, its run locks) are mixed into ``Store``, one concept a module; the store owns the engine."""

    def session(self) -> AbstractContextManager[Session]:
        raise NotImplementedError

MIGRATIONS = Path(__file__).resolve().parent / "migrations"

_REVISION_LINE = re.compile(r'^(down_revision|revision)\s*=\s*(?:"([^"]+)"|None)', re.MULTILINE)


@cache
def _revision_links() -> tuple[frozenset[str], frozenset[str]]:
    """(every migration's revision, the revisions another migration follows), read from the migration files."""
    revisions: set[str] = set()
    followed: set[str] = set()
    for path in (MIGRATIONS / "versions").glob("[0-9]*.py"):
        for key, value in _REVISION_LINE.findall(path.read_text(encoding="utf-8")):
            if value:
                (revisions if key == "revision" else followed).add(value)
    return frozenset(revisions), frozenset(followed)


def known_revisions() -> frozenset[str]:
    """Every schema this gpuaas has a migration for. A database at any other revision was migrated by a newer
    gpuaas: this one can neither read it nor migrate it (Alembic cannot locate the revision)."""
    return _revision_links()[0]


@cache
def head_revision() -> str:
    """The newest migration's revision, read from the migration files (the one no other migration follows)."""
    revisions, followed = _revision_links()
    heads = revisions - followed
    if len(heads) != 1:
        raise StoreError(f"the migrations in {MIGRATIONS} have {len(heads)} heads, not one: {sorted(heads)}")
    return next(iter(heads))


_INSTALLED_DRIVER = {"postgresql": "postgresql+psycopg2", "postgres": "postgresql+psycopg2"}
"""The driver a URL that names none gets, by the database it names."""


def engine_url(url: str) -> URL:
    """The URL the engine is created from: ``url`` with the installed driver where it names none.

    SQLAlchemy 2.1 gives a bare ``postgresql://`` URL the psycopg 3 driver, which gpuaas does not install
    (it depends on psycopg2), and no longer knows ``postgres://`` at all, the form many hosted databases
    hand out; both would fail to open with a missing module. A driver the URL names (``postgresql+psycopg``)
    is kept as given: the user chose it. Raises what ``make_url`` raises for an unparsable URL."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    driver = _INSTALLED_DRIVER.get(parsed.drivername)
    return parsed.set(drivername=driver) if driver else parsed


CONNECT_TIMEOUT_S = 10
"""How long a connection to PostgreSQL may take to open: a server that accepts and never answers (a hung host, a
firewall that drops) would otherwise hold a run, and the writes lock it holds, for as long as the kernel retries."""

_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10, "keepalives_count": 3}
"""TCP keepalives on every PostgreSQL connection: one whose server went away mid-run (a partition, a host that
died) is found dead about a minute later instead of waiting on it without end."""


def connect_args(url: URL) -> dict[str, object]:
    """What every connection to ``url`` is opened with: for PostgreSQL through libpq (psycopg2, or psycopg where the
    URL names it), the connect timeout and the keepalives, where the URL does not set them itself (its own
    ``?connect_timeout=`` wins)."""
    if url.get_backend_name() != "postgresql" or url.get_driver_name() not in ("psycopg2", "psycopg"):
        return {}
    wanted: dict[str, object] = {"connect_timeout": CONNECT_TIMEOUT_S, **_KEEPALIVES}
    return {k: v for k, v in wanted.items() if k not in url.query}


_SECRET_QUERY = re.compile(r"pass|pwd|token|secret", re.IGNORECASE)
"""Query parameters that carry a secret: libpq's ``password`` and ``sslpassword``, ``token``, ``access_token``."""


def redact_url(url: str) -> str:
    """The URL with its password replaced, for messages and logs: the one of ``user:password@`` and the value
    of every query parameter that carries one (``?password=``, ``sslpassword``, ``token``, ``access_token``)."""
    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
        shown = parsed.render_as_string(hide_password=True)
        secret = [k for k in parsed.query if _SECRET_QUERY.search(k)]
        if not secret:
            return shown
        base, _, _ = shown.partition("?")
        pairs = [(k, "***" if k in secret else v) for k, vs in parsed.query.items()
                 for v in ((vs,) if isinstance(vs, str) else vs)]
        return f"{base}?" + "&".join(f"{quote_plus(k)}={v if v == '***' else quote_plus(v)}" for k, v in pairs)
    except Exception:  # noqa: BLE001 - an unparsable URL is reported by create_engine itself
        return "<unparsable database URL>"


def in_words(exc: SQLAlchemyError) -> str:
    """The database's own words (``file is not a database``), without SQLAlchemy's wrapping: the
    driver's class in brackets, the statement and the link to its documentation."""
    cause = getattr(exc, "orig", None) or exc
    return str(cause).split("\n")[0].split(" (Background on this error at:")[0]


def sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL names; None for another database or an in-memory one."""
    if not url.startswith("sqlite:///"):
        return None
    name = url.removeprefix("sqlite:///").split("?", 1)[0]
    return Path(name).expanduser() if name and name != ":memory:" else None


def create_sqlite_file(file: Path) -> None:
    """The SQLite file, created empty for its owner alone (0600) where it is not there, in a data directory created
    0700 where that is not there either: the audit log names the cluster's workloads and what was done to them, and
    under the usual umask (022) SQLite would create both readable by every user of the machine. SQLite gives its
    journal and WAL files the database file's mode. What is already there is left as it is: a directory the user
    made, and a file whose mode the user chose. ``OSError`` as ``mkdir`` raises it; a file that cannot be created
    is left to SQLite, whose error names the database."""
    import os

    directory = file.parent
    if not directory.is_dir():  # its parents (``~/.local/share``) made as anything makes them: the mode is the last's
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        os.close(os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError:  # there already (FileExistsError), or not creatable: SQLite says why when it opens it
        pass


def sqlite_pragmas(*, read_only: bool = False) -> Callable[[Any, Any], None]:
    """The hook each new SQLite connection runs. WAL lets the CLI read while a flow writes; a busy
    timeout rides out short locks. A reader sets the timeout only: switching to WAL writes to the
    file, and a reader leaves the file as it found it (a flow's writer has switched it already)."""
    pragmas = ("busy_timeout=5000",) if read_only else ("journal_mode=WAL", "busy_timeout=5000")

    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        for pragma in pragmas:
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()

    return on_connect


ANALYSIS_LIMIT = 400
"""Rows ANALYZE samples per index when ``PRAGMA optimize`` runs it (SQLite's own suggestion is 100 to 1000): enough
for the query planner's statistics, and milliseconds on a log of millions of rows."""


def sqlite_optimize(dbapi_connection: Any, _record: Any) -> None:
    """The hook a writer's SQLite connection runs as it closes: ``PRAGMA optimize``, where SQLite's documentation
    places it for connections that live as long as a run. Without it the query planner never has statistics (nothing
    runs ANALYZE) and guesses between the audit log's indexes; ``optimize`` analyzes only the tables this connection's
    queries would have planned better with fresh statistics, usually none, so it costs nothing most times.

    Advice, never a failure: a database another process is writing to (or one that went read-only) skips it, and a
    later close runs it; a short busy timeout keeps a close from waiting on that writer."""
    try:
        cursor = dbapi_connection.cursor()
        try:
            for pragma in ("busy_timeout=100", f"analysis_limit={ANALYSIS_LIMIT}", "optimize"):
                cursor.execute(f"PRAGMA {pragma}")
        finally:
            cursor.close()
    except sqlite3.Error:
        return
