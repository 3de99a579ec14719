"""The rows an archive keeps back, one test per rule, on SQLite and PostgreSQL: each builds old rows the rule keeps
beside old rows like them it does not, archives, and checks which ids stayed and the count the dry run gave for the
rule. Dropping a rule archives rows its test expects to stay.

* linked: an old reclaim whose undo is newer than the cutoff; an old decision whose key a newer row repeats;
* open intent: an apply intent with no completion (a dry-run decision beside it goes);
* reclaim never restored: an applied stop with no restore (one restored, one that failed, go), with every row of
  its decision key;
* hold never released: an applied hold (one released goes);
* latest quota plan: per queue and flavor the plan of the latest change, and past it while that plan was undone.

The action names the rules read are pinned to the writers' own constants, and the cutoff's minimum to the
recoveries' lookbacks.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gpuaas.actions._quota_moves import CHANGE_ACTION, PLAN_ACTION
from gpuaas.actions._quota_undo import undo_key
from gpuaas.actions._restore import restore_key
from gpuaas.actions.deadline_holds import NUDGE_ACTIONS, RELEASE_ACTION, SETTLE_LOOKBACK
from gpuaas.actions.reclaim import RECOVERY_LOOKBACK
from gpuaas.store import MIN_AGE, AuditEntry, KeptBack, Store, archive_audit, plan_archive
from gpuaas.store import _archive_keep as keep

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NOW = T0 + timedelta(days=90)
CUTOFF = T0 + timedelta(days=40)
OLD, NEW = 5, 50
"""Days after T0 of the rows an archive before the cutoff takes, and of rows it leaves."""


def add(store: Store, day: float, action: str, outcome: str, *, flow: str = "reclaim", mode: str = "apply",
        refers_to: AuditEntry | None = None, key: str | None = None, name: str = "train", kind: str = "RayCluster",
        before: dict[str, Any] | None = None, evidence: dict[str, Any] | None = None) -> AuditEntry:
    return store.append(AuditEntry(
        created_at=T0 + timedelta(days=day), flow=flow, action=action, kind=kind, namespace="team-a", name=name,
        mode=mode, outcome=outcome, reason="", evidence=evidence or {}, before=before,
        refers_to=refers_to.id if refers_to is not None else None, idempotency_key=key))


def archived_and_kept(store: Store, out: Path) -> tuple[dict[KeptBack, int], set[int]]:
    """The dry run's kept-back counts, then the ids still there after the archive (but a row of today's, added
    first as a running log has one: its newest row is newer than the cutoff)."""
    today = add(store, NEW, "reclaim", "skipped", mode="dry-run", name="today")
    plan = plan_archive(store, CUTOFF, now=NOW)
    archive_audit(store, CUTOFF, out / "a.jsonl.gz", holder="test@here:1", now=NOW)
    return plan.kept, {int(r.id or 0) for r in store.audit(limit=None) if r.flow != "cli"} - ids(today)


def ids(*rows: AuditEntry) -> set[int]:
    return {int(r.id or 0) for r in rows}


def test_rows_linked_to_a_newer_row_stay(store: Store, tmp_path: Path) -> None:
    intent = add(store, OLD, "reclaim", "planned")
    done = add(store, OLD, "reclaim", "applied", refers_to=intent)
    undo = add(store, NEW, "restore", "planned", refers_to=intent, key=restore_key(int(intent.id or 0)))
    undone = add(store, NEW, "restore", "restored", refers_to=undo, key=restore_key(int(intent.id or 0)))
    decided = add(store, OLD, "reclaim", "skipped", mode="dry-run", key="reclaim/dry-run/w1")
    again = add(store, NEW, "reclaim", "skipped", mode="dry-run", key="reclaim/dry-run/w1")
    alone = add(store, OLD, "reclaim", "skipped", mode="dry-run", key="reclaim/dry-run/w0")
    kept, left = archived_and_kept(store, tmp_path)
    assert kept == {KeptBack.linked: 3}
    assert left == ids(intent, done, undo, undone, decided, again) and alone.id not in left


def test_an_apply_intent_never_completed_stays(store: Store, tmp_path: Path) -> None:
    open_plan = add(store, OLD, PLAN_ACTION, "planned", flow="rebalance", kind="Cohort")
    change = add(store, OLD, CHANGE_ACTION, "failed", flow="rebalance", kind="ClusterQueue", refers_to=open_plan)
    dry = add(store, OLD, "reclaim", "planned", mode="dry-run")
    closed = add(store, OLD, PLAN_ACTION, "planned", flow="rebalance", kind="Cohort")
    closing = add(store, OLD, PLAN_ACTION, "skipped", flow="rebalance", kind="Cohort", refers_to=closed)
    kept, left = archived_and_kept(store, tmp_path)
    assert kept == {KeptBack.open_intent: 2}
    assert left == ids(open_plan, change) and not left & ids(dry, closed, closing)


def test_an_applied_reclaim_never_restored_stays(store: Store, tmp_path: Path) -> None:
    stopped = add(store, OLD, "reclaim", "planned", name="stopped")
    stop = add(store, OLD, "reclaim", "applied", refers_to=stopped, name="stopped")
    restored = add(store, OLD, "reclaim", "planned", name="restored")
    rows = [restored, add(store, OLD, "reclaim", "applied", refers_to=restored, name="restored")]
    key = restore_key(int(restored.id or 0))
    rows.append(add(store, OLD + 1, "restore", "planned", refers_to=restored, key=key, name="restored"))
    rows.append(add(store, OLD + 1, "restore", "restored", refers_to=rows[-1], key=key, name="restored"))
    never = add(store, OLD, "reclaim", "planned", name="never")
    rows += [never, add(store, OLD, "reclaim", "failed", refers_to=never, name="never")]
    kept, left = archived_and_kept(store, tmp_path)
    assert kept == {KeptBack.reclaim_not_restored: 2}
    assert left == ids(stopped, stop) and not left & ids(*rows)


def test_the_rows_of_one_decision_key_stay_together(store: Store, tmp_path: Path) -> None:
    """A window's second attempt kept (stopped, never restored) keeps its first, failed one: a re-run counts its
    attempts over every row of the key (``Store.append_decisions``)."""
    first = add(store, OLD, "reclaim", "planned", key="reclaim/apply/w1")
    failed = add(store, OLD, "reclaim", "failed", refers_to=first, key="reclaim/apply/w1")
    second = add(store, OLD, "reclaim", "planned", key="reclaim/apply/w1")
    stop = add(store, OLD, "reclaim", "applied", refers_to=second, key="reclaim/apply/w1")
    kept, left = archived_and_kept(store, tmp_path)
    assert kept == {KeptBack.reclaim_not_restored: 4} and left == ids(first, failed, second, stop)


def test_a_deadline_hold_never_released_stays(store: Store, tmp_path: Path) -> None:
    hold, demote = NUDGE_ACTIONS
    held = add(store, OLD, hold, "planned", flow="deadlines", kind="Workload", name="held")
    holding = add(store, OLD, hold, "applied", flow="deadlines", kind="Workload", name="held", refers_to=held)
    lifted = add(store, OLD, demote, "planned", flow="deadlines", kind="Workload", name="lifted")
    rows = [lifted, add(store, OLD, demote, "applied", flow="deadlines", kind="Workload", name="lifted",
                        refers_to=lifted)]
    rows.append(add(store, OLD + 1, RELEASE_ACTION, "planned", flow="deadlines", kind="Workload", name="lifted",
                    refers_to=lifted))
    rows.append(add(store, OLD + 1, RELEASE_ACTION, "released", flow="deadlines", kind="Workload", name="lifted",
                    refers_to=rows[-1]))
    kept, left = archived_and_kept(store, tmp_path)
    assert kept == {KeptBack.hold_not_released: 2}
    assert left == ids(held, holding) and not left & ids(*rows)


def _plan(store: Store, day: float, queue: str, *, restored: bool = False) -> list[AuditEntry]:
    """An applied plan that moved ``queue``'s h100 quota, and its undo where ``restored``."""
    intent = add(store, day, PLAN_ACTION, "planned", flow="rebalance", kind="Cohort", name="cohort")
    rows = [intent, add(store, day, CHANGE_ACTION, "applied", flow="rebalance", kind="ClusterQueue", name=queue,
                        refers_to=intent, before={"h100": 8}, evidence={"why": "apply"}),
            add(store, day, PLAN_ACTION, "applied", flow="rebalance", kind="Cohort", name="cohort", refers_to=intent)]
    if restored:
        key = undo_key(int(intent.id or 0))
        rows.append(add(store, day + 1, "restore", "planned", flow="rebalance", kind="Cohort", refers_to=intent,
                        key=key))
        rows.append(add(store, day + 1, "restore", "restored", flow="rebalance", kind="Cohort", refers_to=rows[-1],
                        key=key))
    return rows


def test_the_latest_quota_plan_of_each_queue_stays(store: Store, tmp_path: Path) -> None:
    earlier_a = _plan(store, OLD, "team-a-cq")
    latest_a = _plan(store, OLD + 2, "team-a-cq")
    earlier_b = _plan(store, OLD, "team-b-cq")
    undone_b = _plan(store, OLD + 2, "team-b-cq", restored=True)  # undone: team-b-cq is back at earlier_b's after
    oldest_c = _plan(store, OLD, "team-c-cq")
    _plan(store, NEW, "team-c-cq")  # the latest change of team-c-cq is newer: the old plan is no longer its undo
    kept, left = archived_and_kept(store, tmp_path)
    assert kept == {KeptBack.latest_quota_plan: 3 + 3 + 5}
    assert ids(*latest_a, *earlier_b, *undone_b) <= left
    assert not left & ids(*earlier_a, *oldest_c)


def test_the_names_the_rules_read_are_the_writers() -> None:
    assert keep.HOLD_ACTIONS == NUDGE_ACTIONS and keep.RELEASE_ACTION == RELEASE_ACTION
    assert (keep.PLAN_ACTION, keep.CHANGE_ACTION) == (PLAN_ACTION, CHANGE_ACTION)
    assert restore_key(41) == undo_key(41) == f"{keep.RESTORE_KEY}41"
    assert MIN_AGE > RECOVERY_LOOKBACK and MIN_AGE > SETTLE_LOOKBACK


def test_a_log_with_no_row_since_the_cutoff_keeps_its_newest_so_no_id_is_handed_out_twice(store: Store,
                                                                                          tmp_path: Path) -> None:
    """SQLite numbers a new row one past the highest id there: archived to its last row, a log would give the next
    row an id an archive, an Event or an annotation already names."""
    rows = [add(store, OLD + i, "reclaim", "skipped", mode="dry-run", name=f"w{i}") for i in range(4)]
    plan = plan_archive(store, CUTOFF, now=NOW)
    assert (plan.rows, plan.kept) == (3, {KeptBack.newest_entry: 1})
    archive_audit(store, CUTOFF, tmp_path / "a.jsonl.gz", holder="test@here:1", now=NOW)
    later = add(store, NEW, "reclaim", "skipped", mode="dry-run", name="later")
    assert int(later.id or 0) > max(ids(*rows))
