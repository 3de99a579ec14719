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


@pytest.mark.parametrize(("count", "linked"), [(1, "dep-5f9c7-abcde"), (2, None)], ids=["per-pod", "pod-group"])
def test_a_per_pod_workload_keeps_its_pod_and_a_pod_groups_does_not(count: int, linked: str | None) -> None:
    """A per-pod Workload holds its pod's GPUs: its telemetry is that pod's alone (``Workload.pod``). One Workload of
    a pod group (two pods' GPUs, owned by its first pod here) is linked to every pod of the Deployment, as before."""
    deployment = parse_owner({"metadata": {"name": "dep", "namespace": "ns", "uid": "uid-dep"},
                              "spec": {"replicas": 2, "template": {"spec": SPEC}}}, "Deployment", GPU)
    pods = parse_pods([pod(f"dep-5f9c7-{i}", ("ReplicaSet", "dep-5f9c7"), {"pod-template-hash": "5f9c7"})
                       for i in ("abcde", "fghij")], [deployment], GPU)
    obj = workload("w", ("Pod", "dep-5f9c7-abcde"))
    obj["spec"]["podSets"][0]["count"] = count
    [wl] = owned_through_pods([parse_workload(obj, GPU)], pods)
    assert (wl.owner_kind, wl.owner_name, wl.gpus, wl.pod) == ("Deployment", "dep", float(count), linked)
