"""``Store.newest_rows``: per object, the newest row one flow wrote since an instant, on SQLite and PostgreSQL.

What a reclaim run compares its unchanged skips with: other flows' rows and rows before the instant are not
read, the newest is by time then id, ``evidence["cause"]`` comes back as text (None where a row has none), and
on SQLite the query walks the (flow, created_at, id) index, not the table. And ``Store.object_rows``: one
object's newest rows, by its kind, namespace, name and uid, found through the name index.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import event

from gpuaas.store import AuditEntry, NewestRow, Store

T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)


def _row(name: str, at: datetime, *, flow: str = "reclaim", outcome: str = "skipped", cause: str | None = "keda",
         kind: str = "Notebook", namespace: str | None = "team-a", action: str = "reclaim") -> AuditEntry:
    evidence: dict[str, Any] = {"window_minutes": 30.0} if cause is None else {"window_minutes": 30.0, "cause": cause}
    return AuditEntry(created_at=at, flow=flow, action=action, kind=kind, namespace=namespace, name=name,
                      uid="uid-1", mode="dry-run", outcome=outcome, reason="r", evidence=evidence)


def test_the_newest_row_of_each_object_since_the_instant(store: Store) -> None:
    old = store.append(_row("nb", T0 - timedelta(minutes=61), cause="opted-out"))
    first = store.append(_row("nb", T0, cause="opted-out"))
    tie = store.append(_row("nb", T0 + timedelta(minutes=15), cause="keda"))
    last = store.append(_row("nb", T0 + timedelta(minutes=15), outcome="planned", cause=None))  # same time: by id
    store.append(_row("nb", T0 + timedelta(minutes=30), flow="deadlines", cause="held"))  # another flow
    other = store.append(_row("cq", T0 + timedelta(minutes=5), kind="ClusterQueue", namespace=None,
                              action="restore", outcome="restored", cause=None))
    found = store.newest_rows(flow="reclaim", since=T0 - timedelta(minutes=60))
    assert found == {
        ("Notebook", "team-a", "nb"): NewestRow(int(last.id or 0), T0 + timedelta(minutes=15), "reclaim", "uid-1",
                                                "dry-run", "planned", None),
        ("ClusterQueue", "", "cq"): NewestRow(int(other.id or 0), T0 + timedelta(minutes=5), "restore", "uid-1",
                                              "dry-run", "restored", None),
    }
    assert old.id and first.id and tie.id
    only_old = store.newest_rows(flow="reclaim", since=T0 - timedelta(minutes=90))[("Notebook", "team-a", "nb")]
    assert only_old.audit_id == last.id  # further back, still the newest
    assert store.newest_rows(flow="reclaim", since=T0 + timedelta(hours=1)) == {}


def test_the_cause_comes_back_as_text(store: Store) -> None:
    row = store.append(_row("nb", T0, cause="over-cap"))
    found = store.newest_rows(flow="reclaim", since=T0)[("Notebook", "team-a", "nb")]
    assert (found.audit_id, found.cause, found.created_at.tzinfo is not None) == (row.id, "over-cap", True)


def _sqlite_plan(store: Store, read: Any) -> str:
    """SQLite's plan of the one SELECT on the log that ``read()`` sends."""
    sent: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        if "audit_log" in statement and statement.lstrip().upper().startswith("SELECT"):
            sent.append((statement, parameters))

    event.listen(store.engine, "before_cursor_execute", capture)
    try:
        read()
    finally:
        event.remove(store.engine, "before_cursor_execute", capture)
    assert len(sent) == 1
    with store.engine.connect() as connection:
        return " | ".join(str(r[-1]) for r in connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {sent[0][0]}",
                                                                         sent[0][1]))


def test_on_sqlite_the_read_is_served_by_the_flow_time_index(store: Store) -> None:
    """The statement the store sends, planned by SQLite: a search of the index, never a scan of the log."""
    if store.engine.dialect.name != "sqlite":
        return
    store.append(_row("nb", T0))
    plan = _sqlite_plan(store, lambda: store.newest_rows(flow="reclaim", since=T0))
    assert "SEARCH audit_log USING INDEX ix_audit_log_flow_created_at_id" in plan, plan


def _object_rows(store: Store, name: str = "nb", namespace: str | None = "team-a", uid: str | None = "uid-1",
                 limit: int = 20) -> list[int]:
    return [int(r.id or 0) for r in store.object_rows(flow="reclaim", action="reclaim", kind="Notebook",
                                                      namespace=namespace, name=name, uid=uid, limit=limit)]


def test_one_objects_rows_are_its_own_newest_first_cut(store: Store) -> None:
    mine = [store.append(_row("nb", T0 + timedelta(minutes=m), outcome="planned")) for m in (0, 15, 15, 30)]
    store.append(_row("nb", T0 + timedelta(minutes=40), namespace="team-b"))  # same name, another namespace
    store.append(_row("nb", T0 + timedelta(minutes=40), kind="RayCluster"))
    store.append(_row("nb", T0 + timedelta(minutes=40), flow="deadlines"))
    store.append(_row("nb", T0 + timedelta(minutes=40), action="restore"))
    recreated = _row("nb", T0 + timedelta(minutes=45))
    recreated.uid = "uid-2"
    store.append(recreated)
    ids = [int(r.id or 0) for r in mine]
    assert _object_rows(store) == ids
    assert _object_rows(store, limit=2) == ids[2:]  # the last two written, still oldest first
    assert _object_rows(store, uid="uid-2") == [recreated.id]
    assert _object_rows(store, name="other") == []


def test_a_cluster_scoped_objects_rows_match_none_or_empty_namespace(store: Store) -> None:
    a = store.append(_row("cq", T0, namespace=None))
    b = store.append(_row("cq", T0 + timedelta(minutes=1), namespace=""))
    store.append(_row("cq", T0 + timedelta(minutes=2), namespace="team-a"))
    assert _object_rows(store, name="cq", namespace=None) == [a.id, b.id]
    assert _object_rows(store, name="cq", namespace="") == [a.id, b.id]


def test_on_sqlite_one_objects_rows_are_found_through_the_name_index(store: Store) -> None:
    """Not a walk of the flow's rows, nor the evidence of every row: the stop guard asks this once per stop."""
    if store.engine.dialect.name != "sqlite":
        return
    for i in range(50):
        store.append(_row(f"nb-{i}", T0 + timedelta(minutes=i)))
    plan = _sqlite_plan(store, lambda: _object_rows(store, name="nb-7"))
    assert "USING INDEX ix_audit_log_name" in plan, plan


def test_one_objects_rows_of_some_outcomes_are_not_pushed_out_by_later_skips(store: Store) -> None:
    """The stop guard looks for the last stop's completion: a day of hourly skips since must not hide it."""
    failed = store.append(_row("nb", T0, outcome="failed"))
    for hour in range(1, 25):
        store.append(_row("nb", T0 + timedelta(hours=hour), outcome="skipped"))
    found = store.object_rows(flow="reclaim", action="reclaim", kind="Notebook", namespace="team-a", name="nb",
                              uid="uid-1", outcomes=("applied", "failed"), limit=20)
    assert [r.id for r in found] == [failed.id]
    assert len(_object_rows(store, limit=20)) == 20 and failed.id not in _object_rows(store, limit=20)
