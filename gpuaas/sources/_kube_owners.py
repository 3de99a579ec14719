"""Objects that own GPU pods (RayCluster, InferenceService, Notebook, Deployment, StatefulSet)
and the running GPU pods themselves, with the owner chain resolved.

Telemetry is labelled by pod, while Kueue Workloads and stop actions name the owning object;
the owner chain (pod -> ReplicaSet -> Deployment -> InferenceService, pod -> StatefulSet ->
Notebook) is what joins the two. It is resolved from ``ownerReferences`` of objects already
listed, so no per-object GETs are needed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from gpuaas.models import ELASTIC_ANNOTATION, Owner, PodGpus, Workload
from gpuaas.sources._kube_kueue import ANNOTATIONS_OF_INTEREST, pod_spec_gpus

__all__ = ["OWNER_KINDS", "owned_through_pods", "parse_owner", "parse_pods"]

Obj = Mapping[str, Any]

KSERVE_STOP = "serving.kserve.io/stop"
NOTEBOOK_STOP = "kubeflow-resource-stopped"
OWNER_KINDS = ("RayCluster", "InferenceService", "Notebook", "Deployment", "StatefulSet")


def _controller(meta: Obj) -> tuple[str | None, str | None]:
    refs = meta.get("ownerReferences") or []
    chosen = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    return (chosen.get("kind"), chosen.get("name")) if chosen else (None, None)


def _raycluster(spec: Obj, names: Sequence[str]) -> tuple[float, int, bool]:
    head = pod_spec_gpus(((spec.get("headGroupSpec") or {}).get("template") or {}).get("spec"), names)
    gpus, replicas = head, 0
    for group in spec.get("workerGroupSpecs") or []:
        count = int(group.get("replicas") or 0) * int(group.get("numOfHosts") or 1)
        replicas += count
        gpus += count * pod_spec_gpus((group.get("template") or {}).get("spec"), names)
    return gpus, replicas, bool(spec.get("suspend"))


def _inference_service(spec: Obj, annotations: Obj, names: Sequence[str]) -> tuple[float, int, bool]:
    predictor = spec.get("predictor") or {}
    containers = list(predictor.get("containers") or [])
    containers += [v for v in predictor.values() if isinstance(v, Mapping) and "resources" in v]
    replicas = predictor.get("minReplicas")
    replicas = 1 if replicas is None else int(replicas)
    per_pod = pod_spec_gpus({"containers": containers}, names)
    stopped = str(annotations.get(KSERVE_STOP, "")).lower() == "true"
    return per_pod * max(replicas, 1), replicas, stopped


def parse_owner(obj: Obj, kind: str, gpu_resources: Iterable[str]) -> Owner:
    """One owner record; ``gpus`` is what the object asks for at its current replica count."""
    names = tuple(gpu_resources)
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    annotations = meta.get("annotations") or {}
    if kind == "RayCluster":
        gpus, replicas, stopped = _raycluster(spec, names)
    elif kind == "InferenceService":
        gpus, replicas, stopped = _inference_service(spec, annotations, names)
    elif kind == "Notebook":
        per_pod = pod_spec_gpus((spec.get("template") or {}).get("spec"), names)
        gpus, replicas, stopped = per_pod, 1, NOTEBOOK_STOP in annotations
    else:  # Deployment, StatefulSet
        replicas = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
        gpus = replicas * pod_spec_gpus((spec.get("template") or {}).get("spec"), names)
        stopped = replicas == 0
    ckind, cname = _controller(meta)
    keep = ANNOTATIONS_OF_INTEREST + (KSERVE_STOP, NOTEBOOK_STOP, ELASTIC_ANNOTATION)
    return Owner(
        kind=kind,
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        gpus=float(gpus),
        replicas=replicas,
        stopped=stopped,
        annotations=tuple((k, str(annotations[k])) for k in keep if k in annotations),
        controller_kind=ckind,
        controller_name=cname,
    )


def parse_pods(pods: Iterable[Obj], owners: Iterable[Owner], gpu_resources: Iterable[str]) -> list[PodGpus]:
    """Running pods that request GPUs; ReplicaSets are mapped to their Deployment by the
    ``pod-template-hash`` label, and Deployments/StatefulSets to their own controller."""
    names = tuple(gpu_resources)
    parents = {(o.namespace, o.kind, o.name): (o.controller_kind, o.controller_name) for o in owners}
    out = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        gpus = pod_spec_gpus(pod.get("spec"), names)
        if gpus <= 0:
            continue
        namespace = str(meta.get("namespace", ""))
        kind, name = _controller(meta)
        pod_hash = (meta.get("labels") or {}).get("pod-template-hash")
        if kind == "ReplicaSet" and name and pod_hash and name.endswith(f"-{pod_hash}"):
            kind, name = "Deployment", name[: -len(pod_hash) - 1]
        root_kind, root_name = kind, name
        parent = parents.get((namespace, kind or "", name or ""))
        if parent and parent[0]:
            root_kind, root_name = parent
        out.append(
            PodGpus(
                namespace=namespace,
                pod=str(meta.get("name", "")),
                node=(pod.get("spec") or {}).get("nodeName"),
                gpus=gpus,
                owner_kind=kind,
                owner_name=name,
                root_kind=root_kind,
                root_name=root_name,
            )
        )
    return out


def owned_through_pods(workloads: Iterable[Workload], pods: Iterable[PodGpus]) -> list[Workload]:
    """Workloads owned by a pod, given the pod's root owner when it is one of ``OWNER_KINDS``.

    Kueue's pod integration (a Deployment's pods) makes one Workload per pod, owned by the pod; the
    object a team scales, and gpuaas stops, is the Deployment at the root of the pod's owner chain.
    A pod that is not running (gated, say) is not in ``pods``: its Workload keeps the pod as owner."""
    pods = list(pods)
    roots = {(p.namespace, p.pod): (p.root_kind, p.root_name) for p in pods}
    gpus = {(p.namespace, p.pod): float(p.gpus) for p in pods}
    out = []
    for wl in workloads:
        key = (wl.namespace, wl.owner_name or "")
        kind, name = roots.get(key, (None, None)) if wl.owner_kind == "Pod" else (None, None)
        # One pod's Workload holds that pod's GPUs; a pod group's (one Workload for several pods, each an owner)
        # holds more, and is linked to every pod of the root, as before.
        alone = gpus.get(key) is not None and abs(gpus[key] - wl.gpus) < 1e-9
        out.append(replace(wl, kind=kind, owner_kind=kind, owner_name=name, pod=wl.owner_name if alone else None)
                   if kind in OWNER_KINDS and name else wl)
    return out
