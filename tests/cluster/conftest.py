"""Fixtures for the embedded API server: a store, a server on loopback, the official client.

Tests talk to the server only through the official ``kubernetes`` client loaded from the
kubeconfig the server writes, exactly as production code does. Object builders live here
too so both test modules build the same representative objects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from gpuaas.cluster.apiserver import ApiServer, ObjectStore, RBACRules

KUEUE = "kueue.x-k8s.io"
FIXED_NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


@dataclass
class Cluster:
    store: ObjectStore
    server: ApiServer
    api: client.ApiClient

    # The APIs are typed Any on purpose: the generated client types custom objects as ``object``
    # and every model field as Optional, and these tests assert the shapes themselves.
    @property
    def custom(self) -> Any:
        return client.CustomObjectsApi(self.api)

    @property
    def core(self) -> Any:
        return client.CoreV1Api(self.api)

    @property
    def apps(self) -> Any:
        return client.AppsV1Api(self.api)


MakeCluster = Callable[..., Cluster]


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[MakeCluster]:
    """Start a server (optionally with RBAC rules or a visibility callable) and a client for it."""
    started: list[Cluster] = []

    def make(rbac: RBACRules | None = None, visibility: Any = None) -> Cluster:
        store = ObjectStore(clock=lambda: FIXED_NOW)
        server = ApiServer(store, rbac=rbac, visibility=visibility)
        server.start()
        path = server.write_kubeconfig(tmp_path / f"kubeconfig-{len(started)}")
        cfg = client.Configuration()
        config.load_kube_config(config_file=str(path), client_configuration=cfg)  # type: ignore[no-untyped-call]
        cluster = Cluster(store, server, client.ApiClient(cfg))
        started.append(cluster)
        return cluster

    yield make
    for cluster in started:
        cluster.api.close()  # type: ignore[no-untyped-call]
        cluster.server.stop()


@pytest.fixture
def cluster(make_cluster: MakeCluster) -> Cluster:
    return make_cluster()


# --- builders ------------------------------------------------------------------------------
def cluster_queue(name: str, *, cohort: str | None = "gpu-pool", gpus: int | str = 8,
                  flavor: str = "a100") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [{
            "coveredResources": ["cpu", "nvidia.com/gpu"],
            "flavors": [{"name": flavor, "resources": [
                {"name": "cpu", "nominalQuota": "64"},
                {"name": "nvidia.com/gpu", "nominalQuota": gpus},
            ]}],
        }],
        "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
    }
    if cohort:
        spec["cohortName"] = cohort
    return {"apiVersion": f"{KUEUE}/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(name: str, namespace: str, cq: str) -> dict[str, Any]:
    return {"apiVersion": f"{KUEUE}/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"clusterQueue": cq}}


def workload(name: str, namespace: str = "team-a", *, queue: str = "team-a-queue", gpus: int = 1,
             labels: dict[str, str] | None = None, priority_class: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "active": True,
        "queueName": queue,
        "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "trainer", "image": "pytorch:2",
                            "resources": {"requests": {"cpu": "4", "nvidia.com/gpu": str(gpus)}}}],
        }}}],
    }
    if priority_class:
        spec["priorityClassRef"] = {"group": KUEUE, "kind": "WorkloadPriorityClass", "name": priority_class}
        spec["priority"] = 100
    return {"apiVersion": f"{KUEUE}/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}}, "spec": spec}


def admitted_status(cq: str, flavor: str = "a100", gpus: int = 1) -> dict[str, Any]:
    """A Workload status as Kueue writes it once the workload is admitted."""
    at = "2026-03-01T12:00:00Z"
    return {
        "admission": {"clusterQueue": cq, "podSetAssignments": [{
            "name": "main", "count": 1, "flavors": {"cpu": flavor, "nvidia.com/gpu": flavor},
            "resourceUsage": {"cpu": "4", "nvidia.com/gpu": str(gpus)}}]},
        "conditions": [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
             "message": f"Quota reserved in ClusterQueue {cq}", "lastTransitionTime": at, "observedGeneration": 1},
            {"type": "Admitted", "status": "True", "reason": "Admitted",
             "message": "The workload is admitted", "lastTransitionTime": at, "observedGeneration": 1},
        ],
        "requeueState": {"count": 1, "requeueAt": at},
        "resourceRequests": [{"name": "main", "resources": {"cpu": "4", "nvidia.com/gpu": str(gpus)}}],
    }


def usage_status(flavor: str = "a100", gpus: int = 4) -> dict[str, Any]:
    """A ClusterQueue/LocalQueue status with usage, as Kueue reports it."""
    usage = [{"name": flavor, "resources": [{"name": "nvidia.com/gpu", "total": str(gpus), "borrowed": "0"}]}]
    return {
        "pendingWorkloads": 2, "reservingWorkloads": 1, "admittedWorkloads": 1,
        "flavorsReservation": usage, "flavorsUsage": usage,
        "conditions": [{"type": "Active", "status": "True", "reason": "Ready", "message": "Can admit new workloads",
                        "lastTransitionTime": "2026-03-01T12:00:00Z"}],
    }


def pod(name: str, namespace: str, node: str, phase: str = "Running", labels: dict[str, str] | None = None
        ) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
            "status": {"phase": phase}}


def node(name: str, gpus: int = 8) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"gpu": "a100"}},
            "status": {"capacity": {"nvidia.com/gpu": str(gpus)}, "allocatable": {"nvidia.com/gpu": str(gpus)}}}
