"""``gpuaas db copy``: a trial's SQLite file into an empty database (SQLite, or a fresh schema of a real PostgreSQL).

Every audit entry, snapshot and fleet-history row arrives with its id, so an undo hint written before the move
names the same row after it; the next row a flow appends is numbered past them (a PostgreSQL sequence left at 1
would collide); a target that holds rows, a source behind this gpuaas, the database itself, and a row the target
refuses are each one line with nothing written."""

from __future__ import annotations

import zlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app
from gpuaas.errors import StoreError
from gpuaas.store import AuditEntry, Copied, Store, copy_database

T0 = datetime(2026, 11, 1, tzinfo=UTC)
runner = CliRunner()


def _trial(path: Path, audit_rows: int = 30) -> Store:
    """A SQLite store as a trial leaves it: audit rows whose ids have gaps (a row per id is not guaranteed), undo
    chains through ``refers_to``, a full snapshot and an empty one, and fleet history."""
    store = Store(f"sqlite:///{path}")
    with store.session() as session:
        for i in range(audit_rows):
            session.add(AuditEntry(id=3 * i + 2, created_at=T0 + timedelta(minutes=i), flow="reclaim",
                                   action="restore" if i % 2 else "reclaim", kind="Workload", namespace="team-a",
                                   name=f"wl-{i}", mode="apply", outcome="applied", reason="idle 1h ≤ 5 %",
                                   evidence={"owner": "RayCluster ray", "gpus": [{"uuid": f"GPU-{i}"}]},
                                   before={"spec": {"active": True}}, refers_to=3 * i - 1 if i % 2 else None,
                                   idempotency_key=f"k{i}", decision=f"planned#{i}"))
        session.commit()
    store.save_snapshot(T0, {"cluster": "prod", "gpus": 8}, {"snapshot": '{"gpus": []}'})
    store.save_snapshot(T0 + timedelta(minutes=1), {"cluster": "prod"}, {})
    store.save_history(T0, [{"cluster_queue": "team-a-cq", "flavor": "h100", "nominal_gpus": 8.0}],
                       [{"tenant": "team-a", "allocated_gpus": 4.0}])
    return store


def _everything(store: Store) -> tuple[object, ...]:
    """The rows a copy must carry, as the store reads them back: audit rows whole, snapshots with their document."""
    audit = [r.model_dump() for r in store.audit(limit=None)]
    with store.session() as session:
        from sqlmodel import select

        from gpuaas.store import SnapshotRecord
        snapshots = [(s.id, s.collected_at, s.summary, s.payload,
                      zlib.decompress(s.compressed) if s.compressed else None)
                     for s in session.exec(select(SnapshotRecord).order_by(SnapshotRecord.id))]  # type: ignore[arg-type]
    far = timedelta(days=3650)
    return (audit, snapshots, len(store.queue_history(T0 - far, T0 + far)), len(store.tenant_history(T0 - far, T0 + far)))


def test_every_row_arrives_with_its_id_and_the_next_row_is_numbered_past_them(tmp_path: Path, db_url: str) -> None:
    with _trial(tmp_path / "trial.db") as source, Store(db_url, migrate=False) as target:
        heard: list[str] = []
        copied = copy_database(source, target, heard.append)
        assert copied == Copied(audit=30, snapshots=2, queue_history=1, tenant_history=1)
        assert heard == ["30 audit entries", "2 snapshots", "1 queue history rows", "1 tenant history rows"]
        assert _everything(target) == _everything(source)
        assert [r.id for r in target.audit(limit=None)][:3] == [2, 5, 8]
        appended = target.append(AuditEntry(flow="reclaim", action="reclaim", kind="Notebook", namespace="a",
                                            name="nb", mode="dry-run", outcome="planned"))
        assert appended.id is not None and appended.id > 3 * 29 + 2  # past every copied id, not a collision at 1
        snapshot = target.save_snapshot(T0 + timedelta(hours=1), {"cluster": "prod"}, {})
        assert snapshot.id == 3


def test_a_target_that_holds_rows_is_refused_and_left_as_it_was(tmp_path: Path, db_url: str) -> None:
    with _trial(tmp_path / "trial.db", audit_rows=3) as source, Store(db_url) as target:
        target.append(AuditEntry(flow="reclaim", action="reclaim", kind="Notebook", namespace="a", name="nb",
                                 mode="dry-run", outcome="planned"))
        with pytest.raises(StoreError, match=r"already holds 1 audit entries: copy into an empty database"):
            copy_database(source, target)
        assert [r.name for r in target.audit(limit=None)] == ["nb"]


def test_a_row_the_target_refuses_leaves_it_empty(tmp_path: Path, postgres_url: str) -> None:
    """SQLite keeps a name longer than the column; PostgreSQL refuses it. The rows before it are rolled back."""
    from gpuaas.cluster.services import fresh_schema_url

    with _trial(tmp_path / "trial.db", audit_rows=5) as source, \
            Store(fresh_schema_url(postgres_url, "copy_refused"), migrate=False) as target:
        source.append(AuditEntry(flow="reclaim", action="reclaim", kind="Notebook", namespace="a", name="n" * 300,
                                 mode="dry-run", outcome="planned"))
        with pytest.raises(StoreError, match=r"^nothing copied into postgresql.*: audit entries with ids 2 to 15: "
                                             r"value too long") as refused:
            copy_database(source, target)
        assert "\n" not in str(refused.value)
        assert target.audit(limit=None) == [] and target.latest_snapshot() is None


def test_a_source_behind_this_gpuaas_and_the_database_itself_are_refused(tmp_path: Path) -> None:
    old = Store(f"sqlite:///{tmp_path}/old.db", migrate=False)
    old.upgrade("0003")
    with old, Store(f"sqlite:///{tmp_path}/new.db", migrate=False) as target:
        with pytest.raises(StoreError, match=r"^the database to copy from: .*old\.db is at schema 0003, behind"):
            copy_database(old, target)
        assert old.current_revision() == "0003"  # only read
        with pytest.raises(StoreError, match="is the database to copy from"):
            copy_database(target, Store(f"sqlite:///{tmp_path}/./new.db", migrate=False))


def test_the_command_says_what_it_copied_and_refuses_a_second_copy(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _trial(tmp_path / "trial.db", audit_rows=4).close()
    monkeypatch.setenv("GPUAAS_DATABASE_URL", f"sqlite:///{tmp_path}/shared.db")
    first = runner.invoke(app, ["db", "copy", "--from", str(tmp_path / "trial.db")])
    assert first.exit_code == 0, first.output
    said = " ".join(first.stdout.split())  # wrapped at words to the terminal's width
    assert said.startswith("Copied 4 audit entries, 2 snapshots and 2 fleet-history rows from sqlite:///")
    again = runner.invoke(app, ["db", "copy", "--from", str(tmp_path / "trial.db")])
    assert again.exit_code == 1 and "already holds 4 audit entries, 2 snapshots" in again.stderr
    assert "Traceback" not in again.output
    missing = runner.invoke(app, ["db", "copy", "--from", str(tmp_path / "nowhere.db")])
    assert missing.exit_code == 1 and "no such file" in missing.stderr
    assert missing.stderr.startswith(f"error: --from {tmp_path / 'nowhere.db'}: ")
    assert "GPUAAS_DATABASE_URL" not in missing.stderr  # that variable names the target, not the file to copy
    directory = runner.invoke(app, ["db", "copy", "--from", str(tmp_path)])
    assert directory.exit_code == 1 and f"--from {tmp_path}: a directory, not a SQLite file" in directory.stderr


def test_a_target_with_rows_at_an_older_schema_is_refused_before_it_is_migrated(tmp_path: Path) -> None:
    """A live shared database named by mistake: migrating it first would move it ahead of the workers still on the
    older gpuaas, and every one of their runs would fail. It keeps its schema."""
    from datetime import UTC, datetime

    older = Store(f"sqlite:///{tmp_path}/older.db", migrate=False)
    older.upgrade("0003")
    older.save_snapshot(datetime(2026, 11, 1, tzinfo=UTC), {"cluster": "prod"}, {})
    with _trial(tmp_path / "trial.db", audit_rows=2) as source, older:
        with pytest.raises(StoreError, match="already holds 1 snapshots: copy into an empty database"):
            copy_database(source, older)
        assert older.current_revision() == "0003"


def test_a_copy_while_a_run_holds_the_writes_is_refused(tmp_path: Path) -> None:
    """Rows a running flow wrote while the tables were read would be left behind: stop the flows first."""
    from gpuaas.store import WRITES_LOCK

    with _trial(tmp_path / "trial.db", audit_rows=2) as source, \
            Store(f"sqlite:///{tmp_path}/new.db", migrate=False) as target:
        assert source.acquire_lock(WRITES_LOCK, "reclaim-1a2b@worker/pid:7", timedelta(minutes=15))
        with pytest.raises(StoreError, match=r"^reclaim-1a2b@worker/pid:7 holds the cluster writes on sqlite:///.*"
                                             r"trial\.db until .* UTC: stop the flows first"):
            copy_database(source, target)
        assert target.current_revision() is None  # nothing made, not even the schema
        source.release_lock(WRITES_LOCK, "reclaim-1a2b@worker/pid:7")
        assert copy_database(source, target).audit == 2
