"""What the database refuses during a store call leaves the store as one line naming the database.

A SQLite store locked by another process failed a writing flow with SQLAlchemy's own text: the driver's class,
``[SQL: DELETE FROM queue_history …]``, ``[parameters: (…)]`` (a row's values) and a sqlalche.me link, over
several lines, naming no database; ``gpuaas db status`` said the same lock in one line. The store's sessions
now say it as the rest of the store does: a ``StoreError`` with the URL (without its password) and the
driver's own words.
"""

from __future__ import annotations

import sqlite3
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from gpuaas.errors import StoreError
from gpuaas.store import Store, redact_url

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _one_line_naming(error: StoreError, url: str, says: str) -> None:
    said = str(error)
    assert said.startswith(f"the gpuaas database at {redact_url(url)}: ") and says in said, said
    assert "\n" not in said and "[SQL" not in said and "parameters" not in said and "sqlalche.me" not in said
    password = make_url(url).password
    assert not password or str(password) not in said


def test_a_locked_sqlite_database_is_one_line_naming_it(tmp_path: Path) -> None:
    """The fuzzed case: another process holds SQLite's exclusive lock past the busy timeout (5 s)."""
    url = f"sqlite:///{tmp_path}/gpuaas.db"
    store = Store(url)
    holder = sqlite3.connect(tmp_path / "gpuaas.db", isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        started = time.monotonic()
        with pytest.raises(StoreError) as refused:
            store.prune_history(timedelta(days=1), now=T0)
        assert time.monotonic() - started >= 4  # the busy timeout was waited out first
    finally:
        holder.close()
        store.close()
    _one_line_naming(refused.value, url, "database is locked")
    assert isinstance(refused.value.__cause__, Exception) and "DELETE FROM" in str(refused.value.__cause__)


def test_what_the_database_refuses_is_one_line_on_either_backend(db_url: str) -> None:
    """A table gone under the store (a driver error, immediate): SQLite's and PostgreSQL's words, the URL without
    its password (the suite's own PostgreSQL trusts any, so one is given where its URL has none)."""
    parsed = make_url(db_url)
    if parsed.drivername.startswith("postgresql") and not parsed.password:
        db_url = parsed.set(password="hunter2-not-shown").render_as_string(hide_password=False)
    store = Store(db_url)
    try:
        with store.engine.begin() as conn:
            conn.execute(text("DROP TABLE queue_history"))
        with pytest.raises(StoreError) as refused:
            store.save_history(T0, [{"cluster_queue": "q", "flavor": "h100"}], [])
    finally:
        store.close()
    _one_line_naming(refused.value, db_url, "queue_history")


def test_a_lock_already_taken_is_still_the_callers_answer_not_an_error(tmp_path: Path) -> None:
    """A session's block that handles the database's refusal itself (a run lock held: a unique row) is unchanged."""
    store = Store(f"sqlite:///{tmp_path}/gpuaas.db")
    try:
        assert store.acquire_lock("cluster-writes", "run-a", timedelta(minutes=5), now=T0)
        assert not store.acquire_lock("cluster-writes", "run-b", timedelta(minutes=5), now=T0)
    finally:
        store.close()
