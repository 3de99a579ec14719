"""SIGKILL a flow process at a chosen request: the mechanism of every kill test (reclaim, undo, rebalance).

The fault proxy holds the first request that matches (a PATCH of one object, the Pushgateway's
push): either before it reaches the server (``forward=False``: killed before that write) or
after the server applied it (``forward=True``: killed with the answer in flight). The flow runs
in its own process (``bench._flow_process``), so the kill is a real SIGKILL of a real
process, and the pytest process runs the next run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from gpuaas.cluster.fault_proxy import FaultProxy, Hit
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.models import ELASTIC_ANNOTATION

__all__ = ["ROOT", "flow_process", "killed_at", "stopped", "written_name"]

ROOT = Path(__file__).resolve().parents[2]


_warm: list[subprocess.Popen[bytes]] = []


def _spawn() -> subprocess.Popen[bytes]:
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value()), "PYTHONPATH": str(ROOT),
           "PREFECT_LOGGING_LEVEL": "WARNING"}
    return subprocess.Popen([sys.executable, "-m", "bench._flow_process", "--warm"], cwd=ROOT, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def flow_process(args: list[str]) -> subprocess.Popen[bytes]:
    """``flow_process ARGS`` in a child with this process's environment now. The child was started (and
    imported Prefect and the flows) during the previous call's test; the next one starts warming now.
    Needs the Prefect harness (its API URL is fixed at the child's start)."""
    child = _warm.pop() if _warm else _spawn()
    _warm.append(_spawn())
    assert child.stdin is not None
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PREFECT_LOGGING_LEVEL": "WARNING"}
    child.stdin.write(json.dumps({"env": env, "argv": args}).encode() + b"\n")
    child.stdin.flush()  # left open: communicate() closes it
    return child


def killed_at(proxy: FaultProxy, args: list[str], *, forward: bool, method: str = "PATCH",
              path: str | None = None) -> list[Hit]:
    """Run ``flow_process ARGS`` in a child; SIGKILL it while ``proxy`` holds its first matching request.

    Returns what ``proxy`` relayed for the killed run (the held request not included); the proxy is
    cleared for the next run."""
    proxy.arm("hold", 1, method=method, path=path, forward=forward)
    child = flow_process(args)
    try:
        assert proxy.held.wait(timeout=90), f"the flow never reached {method} {path or ''}: {child.communicate(timeout=5)}"
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=10) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        proxy.release.set()
    relayed = list(proxy.relayed)
    proxy.clear()  # the killed run's Prefect slot and store lock: the next run takes them over (its process is gone)
    return relayed


def stopped(cluster: EmbeddedCluster, kind: str, name: str) -> bool:
    """Stopped the way each kind is stopped (a Workload deactivated, its RayCluster's included; suspend,
    replicas 0, an elastic RayCluster's workers at 0, the Notebook's or KServe's annotation)."""
    obj = cluster.store.get(kind, "team-a", name)
    spec, notes = obj["spec"], obj["metadata"].get("annotations") or {}
    workers = spec.get("workerGroupSpecs") or []
    deactivated = spec.get("active") is False or (kind == "RayCluster" and any(
        (w.get("spec") or {}).get("active") is False for w in cluster.kueue.workloads_for(kind, "team-a", name)))
    return (deactivated or bool(spec.get("suspend")) or spec.get("replicas") == 0
            or "kubeflow-resource-stopped" in notes or notes.get("serving.kserve.io/stop") == "true"
            or (bool(workers) and all(g.get("replicas") == 0 for g in workers)))


def written_name(cluster: EmbeddedCluster, kind: str, name: str) -> str:
    """The object a reclaim of ``kind/name`` patches: a non-elastic RayCluster's Workload, else itself."""
    obj = cluster.store.get(kind, "team-a", name)
    if kind == "RayCluster" and (obj["metadata"].get("annotations") or {}).get(ELASTIC_ANNOTATION) != "true":
        return str(cluster.kueue.workloads_for(kind, "team-a", name)[0]["metadata"]["name"])
    return name
