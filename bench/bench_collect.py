"""Collect benchmark: one snapshot of a small and a large embedded fleet, timed and counted.

The point is the shape, not one number: API requests per cycle must grow only with pages
(``limit`` = ``GPUAAS_KUBE_PAGE_SIZE``) and Prometheus queries not at all, while the join
stays vectorised. Runs the plain ``gpuaas.operations.collect.read_snapshot`` (the flow adds Prefect's overhead, not
work that grows with the fleet).

    python -m bench.bench_collect [--smoke]

``--smoke``: the small fleet only, at 5 nodes. Then the peak memory of the pods list at 10,000 and 100,000 running
pods (``bench._pods_memory``: every page kept until the end against the GPU pods kept page by page; 2,000 pods
with ``--smoke``).
"""

from __future__ import annotations

import os
import resource
import sys
import time
from datetime import UTC, datetime, timedelta

from bench._pods_memory import GPU_EVERY, pods_peak_mib
from bench._run import BenchFailed, headline, parser, run, scratch
from bench.bench_cluster import fleet
from gpuaas.cluster.clock import ManualClock
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.operations.collect import read_snapshot
from gpuaas.settings import load_settings
from gpuaas.sources.prometheus import queries_per_cycle

SIZES = [(25, 10, 100), (250, 40, 1000)]  # nodes (8 GPUs each), ClusterQueues, RayClusters
PODS = [10_000, 100_000]


def main(argv: list[str]) -> int:
    args = parser(__doc__).parse_args(argv)
    sizes = [(5, 2, 10)] if args.smoke else SIZES
    rows = []
    print(f"{'nodes':>6} {'GPUs':>6} {'CQs':>5} {'workloads':>9} {'API req':>8} {'PromQL':>7} "
          f"{'collect s':>9} {'RSS GiB':>8}")
    for nodes, queues, jobs in sizes:
        history = timedelta(minutes=40)
        start = datetime.now(UTC).replace(second=0, microsecond=0) - history
        data = scratch("bench-collect-")
        with EmbeddedCluster(fleet(nodes, queues, jobs, kind="RayCluster"), data, history=history,
                             clock=ManualClock(start)) as cluster:
            os.environ.update(cluster.settings_env())
            os.environ["GPUAAS_DATA_DIR"] = str(data / "gpuaas")
            os.environ["GPUAAS_NVML"] = "off"
            settings = load_settings()
            before = sum(cluster.api.requests.values())
            started = time.perf_counter()
            snapshot = read_snapshot(settings, cluster.clock.now())
            elapsed = time.perf_counter() - started
            requests = sum(cluster.api.requests.values()) - before
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
            queries = queries_per_cycle(list(snapshot.windows_minutes))
            print(f"{nodes:>6} {nodes * 8:>6} {queues:>5} {len(snapshot.workloads):>9} {requests:>8} {queries:>7} "
                  f"{elapsed:>9.2f} {rss:>8.2f}")
            if snapshot.degraded:
                raise BenchFailed(f"the snapshot of {nodes} nodes is degraded: {snapshot.sources}")
            rows.append(f"{nodes * 8:,} GPUs in {elapsed:.2f} s ({requests} API requests, {queries} PromQL)")
    print(f"{'running pods':>12} {'GPU pods':>9} {'kept whole MiB':>15} {'by page MiB':>12}")
    for pods in [2_000] if args.smoke else PODS:
        whole, by_page, gpu_pods = pods_peak_mib(pods)
        print(f"{pods:>12,} {gpu_pods:>9,} {whole:>15,.0f} {by_page:>12,.0f}")
        if gpu_pods != pods // GPU_EVERY:
            raise BenchFailed(f"{gpu_pods} GPU pods read of {pods // GPU_EVERY}")
        rows.append(f"pods list of {pods:,} at peak {by_page:,.0f} MiB (kept whole: {whole:,.0f} MiB)")
    headline("collect: " + "; ".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(run(main, "bench_collect"))
