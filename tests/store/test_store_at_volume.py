"""The store's reads that a long history would make slow, as the database must answer them, on SQLite and PostgreSQL.

* a reclaim run's recovery asks the database for the apply intents still open (no completion refers to them) and
  loads those alone, not the lookback's closed decisions;
* the audit log has one (flow, created_at, id) index (migration 0005), which a database left at 0003 gets on
  upgrade, without the two single-column indexes it makes redundant and with its append-only triggers;
* a flow's newest rows are read from that index in order, without sorting the flow's whole history (SQLite);
* a writing SQLite store leaves statistics for the query planner (``PRAGMA optimize``), a reader leaves none;
* ``latest_cluster`` reads the one row it answers with.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, inspect, text
from sqlalchemy.exc import DBAPIError

from gpuaas.actions import recover_interrupted
from gpuaas.actions._restore import restore_key
from gpuaas.errors import NotFound
from gpuaas.store import AuditEntry, Store

NOW = datetime(2026, 12, 8, 12, 0, tzinfo=UTC)
FLOW_TIME = "ix_audit_log_flow_created_at_id"
CLOSES_A_STOP = [("reclaim", None), ("restore", "planned")]


def _row(action: str, outcome: str, at: datetime, *, refers_to: int | None = None, mode: str = "apply",
         flow: str = "reclaim", name: str = "nb") -> AuditEntry:
    """A row as the reclaim flow writes it; a restore's carries its key (``restore/<reclaim id>``)."""
    key = restore_key(refers_to or 0) if action == "restore" and outcome == "planned" else None
    return AuditEntry(created_at=at, flow=flow, action=action, kind="Notebook", namespace="team-a", name=name,
                      mode=mode, outcome=outcome, reason="idle", evidence={"activity": [0.0] * 50},
                      before={"replicas": 1}, after={"replicas": 0}, refers_to=refers_to, idempotency_key=key)


class _Gone:
    """A cluster where every object recovery reads is gone: it closes each stop it is asked about as ``failed``."""

    def __init__(self) -> None:
        self.read: list[str] = []

    def get(self, kind: str, namespace: str, name: str, version: str | None = None) -> dict[str, Any]:
        self.read.append(name)
        raise NotFound(f"reading {kind} {namespace}/{name}: 404 Not Found", status=404)


class _Week:
    """A week of reclaim runs: many stops closed every way one closes, and the few a killed run left open."""

    def __init__(self, store: Store, closed: int = 60) -> None:
        at = NOW - timedelta(days=6)
        step = timedelta(minutes=10)
        self.open_stops: list[int] = []
        self.open_restores: list[int] = []
        for i in range(closed):
            intent = store.append(_row("reclaim", "planned", at, name=f"closed-{i}"))
            store.append(_row("reclaim", ("applied", "failed", "skipped")[i % 3], at + step, refers_to=intent.id))
            if i % 5 == 0:  # undone: the restore's intent and its completion
                undo = store.append(_row("restore", "planned", at + 2 * step, refers_to=intent.id))
                store.append(_row("restore", "restored", at + 3 * step, refers_to=undo.id))
            at += 4 * step
        # closed by the undo alone: its restore intent found the stop's mark, so the stop landed
        marked = store.append(_row("reclaim", "planned", at, name="marked"))
        undo = store.append(_row("restore", "planned", at + step, refers_to=marked.id))
        store.append(_row("restore", "restored", at + 2 * step, refers_to=undo.id))
        # still open: a refused undo refers to the stop too, but closes nothing
        refused = store.append(_row("reclaim", "planned", at + 3 * step, name="refused-undo"))
        store.append(_row("restore", "skipped", at + 4 * step, refers_to=refused.id))
        self.open_stops.append(int(refused.id or 0))
        # a restore intent with no completion: its undo was killed; the stop it undoes is closed
        undone = store.append(_row("reclaim", "planned", at + 5 * step, name="undo-killed"))
        store.append(_row("reclaim", "applied", at + 6 * step, refers_to=undone.id))
        store.append(_row("restore", "planned", at + 7 * step, refers_to=undone.id))
        self.open_restores.append(int(undone.id or 0))
        # never completed: a run killed between its intent and its patch
        killed = store.append(_row("reclaim", "planned", at + 8 * step, name="killed"))
        self.open_stops.append(int(killed.id or 0))
        # open, but not the reclaim run's to close: a dry run's, another flow's, and one older than the lookback
        store.append(_row("reclaim", "planned", at + 9 * step, mode="dry-run", name="dry"))
        store.append(_row("reclaim", "planned", at + 9 * step, flow="rebalance", name="other-flow"))
        store.append(_row("reclaim", "planned", NOW - timedelta(days=8), name="too-old"))


@contextmanager
def _loaded(store: Store) -> Iterator[list[int]]:
    """The ids of the audit rows the store builds from what the database sent back, while in the block."""
    ids: list[int] = []

    def on_load(target: AuditEntry, _context: Any) -> None:
        ids.append(int(target.id or 0))

    event.listen(AuditEntry, "load", on_load)
    try:
        yield ids
    finally:
        event.remove(AuditEntry, "load", on_load)


def test_the_database_answers_with_the_open_intents_alone(store: Store) -> None:
    week = _Week(store)
    with _loaded(store) as loaded:
        stops = store.open_intents(flow="reclaim", action="reclaim", mode="apply", since=NOW - timedelta(days=7),
                                   closed_by=CLOSES_A_STOP)
        restores = store.open_intents(flow="reclaim", action="restore", since=NOW - timedelta(days=7))
    assert [r.id for r in stops] == week.open_stops  # oldest first
    assert [r.refers_to for r in restores] == week.open_restores
    assert sorted(loaded) == sorted([*week.open_stops, *(int(r.id or 0) for r in restores)])  # not one closed row
    assert store.open_intents(flow="reclaim", action="reclaim", mode="apply", since=NOW - timedelta(days=9),
                              closed_by=CLOSES_A_STOP)[0].name == "too-old"


def test_a_completion_from_before_the_lookback_closes_nothing(store: Store) -> None:
    """As the recovery reads it: the rows of the window; one written before it does not count (a worker's clock
    behind another's), the intent is settled from the object again."""
    intent = store.append(_row("reclaim", "planned", NOW - timedelta(days=6)))
    store.append(_row("reclaim", "applied", NOW - timedelta(days=8), refers_to=intent.id))
    [still_open] = store.open_intents(flow="reclaim", action="reclaim", mode="apply",
                                      since=NOW - timedelta(days=7), closed_by=CLOSES_A_STOP)
    assert still_open.id == intent.id


def test_the_recovery_closes_the_open_stops_and_restores_and_loads_nothing_else(store: Store) -> None:
    week = _Week(store)
    cluster = _Gone()
    with _loaded(store) as loaded:
        closed = recover_interrupted(store, cluster, flow_run_id="next", now=NOW)  # type: ignore[arg-type]
    assert sorted(r.refers_to or 0 for r in closed if r.action == "reclaim") == week.open_stops
    [restore] = [r for r in closed if r.action == "restore"]
    assert (restore.outcome, restore.name) == ("failed", "undo-killed")
    assert sorted(cluster.read) == ["killed", "refused-undo", "undo-killed"]
    # the open intents, the stop the open restore undoes, and the rows appended: no closed row of the week
    assert set(loaded) <= {*week.open_stops, *week.open_restores, *(r.id for r in closed),
                           *(r.id for r in store.audit(flow="reclaim", refers_to=week.open_restores, limit=None))}
    assert recover_interrupted(store, _Gone(), flow_run_id="again", now=NOW) == []  # type: ignore[arg-type]


def _indexes(store: Store) -> dict[str, list[str | None]]:
    with store.engine.connect() as conn:
        return {str(ix["name"]): list(ix["column_names"]) for ix in inspect(conn).get_indexes("audit_log")}


def test_a_0003_database_upgrades_to_the_flow_time_index(db_url: str) -> None:
    old = Store(db_url, migrate=False)
    old.upgrade("0003")
    with old.engine.begin() as conn:  # as an older gpuaas wrote it (no ``decision`` column yet)
        conn.execute(text("INSERT INTO audit_log (created_at, flow, action, kind, name, mode, outcome, reason, "
                          "evidence) VALUES (:t, 'reclaim', 'reclaim', 'Notebook', 'nb', 'apply', 'planned', 'idle', "
                          "'{}')"), {"t": NOW})
    old.close()
    if db_url.startswith("sqlite"):
        Store(db_url).close()  # a flow's opening upgrades a SQLite file, a copy of it kept first
        file = Path(db_url.removeprefix("sqlite:///"))
        assert file.with_name(f"{file.name}.schema-0003.bak").is_file()
    else:
        with Store(db_url, migrate=False) as shared:  # `gpuaas db upgrade`
            assert shared.upgrade() == ("0003", "0005")
    with Store(db_url) as store:
        assert store.current_revision() == "0005"
        indexes = _indexes(store)
        assert indexes[FLOW_TIME] == ["flow", "created_at", "id"]
        assert "ix_audit_log_flow" not in indexes and "ix_audit_log_idempotency_key" not in indexes
        assert indexes["uq_audit_log_decision"][0] == "idempotency_key"  # serves a lookup by the key alone
        [row] = store.audit(flow="reclaim")
        with pytest.raises(DBAPIError, match="append-only"), store.engine.begin() as conn:
            conn.execute(text("UPDATE audit_log SET outcome = 'applied' WHERE id = :id"), {"id": row.id})


def test_0005_downgrades_to_the_indexes_it_replaced(db_url: str) -> None:
    from alembic import command

    with Store(db_url) as store:
        config = store._alembic()
        with store.engine.begin() as conn:
            config.attributes["connection"] = conn
            command.downgrade(config, "0004")
        indexes = _indexes(store)
        assert FLOW_TIME not in indexes
        assert indexes["ix_audit_log_flow"] == ["flow"] and indexes["ix_audit_log_idempotency_key"] == ["idempotency_key"]
        assert store.current_revision() == "0004"


@contextmanager
def _statements(store: Store) -> Iterator[list[tuple[str, Any]]]:
    said: list[tuple[str, Any]] = []

    def before(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _many: bool) -> None:
        said.append((statement, parameters))

    event.listen(store.engine, "before_cursor_execute", before)
    try:
        yield said
    finally:
        event.remove(store.engine, "before_cursor_execute", before)


def _plan(store: Store, statement: str, parameters: Any) -> str:
    with store.engine.connect() as conn:
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        cursor.execute("EXPLAIN QUERY PLAN " + statement, parameters)
        return " / ".join(str(r[-1]) for r in cursor.fetchall())


def test_a_flows_newest_rows_are_read_in_index_order_on_sqlite(tmp_path: Path) -> None:
    with Store(f"sqlite:///{tmp_path}/gpuaas.db") as store:
        store.append(_row("reclaim", "planned", NOW))
        with _statements(store) as said:
            store.audit(flow="reclaim", limit=200, newest=True)
            store.audit(flow="reclaim", since=NOW - timedelta(days=7), limit=None)
            store.open_intents(flow="reclaim", action="reclaim", mode="apply", since=NOW - timedelta(days=7),
                               closed_by=CLOSES_A_STOP)
        plans = [_plan(store, s, p) for s, p in said if s.lstrip().startswith("SELECT")]
    assert len(plans) == 3
    assert all(FLOW_TIME in plan and "TEMP B-TREE" not in plan for plan in plans), plans
    assert "ix_audit_log_refers_to" in plans[2]  # each intent's completion found by one probe


def _stat_tables(file: Path) -> list[str]:
    import sqlite3

    conn = sqlite3.connect(file)
    try:
        return [r[0] for r in conn.execute("SELECT tbl FROM sqlite_stat1")] if conn.execute(
            "SELECT 1 FROM sqlite_master WHERE name = 'sqlite_stat1'").fetchone() else []
    finally:
        conn.close()


def test_a_writing_sqlite_store_leaves_statistics_for_the_planner_and_a_reader_none(tmp_path: Path) -> None:
    file = tmp_path / "gpuaas.db"
    with Store(f"sqlite:///{file}") as store:
        for i in range(20):
            store.append(_row("reclaim", "planned", NOW + timedelta(minutes=i)))
    copy = tmp_path / "read.db"
    copy.write_bytes(file.read_bytes())
    with Store(f"sqlite:///{copy}", read_only=True) as reader:
        reader.audit(flow="reclaim", since=NOW, limit=10)
    assert _stat_tables(copy) == _stat_tables(file)  # the reader wrote nothing
    with Store(f"sqlite:///{file}") as store:
        store.audit(flow="reclaim", since=NOW, limit=10)
    assert "audit_log" in _stat_tables(file)


def test_latest_cluster_reads_the_one_row_it_answers_with(store: Store) -> None:
    for i in range(30):
        store.save_snapshot(NOW + timedelta(minutes=i), {"cluster": "uid-a" if i < 10 else None, "gpus": i}, {})
    with _statements(store) as said:
        assert store.latest_cluster() == ("uid-a", NOW + timedelta(minutes=9))
    [(statement, _)] = [s for s in said if s[0].lstrip().startswith("SELECT")]
    assert "LIMIT" in statement.upper() and "SELECT snapshots.summary" not in statement  # one row, the cluster's name alone
    assert store.latest_cluster(look_back=21) == ("uid-a", NOW + timedelta(minutes=9))
    assert store.latest_cluster(look_back=20) is None  # only the newest rows are looked through
