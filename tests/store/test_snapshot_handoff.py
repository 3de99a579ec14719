"""The full snapshot only as the policy says, and a prune racing an overlapping run.

The reclaim flow decides on the snapshot its collect step built in this process; another run's
prune (``keep_latest``) drops only full documents, never the row a run holds, and a snapshot
with no document that is not in memory is a clear error, not a KeyError.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from gpuaas.errors import ActionRefused, NotStored, StoreError
from gpuaas.models import Snapshot
from gpuaas.store import Store, load_snapshot, remember_snapshot

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)



def _snapshot(at: datetime, workloads: int) -> Snapshot:
    frame = pd.DataFrame({"namespace": ["team-a"] * workloads, "name": [f"wl-{i}" for i in range(workloads)],
                          "gpus": [float(i % 8) for i in range(workloads)]})
    return Snapshot(collected_at=at, windows_minutes=(30.0,), sources={}, workloads=frame)


def test_a_pruned_document_under_a_running_reclaim(store: Store) -> None:
    mine = _snapshot(T0, 3)
    held = store.save_snapshot(T0, mine.summary(), {"snapshot": mine.to_json()})
    remember_snapshot(store, int(held.id or 0), mine)
    # An overlapping run stores a newer full snapshot and prunes to the newest one.
    newer = _snapshot(T0 + timedelta(minutes=1), 5)
    store.save_snapshot(newer.collected_at, newer.summary(), {"snapshot": newer.to_json()})
    assert store.prune_snapshots(timedelta(days=14), now=T0, keep_latest=1) == 1
    record = store.get_snapshot(int(held.id or 0))
    assert record is not None and record.summary["workloads"] == 3 and "snapshot" not in record.payload
    assert load_snapshot(store, int(held.id or 0)) is mine  # decided on what this process collected


def test_a_row_without_its_document_elsewhere_is_a_clear_error(store: Store) -> None:
    row = store.save_snapshot(T0, {"workloads": 3}, {})
    with pytest.raises(NotStored, match=rf"snapshot {row.id} was stored without its rows"):
        load_snapshot(store, int(row.id or 0))
    with pytest.raises(NotStored, match="snapshot 999 is not in the store"):
        load_snapshot(store, 999)
    full = _snapshot(T0, 4)
    kept = store.save_snapshot(T0, full.summary(), {"snapshot": full.to_json()})
    back = load_snapshot(store, int(kept.id or 0))  # not held in memory: read from its document
    assert back is not full and list(back.workloads["name"]) == ["wl-0", "wl-1", "wl-2", "wl-3"]


def test_the_newest_full_snapshot_is_found_past_newer_rows(store: Store) -> None:
    full = store.save_snapshot(T0, {"workloads": 4}, {"snapshot": _snapshot(T0, 4).to_json()})
    row = store.save_snapshot(T0 + timedelta(minutes=5), {"workloads": 4}, {})
    newest, newest_full = store.latest_snapshot(), store.latest_snapshot(full=True)
    assert newest is not None and newest.id == row.id
    assert newest_full is not None and newest_full.id == full.id and "snapshot" in newest_full.payload


@pytest.mark.parametrize(("raised", "ends"), [
    (StoreError("the gpuaas database at sqlite:///g.db: database is locked"), StoreError),
    (NotStored("snapshot 7 is not in the store"), ActionRefused),
], ids=["busy-database", "not-stored"])
def test_the_flows_snapshot_step_leaves_a_busy_database_to_its_retries_and_refuses_a_missing_snapshot(
        monkeypatch: pytest.MonkeyPatch, raised: StoreError, ends: type[Exception]) -> None:
    """The step's retries (``retry_unless_misconfigured``) ask a database locked for a moment again, and not for a
    refusal (``ActionRefused``): only a snapshot the store does not hold becomes one."""
    from contextlib import nullcontext

    import tasks.reclaim as steps

    def failing(store: object, snapshot_id: int) -> Snapshot:
        raise raised

    monkeypatch.setattr(steps, "open_store", lambda settings: nullcontext(None))
    monkeypatch.setattr(steps, "stored_snapshot", failing)
    with pytest.raises(ends) as caught:
        steps.load_snapshot.fn(None, 7)  # type: ignore[arg-type]
    assert str(caught.value) == str(raised)
