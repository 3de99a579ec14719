"""``archive_audit``: old audit rows to a gzip JSON Lines file, then out of the database, on SQLite and PostgreSQL.

* the file read back holds exactly the rows removed, every column, behind a header that says what it is, and the
  SHA-256 of its row lines is the one the archive's own audit row records;
* the dry run (``plan_archive``) writes nothing and counts what would go, per flow;
* the append-only trigger is back after an archive, and after a failed one (a delete that fails once the file is
  written): then every row is still there, UPDATE and DELETE are still refused, and no file is left;
* a file already at the path, and a cutoff less than 30 days ago, are refused with nothing written;
* ``gpuaas db status``'s sentence says when the log was last archived, and up to when.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, text
from sqlalchemy.exc import DBAPIError

import gpuaas.store._archive as archive_module
from gpuaas.errors import StoreError
from gpuaas.store import AuditEntry, KeptBack, Store, archive_audit, holdings, plan_archive, read_archive

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NOW = T0 + timedelta(days=90)
CUTOFF = T0 + timedelta(days=40)
HOLDER = "db-archive-test@here:1"


def row(day: float, *, flow: str = "reclaim", action: str = "reclaim", outcome: str = "skipped",
        mode: str = "dry-run", refers_to: int | None = None, key: str | None = None, name: str = "train",
        **extra: Any) -> AuditEntry:
    """An audit row ``day`` days after T0 (a decision that changed nothing, unless told otherwise)."""
    return AuditEntry(created_at=T0 + timedelta(days=day), flow=flow, action=action, kind="RayCluster",
                      namespace="team-a", name=name, mode=mode, outcome=outcome, reason="idle 45m ≤ 5 %",
                      evidence={"gpus": [{"uuid": "GPU-1", "util": 0.01}]}, before={"spec": {"suspend": False}},
                      refers_to=refers_to, idempotency_key=key, **extra)


def fill(store: Store) -> list[AuditEntry]:
    """Ten old rows of three flows, five newer ones."""
    rows = [store.append(row(d, flow=f)) for d, f in zip(range(10), ["reclaim", "rebalance", "deadlines"] * 4,
                                                         strict=False)]
    rows += [store.append(row(50 + d)) for d in range(5)]
    return rows


@pytest.fixture()
def out(tmp_path: Path) -> Path:
    """The folder the archives go to, apart from the SQLite file and its journal."""
    folder = tmp_path / "archives"
    folder.mkdir()
    return folder


def _all(store: Store) -> list[dict[str, Any]]:
    return [r.model_dump() for r in store.audit(limit=None)]


def _as_line(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.astimezone(UTC).isoformat() if isinstance(v, datetime) else v) for k, v in entry.items()}


def test_the_file_read_back_holds_exactly_the_rows_removed(store: Store, out: Path) -> None:
    rows = fill(store)
    before = _all(store)
    target = out / "audit-2026-02.jsonl.gz"
    done = archive_audit(store, CUTOFF, target, holder=HOLDER, now=NOW)
    assert done is not None and done.plan.rows == 10 and done.file == target
    header, lines = read_archive(target)
    raw = list(lines)
    archived = [json.loads(line) for line in raw]
    assert header["format"] == "gpuaas-audit-archive" and header["version"] == 1
    assert header["schema"] == store.head_revision() and header["rows"] == 10
    assert (header["first_id"], header["last_id"]) == (rows[0].id, rows[9].id)
    assert header["before"] == CUTOFF.isoformat() and "written_at" in header
    assert archived == [_as_line(e) for e in before[:10]]  # every column, times in ISO UTC, JSON as JSON
    assert hashlib.sha256(b"".join(raw)).hexdigest() == done.sha256
    left = _all(store)
    assert left[:5] == before[10:]
    [record] = left[5:]
    assert (record["flow"], record["action"], record["outcome"], record["id"]) == ("cli", "archive", "applied",
                                                                                   done.audit_id)
    assert record["evidence"]["sha256"] == done.sha256 and record["evidence"]["rows"] == 10
    assert record["evidence"]["file"] == str(target.resolve())
    assert (record["evidence"]["first_id"], record["evidence"]["last_id"]) == (rows[0].id, rows[9].id)
    assert list(out.iterdir()) == [target]  # no temporary file left beside it
    with gzip.open(target, "rt") as text_file:  # what zcat shows: the header line first
        assert json.loads(text_file.readline())["rows"] == 10


def test_the_dry_run_counts_what_would_go_and_writes_nothing(store: Store, out: Path) -> None:
    fill(store)
    before = _all(store)
    plan = plan_archive(store, CUTOFF, now=NOW)
    assert (plan.rows, plan.newer, plan.kept) == (10, 5, {})
    assert plan.by_flow == {"deadlines": 3, "rebalance": 3, "reclaim": 4}
    assert (plan.oldest, plan.newest) == (T0, T0 + timedelta(days=9))
    assert _all(store) == before and list(out.iterdir()) == []


def _refused(store: Store, statement: str) -> None:
    with pytest.raises(DBAPIError, match="append-only"), store.engine.begin() as connection:
        connection.execute(text(statement))


def test_the_append_only_trigger_is_back_after_an_archive(store: Store, out: Path) -> None:
    fill(store)
    assert archive_audit(store, CUTOFF, out / "a.jsonl.gz", holder=HOLDER, now=NOW) is not None
    _refused(store, "DELETE FROM audit_log")
    _refused(store, "UPDATE audit_log SET reason = 'rewritten'")
    assert len(_all(store)) == 6


def test_a_failed_delete_leaves_every_row_the_trigger_and_no_file(store: Store, out: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    fill(store)
    before = _all(store)

    original = archive_module._delete_rows

    def failing(connection: Any, ids: list[int]) -> int:
        original(connection, ids[:3])
        raise StoreError("the disk went away")

    monkeypatch.setattr(archive_module, "_delete_rows", failing)
    target = out / "a.jsonl.gz"
    with pytest.raises(StoreError, match="the disk went away"):
        archive_audit(store, CUTOFF, target, holder=HOLDER, now=NOW)
    assert _all(store) == before  # the three deleted before the failure are back
    assert list(out.iterdir()) == []
    _refused(store, "DELETE FROM audit_log")
    _refused(store, "UPDATE audit_log SET reason = 'rewritten'")
    assert store.lock_holder("cluster-writes") is None  # the writes are free again


def test_a_failure_after_the_file_is_in_place_removes_it(store: Store, out: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The file goes into place inside the transaction; a commit that fails after it takes the file with it."""
    fill(store)
    before = _all(store)
    target = out / "a.jsonl.gz"

    def failing_commit(connection: Connection) -> None:
        assert target.exists()  # in place, and the rows not yet removed for anyone else
        raise StoreError("the commit failed")

    monkeypatch.setattr(Connection, "commit", failing_commit)
    with pytest.raises(StoreError, match="the commit failed"):
        archive_audit(store, CUTOFF, out / "a.jsonl.gz", holder=HOLDER, now=NOW)
    assert _all(store) == before
    assert list(out.iterdir()) == []


def test_a_file_already_there_is_refused_and_left_as_it_was(store: Store, out: Path) -> None:
    fill(store)
    target = out / "a.jsonl.gz"
    target.write_bytes(b"the team's earlier archive")
    with pytest.raises(StoreError, match=rf"^{target} already exists: an archive is never written over a file"):
        archive_audit(store, CUTOFF, target, holder=HOLDER, now=NOW)
    assert target.read_bytes() == b"the team's earlier archive" and len(_all(store)) == 15


@pytest.mark.parametrize(("days_ago", "refused"), [(29, True), (30, False), (31, False)], ids=["29d", "30d", "31d"])
def test_the_cutoff_must_be_at_least_30_days_ago(store: Store, out: Path, days_ago: int, refused: bool) -> None:
    fill(store)
    cutoff = NOW - timedelta(days=days_ago)
    if refused:
        with pytest.raises(StoreError, match=r"less than 30 days ago: .* give 2026-03-02 or earlier"):
            archive_audit(store, cutoff, out / "a.jsonl.gz", holder=HOLDER, now=NOW)
        with pytest.raises(StoreError, match="less than 30 days ago"):
            plan_archive(store, cutoff, now=NOW)
        assert len(_all(store)) == 15
    else:
        plan = plan_archive(store, cutoff, now=NOW)  # all 15 are older than the cutoff: the newest stays
        assert (plan.rows, plan.kept) == (14, {KeptBack.newest_entry: 1})


def test_a_held_writes_lock_is_refused(store: Store, out: Path) -> None:
    fill(store)
    assert store.acquire_lock("cluster-writes", "reclaim-1@worker:7", timedelta(minutes=15))
    with pytest.raises(StoreError, match="reclaim-1@worker:7 holds the cluster writes until .* nothing archived"):
        archive_audit(store, CUTOFF, out / "a.jsonl.gz", holder=HOLDER, now=NOW)
    assert len(_all(store)) == 15 and store.lock_holder("cluster-writes") == "reclaim-1@worker:7"


def test_nothing_to_archive_writes_nothing(store: Store, out: Path) -> None:
    store.append(row(60))
    assert archive_audit(store, CUTOFF, out / "a.jsonl.gz", holder=HOLDER, now=NOW) is None
    assert not (out / "a.jsonl.gz").exists() and len(_all(store)) == 1


def test_status_says_when_the_log_was_last_archived_and_up_to_when(store: Store, out: Path) -> None:
    fill(store)
    assert "(never pruned)" in holdings(store).words()
    archive_audit(store, CUTOFF, out / "a.jsonl.gz", holder=HOLDER, now=NOW)
    words = holdings(store).words()
    today = datetime.now(UTC)
    assert f"(last archived on {today:%Y-%m-%d}, up to 2026-02-10)" in words and "never pruned" not in words
