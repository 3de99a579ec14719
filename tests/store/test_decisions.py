"""One audit row per decision: ``Store.append_decision`` on SQLite and PostgreSQL.

The unique (idempotency_key, decision) index with ``INSERT ... ON CONFLICT DO NOTHING`` is what
makes a duplicate impossible, not the read before it: threads racing on one key record it once.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from threading import Barrier

import pytest
from sqlalchemy.exc import DBAPIError, IntegrityError

from gpuaas.actions.reclaim import execute_decisions
from gpuaas.models import KEY_MAX_LENGTH, Outcome, bounded_key
from gpuaas.policies.deadlines import Nudge, NudgeAction
from gpuaas.policies.reclaim import Decision, reclaim_key
from gpuaas.policy import FreeGoal, Mode
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


LONG_NAME = "llm-serving-" + "x" * 100
"""112 characters: a legal Deployment name (a DNS subdomain, up to 253), which made the key longer than the column."""
UID = "0b5e6a5e-1d7b-4d5c-9d1e-3c2a8a7e9f10"
WINDOW_END = datetime(2026, 12, 6, 1, 0, tzinfo=UTC)


def _deferred(name: str) -> Decision:
    return Decision(kind="Deployment", namespace="team-a", name=name, uid=UID, tenant="team-a", gpus=1,
                    idle_seconds=3600, free=FreeGoal.quota, outcome=Outcome.deferred,
                    reason="over the cap of 0 actions per run", resource_version="1", mode=Mode.dry_run,
                    idempotency_key=reclaim_key(Mode.dry_run, "Deployment", "team-a", name, UID, WINDOW_END))


def test_a_reclaim_of_an_object_with_a_long_name_is_recorded_once_per_object(store: Store) -> None:
    """A key longer than the column is refused by PostgreSQL (the whole run failed, dry-run included): it is
    bounded, and two objects whose names differ only past the bound still have a key each."""
    twin = LONG_NAME[:-1] + "y"
    decisions = [_deferred(LONG_NAME), _deferred(twin)]
    results = execute_decisions(decisions, store, writer=None,  # type: ignore[arg-type]  # no write for a deferral
                                mode=Mode.dry_run, flow_run_id="run-1", now=WINDOW_END)
    assert [r.result for r in results] == [Outcome.deferred, Outcome.deferred]
    assert all(len(d.idempotency_key) <= KEY_MAX_LENGTH for d in decisions)
    assert decisions[0].idempotency_key != decisions[1].idempotency_key
    rows = store.audit(idempotency_keys=[d.idempotency_key for d in decisions], limit=None)
    assert sorted(r.name for r in rows) == sorted([LONG_NAME, twin])
    again = execute_decisions([_deferred(LONG_NAME)], store, writer=None,  # type: ignore[arg-type]
                              mode=Mode.dry_run, flow_run_id="run-2", now=WINDOW_END)
    assert again[0].audit_id == results[0].audit_id  # the same decision, found by its bounded key


def test_holds_of_one_workload_at_two_release_times_keep_two_keys(store: Store) -> None:
    """A Workload's name may be 253 characters: a plain cut to the column dropped the release time that tells two
    holds apart; the bounded key keeps it, and both rows are stored on either database."""
    holds = [Nudge(NudgeAction.hold, "team-a", "w" * 253, "waits for its planned start", release_at=at)
             for at in (WINDOW_END, WINDOW_END + timedelta(minutes=15))]
    keys = [n.idempotency_key for n in holds]
    assert all(len(k) <= KEY_MAX_LENGTH for k in keys) and keys[0] != keys[1]
    for n in holds:
        store.append(AuditEntry(flow="deadlines", action=f"deadline-{n.action}", kind="Workload",
                                namespace=n.namespace, name=n.name, mode="apply", outcome="planned",
                                idempotency_key=n.idempotency_key))
    assert [len(store.audit(idempotency_key=k)) for k in keys] == [1, 1]


def test_a_key_that_fits_is_kept_as_it_is() -> None:
    """Rows written before keys were bounded are still found: a key that fits the column is unchanged."""
    assert bounded_key(KEY) == KEY
    long = bounded_key(KEY + "/" + "x" * 300)
    assert len(long) == KEY_MAX_LENGTH and long.startswith(KEY) and bounded_key(long) == long
