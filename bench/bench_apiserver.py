"""Benchmark the embedded API server at the size of a large GPU cluster.

Loads 2,000 Nodes, 16,000 single-GPU Pods, 200 ClusterQueues and 50,000 Workloads into one
ObjectStore, then pages through the Workloads with the official client
(``CustomObjectsApi.list_cluster_custom_object(limit=500, _continue=...)``) and prints:
the resident memory after loading, the load time, the paging time and the request count.

Run: ``python -m bench.bench_apiserver [--workloads N] [--smoke]`` (``--smoke``: 20 nodes, 500 Workloads).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kubernetes import client, config

from bench._run import BenchFailed, headline, parser, run
from gpuaas.cluster.apiserver import ApiServer, ObjectStore

KUEUE = "kueue.x-k8s.io"


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def load(store: ObjectStore, workloads: int, nodes: int = 2000) -> None:
    """``nodes`` Nodes of 8 GPUs, each GPU one Pod, 200 ClusterQueues and ``workloads`` Workloads."""
    for i in range(nodes):
        store.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"gpu-node-{i:04d}",
                      "labels": {"nvidia.com/gpu.product": "A100", "topology.kubernetes.io/zone": f"z{i % 4}"}},
                      "status": {"capacity": {"nvidia.com/gpu": "8", "cpu": "96"},
                                 "allocatable": {"nvidia.com/gpu": "8", "cpu": "96"}}})
    for i in range(200):
        store.create({"apiVersion": f"{KUEUE}/v1beta2", "kind": "ClusterQueue", "metadata": {"name": f"cq-{i:03d}"},
                      "spec": {"cohortName": f"pool-{i % 10}", "namespaceSelector": {}, "resourceGroups": [{
                          "coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [{"name": "a100", "resources": [
                              {"name": "cpu", "nominalQuota": "768"}, {"name": "nvidia.com/gpu", "nominalQuota": 80}]}]}]}})
    for i in range(nodes * 8):
        store.create({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": f"train-{i:05d}-0", "namespace": f"team-{i % 200:03d}",
                                   "labels": {"app": "train", "kueue.x-k8s.io/queue-name": "q"}},
                      "spec": {"nodeName": f"gpu-node-{i // 8:04d}", "containers": [{"name": "main", "image": "pytorch:2",
                               "resources": {"requests": {"nvidia.com/gpu": "1", "cpu": "8"}}}]},
                      "status": {"phase": "Running"}})
    for i in range(workloads):
        store.create({"apiVersion": f"{KUEUE}/v1beta2", "kind": "Workload",
                      "metadata": {"name": f"job-{i:06d}", "namespace": f"team-{i % 200:03d}",
                                   "labels": {"kueue.x-k8s.io/job-uid": f"uid-{i}"}},
                      "spec": {"active": True, "queueName": "q", "priority": i % 3, "podSets": [{
                          "name": "main", "count": 1, "template": {"spec": {"restartPolicy": "Never", "containers": [{
                              "name": "main", "image": "pytorch:2",
                              "resources": {"requests": {"nvidia.com/gpu": "1", "cpu": "8"}}}]}}}]}})


def main(argv: list[str]) -> int:
    cli = parser(__doc__)
    cli.add_argument("--workloads", type=int, default=50_000)
    cli.add_argument("--limit", type=int, default=500)
    args = cli.parse_args(argv)
    nodes = 20 if args.smoke else 2000
    if args.smoke:
        args.workloads, args.limit = 500, 100

    base = rss_mib()
    store = ObjectStore()
    started = time.perf_counter()
    load(store, args.workloads, nodes)
    load_s = time.perf_counter() - started
    print(f"loaded {nodes} nodes, {nodes * 8} pods, 200 clusterqueues, {args.workloads} workloads in {load_s:.1f}s")
    print(f"RSS after loading: {rss_mib():.0f} MiB (process baseline {base:.0f} MiB)")

    with ApiServer(store) as server, tempfile.TemporaryDirectory() as tmp:
        cfg = client.Configuration()
        config.load_kube_config(config_file=str(server.write_kubeconfig(Path(tmp) / "kubeconfig")),
                                client_configuration=cfg)
        with client.ApiClient(cfg) as api:
            custom: Any = client.CustomObjectsApi(api)  # custom objects are typed ``object``
            started, seen, token = time.perf_counter(), 0, None
            while True:
                page = custom.list_cluster_custom_object(KUEUE, "v1beta2", "workloads", limit=args.limit,
                                                         _continue=token)
                seen += len(page["items"])
                token = page["metadata"].get("continue")
                if not token:
                    break
            page_s = time.perf_counter() - started
        requests = server.requests[f"GET /apis/{KUEUE}/v1beta2/workloads"]
    if seen != args.workloads:
        raise BenchFailed(f"paged {seen} workloads, expected {args.workloads}")
    print(f"paged {seen} workloads at limit {args.limit} in {page_s:.2f}s with {requests} requests "
          f"({page_s / requests * 1000:.1f} ms/request)")
    print(f"RSS at the end: {rss_mib():.0f} MiB")
    headline(f"{seen:,} Workloads paged in {page_s:.2f} s ({requests} requests); loaded in {load_s:.1f} s; "
             f"RSS {rss_mib():.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(run(main, "bench_apiserver"))
