"""The store on SQLite and on a real PostgreSQL: migrations, append-only audit, snapshots, locks."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, IntegrityError

from gpuaas.errors import StoreError
from gpuaas.store import AuditEntry, Store


def _entry(**overrides: object) -> AuditEntry:
    fields: dict[str, object] = dict(
        flow="reclaim", action="reclaim", kind="RayCluster", namespace="team-a", name="train-7",
        mode="dry-run", outcome="planned", reason="idle 45m", evidence={"activity": [0.01, 0.0]},
        before={"spec": {"suspend": False}},
    )
    fields.update(overrides)
    return AuditEntry(**fields)  # type: ignore[arg-type]


def test_fresh_database_is_created_and_migrated(db_url: str) -> None:
    store = Store(db_url)
    assert store.current_revision() == store.head_revision() == "0005"
    assert store.audit() == []
    store.close()


def test_the_head_read_from_the_files_is_alembics_and_an_up_to_date_store_opens_without_alembic(tmp_path: Path) -> None:
    from alembic.script import ScriptDirectory

    store = Store(f"sqlite:///{tmp_path}/gpuaas.db")
    assert store.head_revision() == ScriptDirectory.from_config(store._alembic()).get_current_head()
    store.close()
    code = (f"import sys; from gpuaas.store import Store; s = Store('sqlite:///{tmp_path}/gpuaas.db'); "
            "print(s.current_revision(), 'alembic' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert proc.stdout.split() == [store.head_revision(), "False"]


def test_old_database_upgrades_in_place_keeping_rows(db_url: str) -> None:
    old = Store(db_url, migrate=False)
    old.upgrade("0001")
    assert old.current_revision() == "0001"
    with old.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO audit_log (created_at, flow, action, kind, name, mode, outcome, reason, evidence) "
                "VALUES (:t, 'reclaim', 'reclaim', 'Notebook', 'nb', 'apply', 'applied', 'idle', '{}')"
            ),
            {"t": datetime(2026, 11, 1, tzinfo=UTC)},
        )
    if not db_url.startswith("sqlite"):  # `gpuaas db upgrade`: a flow migrates only a SQLite file
        old.upgrade()
    old.close()

    store = Store(db_url)  # a flow's opening: SQLite upgrades here
    assert store.current_revision() == "0005"
    [row] = store.audit()
    assert (row.kind, row.name, row.outcome) == ("Notebook", "nb", "applied")
    assert row.created_at == datetime(2026, 11, 1, tzinfo=UTC)
    assert store.acquire_lock("cluster-writes", "reclaim/1", timedelta(minutes=5))
    store.close()


def test_a_reader_neither_migrates_nor_creates_and_says_which_schema_it_found(db_url: str) -> None:
    empty = Store(db_url, migrate=False)  # there, with no gpuaas schema (an empty file or a fresh PostgreSQL schema)
    with empty.engine.begin() as conn:
        conn.execute(text("CREATE TABLE IF NOT EXISTS placeholder (x INTEGER)"))
    empty.close()
    with pytest.raises(StoreError, match="holds no gpuaas schema"):
        Store(db_url, read_only=True)
    old = Store(db_url, migrate=False)
    old.upgrade("0003")
    old.close()
    with pytest.raises(StoreError, match="is at schema 0003, behind the 0005 this gpuaas reads: run `gpuaas db upgrade`"):
        Store(db_url, read_only=True)
    check = Store(db_url, migrate=False)
    assert check.current_revision() == "0003"  # the reader left it there
    with check.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0099'"))
    check.close()
    with pytest.raises(StoreError, match="is at schema 0099, newer than the 0005 this gpuaas reads: upgrade gpuaas"):
        Store(db_url, read_only=True)


def test_a_reader_of_a_sqlite_file_leaves_it_as_it_found_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/copy.db"
    Store(url).close()
    with sqlite3.connect(tmp_path / "copy.db") as conn:  # a copy taken with the journal a writer had not switched
        conn.execute("PRAGMA journal_mode=DELETE")
    before = (tmp_path / "copy.db").read_bytes()
    reader = Store(url, read_only=True)
    assert reader.audit() == []
    reader.close()
    assert (tmp_path / "copy.db").read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["copy.db"]
    with pytest.raises(StoreError, match=f"no gpuaas database at {tmp_path}/missing.db"):
        Store(f"sqlite:///{tmp_path}/missing.db", read_only=True)
    assert not (tmp_path / "missing.db").exists()


@pytest.mark.parametrize("read_only", [True, False], ids=["reader", "writer"])
def test_a_data_directory_that_is_a_file_is_said_so(tmp_path: Path, read_only: bool) -> None:
    (tmp_path / "data").write_text("not a directory", encoding="utf-8")
    with pytest.raises(StoreError, match=f"the data directory {tmp_path}/data is a file, not a directory"):
        Store(f"sqlite:///{tmp_path}/data/gpuaas.db", read_only=read_only)


def test_audit_round_trip_and_filters(db_url: str) -> None:
    store = Store(db_url)
    t0 = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
    a = store.append(_entry(created_at=t0))
    b = store.append(_entry(created_at=t0 + timedelta(minutes=30), flow="rebalance", kind="ClusterQueue",
                            namespace=None, name="team-a-cq", action="quota-change"))
    c = store.append(_entry(created_at=t0 + timedelta(hours=2), name="other", refers_to=a.id))
    assert [e.id for e in store.audit()] == [a.id, b.id, c.id]
    assert [e.id for e in store.audit(since=t0 + timedelta(minutes=1))] == [b.id, c.id]
    assert [e.id for e in store.audit(since=t0, until=t0 + timedelta(hours=1))] == [a.id, b.id]
    assert [e.id for e in store.audit(flow="rebalance")] == [b.id]
    assert [e.id for e in store.audit(obj="team-a/train-7")] == [a.id]
    assert [e.id for e in store.audit(obj="ClusterQueue//team-a-cq")] == [b.id]
    assert [e.id for e in store.audit(refers_to=[a.id or 0])] == [c.id]
    got = store.get_audit(a.id or 0)
    assert got is not None
    assert got.evidence == {"activity": [0.01, 0.0]} and got.before == {"spec": {"suspend": False}}
    assert got.created_at == t0
    store.close()


@pytest.mark.parametrize("statement", ["UPDATE audit_log SET outcome = 'applied'", "DELETE FROM audit_log"])
def test_audit_log_is_append_only_in_the_database(db_url: str, statement: str) -> None:
    store = Store(db_url)
    store.append(_entry())
    with pytest.raises((IntegrityError, DBAPIError), match="append-only"):
        with store.engine.begin() as conn:
            conn.execute(text(statement))
    assert [e.outcome for e in store.audit()] == ["planned"]
    store.close()


def test_store_has_no_update_or_delete_path_for_audit() -> None:
    public = {name for name in dir(Store) if not name.startswith("_")}
    assert not {n for n in public if ("audit" in n or n == "append") and any(v in n for v in ("update", "delete"))}
    assert "append" in public


def test_snapshots_saved_and_pruned_by_age(db_url: str) -> None:
    store = Store(db_url)
    now = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    store.save_snapshot(now - timedelta(days=20), {"workloads": 1}, {"x": 1})
    store.save_snapshot(now - timedelta(days=1), {"workloads": 2}, {"x": 2})
    assert store.prune_snapshots(timedelta(days=14), now=now) == 1
    latest = store.latest_snapshot()
    assert latest is not None and latest.summary == {"workloads": 2}
    store.close()


def test_run_lock_excludes_a_second_holder_until_expiry(db_url: str) -> None:
    store = Store(db_url)
    now = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
    assert store.acquire_lock("cluster-writes", "reclaim/run-1", timedelta(minutes=10), now=now)
    assert not store.acquire_lock("cluster-writes", "rebalance/run-9", timedelta(minutes=10), now=now)
    later = now + timedelta(minutes=11)
    assert store.acquire_lock("cluster-writes", "rebalance/run-9", timedelta(minutes=10), now=later)
    store.release_lock("cluster-writes", "rebalance/run-9")
    assert store.acquire_lock("cluster-writes", "reclaim/run-2", timedelta(minutes=10), now=later)
    store.close()


def test_a_holder_renews_its_lock_and_learns_when_it_is_no_longer_its_own(db_url: str) -> None:
    store = Store(db_url)
    now = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
    ttl = timedelta(minutes=10)
    assert store.acquire_lock("cluster-writes", "reclaim/run-1", ttl, now=now)
    assert store.renew_lock("cluster-writes", "reclaim/run-1", ttl, now=now + timedelta(minutes=8))
    # renewed: past the first lease another run is still refused
    assert not store.acquire_lock("cluster-writes", "rebalance/run-9", ttl, now=now + timedelta(minutes=12))
    assert not store.renew_lock("cluster-writes", "rebalance/run-9", ttl, now=now + timedelta(minutes=12))
    # a renewal after the lease ran out is refused, and the next run takes the lock
    assert not store.renew_lock("cluster-writes", "reclaim/run-1", ttl, now=now + timedelta(minutes=19))
    assert store.acquire_lock("cluster-writes", "rebalance/run-9", ttl, now=now + timedelta(minutes=19))
    assert not store.renew_lock("cluster-writes", "reclaim/run-1", ttl, now=now + timedelta(minutes=19))
    store.close()


def test_unreachable_database_is_a_store_error(tmp_path: Path) -> None:
    from gpuaas.errors import StoreError

    with pytest.raises(StoreError, match=r"postgres:\*\*\*@127.0.0.1:1/x"):
        Store("postgresql+psycopg2://postgres:secret@127.0.0.1:1/x")


def test_a_file_that_is_not_a_database_is_named_in_the_databases_words(tmp_path: Path) -> None:
    from gpuaas.errors import StoreError

    junk = tmp_path / "policy.yaml"
    junk.write_text("reclaim:\n  mode: apply\n" * 200)
    with pytest.raises(StoreError) as caught:
        Store(f"sqlite:///{junk}")
    assert str(caught.value) == f"cannot read the gpuaas database at sqlite:///{junk}: file is not a database"
    assert junk.read_text() == "reclaim:\n  mode: apply\n" * 200  # nothing written to it
