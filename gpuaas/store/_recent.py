"""The snapshots this process collected last, so that a flow decides on its own collect's snapshot.

The reclaim flow runs collect as a subflow in its own process and used to read the snapshot
back from the store by id, which is why every collect had to write the whole snapshot (a row
per Workload and GPU: MBs per cycle at 16,000 GPUs). Now the collect hands it over in memory and
writes the full document only as ``store.full_snapshot_every_minutes`` says; a snapshot from
another process is still read from the store, where its document is kept. Holding the newest
two bounds the memory to what a collect already needs; nothing here outlives the process.
"""

from __future__ import annotations

from collections import OrderedDict
from threading import Lock
from typing import TYPE_CHECKING

from gpuaas.errors import NotStored

if TYPE_CHECKING:
    from gpuaas.models import Snapshot
    from gpuaas.store._store import Store

__all__ = ["load_snapshot", "remember_snapshot"]

_KEEP = 2
_recent: OrderedDict[tuple[str, int], Snapshot] = OrderedDict()
_lock = Lock()


def remember_snapshot(store: Store, snapshot_id: int, snapshot: Snapshot) -> None:
    """Keep ``snapshot`` (stored as ``snapshot_id`` in ``store``) for ``load_snapshot`` in this process."""
    with _lock:
        _recent[(store.url, snapshot_id)] = snapshot
        while len(_recent) > _KEEP:
            _recent.popitem(last=False)


def load_snapshot(store: Store, snapshot_id: int) -> Snapshot:
    """Snapshot ``snapshot_id``: the one this process collected, else its stored full document."""
    from gpuaas.models import Snapshot

    with _lock:
        held = _recent.get((store.url, snapshot_id))
    if held is not None:
        return held
    record = store.get_snapshot(snapshot_id)
    if record is None:
        raise NotStored(f"snapshot {snapshot_id} is not in the store")
    document = record.payload.get("snapshot")
    if not isinstance(document, str):
        raise NotStored(f"snapshot {snapshot_id} was stored without its rows (store.full_snapshot_every_minutes, "
                         "store.keep_full_snapshots): decide on a fresh collect")
    return Snapshot.from_json(document)
