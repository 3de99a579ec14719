"""Embedded-cluster scale benchmark: 2,000 nodes / 16,000 GPUs / 50,000 Workloads / 200 ClusterQueues.

Builds a generated scenario in memory, creates every object in the store, runs one Kueue
pass, generates one step of dcgm telemetry for the whole fleet, then lists all Workloads
through the official ``kubernetes`` client in pages of 500, as gpuaas's collector does.
Prints the figures; fails if peak RSS reaches 2 GiB.

    python -m bench.bench_cluster [--nodes 2000] [--queues 200] [--workloads 50000] [--smoke]

``--smoke``: 20 nodes, 4 ClusterQueues, 200 Workloads. ``fleet`` is the generated fleet the other
benchmarks build on.
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from kubernetes import client, config

from bench._run import BenchFailed, headline, parser, run
from gpuaas.cluster.apiserver import ApiServer, ObjectStore
from gpuaas.cluster.clock import ManualClock
from gpuaas.cluster.kueue import KueueController
from gpuaas.cluster.scenario import Scenario, fleet_objects, instances, parse_scenario, workload_objects
from gpuaas.cluster.telemetry import TelemetryGenerator

RSS_LIMIT_GIB = 2.0


def fleet(nodes: int, queues: int, workloads: int, kind: str = "Workload", cohorts: int = 10,
          step: str | None = None, idle_every: int | None = None) -> Scenario:
    """``queues`` tenants in ``cohorts`` cohorts over two flavors; each tenant submits ``workloads/queues`` jobs.

    ``idle_every``: every n-th tenant's jobs go idle 2 h after they start (the forgotten job), so a
    reclaim pass has idle workloads to judge; the others stay busy at 60 %.
    """
    idle = {"profile": "idle-after", "busy": 0.7, "idle": 0.01, "after": "2h"}
    half = nodes // 2
    per_queue_gpus = (nodes * 8) // queues
    tenants = [{"name": f"t{i:03d}", "cohort": f"cohort-{i % cohorts}",
                "quotas": [{"flavor": "h100" if i % 2 == 0 else "a100", "gpus": per_queue_gpus}]}
               for i in range(queues)]
    per = workloads // queues
    specs = [{"name": f"job-t{i:03d}", "kind": kind, "tenant": f"t{i:03d}", "gpus_per_pod": 1 + i % 4,
              "pods": 1 + i % 2, "copies": per, "every": "1s",
              **({"utilisation": idle} if idle_every and i % idle_every == 0 else {})} for i in range(queues)]
    return parse_scenario({
        "name": "bench",
        "flavors": [{"name": "h100"}, {"name": "a100"}],
        "pools": [{"name": "h100", "count": half, "flavor": "h100", "gpu_hourly_price": 4.0},
                  {"name": "a100", "count": nodes - half, "flavor": "a100", "gpu_hourly_price": 2.5,
                   "gpu_model": "NVIDIA A100-SXM4-80GB"}],
        "tenants": tenants,
        "workloads": specs,
        **({"telemetry": {"step": step}} if step else {}),
    }, "bench")


def rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # ru_maxrss is KiB on Linux


def main(argv: list[str]) -> int:
    cli = parser(__doc__)
    cli.add_argument("--nodes", type=int, default=2000)
    cli.add_argument("--queues", type=int, default=200)
    cli.add_argument("--workloads", type=int, default=50_000)
    args = cli.parse_args(argv)
    if args.smoke:
        args.nodes, args.queues, args.workloads = 20, 4, 200

    clock = ManualClock(datetime(2026, 11, 1, tzinfo=UTC))
    t0 = time.perf_counter()
    scenario = fleet(args.nodes, args.queues, args.workloads)
    todo = instances(scenario)
    t_build = time.perf_counter() - t0

    store = ObjectStore(clock.now)
    kueue = KueueController(store, clock.now)
    kueue.attach()
    t0 = time.perf_counter()
    for obj in fleet_objects(scenario):
        store.create(obj)
    for inst in todo:
        for obj in workload_objects(inst.spec, inst.name, inst.tenant, clock.now()):
            store.create(obj)
    t_create = time.perf_counter() - t0
    t0 = time.perf_counter()
    result = kueue.reconcile()
    t_reconcile = time.perf_counter() - t0

    t0 = time.perf_counter()
    samples = TelemetryGenerator(scenario, seed=0).gpu_samples(clock.now(), {})
    t_telemetry = time.perf_counter() - t0

    with tempfile.TemporaryDirectory() as tmp, ApiServer(store) as api:
        kubeconfig = api.write_kubeconfig(Path(tmp) / "kubeconfig")
        custom = client.CustomObjectsApi(config.new_client_from_config(config_file=str(kubeconfig)))
        t0 = time.perf_counter()
        listed, pages, token = 0, 0, None
        while True:
            page = custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "workloads", limit=500,
                                                     _continue=token)
            listed += len(page["items"])
            pages += 1
            token = page["metadata"].get("continue")
            if not token:
                break
        t_list = time.perf_counter() - t0

    gpus = sum(p.count * p.gpus_per_node for p in scenario.pools)
    peak = rss_gib()
    print(f"fleet: {args.nodes:,} nodes, {gpus:,} GPUs, {len(todo):,} workloads, {len(scenario.tenants)} ClusterQueues")
    print(f"scenario build:      {t_build:8.2f} s")
    print(f"create objects:      {t_create:8.2f} s")
    print(f"kueue reconcile:     {t_reconcile:8.2f} s  (admitted {len(result.admitted):,}, pending {result.pending:,})")
    print(f"dcgm step (all GPUs):{t_telemetry:8.2f} s  ({len(samples):,} samples)")
    print(f"paginated list:      {t_list:8.2f} s  ({listed:,} Workloads in {pages} pages of <=500)")
    print(f"peak RSS:            {peak:8.2f} GiB (limit {RSS_LIMIT_GIB} GiB)")
    ok = peak < RSS_LIMIT_GIB and listed == len(todo)
    print("OK" if ok else "FAILED")
    headline(f"{len(todo):,} workloads on {gpus:,} GPUs: create {t_create:.1f} s, reconcile {t_reconcile:.1f} s, "
             f"list {t_list:.1f} s, peak RSS {peak:.2f} GiB")
    if not ok:
        raise BenchFailed(f"peak RSS {peak:.2f} GiB (limit {RSS_LIMIT_GIB} GiB) or {listed:,} of {len(todo):,} listed")
    return 0


if __name__ == "__main__":
    sys.exit(run(main, "bench_cluster"))
