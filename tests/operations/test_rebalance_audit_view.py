"""``gpuaas.operations.rebalance.read_audit_view``: the night's moves and the no-reversal window, read from a store.

A plan applied 6 hours ago moved 4 GPUs from ``team-c-cq`` to ``team-b-cq``. Whatever instant a run is
given, the night's cap and the no-reversal rule must still count that move: a run told it is 20 hours
later (the cap's window would then start after the move) must not find the whole cap free again.

Then whole runs on SQLite and PostgreSQL, each planned on what the store says and its moves written as an
apply writes them, a minute after the run's start: nightly runs a day apart (or the 23 hours of a
daylight-saving night) each take a full step, and a run by hand the same day only what is left of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from gpuaas.models import Snapshot, SourceStatus
from gpuaas.operations.rebalance import plan, read_audit_view
from gpuaas.policy import Policy
from gpuaas.store import AuditEntry, Store

MOVED = {("team-b-cq", "h100"): (4, 0), ("team-c-cq", "h100"): (0, 4)}


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(f"sqlite:///{tmp_path}/gpuaas.db")
    at = datetime.now(UTC) - timedelta(hours=6)

    def row(action: str, kind: str, name: str, outcome: str, **kw: Any) -> AuditEntry:
        return opened.append(AuditEntry(created_at=at, flow="rebalance", action=action, kind=kind, name=name,
                                        mode="apply", outcome=outcome, **kw))

    intent = row("quota-plan", "Cohort", "c", "planned")
    row("quota-change", "ClusterQueue", "team-c-cq", "applied", before={"h100": 8}, after={"h100": 4},
        refers_to=intent.id)
    row("quota-change", "ClusterQueue", "team-b-cq", "applied", before={"h100": 4}, after={"h100": 8},
        refers_to=intent.id)
    row("quota-plan", "Cohort", "c", "applied", refers_to=intent.id)
    yield opened
    opened.close()


def test_the_days_moves_count_at_now(store: Store) -> None:
    view = read_audit_view(store, Policy(), datetime.now(UTC))
    assert view.moved_24h == MOVED
    assert view.recent_change == {("team-b-cq", "h100"): 4, ("team-c-cq", "h100"): -4}


@pytest.mark.parametrize("ahead", [timedelta(hours=20), timedelta(days=8)])
def test_a_later_instant_still_counts_the_moves_made_today(store: Store, ahead: timedelta) -> None:
    """20 hours ahead the cap's window would start after the move; 8 days ahead, the no-reversal window too."""
    view = read_audit_view(store, Policy(), datetime.now(UTC) + ahead)
    assert view.moved_24h == MOVED
    assert view.recent_change == {("team-b-cq", "h100"): 4, ("team-c-cq", "h100"): -4}


def test_an_earlier_instant_counts_them_too(store: Store) -> None:
    """The windows have no upper end: a replay of yesterday sees at least what is true now."""
    view = read_audit_view(store, Policy(), datetime.now(UTC) - timedelta(hours=12))
    assert view.moved_24h == MOVED


def test_the_days_cap_counts_a_rollback_by_what_its_row_records_not_by_its_wording(tmp_path: Path) -> None:
    """A rolled-back step gives back what its apply took, so the pair nets to nothing; an undo's does not
    (a plan undone in the morning is not made again at noon). Rows are told apart by the ``why`` their
    evidence records, whatever their reason says."""
    from gpuaas.actions.quotas import quota_moved_since

    store = Store(f"sqlite:///{tmp_path}/gpuaas.db")
    at = datetime.now(UTC) - timedelta(hours=1)

    def change(plan: int, outcome: str, why: str, before: int, after: int) -> None:
        store.append(AuditEntry(created_at=at, flow="rebalance", action="quota-change", kind="ClusterQueue",
                                name=f"q{plan}", mode="apply", outcome=outcome, reason="reworded: h100 moved",
                                before={"h100": before}, after={"h100": after}, refers_to=plan,
                                evidence={"why": why}))

    change(1, "applied", "apply", 8, 4)
    change(1, "restored", "rollback", 4, 8)  # rolled back: nothing moved
    change(2, "applied", "apply", 8, 4)
    change(2, "restored", "undo", 4, 8)  # undone later: the day's move stands
    try:
        assert quota_moved_since(store, at - timedelta(minutes=1)) == {("q2", "h100"): (0, 4)}
    finally:
        store.close()


# Whole runs: cohort c, ``busy`` holds its whole quota and waits for more, ``idle`` (which cannot reclaim, so
# it lends in a cohort full at its busiest) uses none. Both start at their share, 32 of 64: the step binds,
# min(max_step_gpus 8, 50 % of 32).
PLANNING = timedelta(seconds=40)
"""How long after its start a run writes its moves (collect and planning come first)."""




def run(store: Store, start: datetime, quotas: dict[str, int], busy_wants: int) -> tuple[dict[str, int], list[str]]:
    """One rebalance run at ``start``: the audit view, the plan, and its moves written as applied. The new quotas
    and the plan's notes."""
    cells = [{"cluster_queue": q, "cohort": "c", "flavor": "h100", "resource": "nvidia.com/gpu", "nominal": float(g),
              "borrowing_limit": None, "lending_limit": None, "reserved": float(g if q == "busy" else 0),
              "usage": float(g if q == "busy" else 0), "borrowed": 0.0, "reclaim_within_cohort": "Never"}
             for q, g in quotas.items()]
    waiting = float(busy_wants - quotas["busy"])
    queues = [{"name": "busy", "pending_gpus": waiting, "oldest_pending_seconds": 5 * 3600.0},
              {"name": "idle", "pending_gpus": 0.0, "oldest_pending_seconds": float("nan")}]
    history = pd.DataFrame([{"cluster_queue": q, "flavor": f, "stat": stat, "value": value}
                            for q, held, pending in (("busy", float(quotas["busy"]), waiting), ("idle", 0.0, 0.0))
                            for f, stat, value in (("h100", "usage_p", held), ("h100", "reservation_p", held),
                                                   ("h100", "history_seconds", 7 * 86400.0),
                                                   ("", "pending_median", pending), ("", "pending_max", pending))])
    snapshot = Snapshot(collected_at=start, windows_minutes=(30.0,), sources={"kube": SourceStatus("kube", ok=True)},
                        quotas=pd.DataFrame(cells), queues=pd.DataFrame(queues))
    [cohort] = plan(snapshot, history, Policy(), audit=read_audit_view(store, Policy(), start)).cohorts
    assert cohort.plan is not None, cohort.error
    after = {c.queue: c.after for c in cohort.plan.changes}
    at = start + PLANNING

    def row(action: str, kind: str, name: str, outcome: str, **kw: Any) -> AuditEntry:
        return store.append(AuditEntry(created_at=at, flow="rebalance", action=action, kind=kind, name=name,
                                       mode="apply", outcome=outcome, **kw))

    if after != quotas:
        intent = row("quota-plan", "Cohort", "c", "planned")
        for queue in sorted(quotas, key=lambda q: after[q] - quotas[q]):  # decreases first, as an apply lands them
            row("quota-change", "ClusterQueue", queue, "applied", before={"h100": quotas[queue]},
                after={"h100": after[queue]}, refers_to=intent.id)
        row("quota-plan", "Cohort", "c", "applied", refers_to=intent.id)
    return after, cohort.demand.notes


@pytest.mark.parametrize("apart", [timedelta(hours=24), timedelta(hours=23), timedelta(hours=24, minutes=-1)],
                         ids=["a-day", "a-daylight-saving-night", "a-minute-early"])
def test_each_nightly_run_takes_a_full_step_although_the_last_ones_moves_are_less_than_24_hours_old(
        any_store: Store, apart: timedelta) -> None:
    """Last night's moves are written 40 s after its start, so less than 24 hours before tonight's start: they
    must not spend tonight's step, or the rebalance moves every other night."""
    tonight = datetime.now(UTC)
    first, _ = run(any_store, tonight - apart, {"busy": 32, "idle": 32}, busy_wants=64)
    assert first == {"busy": 40, "idle": 24}
    second, notes = run(any_store, tonight, first, busy_wants=64)
    assert second == {"busy": 48, "idle": 16}  # a full step again, not what was left of last night's
    assert not any("already moved" in n for n in notes)


def test_a_run_by_hand_the_same_day_moves_only_what_is_left_of_the_nights_step(any_store: Store) -> None:
    """The night moved 4 of busy's step of 8; a run 12 hours later, with more waiting, moves the other 4, one
    30 minutes after that nothing. The next night, 12 hours after the run by hand, counts that run's moves
    (they are within 22 hours) but not its own last night's: it moves what the run by hand left, 4."""
    night = datetime.now(UTC) - timedelta(hours=24, minutes=30)
    quotas, _ = run(any_store, night, {"busy": 32, "idle": 32}, busy_wants=36)
    assert quotas == {"busy": 36, "idle": 28}
    quotas, notes = run(any_store, night + timedelta(hours=12), quotas, busy_wants=64)
    assert quotas == {"busy": 40, "idle": 24}
    assert any(n.startswith("4 GPUs of quota already moved in this cohort in the last 22 hours") for n in notes)
    again, _ = run(any_store, night + timedelta(hours=12, minutes=30), quotas, busy_wants=64)
    assert again == quotas
    quotas, notes = run(any_store, night + timedelta(hours=24), quotas, busy_wants=64)
    assert quotas == {"busy": 44, "idle": 20}
    assert any(n.startswith("4 GPUs of quota already moved in this cohort in the last 22 hours") for n in notes)


@pytest.mark.parametrize("jitter", [timedelta(seconds=-90), timedelta(seconds=90), timedelta(minutes=50)])
def test_the_no_reversal_window_counts_the_same_nights_whatever_the_start_times_seconds(
        tmp_path: Path, jitter: timedelta) -> None:
    """Eight nightly runs each moved one GPU from c to b, writing it a minute after their start. Tonight's run
    counts the last seven nights (no_reversal_days 7), as the replay does, whether that night's run started
    90 seconds before tonight's time of day, 90 seconds after or 50 minutes after: never six, never eight."""
    store = Store(f"sqlite:///{tmp_path}/gpuaas.db")
    tonight = datetime.now(UTC) - timedelta(hours=1)
    for nights_ago in range(1, 9):
        at = tonight - timedelta(days=nights_ago) + jitter + timedelta(minutes=1)
        for queue, before, after in (("team-b-cq", 8, 9), ("team-c-cq", 8, 7)):
            store.append(AuditEntry(created_at=at, flow="rebalance", action="quota-change", kind="ClusterQueue",
                                    name=queue, mode="apply", outcome="applied", before={"h100": before},
                                    after={"h100": after}, refers_to=nights_ago))
    view = read_audit_view(store, Policy(), tonight)
    store.close()
    assert view.recent_change == {("team-b-cq", "h100"): 7, ("team-c-cq", "h100"): -7}
    assert view.moved_24h == {}  # last night's move is not tonight's to spend


def test_no_reversal_days_0_counts_no_move(store: Store) -> None:
    """The rule off: the move made 6 hours ago does not hold anyone back (the night's cap still counts it)."""
    policy = Policy.model_validate({"rebalance": {"no_reversal_days": 0}})
    view = read_audit_view(store, policy, datetime.now(UTC))
    assert view.recent_change == {}
    assert view.moved_24h == MOVED
