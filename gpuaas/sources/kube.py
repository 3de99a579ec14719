"""Kubernetes source: Kueue objects, the objects that own GPU pods, and running GPU pods.

One ``ApiClient``, one paginated list per kind: the number of requests per cycle is a
constant plus one per extra page, never one per object. Kueue is read at ``v1beta2`` and
falls back to ``v1beta1`` when the cluster does not serve it (404 on the group version);
field renames are normalised by the parsers. A CRD that is not installed (KServe, KubeRay,
Kubeflow absent: 404) is reported in ``not_installed`` and is not an error.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from kubernetes import client

from gpuaas.errors import NotFound
from gpuaas.models import ClusterQueue, Cohort, LocalQueue, Owner, PodGpus, ResourceFlavor, Workload
from gpuaas.settings import GpuaasSettings
from gpuaas.sources._kube_client import KubeLister, make_api_client
from gpuaas.sources._kube_kueue import (
    parse_cluster_queue,
    parse_cohort,
    parse_local_queue,
    parse_resource_flavor,
    parse_workload,
    pod_spec_gpus,
)
from gpuaas.sources._kube_owners import parse_owner, parse_pods

__all__ = ["DEFAULT_GPU_RESOURCES", "KUEUE_GROUP", "KubeState", "read_kube"]

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSIONS = ("v1beta2", "v1beta1")
DEFAULT_GPU_RESOURCES: tuple[str, ...] = ("nvidia.com/gpu",)
_CRD_OWNERS = (
    ("RayCluster", "ray.io", "v1", "rayclusters"),
    ("InferenceService", "serving.kserve.io", "v1beta1", "inferenceservices"),
    ("Notebook", "kubeflow.org", "v1", "notebooks"),
)


@dataclass(frozen=True)
class KubeState:
    """Everything the Kubernetes source read in one cycle."""

    kueue_version: str | None
    cluster_queues: tuple[ClusterQueue, ...]
    local_queues: tuple[LocalQueue, ...]
    workloads: tuple[Workload, ...]
    cohorts: tuple[Cohort, ...]
    resource_flavors: tuple[ResourceFlavor, ...]
    owners: tuple[Owner, ...]
    pods: tuple[PodGpus, ...]
    not_installed: tuple[str, ...]
    requests: int


def _kueue_version(lister: KubeLister) -> tuple[str | None, list[dict[str, Any]]]:
    for version in KUEUE_VERSIONS:
        try:
            return version, lister.custom_objects(KUEUE_GROUP, version, "clusterqueues")
        except NotFound:
            continue
    return None, []


def read_kube(
    settings: GpuaasSettings,
    *,
    gpu_resources: tuple[str, ...] = DEFAULT_GPU_RESOURCES,
    api_client: client.ApiClient | None = None,
) -> KubeState:
    """Read the cluster once. Raises ``KubeAPIError``/``SourceUnavailable`` for real failures."""
    own_client = api_client is None
    api = api_client or make_api_client(settings)
    try:
        return _read(KubeLister(api, settings), gpu_resources)
    finally:
        if own_client:
            api.close()


def _read(lister: KubeLister, gpu_resources: tuple[str, ...]) -> KubeState:
    missing: list[str] = []

    def optional(name: str, fetch: Any) -> list[dict[str, Any]]:
        try:
            return list(fetch())
        except NotFound:
            missing.append(name)
            return []

    version, cq_objs = _kueue_version(lister)
    kueue: dict[str, list[dict[str, Any]]] = {"clusterqueues": cq_objs}
    if version is None:
        missing.append(f"{KUEUE_GROUP}")
    else:
        for plural in ("localqueues", "workloads", "cohorts", "resourceflavors"):
            kueue[plural] = optional(
                f"{plural}.{KUEUE_GROUP}/{version}",
                lambda p=plural: lister.custom_objects(KUEUE_GROUP, version, p),
            )

    owners: list[Owner] = []
    for kind, group, ver, plural in _CRD_OWNERS:
        objs = optional(f"{plural}.{group}/{ver}", lambda g=group, v=ver, p=plural: lister.custom_objects(g, v, p))
        owners.extend(parse_owner(o, kind, gpu_resources) for o in objs)
    for kind, fetch in (("Deployment", lister.deployments), ("StatefulSet", lister.stateful_sets)):
        objs = optional(f"{kind.lower()}s.apps/v1", fetch)
        owners.extend(
            parse_owner(o, kind, gpu_resources)
            for o in objs
            if pod_spec_gpus(((o.get("spec") or {}).get("template") or {}).get("spec"), gpu_resources) > 0
        )
    pods = parse_pods(optional("pods/v1", lister.running_pods), owners, gpu_resources)

    local_queues = tuple(parse_local_queue(o) for o in kueue.get("localqueues", []))
    lq_to_cq = {(lq.namespace, lq.name): lq.cluster_queue for lq in local_queues}
    workloads = tuple(
        wl if wl.cluster_queue else replace(wl, cluster_queue=lq_to_cq.get((wl.namespace, wl.queue or "")))
        for wl in (parse_workload(o, gpu_resources) for o in kueue.get("workloads", []))
    )
    return KubeState(
        kueue_version=version,
        cluster_queues=tuple(parse_cluster_queue(o) for o in cq_objs),
        local_queues=local_queues,
        workloads=workloads,
        cohorts=tuple(parse_cohort(o) for o in kueue.get("cohorts", [])),
        resource_flavors=tuple(parse_resource_flavor(o) for o in kueue.get("resourceflavors", [])),
        owners=tuple(owners),
        pods=tuple(pods),
        not_installed=tuple(missing),
        requests=lister.requests,
    )
