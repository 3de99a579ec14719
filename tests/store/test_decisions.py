"""One audit row per decision: ``Store.append_decision`` on SQLite and PostgreSQL.

The unique (idempotency_key, decision) index with ``INSERT ... ON CONFLICT DO NOTHING`` is what
makes a duplicate impossible, not the read before it: threads racing on one key record it once.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from threading import Barrier

import pytest
from sqlalchemy.exc import DBAPIError, IntegrityError

from gpuaas.store import AuditEntry, Store

KEY = "reclaim/dry-run/Notebook/team-a/nb/uid-1/2026-12-01T10:00:00Z"



def _entry(outcome: str = "planned", refers_to: int | None = None, run: str = "run-1") -> AuditEntry:
    return AuditEntry(flow="reclaim", flow_run_id=run, action="reclaim", kind="Notebook", namespace="team-a",
                      name="nb", uid="uid-1", mode="dry-run", outcome=outcome, reason="idle 45m",
                      evidence={"gpus": [{"uuid": "GPU-1", "activity_avg": 0.0}]}, idempotency_key=KEY,
                      refers_to=refers_to)


def test_the_same_decision_twice_is_recorded_once(store: Store) -> None:
    first, new = store.append_decision(_entry(run="run-1"))
    again, again_new = store.append_decision(_entry(run="run-2"))
    assert new and not again_new
    assert again.id == first.id and again.flow_run_id == "run-1"
    assert first.evidence == {"gpus": [{"uuid": "GPU-1", "activity_avg": 0.0}]} and first.decision == "planned#0"
    # Another outcome for the key (a re-run deferring it) is another decision.
    deferred, deferred_new = store.append_decision(_entry("deferred"))
    assert deferred_new and deferred.id != first.id
    assert [r.id for r in store.audit(idempotency_key=KEY)] == [first.id, deferred.id]


def test_a_failed_attempt_opens_the_next_one_and_completions_are_free(store: Store) -> None:
    intent, _ = store.append_decision(_entry())
    store.append(_entry("failed", refers_to=intent.id))
    retry, new = store.append_decision(_entry(run="run-2"))
    assert new and retry.decision == "planned#1"
    applied = store.append(_entry("applied", refers_to=retry.id))
    assert applied.decision is None
    assert not store.append_decision(_entry(run="run-3"))[1]
    assert [r.outcome for r in store.audit(idempotency_key=KEY)] == ["planned", "failed", "planned", "applied"]


def test_racing_writers_record_one_decision(store: Store) -> None:
    writers = 8
    barrier = Barrier(writers)

    def append(i: int) -> tuple[int, bool]:
        barrier.wait(timeout=30)
        row, new = store.append_decision(_entry(run=f"run-{i}"))
        return int(row.id or 0), new

    with ThreadPoolExecutor(writers) as pool:
        results = list(pool.map(append, range(writers)))
    assert sum(new for _, new in results) == 1
    assert len({row_id for row_id, _ in results}) == 1
    assert len(store.audit(idempotency_key=KEY)) == 1


def test_the_audit_log_is_still_append_only_after_0004(store: Store) -> None:
    row, _ = store.append_decision(_entry())
    with pytest.raises((IntegrityError, DBAPIError)), store.engine.begin() as conn:
        conn.exec_driver_sql(f"UPDATE audit_log SET decision = NULL WHERE id = {int(row.id or 0)}")


def test_a_batch_records_each_new_decision_once_in_order(store: Store) -> None:
    """``append_decisions``: one transaction for a run's thousands of deferrals, chunked past the
    ``IN`` list size, with the same answer per row as one ``append_decision`` each."""
    held, _ = store.append_decision(_entry(run="run-0"))
    keys = [f"{KEY}/{i}" for i in range(1203)]  # > 2 IN lists of 500

    def entry(key: str) -> AuditEntry:
        row = _entry("deferred", run="run-1")
        row.idempotency_key = key
        return row

    batch = [entry(k) for k in keys[:700]] + [_entry(run="run-1")] + [entry(k) for k in keys[700:]]
    answers = store.append_decisions(batch)
    assert [row.idempotency_key for row, _ in answers] == [e.idempotency_key for e in batch]
    assert [new for _, new in answers] == [True] * 700 + [False] + [True] * 503
    assert answers[700][0].id == held.id and answers[700][0].flow_run_id == "run-0"
    again = store.append_decisions([entry(k) for k in keys[::100]])
    assert not any(new for _, new in again)
    assert [row.id for row, _ in again] == [answers[i if i < 700 else i + 1][0].id for i in range(0, 1203, 100)]
    found = store.audit(idempotency_keys=keys, limit=None)
    assert len(found) == 1203 and {r.idempotency_key for r in found} == set(keys)
    assert [r.id for r in found] == sorted(r.id or 0 for r in found)  # oldest first across the IN lists
