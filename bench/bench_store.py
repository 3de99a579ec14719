"""Store benchmark: bytes written per collect cycle, before and after the fleet history, and 14 days.

A real snapshot is collected from a small embedded fleet (200 GPUs, 10 ClusterQueues, 100
RayClusters), then tiled in process to 1/10 and the full fleet (1,600 / 16,000 GPUs, 5,000 /
50,000 Workloads, 20 / 200 ClusterQueues): collecting the full fleet through the embedded API
and Prometheus takes minutes on two cores, and the store sees only the snapshot, not how it was
read. Each size is written to a fresh SQLite file and a fresh PostgreSQL database:

* before: the whole snapshot as JSON in ``snapshots.payload`` every cycle (the old collect), kept
  for the retention (14 days = 4,032 cycles at 5 minutes);
* after: per-queue and per-tenant rows every cycle, kept for the retention, plus the full
  snapshot compressed, of which only the newest ``store.keep_full_snapshots`` are kept.

Sizes are what the database occupies (SQLite pages in use; PostgreSQL relation sizes with TOAST
and indexes), measured as the growth over several cycles, not estimated from the JSON.

    .venv/bin/python bench/bench_store.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
from bench_cluster import fleet  # same folder
from sqlalchemy import text

from gpuaas.cluster.clock import ManualClock
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.fleet_history import queue_aggregates, tenant_aggregates
from gpuaas.models import FRAMES, Snapshot
from gpuaas.policy import Policy
from gpuaas.settings import load_settings
from gpuaas.snapshot import collect_snapshot
from gpuaas.store import SnapshotRecord, Store
from tests.services import fresh_schema_url, postgres_server

CYCLES_14_DAYS = 14 * 24 * 12
KEEP_FULL = Policy().store.keep_full_snapshots
SIZES = [("1/10", 1_600, 5_000, 20), ("full", 16_000, 50_000, 200)]  # GPUs, Workloads, ClusterQueues
_IDENTITY = ("name", "uid", "cluster_queue", "queue", "pod", "host", "uuid", "owner_name")


def _tile(frame: pd.DataFrame, factor: float) -> pd.DataFrame:
    """``frame`` repeated ``ceil(factor)`` times with distinct names, cut to ``factor`` x its rows."""
    if frame.empty:
        return frame
    copies = []
    for i in range(int(-(-factor // 1))):
        part = frame.copy()
        for col in _IDENTITY:
            if col in part and part[col].dtype == object:
                part[col] = part[col].map(lambda v, i=i: f"{v}-{i}" if isinstance(v, str) else v)
        copies.append(part)
    return pd.concat(copies, ignore_index=True).head(round(len(frame) * factor))


def scaled(snapshot: Snapshot, gpus: int, workloads: int, queues: int) -> Snapshot:
    have_gpus = max(1, snapshot.gpus["uuid"].nunique())
    by = {"workloads": workloads / len(snapshot.workloads), "owners": workloads / len(snapshot.workloads),
          "serving": workloads / len(snapshot.workloads), "queues": queues / len(snapshot.queues),
          "quotas": queues / len(snapshot.queues), "gpus": gpus / have_gpus, "costs": gpus / have_gpus,
          "data_quality": workloads / len(snapshot.workloads)}  # per-workload findings
    frames = {name: _tile(getattr(snapshot, name), by[name]) for name in FRAMES}
    # One tenant per ClusterQueue, as a policy naming every team would give.
    frames["workloads"]["tenant"] = "tenant-" + frames["workloads"]["cluster_queue"].astype(str)
    frames["queues"]["tenant"] = "tenant-" + frames["queues"]["name"].astype(str)
    return Snapshot(collected_at=snapshot.collected_at, windows_minutes=snapshot.windows_minutes,
                    sources=snapshot.sources, **frames)


def used_bytes(store: Store) -> int:
    with store.engine.connect() as conn:
        if store.engine.dialect.name == "sqlite":
            conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
            pages = conn.execute(text("PRAGMA page_count")).scalar_one()
            free = conn.execute(text("PRAGMA freelist_count")).scalar_one()
            size = conn.execute(text("PRAGMA page_size")).scalar_one()
            return int((pages - free) * size)
        conn.execute(text("COMMIT"))
        return int(conn.execute(text(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind = 'r' AND n.nspname = current_schema()")).scalar_one())


def growth(store: Store, cycles: int, write: Callable[[int], None]) -> float:
    before = used_bytes(store)
    for i in range(cycles):
        write(i)
    return (used_bytes(store) - before) / cycles


def measure(url: str, snapshot: Snapshot, policy: Policy) -> dict[str, float]:
    store = Store(url)
    document = snapshot.to_json()
    summary = snapshot.summary()
    queues = queue_aggregates(snapshot).to_dict(orient="records")
    tenants = tenant_aggregates(snapshot, policy).to_dict(orient="records")
    at = snapshot.collected_at

    def old_cycle(i: int) -> None:  # what collect wrote before: the JSON document, uncompressed
        with store.session() as session:
            session.add(SnapshotRecord(collected_at=at + timedelta(minutes=5 * i), summary=summary,
                                       payload={"snapshot": document}))
            session.commit()

    def history_cycle(i: int) -> None:
        store.save_history(at + timedelta(minutes=5 * i), queues, tenants)

    def full_cycle(i: int) -> None:
        store.save_snapshot(at + timedelta(minutes=5 * i), summary, {"snapshot": document})

    out = {"json": float(len(document)), "queue_rows": float(len(queues)), "tenant_rows": float(len(tenants))}
    out["before"] = growth(store, 2, old_cycle)
    out["history"] = growth(store, 5, history_cycle)
    out["full_z"] = growth(store, 2, full_cycle)
    store.close()
    return out


def real_snapshot() -> tuple[Snapshot, Policy]:
    history = timedelta(minutes=40)
    start = datetime.now(UTC).replace(second=0, microsecond=0) - history
    data = Path(tempfile.mkdtemp(prefix="bench-store-"))
    with EmbeddedCluster(fleet(25, 10, 100, kind="RayCluster"), data, history=history,
                         clock=ManualClock(start)) as cluster:
        os.environ.update(cluster.settings_env())
        os.environ["GPUAAS_DATA_DIR"] = str(data / "gpuaas")
        os.environ["GPUAAS_NVML"] = "off"
        snapshot = collect_snapshot(load_settings(), cluster.clock.now())
    assert not snapshot.degraded, snapshot.sources
    return snapshot, Policy()


def _mb(n: float) -> str:
    return f"{n / 1e6:10.3f}"


def main() -> int:
    base, policy = real_snapshot()
    print(f"collected: {base.gpus['uuid'].nunique()} GPUs, {len(base.workloads)} Workloads, {len(base.queues)} CQs")
    print(f"{'size':>5} {'db':>10} {'JSON MB':>10} {'before MB/cycle':>15} {'before 14 d GB':>14} "
          f"{'history KB/cycle':>16} {'full snapshot MB (z)':>20} {'after MB/cycle':>14} {'after 14 d GB':>13}")
    ok = True
    with postgres_server() as pg:
        for label, gpus, workloads, queues in SIZES:
            snapshot = scaled(base, gpus, workloads, queues)
            for db in ("sqlite", "postgresql"):
                url = (f"sqlite:///{tempfile.mkdtemp(prefix='bench-store-db-')}/gpuaas.db" if db == "sqlite"
                       else fresh_schema_url(pg, f"bench_{label.replace('/', '_')}"))
                m = measure(url, snapshot, policy)
                after_cycle = m["history"] + m["full_z"]
                after_14 = m["history"] * CYCLES_14_DAYS + m["full_z"] * KEEP_FULL
                print(f"{label:>5} {db:>10} {_mb(m['json'])} {_mb(m['before']):>15} "
                      f"{m['before'] * CYCLES_14_DAYS / 1e9:14.1f} {m['history'] / 1e3:16.1f} "
                      f"{_mb(m['full_z']):>20} {_mb(after_cycle):>14} {after_14 / 1e9:13.2f}")
                if label == "full":
                    ok &= after_14 < 5e9
    print(f"(14 d = {CYCLES_14_DAYS} cycles; after keeps {KEEP_FULL} full snapshots; target at full size: "
          "under 5 GB for 14 days)")
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
