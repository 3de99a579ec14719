"""Workloads Kueue's pod integration makes (one per pod, owned by the pod) are given the object the pod
belongs to: a Deployment, through the pod's ReplicaSet and its ``pod-template-hash``. Covers: a running
Deployment pod's Workload; a bare pod's, a pod that is not running, and a job-owned Workload, unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaas.sources._kube_kueue import parse_workload
from gpuaas.sources._kube_owners import owned_through_pods, parse_owner, parse_pods

GPU = ("nvidia.com/gpu",)
SPEC = {"containers": [{"name": "main", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}


def _ref(kind: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": kind, "name": name, "uid": f"uid-{name}", "controller": True}


def workload(name: str, owner: tuple[str, str]) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "ownerReferences": [_ref(*owner)]},
            "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": {"spec": SPEC}}]}}


def pod(name: str, owner: tuple[str, str] | None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [_ref(*owner)]
    return {"metadata": meta, "spec": {**SPEC, "nodeName": "n1"}, "status": {"phase": "Running"}}


@pytest.mark.parametrize(("owner", "want"), [
    (("Pod", "dep-5f9c7-abcde"), ("Deployment", "Deployment", "dep")),
    (("Pod", "solo"), ("Workload", "Pod", "solo")),
    (("Pod", "dep-5f9c7-gone0"), ("Workload", "Pod", "dep-5f9c7-gone0")),
    (("RayCluster", "ray"), ("RayCluster", "RayCluster", "ray")),
], ids=["deployment-pod", "bare-pod", "pod-not-running", "job-owned"])
def test_a_pod_owned_workload_is_given_the_pods_deployment(owner: tuple[str, str], want: tuple[str, str, str]) -> None:
    deployment = parse_owner({"metadata": {"name": "dep", "namespace": "ns", "uid": "uid-dep"},
                              "spec": {"replicas": 1, "template": {"spec": SPEC}}}, "Deployment", GPU)
    pods = parse_pods([pod("dep-5f9c7-abcde", ("ReplicaSet", "dep-5f9c7"), {"pod-template-hash": "5f9c7"}),
                       pod("solo", None)], [deployment], GPU)
    [wl] = owned_through_pods([parse_workload(workload("w", owner), GPU)], pods)
    assert (wl.kind, wl.owner_kind, wl.owner_name) == want
