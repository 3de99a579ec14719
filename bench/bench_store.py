"""Store benchmark: bytes written per collect cycle, before and after, and the size of 14 days.

A real snapshot is collected from a small embedded fleet (200 GPUs, 10 ClusterQueues, 100
RayClusters), then tiled in process to 1/10 and the full fleet (1,600 / 16,000 GPUs, 5,000 /
50,000 Workloads, 20 / 200 ClusterQueues): collecting the full fleet through the embedded API
and Prometheus takes minutes on two cores, and the store sees only the snapshot, not how it was
read. Each size is written to a fresh SQLite file and a fresh PostgreSQL database:

* before: the whole snapshot as JSON in ``snapshots.payload`` every cycle (the first collect), kept
  for the retention (14 days = 4,032 cycles at 5 minutes);
* after, what ``tasks.collect.store_snapshot`` writes: every cycle the per-queue and per-tenant
  rows and a snapshot row (instant and summary, no per-Workload rows), kept for the retention;
  the full snapshot (zlib) only every ``store.full_snapshot_every_minutes`` (one cycle in N), of
  which the newest ``store.keep_full_snapshots`` keep their document.

Sizes are what the database occupies (SQLite pages in use; PostgreSQL relation sizes with TOAST
and indexes), measured as the growth over several cycles, not estimated from the JSON. The
reclaim scenario of the tests (real idle targets) gives the size of one dry-run decision's audit
row with its per-GPU evidence, the cost every reclaim run adds per idle target.

    python -m bench.bench_store [--smoke]

``--smoke``: a 40-GPU fleet written at its own size, 2 audit windows on SQLite.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pandas as pd
from sqlalchemy import text

from bench._run import BenchFailed, headline, parser, run, scratch
from bench.bench_cluster import fleet
from gpuaas.cluster.clock import ManualClock
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.services import fresh_schema_url, postgres_server
from gpuaas.fleet_history import queue_aggregates, tenant_aggregates
from gpuaas.models import FRAMES, Snapshot
from gpuaas.operations.collect import read_snapshot
from gpuaas.policy import Policy
from gpuaas.settings import load_settings
from gpuaas.store import SnapshotRecord, Store

CYCLES_14_DAYS = 14 * 24 * 12
AUDIT_RUNS = 20
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
    # Rows shuffled: the document stores each column in one piece, and copies side by side would let
    # zlib find every tile's twin a few KB back, flattering the size of the full snapshot.
    tiled = pd.concat(copies, ignore_index=True).head(round(len(frame) * factor))
    return tiled.sample(frac=1.0, random_state=14).reset_index(drop=True)


def scaled(snapshot: Snapshot, gpus: int, workloads: int, queues: int) -> Snapshot:
    have_gpus = max(1, snapshot.gpus["uuid"].nunique())
    by = {"workloads": workloads / len(snapshot.workloads), "owners": workloads / len(snapshot.workloads),
          "serving": workloads / len(snapshot.workloads), "queues": queues / len(snapshot.queues),
          "quotas": queues / len(snapshot.queues), "cohorts": queues / len(snapshot.queues), "gpus": gpus / have_gpus, "costs": gpus / have_gpus,
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

    def cycle(i: int) -> None:  # every cycle: aggregates and the snapshot row
        store.save_history(at + timedelta(days=1, minutes=5 * i), queues, tenants)
        store.save_snapshot(at + timedelta(days=1, minutes=5 * i), summary, {})

    def full_cycle(i: int) -> None:  # one cycle in N: the document too
        store.save_snapshot(at + timedelta(days=2, minutes=5 * i), summary, {"snapshot": document})

    out = {"json": float(len(document)), "queue_rows": float(len(queues)), "tenant_rows": float(len(tenants))}
    out["before"] = growth(store, 2, old_cycle)
    out["cycle"] = growth(store, 5, cycle)
    out["full_z"] = growth(store, 2, full_cycle)  # its snapshot row is counted again: an upper bound
    store.close()
    return out


def audit_row_bytes(url: str, runs: int = AUDIT_RUNS) -> tuple[int, float]:
    """Decision rows of ``AUDIT_RUNS`` dry-runs of the reclaim scenario, and the bytes each occupies."""
    from gpuaas.actions import KubeWriter
    from gpuaas.cluster.testbed import reclaim_cluster, write_policy
    from gpuaas.operations import reclaim as operation
    from gpuaas.policy import Mode

    data = scratch("bench-store-audit-")
    with reclaim_cluster(data / "cluster") as cluster:
        os.environ.update(cluster.settings_env())
        os.environ.update({"GPUAAS_NVML": "off", "GPUAAS_DATABASE_URL": url, "GPUAAS_DATA_DIR": str(data),
                           "GPUAAS_POLICY_FILE": str(write_policy(data / "policy.yaml", max_actions_per_run=20))})
        settings = load_settings()
        snapshot = read_snapshot(settings, cluster.clock.now())
        idle = operation.verdicts(snapshot, settings.policy)
        plan = operation.plan(operation.propose(snapshot, idle, settings.policy, Mode.dry_run), operation.AuditView(),
                              settings.policy, Mode.dry_run, cluster.clock.now())
        store = Store(url)
        before = used_bytes(store)
        with KubeWriter(settings) as writer:
            for window_no in range(runs):  # one run per window: the same targets under the next window's keys
                window = [replace(d, idempotency_key=f"{d.idempotency_key}+{window_no}") for d in plan.decisions]
                operation.apply(replace(plan, decisions=window), store, writer, flow_run_id="bench",
                                now=cluster.clock.now())
        rows = len(store.audit(limit=None))
        size = (used_bytes(store) - before) / max(rows, 1)
        store.close()
    return rows, size


def real_snapshot(nodes: int = 25, queues: int = 10, workloads: int = 100) -> tuple[Snapshot, Policy]:
    history = timedelta(minutes=40)
    start = datetime.now(UTC).replace(second=0, microsecond=0) - history
    data = scratch("bench-store-")
    with EmbeddedCluster(fleet(nodes, queues, workloads, kind="RayCluster"), data, history=history,
                         clock=ManualClock(start)) as cluster:
        os.environ.update(cluster.settings_env())
        os.environ["GPUAAS_DATA_DIR"] = str(data / "gpuaas")
        os.environ["GPUAAS_NVML"] = "off"
        snapshot = read_snapshot(load_settings(), cluster.clock.now())
    if snapshot.degraded:
        raise BenchFailed(f"the collected snapshot is degraded: {snapshot.sources}")
    return snapshot, Policy()


def _mb(n: float) -> str:
    return f"{n / 1e6:10.3f}"


def main(argv: list[str]) -> int:
    args = parser(__doc__).parse_args(argv)
    base, policy = real_snapshot(5, 2, 10) if args.smoke else real_snapshot()
    sizes = [("smoke", 40, 10, 2)] if args.smoke else SIZES
    audit_runs = 2 if args.smoke else AUDIT_RUNS
    figures: dict[str, str] = {}
    every = max(1, round(policy.store.full_snapshot_every_minutes / 5))
    print(f"collected: {base.gpus['uuid'].nunique()} GPUs, {len(base.workloads)} Workloads, {len(base.queues)} CQs")
    print(f"{'size':>5} {'db':>10} {'JSON MB':>8} {'before MB/cycle':>15} {'before 14 d GB':>14} "
          f"{'row+history KB/cycle':>20} {'full snapshot MB (z)':>20} {'after MB/cycle avg':>18} "
          f"{'max':>6} {'after 14 d GB':>13}")
    ok = True
    with postgres_server() as pg:
        for label, gpus, workloads, queues in sizes:
            snapshot = scaled(base, gpus, workloads, queues)
            for db in ("sqlite", "postgresql"):
                url = (f"sqlite:///{scratch('bench-store-db-')}/gpuaas.db" if db == "sqlite"
                       else fresh_schema_url(pg, f"bench_{label.replace('/', '_')}"))
                m = measure(url, snapshot, policy)
                average = m["cycle"] + m["full_z"] / every
                worst = m["cycle"] + m["full_z"]
                after_14 = m["cycle"] * CYCLES_14_DAYS + m["full_z"] * KEEP_FULL
                print(f"{label:>5} {db:>10} {m['json'] / 1e6:8.1f} {_mb(m['before']):>15} "
                      f"{m['before'] * CYCLES_14_DAYS / 1e9:14.1f} {m['cycle'] / 1e3:20.1f} "
                      f"{_mb(m['full_z']):>20} {_mb(average):>18} {worst / 1e6:6.2f} {after_14 / 1e9:13.2f}")
                if label == "full":
                    ok &= after_14 < 5e9 and average < 1e6
                figures[label] = f"{label} fleet on PostgreSQL: {average / 1e6:.3f} MB/cycle, {after_14 / 1e9:.2f} GB/14 d"
        for db in ("sqlite",) if args.smoke else ("sqlite", "postgresql"):
            url = (f"sqlite:///{scratch('bench-store-audit-db-')}/gpuaas.db" if db == "sqlite"
                   else fresh_schema_url(pg, "bench_audit"))
            rows, size = audit_row_bytes(url, audit_runs)
            print(f"audit {db:>10}: {rows} dry-run decision rows ({audit_runs} windows of the reclaim scenario), "
                  f"{size / 1e3:.1f} KB each "
                  "(with per-GPU evidence): every reclaim run adds this per idle target")
    print(f"(14 d = {CYCLES_14_DAYS} cycles; a full snapshot every {every} cycles "
          f"(store.full_snapshot_every_minutes {policy.store.full_snapshot_every_minutes:g}), {KEEP_FULL} kept; "
          "max = the cycle that writes one; target at full size: under 1 MB per cycle on average and 5 GB for 14 days)")
    print("(the tiled full snapshot compresses better than a real one: its UIDs are 100 copied with a suffix, where a "
          "real fleet has 116,000 random ones; bench_cycle.py prints a real full-size collect's)")
    print("OK" if ok else "FAILED")
    headline(figures[sizes[-1][0]])
    if not ok:
        raise BenchFailed("the full fleet misses its target: under 1 MB per cycle on average and 5 GB for 14 days")
    return 0


if __name__ == "__main__":
    sys.exit(run(main, "bench_store"))
