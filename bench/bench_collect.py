"""Collect benchmark: one snapshot of a small and a large embedded fleet, timed and counted.

The point is the shape, not one number: API requests per cycle must grow only with pages
(``limit`` = ``GPUAAS_KUBE_PAGE_SIZE``) and Prometheus queries not at all, while the join
stays vectorised. Runs the plain ``collect_snapshot`` (the flow adds Prefect's overhead, not
work that grows with the fleet).

    .venv/bin/python bench/bench_collect.py
"""

from __future__ import annotations

import os
import resource
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench_cluster import fleet  # same folder

from gpuaas.cluster.clock import ManualClock
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.settings import load_settings
from gpuaas.snapshot import collect_snapshot
from gpuaas.sources.prometheus import queries_per_cycle

SIZES = [(25, 10, 100), (250, 40, 1000)]  # nodes (8 GPUs each), ClusterQueues, RayClusters


def main() -> int:
    print(f"{'nodes':>6} {'GPUs':>6} {'CQs':>5} {'workloads':>9} {'API req':>8} {'PromQL':>7} "
          f"{'collect s':>9} {'RSS GiB':>8}")
    for nodes, queues, jobs in SIZES:
        history = timedelta(minutes=40)
        start = datetime.now(UTC).replace(second=0, microsecond=0) - history
        data = Path(tempfile.mkdtemp(prefix="bench-collect-"))
        with EmbeddedCluster(fleet(nodes, queues, jobs, kind="RayCluster"), data, history=history,
                             clock=ManualClock(start)) as cluster:
            os.environ.update(cluster.settings_env())
            os.environ["GPUAAS_DATA_DIR"] = str(data / "gpuaas")
            os.environ["GPUAAS_NVML"] = "off"
            settings = load_settings()
            before = sum(cluster.api.requests.values())
            started = time.perf_counter()
            snapshot = collect_snapshot(settings, cluster.clock.now())
            elapsed = time.perf_counter() - started
            requests = sum(cluster.api.requests.values()) - before
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
            queries = queries_per_cycle(list(snapshot.windows_minutes))
            print(f"{nodes:>6} {nodes * 8:>6} {queues:>5} {len(snapshot.workloads):>9} {requests:>8} {queries:>7} "
                  f"{elapsed:>9.2f} {rss:>8.2f}")
            assert not snapshot.degraded, snapshot.sources
    return 0


if __name__ == "__main__":
    sys.exit(main())
