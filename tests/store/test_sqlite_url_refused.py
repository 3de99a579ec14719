"""A SQLite URL gpuaas cannot keep its word on is refused when the settings load, in one line naming
GPUAAS_DATABASE_URL.

A URL with no file (``sqlite://``, ``sqlite:///``, ``:memory:``) opened an in-memory database: ``gpuaas db upgrade``
said it upgraded the schema, and a reclaim applied there kept its audit rows (and the writes lock other processes
must see) only until it exited. A query option SQLAlchemy's SQLite driver does not take (``?mode=ro``) was
dropped with a SAWarning on the terminal; those it does take, gpuaas overrides or cannot honour.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuaas.errors import ConfigError
from gpuaas.settings import load_settings


def _refusal(monkeypatch: pytest.MonkeyPatch, url: str) -> str:
    monkeypatch.setenv("GPUAAS_DATABASE_URL", url)
    with pytest.raises(ConfigError) as refused:
        load_settings()
    said = str(refused.value)
    assert said.startswith("environment: GPUAAS_DATABASE_URL: ") and "\n" not in said, said
    return said


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///", "sqlite:///:memory:", "sqlite:///%3Amemory%3A",
                                 "sqlite+pysqlite:///:memory:", "sqlite:///?mode=memory"])
def test_a_sqlite_url_without_a_file_is_refused_as_in_memory(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    said = _refusal(monkeypatch, url)
    assert "in-memory database, gone when the process ends" in said and "sqlite:////absolute/path" in said


@pytest.mark.parametrize("url", ["sqlite://db.example/gpuaas.db", "sqlite://:memory:"])
def test_a_sqlite_url_with_a_host_is_refused(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    """SQLAlchemy refuses it only when the store opens, over four lines and without the variable's name."""
    assert "names a file, not a host" in _refusal(monkeypatch, url)


@pytest.mark.parametrize(("query", "named"), [
    ("mode=ro", "'mode'"),  # not taken by the driver: dropped with a warning
    ("uri=true&mode=ro", "'mode', 'uri'"),  # a SQLite URI: read-only past the store's checks of the file
    ("timeout=30", "'timeout'"),  # replaced by the store's own busy timeout on every connection
    ("check_same_thread=true&cached_statements=10", "'cached_statements', 'check_same_thread'"),
])
def test_a_sqlite_url_with_query_options_is_refused_naming_them(monkeypatch: pytest.MonkeyPatch, query: str,
                                                                named: str) -> None:
    said = _refusal(monkeypatch, f"sqlite:////var/lib/gpuaas/gpuaas.db?{query}")
    assert f"takes no query options (this one has {named})" in said


@pytest.mark.parametrize("url", ["sqlite:////var/lib/gpuaas/gpuaas.db", "sqlite:///relative/gpuaas.db",
                                 "sqlite+pysqlite:////var/lib/gpuaas/gpuaas.db", "sqlite:///a%20b.db",
                                 "postgresql+psycopg2://u:p@db:5432/g?sslmode=require"])
def test_a_url_naming_a_file_or_a_server_still_loads(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("GPUAAS_DATABASE_URL", url)
    assert load_settings().database_url_value == url


def test_a_sqlite_url_naming_a_directory_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``db status`` said "no database there yet; 'gpuaas db upgrade' creates it", and the upgrade could not open it."""
    said = _refusal(monkeypatch, f"sqlite:///{tmp_path}")
    assert f"a SQLite URL names the database's file, and {tmp_path} is a directory" in said
    monkeypatch.setenv("GPUAAS_DATABASE_URL", f"sqlite:///{tmp_path}/gpuaas.db")
    assert load_settings().database_url is not None  # a file in it, not there yet: the first run creates it


def test_a_sqlite_url_in_a_folder_this_user_may_not_search_still_loads(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    """The settings load for every command, most of which never open the database: a path that cannot be looked
    at (a name too long here, a service's mode-0700 folder in the field) is the store's to report, not a crash."""
    monkeypatch.setenv("GPUAAS_DATABASE_URL", f"sqlite:///{tmp_path}/{'x' * 300}/gpuaas.db")
    assert load_settings().database_url is not None
