"""What ``gpuaas db status`` says a database holds: the rows per kind, when the audit log starts, its size.

On SQLite and PostgreSQL (``db_url``): a database with 3 audit entries (the oldest from 2026-01-02), 2 snapshots and
no fleet history is counted so, and sized above 0; the sentence names the audit log as never pruned.
"""

from __future__ import annotations

from datetime import UTC, datetime

from gpuaas.store import AuditEntry, Store, holdings


def _entry(day: int) -> AuditEntry:
    return AuditEntry(flow="reclaim", action="reclaim", kind="RayCluster", namespace="team-a", name=f"train-{day}",
                      mode="dry-run", outcome="planned", reason="idle 45m", evidence={},
                      created_at=datetime(2026, 1, day, 9, 0, tzinfo=UTC))


def test_a_database_is_counted_and_sized(db_url: str) -> None:
    store = Store(db_url)
    try:
        empty = holdings(store)
        assert (empty.audit, empty.oldest_audit, empty.snapshots, empty.history) == (0, None, 0, 0)
        for day in (5, 2, 9):
            store.append(_entry(day))
        for hour in (1, 2):
            store.save_snapshot(datetime(2026, 1, 9, hour, tzinfo=UTC), {"workloads": 1}, {})
        held = holdings(store)
    finally:
        store.close()
    assert (held.audit, held.oldest_audit, held.snapshots, held.history) == (
        3, datetime(2026, 1, 2, 9, 0, tzinfo=UTC), 2, 0)
    assert held.size_bytes is not None and held.size_bytes > 0
    words = held.words()
    assert words.startswith("holds 3 audit entries since 2026-01-02 (never pruned), 2 snapshots and 0 fleet-history "
                            "rows (pruned to collect.retention_days); ")
    assert words.endswith(" on disk")
