"""The newest rows of a long audit log, on SQLite and a real PostgreSQL: ``audit(newest=True, limit=N)`` asks the
database for N rows (the log is never read whole to keep its tail), returns them oldest first, and ``before``
pages back; ``count_audit`` counts what the same filters match."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import event

from gpuaas.store import AuditEntry, Store

T0 = datetime(2026, 11, 1, tzinfo=UTC)
ROWS = 3000


@pytest.fixture()
def long_log(store: Store) -> Iterator[Store]:
    """3,000 rows a second apart; every third one of the rebalance flow."""
    with store.session() as session:
        session.add_all(AuditEntry(created_at=T0 + timedelta(seconds=i), flow="rebalance" if i % 3 == 0 else "reclaim",
                                   action="reclaim", kind="Notebook", namespace="a", name=f"nb-{i}", mode="dry-run",
                                   outcome="planned") for i in range(ROWS))
        session.commit()
    yield store


def _loaded(store: Store, **query: object) -> tuple[list[str], int]:
    """The names ``audit`` returns, and how many rows the database handed over to get them."""
    seen = 0

    def count(*_: object) -> None:
        nonlocal seen
        seen += 1

    event.listen(AuditEntry, "load", count)
    try:
        rows = store.audit(**query)  # type: ignore[arg-type]
    finally:
        event.remove(AuditEntry, "load", count)
    return [r.name for r in rows], seen


def test_the_newest_rows_are_fetched_alone_and_returned_oldest_first(long_log: Store) -> None:
    names, fetched = _loaded(long_log, limit=5, newest=True)
    assert names == [f"nb-{i}" for i in range(ROWS - 5, ROWS)]
    assert fetched == 5
    assert _loaded(long_log, limit=5) == ([f"nb-{i}" for i in range(5)], 5)  # without newest: the oldest, as before


def test_before_pages_back_and_the_count_matches_the_same_filters(long_log: Store) -> None:
    page = long_log.audit(limit=4, newest=True)
    oldest = int(page[0].id or 0)
    back, fetched = _loaded(long_log, limit=4, newest=True, before=oldest)
    assert back == [f"nb-{i}" for i in range(ROWS - 8, ROWS - 4)] and fetched == 4
    assert long_log.count_audit() == ROWS
    assert long_log.count_audit(before=oldest) == ROWS - 4
    assert long_log.count_audit(flow="rebalance") == ROWS // 3
    assert long_log.count_audit(since=T0 + timedelta(seconds=ROWS - 10), flow="reclaim") == 7
    names, fetched = _loaded(long_log, flow="rebalance", limit=2, newest=True)
    assert names == ["nb-2994", "nb-2997"] and fetched == 2


def test_before_pages_in_the_listings_order_where_clocks_disagree_with_ids(store: Store) -> None:
    """Two workers whose clocks differ number rows in one order and time them in another: paging back with ``before``
    from each page's oldest row must visit every row once, in the listing's order (time, then id)."""
    offsets = [0, 600, 10, 610, 20, 5, 615, 15]  # seconds after T0, in the order the rows were inserted (numbered)
    with store.session() as session:
        session.add_all(AuditEntry(created_at=T0 + timedelta(seconds=s), flow="reclaim", action="reclaim",
                                   kind="Notebook", namespace="a", name=f"nb-{s}", mode="dry-run", outcome="planned")
                        for s in offsets)
        session.commit()
    pages: list[list[str]] = []
    before: int | None = None
    while page := store.audit(limit=3, newest=True, before=before):
        pages.append([r.name for r in page])
        before = int(page[0].id or 0)
        assert store.count_audit(before=before) == len(offsets) - sum(map(len, pages))
    assert [name for page in reversed(pages) for name in page] == [f"nb-{s}" for s in sorted(offsets)]
    assert store.audit(before=10_000) == []
