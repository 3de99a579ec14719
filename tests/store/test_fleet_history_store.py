"""Fleet history and compressed snapshots, on SQLite and a real PostgreSQL.

* a 0002 database with an uncompressed snapshot upgrades in place (SQLite: opened by a flow; PostgreSQL: by
  ``gpuaas db upgrade``): the old row reads as before;
* a snapshot document is stored compressed (far fewer bytes than its text) and read back exact;
* ``keep_latest`` keeps the newest N full snapshots whatever their age;
* per-queue and per-tenant rows come back over a half-open window, filtered, NaN as missing;
* history past retention is pruned, newer rows stay.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from sqlalchemy import text

from gpuaas.store import Store

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)



def _queue(name: str, **values: object) -> dict[str, object]:
    row: dict[str, object] = {
        "cluster_queue": name, "flavor": "h100", "cohort": "c", "tenant": None, "nominal_gpus": 8.0,
        "usage_gpus": 4.0, "reserved_gpus": 4.0, "borrowed_gpus": 0.0, "borrowing_limit_gpus": float("nan"),
        "pending_workloads": 0, "pending_gpus": 0.0, "oldest_pending_seconds": float("nan"),
        "admitted_workloads": 1}
    row.update(values)
    return row


def test_a_0002_database_keeps_its_uncompressed_snapshot(db_url: str) -> None:
    old = Store(db_url, migrate=False)
    old.upgrade("0002")
    with old.engine.begin() as conn:
        conn.execute(text("INSERT INTO snapshots (collected_at, summary, payload) VALUES (:t, '{}', :p)"),
                     {"t": T0, "p": json.dumps({"snapshot": '{"old": true}'})})
    if not db_url.startswith("sqlite"):  # a shared database is migrated by `gpuaas db upgrade`, not by a flow
        old.upgrade()
    old.close()
    store = Store(db_url)
    record = store.latest_snapshot()
    store.close()
    assert store.current_revision() == "0005"
    assert record is not None and record.payload == {"snapshot": '{"old": true}'}


def test_snapshot_document_is_compressed_and_read_back_exactly(db_url: str) -> None:
    store = Store(db_url)
    document = json.dumps({"frames": [{"namespace": f"team-{i % 7}", "gpus": i % 8} for i in range(5000)]})
    saved = store.save_snapshot(T0, {"workloads": 5000}, {"snapshot": document, "note": "kept"})
    with store.engine.connect() as conn:
        stored = conn.execute(text("SELECT compressed FROM snapshots WHERE id = :i"), {"i": saved.id}).scalar_one()
    record = store.get_snapshot(int(saved.id or 0))
    store.close()
    assert len(bytes(stored)) * 5 < len(document)
    assert record is not None and record.payload == {"note": "kept", "snapshot": document}
    assert saved.payload["snapshot"] == document


def test_keep_latest_keeps_the_newest_full_documents_and_every_row(db_url: str) -> None:
    store = Store(db_url)
    ids = [store.save_snapshot(T0 + timedelta(minutes=5 * i), {"i": i}, {"snapshot": f'{{"i": {i}}}'}).id
           for i in range(5)]
    assert store.prune_snapshots(timedelta(days=14), now=T0, keep_latest=2) == 3
    records = [store.get_snapshot(int(i or 0)) for i in ids]
    store.close()
    # A run holding an older id still finds its row (instant, summary); only the rows' document went.
    assert all(r is not None for r in records)
    assert [r.summary["i"] for r in records if r is not None] == [0, 1, 2, 3, 4]
    assert ["snapshot" in r.payload for r in records if r is not None] == [False, False, False, True, True]


def test_a_full_snapshot_is_wanted_once_per_interval(db_url: str) -> None:
    store = Store(db_url)
    hour = timedelta(minutes=60)
    assert store.wants_full_snapshot(T0, hour)
    store.save_snapshot(T0, {}, {"snapshot": "{}"})
    assert not store.wants_full_snapshot(T0 + timedelta(minutes=55), hour)
    store.save_snapshot(T0 + timedelta(minutes=55), {}, {})  # a row without its document does not count
    assert store.wants_full_snapshot(T0 + hour, hour)
    assert store.wants_full_snapshot(T0 - timedelta(minutes=5), hour)  # a look back at an earlier window
    assert store.wants_full_snapshot(T0 + timedelta(minutes=5), timedelta(0))  # 0: every collect
    store.close()


def test_queue_and_tenant_history_over_a_window(db_url: str) -> None:
    store = Store(db_url)
    for i in range(4):
        at = T0 + timedelta(minutes=5 * i)
        store.save_history(at, [_queue("a-cq", pending_gpus=float(i), pending_workloads=i,
                                       oldest_pending_seconds=60.0 * i if i else float("nan")),
                                _queue("b-cq", cohort="d", usage_gpus=8.0)],
                           [{"tenant": "a", "workloads": 3, "allocated_gpus": 4.0, "idle_gpus": float(i),
                             "unknown_gpus": 0.0, "pending_gpus": float(i)}])
    window = store.queue_history(T0 + timedelta(minutes=5), T0 + timedelta(minutes=15), cluster_queues=["a-cq"])
    cohort_d = store.queue_history(T0, T0 + timedelta(hours=1), cohort="d")
    tenants = store.tenant_history(T0, T0 + timedelta(hours=1), tenants=["a"])
    first = store.queue_history(T0, T0 + timedelta(minutes=1))
    assert store.prune_history(timedelta(minutes=7), now=T0 + timedelta(minutes=15)) == 6
    rest = store.tenant_history(T0, T0 + timedelta(hours=1))
    store.close()
    assert list(window["collected_at"]) == [T0 + timedelta(minutes=5), T0 + timedelta(minutes=10)]
    assert list(window["pending_gpus"]) == [1.0, 2.0] and list(window["oldest_pending_seconds"]) == [60.0, 120.0]
    assert set(cohort_d["cluster_queue"]) == {"b-cq"} and len(cohort_d) == 4
    assert list(tenants["idle_gpus"]) == [0.0, 1.0, 2.0, 3.0]
    assert first["oldest_pending_seconds"].isna().all() and first["borrowing_limit_gpus"].isna().all()
    assert list(rest["collected_at"]) == [T0 + timedelta(minutes=10), T0 + timedelta(minutes=15)]


def test_a_cycle_written_twice_is_held_once(db_url: str) -> None:
    """The collect step is retried when its snapshot row fails after its history was written: the cycle's rows
    replace those of the same instant, so the incident review never counts one instant twice."""
    store = Store(db_url)
    tenant = {"tenant": "a", "workloads": 3, "allocated_gpus": 4.0, "idle_gpus": 1.0, "unknown_gpus": 0.0,
              "pending_gpus": 0.0}
    store.save_history(T0, [_queue("a-cq"), _queue("b-cq")], [tenant])
    store.save_history(T0 + timedelta(minutes=5), [_queue("a-cq")], [tenant])
    store.save_history(T0, [_queue("a-cq", pending_gpus=2.0), _queue("b-cq")], [tenant])  # the retry
    queues = store.queue_history(T0, T0 + timedelta(hours=1))
    tenants = store.tenant_history(T0, T0 + timedelta(hours=1))
    store.close()
    assert sorted(zip(queues["collected_at"], queues["cluster_queue"])) == [
        (T0, "a-cq"), (T0, "b-cq"), (T0 + timedelta(minutes=5), "a-cq")]
    assert list(queues.loc[queues["collected_at"] == T0, "pending_gpus"]) == [2.0, 0.0]  # the retry's rows
    assert list(tenants["collected_at"]) == [T0, T0 + timedelta(minutes=5)]
