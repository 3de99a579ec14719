"""Job integrations: how a queue-labelled job becomes Workloads, and how Kueue starts and stops it.

Each integration answers three questions about a job object, mirroring Kueue's
``pkg/controller/jobs/<kind>``:

* which Workloads it needs and with which pod sets (``JobView.workloads``);
* whether a client has asked it to stop (``JobView.stopped``): Notebook
  ``kubeflow-resource-stopped``, InferenceService ``serving.kserve.io/stop: "true"``,
  StatefulSet ``replicas: 0``;
* how Kueue gates it before admission: suspend-field jobs (RayCluster) are kept at
  ``spec.suspend: true`` (``suspend_gated``); pod-based jobs simply get no pods until admitted.
  Kueue owns that field: a client's suspend of an admitted RayCluster is set back to false and
  the quota stays reserved (the Workload's ``spec.active: false`` is how a client stops it).

Deployments follow Kueue's pod integration, one Workload per replica pod.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from gpuaas.models import ELASTIC_ANNOTATION, is_elastic

from ._model import PodSetInfo
from ._requests import pod_requests

__all__ = [
    "ELASTIC_ANNOTATION",
    "JOB_KINDS",
    "PRIORITY_LABEL",
    "QUEUE_LABEL",
    "JobView",
    "job_view",
    "owner_reference",
    "pod_labels",
    "suspend_patch",
    "workload_name",
]

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
NOTEBOOK_STOP = "kubeflow-resource-stopped"
ISVC_STOP = "serving.kserve.io/stop"
JOB_KINDS = ("RayCluster", "Notebook", "InferenceService", "StatefulSet", "Deployment")

# KServe predictor keys that hold a model server spec with ``resources`` (besides ``containers``).
_ISVC_FRAMEWORKS = (
    "model", "tensorflow", "pytorch", "sklearn", "xgboost", "onnx", "triton", "huggingface", "lightgbm",
    "paddle", "pmml",
)


@dataclass(frozen=True)
class JobView:
    """What the controller needs to know about one job object."""

    kind: str
    api_version: str
    namespace: str
    name: str
    uid: str
    queue_name: str
    labels: dict[str, str]
    priority_class: str | None
    elastic: bool
    stopped: bool
    suspend_gated: bool
    suspended: bool
    workloads: list[tuple[str, list[PodSetInfo] | None]]  # (name, pod sets; None = keep the current ones)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.namespace, self.name)


def workload_name(kind: str, job_name: str, uid: str, suffix: str = "") -> str:
    """``<kind>-<job>-<5 hex>`` as Kueue names them (``GetWorkloadNameForOwnerWithGVK``)."""
    base = f"{kind.lower()}-{job_name}{suffix}"[:56]
    digest = hashlib.sha1(f"{kind}/{job_name}{suffix}/{uid}".encode()).hexdigest()[:5]
    return f"{base}-{digest}"


def owner_reference(view: JobView) -> dict[str, Any]:
    return {
        "apiVersion": view.api_version,
        "kind": view.kind,
        "name": view.name,
        "uid": view.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def suspend_patch(view: JobView, suspended: bool) -> dict[str, Any] | None:
    """The spec patch that suspends or resumes a suspend-field job; None for pod-based ones."""
    if not view.suspend_gated or view.suspended == suspended:
        return None
    return {"spec": {"suspend": suspended}}


def pod_labels(view: JobView, podset: str) -> dict[str, str]:
    """Labels the job's controller would put on a pod of ``podset``."""
    labels = {k: v for k, v in view.labels.items()}
    labels[QUEUE_LABEL] = view.queue_name
    labels["kueue.x-k8s.io/podset"] = podset
    if view.kind == "RayCluster":
        labels.update({
            "ray.io/cluster": view.name,
            "ray.io/node-type": "head" if podset == "head" else "worker",
            "ray.io/group": "headgroup" if podset == "head" else podset,
            "app.kubernetes.io/created-by": "kuberay-operator",
        })
    elif view.kind == "Notebook":
        labels.update({"notebook-name": view.name, "statefulset": view.name})
    elif view.kind == "InferenceService":
        labels.update({"serving.kserve.io/inferenceservice": view.name, "component": "predictor"})
    elif view.kind in ("Deployment", "StatefulSet"):
        labels[f"gpuaas.io/{view.kind.lower()}"] = view.name
    return labels


def job_view(obj: dict[str, Any]) -> JobView | None:
    """Read a job object; None when it carries no queue-name label (Kueue leaves it alone)."""
    meta = obj.get("metadata") or {}
    labels = dict(meta.get("labels") or {})
    queue = labels.get(QUEUE_LABEL)
    if not queue:
        return None
    annotations = meta.get("annotations") or {}
    spec = obj.get("spec") or {}
    kind = obj["kind"]
    uid = meta.get("uid", "")
    name = meta["name"]
    workloads: list[tuple[str, list[PodSetInfo] | None]]
    stopped = False
    suspended = bool(spec.get("suspend", False))
    if kind == "RayCluster":
        workloads = [(workload_name(kind, name, uid), _ray_podsets(spec))]
        stopped = suspended
    elif kind == "Notebook":
        template = spec.get("template") or {}
        workloads = [(workload_name(kind, name, uid), [_podset("main", 1, template)])]
        stopped = NOTEBOOK_STOP in annotations
    elif kind == "InferenceService":
        predictor = spec.get("predictor") or {}
        count = max(1, int(predictor.get("minReplicas", 1) or 0))
        workloads = [(workload_name(kind, name, uid), [_podset("main", count, _isvc_template(predictor))])]
        stopped = str(annotations.get(ISVC_STOP, "")).lower() == "true"
    elif kind == "StatefulSet":
        replicas = int(spec.get("replicas", 1))
        podsets = [_podset("main", replicas, spec.get("template") or {})] if replicas > 0 else None
        workloads = [(workload_name(kind, name, uid), podsets)]
        stopped = replicas == 0
    elif kind == "Deployment":
        template = spec.get("template") or {}
        workloads = [
            (workload_name("Pod", name, uid, f"-{index}"), [_podset("main", 1, template)])
            for index in range(int(spec.get("replicas", 1)))
        ]
    else:
        return None
    return JobView(
        kind=kind,
        api_version=obj.get("apiVersion", ""),
        namespace=meta.get("namespace", ""),
        name=name,
        uid=uid,
        queue_name=queue,
        labels=labels,
        priority_class=labels.get(PRIORITY_LABEL),
        elastic=is_elastic(annotations),
        stopped=stopped,
        suspend_gated=kind == "RayCluster",
        suspended=suspended,
        workloads=workloads,
    )


def _podset(name: str, count: int, template: dict[str, Any]) -> PodSetInfo:
    return PodSetInfo(name, count, pod_requests(template.get("spec") or {}), template)


def _ray_podsets(spec: dict[str, Any]) -> list[PodSetInfo]:
    """``head`` (count 1) plus one pod set per worker group: ``replicas x numOfHosts``."""
    head = spec.get("headGroupSpec") or {}
    podsets = [_podset("head", 1, head.get("template") or {})]
    for group in spec.get("workerGroupSpecs") or []:
        count = int(group.get("replicas", 1)) * int(group.get("numOfHosts", 1) or 1)
        name = str(group.get("groupName", "workers")).lower().replace("_", "-")
        podsets.append(_podset(name, count, group.get("template") or {}))
    return podsets


def _isvc_template(predictor: dict[str, Any]) -> dict[str, Any]:
    """A pod template for the predictor: its ``containers``, or a server built from the framework spec."""
    containers = list(predictor.get("containers") or [])
    for key in _ISVC_FRAMEWORKS:
        server = predictor.get(key)
        if isinstance(server, dict):
            containers.insert(0, {"name": "kserve-container", "resources": server.get("resources") or {}})
            break
    return {"spec": {"containers": containers}}
