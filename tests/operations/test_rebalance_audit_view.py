"""``gpuaas.operations.rebalance.read_audit_view``: the day's moves and the no-reversal window, read from a store.

A plan applied 6 hours ago moved 4 GPUs from ``team-c-cq`` to ``team-b-cq``. Whatever instant a run is
given, the 24-hour cap and the no-reversal rule must still count that move: a run told it is 20 hours
later (the cap's window would then start after the move) must not find the whole cap free again.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuaas.operations.rebalance import read_audit_view
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
