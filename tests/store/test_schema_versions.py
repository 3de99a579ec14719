"""Who may migrate the database, and what each way in says of a schema it does not read; on SQLite and a real
PostgreSQL.

* a flow's opening (``Store(url)``) creates an empty database, and upgrades a SQLite file that is behind, saying so in
  one line;
* it leaves a PostgreSQL database that is behind as it is and refuses, in one line naming GPUAAS_DATABASE_URL, both
  schemas and what to run: one run of a newer gpuaas must not migrate a database older workers share;
* ``upgrade`` (``gpuaas db upgrade``) still migrates it, keeping its rows;
* a newer schema is refused by a flow's opening, a reader and ``upgrade`` alike, in the same line, naming the
  database without its password; nothing is asked of Alembic, which knows no such revision.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from gpuaas.errors import SchemaMismatch, StoreError
from gpuaas.store import Store


def _at(url: str, revision: str) -> None:
    """A database an older gpuaas left at ``revision`` ("9999": one a newer gpuaas migrated), with one audit row."""
    store = Store(url, migrate=False)
    store.upgrade(min(revision, store.head_revision()))
    with store.engine.begin() as conn:
        conn.execute(text("INSERT INTO audit_log (created_at, flow, action, kind, name, mode, outcome, reason, "
                          "evidence) VALUES (:t, 'reclaim', 'reclaim', 'Notebook', 'nb', 'apply', 'applied', 'idle', "
                          "'{}')"), {"t": datetime(2026, 11, 1, tzinfo=UTC)})
        conn.execute(text("UPDATE alembic_version SET version_num = :v"), {"v": revision})
    store.close()


def _revision(url: str) -> str | None:
    store = Store(url, migrate=False)
    try:
        return store.current_revision()
    finally:
        store.close()


def _upgrade(url: str) -> None:
    """``gpuaas db upgrade``'s migration."""
    store = Store(url, migrate=False)
    try:
        store.upgrade()
    finally:
        store.close()


def _with_password(url: str) -> str:
    """The URL with a password in it (the test server trusts local connections, so any password opens it)."""
    return url.replace("://postgres@", "://postgres:s3cret-db@") if url.startswith("postgresql") else url


def test_a_flow_creates_an_empty_database_on_either_kind(db_url: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="gpuaas.store"):
        store = Store(db_url)
    assert store.current_revision() == store.head_revision()
    store.close()
    assert caplog.records == []  # a fresh deployment: nothing was upgraded, nothing to say


def test_a_flow_upgrades_a_sqlite_file_that_is_behind_and_says_so(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    file = f"{tmp_path}/gpuaas.db"
    _at(f"sqlite:///{file}", "0003")
    with caplog.at_level(logging.WARNING, logger="gpuaas.store"):
        store = Store(f"sqlite:///{file}")
    [row] = store.audit()
    store.close()
    assert store.current_revision() == store.head_revision() and row.name == "nb"
    assert [r.getMessage() for r in caplog.records] == [
        f"upgraded the database {file} from schema 0003 to {store.head_revision()} (the file as it was: "
        f"{file}.schema-0003.bak)"]
    with Store(f"sqlite:///{file}.schema-0003.bak", migrate=False) as kept:  # the file as the older gpuaas left it
        with kept.engine.connect() as conn:
            names = conn.execute(text("SELECT name FROM audit_log")).scalars().all()
        assert kept.current_revision() == "0003" and names == ["nb"]


def test_a_flow_leaves_a_shared_database_behind_as_it_is_and_refuses(postgres_url: str) -> None:
    from gpuaas.cluster.services import fresh_schema_url

    url = _with_password(fresh_schema_url(postgres_url, "behind_flow"))
    _at(url, "0003")
    with pytest.raises(SchemaMismatch) as refused:
        Store(url)
    said = str(refused.value)
    assert said.startswith("GPUAAS_DATABASE_URL: postgresql") and "\n" not in said
    assert "at schema 0003, behind the 0005" in said and "with the scheduled runs paused, run `gpuaas db upgrade`, then roll" in said
    assert "s3cret-db" not in said
    assert _revision(url) == "0003"  # not migrated
    with pytest.raises(SchemaMismatch, match="behind the 0005 this gpuaas reads: run `gpuaas db upgrade` with the scheduled runs paused"):
        Store(url, read_only=True)  # a reader says what to run too

    store = Store(url, migrate=False)  # what `gpuaas db upgrade` does
    assert store.upgrade() == ("0003", "0005")
    store.close()
    with Store(url) as reopened:  # and the flows open it again
        assert [r.name for r in reopened.audit()] == ["nb"]


def test_a_newer_schema_is_refused_the_same_way_by_every_way_in(db_url: str) -> None:
    url = _with_password(db_url)
    _at(url, "9999")
    line = "is at schema 9999, newer than the 0005 this gpuaas reads: upgrade gpuaas"
    said = []
    for opening in (lambda: Store(url), lambda: Store(url, read_only=True), lambda: _upgrade(url)):
        with pytest.raises(StoreError) as refused:
            opening()
        said.append(str(refused.value))
    assert len(set(said)) == 1 and said[0].endswith(line) and "\n" not in said[0], said
    assert "s3cret-db" not in said[0] and "Can't locate revision" not in said[0]
    assert _revision(url) == "9999"


def test_the_preflight_says_what_the_next_flow_run_will_do(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Empty: the run creates it (ok); behind: a SQLite file is upgraded (a warning), a shared database fails the run
    (failed, saying what to run); newer: every run fails (failed)."""
    from gpuaas.operations.preflight import database_check
    from gpuaas.preflight_checks import Verdict
    from gpuaas.settings import load_settings

    monkeypatch.setenv("GPUAAS_DATABASE_URL", db_url)
    shared = not db_url.startswith("sqlite")
    Store(db_url, migrate=False).close()  # there, and empty (a fresh PostgreSQL schema, an empty SQLite file)
    assert database_check(load_settings()).verdict is Verdict.ok
    _at(db_url, "0003")
    behind = database_check(load_settings())
    assert behind.verdict is (Verdict.failed if shared else Verdict.warning)
    assert "gpuaas db upgrade" in behind.detail
    assert ("every worker" in behind.detail) is shared and ("let the next flow run upgrade it" in behind.detail) is not shared
    assert ("every flow run fails on it" in behind.detail) is shared
    with Store(db_url, migrate=False) as store, store.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    newer = database_check(load_settings())
    assert newer.verdict is Verdict.failed and newer.detail.endswith("newer than the 0005 this gpuaas reads: upgrade gpuaas")


@pytest.mark.parametrize("refusal", ["SELECT only", "read-only transactions"])
def test_the_preflight_fails_a_shared_database_that_refuses_writes(postgres_url: str, refusal: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A user granted SELECT only, or one whose transactions are read-only (as on a hot standby): every flow run
    would fail on its first write, so the preflight must not say ok; it names the database and what to grant."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    from gpuaas.cluster.services import fresh_schema_url
    from gpuaas.operations.preflight import database_check
    from gpuaas.preflight_checks import Verdict
    from gpuaas.settings import load_settings

    schema = "refuses_writes" if refusal == "SELECT only" else "read_only_tx"
    url = fresh_schema_url(postgres_url, schema)
    Store(url).close()  # at this gpuaas's schema, written by the owner
    role = f"gpuaas_{schema}"
    admin = create_engine(postgres_url)
    with admin.begin() as conn:
        if conn.execute(text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": role}).first():
            conn.execute(text(f'DROP OWNED BY "{role}"'))
            conn.execute(text(f'DROP ROLE "{role}"'))
        conn.execute(text(f'CREATE ROLE "{role}" LOGIN'))
        conn.execute(text(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"'))
        if refusal == "SELECT only":
            conn.execute(text(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"'))
        else:
            conn.execute(text(f'GRANT ALL ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"'))
            conn.execute(text(f'ALTER ROLE "{role}" SET default_transaction_read_only = on'))
    admin.dispose()
    as_role = make_url(url).set(username=role, password=None).render_as_string(hide_password=False)
    monkeypatch.setenv("GPUAAS_DATABASE_URL", as_role)
    check = database_check(load_settings())
    assert check.verdict is Verdict.failed, check
    assert "every flow run writes to it" in check.detail and "\n" not in check.detail
    assert ("permission denied" if refusal == "SELECT only" else "read-only transaction") in check.detail
    monkeypatch.setenv("GPUAAS_DATABASE_URL", url)  # the owner: the same database passes
    assert database_check(load_settings()).verdict is Verdict.ok
