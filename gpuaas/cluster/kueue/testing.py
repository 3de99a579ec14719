"""Builders for Kueue-shaped test objects, like Kueue's ``pkg/util/testing`` wrappers.

Each returns a plain dict in the storage version, ready for ``ObjectStore.create``. Quota
entries are ``{resource: nominal}`` or ``{resource: (nominal, borrowingLimit, lendingLimit)}``
with ``None`` for an unset limit.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from ...quantity import GPU
from ._jobs import ELASTIC_ANNOTATION, PRIORITY_LABEL, QUEUE_LABEL

__all__ = [
    "FakeClock",
    "cluster_queue",
    "deployment",
    "inference_service",
    "local_queue",
    "node",
    "notebook",
    "raycluster",
    "resource_flavor",
    "statefulset",
    "workload",
    "workload_priority_class",
]

KUEUE = "kueue.x-k8s.io/v1beta2"
QuotaSpec = dict[str, Any]


class FakeClock:
    """An injectable clock that only moves when told to."""

    def __init__(self, start: datetime = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


def resource_flavor(name: str, **node_labels: str) -> dict[str, Any]:
    spec = {"nodeLabels": dict(node_labels)} if node_labels else {}
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def _resource(name: str, quota: Any) -> dict[str, Any]:
    nominal, borrowing, lending = quota if isinstance(quota, tuple) else (quota, None, None)
    entry: dict[str, Any] = {"name": name, "nominalQuota": nominal}
    if borrowing is not None:
        entry["borrowingLimit"] = borrowing
    if lending is not None:
        entry["lendingLimit"] = lending
    return entry


def cluster_queue(name: str, flavors: dict[str, QuotaSpec], cohort: str | None = None,
                  preemption: dict[str, str] | None = None) -> dict[str, Any]:
    """One resource group covering the resources of the first flavor, flavors tried in dict order;
    ``preemption`` is ``spec.preemption`` as written (e.g. ``{"reclaimWithinCohort": "Any"}``)."""
    covered = list(next(iter(flavors.values())))
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [{
            "coveredResources": covered,
            "flavors": [{"name": f, "resources": [_resource(r, q[r]) for r in covered]} for f, q in flavors.items()],
        }],
    }
    if cohort:
        spec["cohortName"] = cohort
    if preemption:
        spec["preemption"] = dict(preemption)
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(namespace: str, name: str, cq: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"namespace": namespace, "name": name},
            "spec": {"clusterQueue": cq}}


def workload_priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}


def node(name: str, gpus: int, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels)},
            "status": {"allocatable": {GPU: str(gpus), "cpu": "96", "memory": "1Ti"},
                       "capacity": {GPU: str(gpus), "cpu": "96", "memory": "1Ti"}}}


def _container(name: str, gpus: int, cpu: str | None = None, memory: str | None = None) -> dict[str, Any]:
    requests: dict[str, str] = {}
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
    resources: dict[str, Any] = {"requests": requests} if requests else {}
    if gpus:
        resources["limits"] = {GPU: str(gpus)}
    return {"name": name, "image": "busybox", "resources": resources}


def _template(gpus: int, cpu: str | None = None, memory: str | None = None, name: str = "main") -> dict[str, Any]:
    return {"spec": {"containers": [_container(name, gpus, cpu, memory)]}}


def workload(namespace: str, name: str, queue: str, gpus: int, count: int = 1, priority: int | None = None,
             cpu: str | None = None) -> dict[str, Any]:
    """A bare Workload (no job): ``gpus`` per pod, ``count`` pods."""
    spec: dict[str, Any] = {"queueName": queue, "active": True,
                            "podSets": [{"name": "main", "count": count, "template": _template(gpus, cpu)}]}
    if priority is not None:
        spec["priority"] = priority
    return {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"namespace": namespace, "name": name}, "spec": spec}


def _job_meta(namespace: str, name: str, queue: str | None, priority_class: str | None = None,
              annotations: dict[str, str] | None = None) -> dict[str, Any]:
    labels = {"team": namespace}
    if queue:
        labels[QUEUE_LABEL] = queue
    if priority_class:
        labels[PRIORITY_LABEL] = priority_class
    meta: dict[str, Any] = {"namespace": namespace, "name": name, "labels": labels}
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def raycluster(namespace: str, name: str, queue: str | None, workers: list[tuple[str, int, int]],
               head_gpus: int = 0, elastic: bool = False, suspend: bool = False) -> dict[str, Any]:
    """``workers`` is ``[(groupName, replicas, gpus per worker)]``; the head asks 1 cpu."""
    annotations = {ELASTIC_ANNOTATION: "true"} if elastic else None
    return {
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": _job_meta(namespace, name, queue, annotations=annotations),
        "spec": {
            "rayVersion": "2.9.0",
            "suspend": suspend,
            "headGroupSpec": {"rayStartParams": {}, "template": _template(head_gpus, "1", "2Gi", "ray-head")},
            "workerGroupSpecs": [
                {"groupName": group, "replicas": replicas, "minReplicas": 0, "maxReplicas": 10, "rayStartParams": {},
                 "template": _template(gpus, "4", "16Gi", "ray-worker")}
                for group, replicas, gpus in workers
            ],
        },
    }


def notebook(namespace: str, name: str, queue: str | None, gpus: int,
             stopped_at: str | None = None) -> dict[str, Any]:
    annotations = {"kubeflow-resource-stopped": stopped_at} if stopped_at else None
    return {"apiVersion": "kubeflow.org/v1", "kind": "Notebook",
            "metadata": _job_meta(namespace, name, queue, annotations=annotations),
            "spec": {"template": _template(gpus, "2", "8Gi", name)}}


def inference_service(namespace: str, name: str, queue: str | None, gpus: int, min_replicas: int = 1,
                      stopped: bool = False) -> dict[str, Any]:
    annotations = {"serving.kserve.io/stop": "true"} if stopped else None
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": _job_meta(namespace, name, queue, annotations=annotations),
            "spec": {"predictor": {"minReplicas": min_replicas, "maxReplicas": 4, "model": {
                "modelFormat": {"name": "huggingface"}, "storageUri": "hf://org/model",
                "resources": {"limits": {GPU: str(gpus)}, "requests": {"cpu": "6", GPU: str(gpus)}}}}}}


def _workload_set(kind: str, namespace: str, name: str, queue: str | None, gpus: int, replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": _job_meta(namespace, name, queue),
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": _template(gpus)["spec"]}}}


def deployment(namespace: str, name: str, queue: str | None, gpus: int, replicas: int = 1) -> dict[str, Any]:
    return _workload_set("Deployment", namespace, name, queue, gpus, replicas)


def statefulset(namespace: str, name: str, queue: str | None, gpus: int, replicas: int = 1) -> dict[str, Any]:
    return _workload_set("StatefulSet", namespace, name, queue, gpus, replicas)
