"""Kubernetes source: Kueue objects, the objects that own GPU pods, running GPU pods, and the
deadline annotations of the batch jobs that own Workloads.

One ``ApiClient``, one paginated list per kind: the number of requests per cycle is a
constant plus one per extra page, never one per object. Kueue is read at ``v1beta2`` and
falls back to ``v1beta1`` when the cluster does not serve it (404 on the group version);
field renames are normalised by the parsers. A CRD that is not installed (KServe, KubeRay,
Kubeflow absent: 404) is reported in ``not_installed`` and is not an error; a batch job kind
that is not installed (``models.JOB_OWNERS``) has no job to read deadlines or an opt-out
from, so it is skipped without a word.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from fnmatch import translate
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from gpuaas.errors import MalformedResponse, NotFound
from gpuaas.models import JOB_OWNERS, ClusterQueue, Cohort, LocalQueue, Owner, PodGpus, ResourceFlavor, Workload
from gpuaas.settings import GpuaasSettings
from gpuaas.sources._concurrent import at_once
from gpuaas.sources._deadline_owners import (
    DeadlineTable,
    deadline_annotations,
    list_deadline_owners,
    owner_deadlines,
    owner_opt_out,
)
from gpuaas.sources._kube_errors import kube_api_error, kube_request
from gpuaas.sources._kube_kueue import (
    parse_cluster_queue,
    parse_cohort,
    parse_local_queue,
    parse_resource_flavor,
    parse_workload,
    pod_spec_gpus,
)
from gpuaas.sources._kube_owners import owned_through_pods, parse_owner, parse_pods

if TYPE_CHECKING:
    from kubernetes import client

    from gpuaas.sources._kube_lister import Keep, KubeLister

__all__ = ["ACCELERATOR_RESOURCES", "DEFAULT_GPU_RESOURCES", "KUEUE_GROUP", "AcceleratorRequest", "KubeState",
           "kube_api_error", "kube_request", "read_kube", "unmanaged_accelerators", "with_cluster_queues",
           "with_owner_annotations", "with_roots"]

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSIONS = ("v1beta2", "v1beta1")
DEFAULT_GPU_RESOURCES: tuple[str, ...] = ("nvidia.com/gpu",)
"""The only GPU resource gpuaas manages: its quota is planned and moved, its Workloads judged and reclaimed."""
ACCELERATOR_RESOURCES: tuple[str, ...] = (
    "nvidia.com/*", "amd.com/gpu", "gpu.intel.com/*", "habana.ai/*", "aws.amazon.com/neuron*", "google.com/tpu")
"""Extended resource names (shell patterns) of accelerators, as their device plugins advertise them. Those not in
``DEFAULT_GPU_RESOURCES`` are read but not managed: a ClusterQueue's quota of them or a Workload's request for them
is said (``unmanaged_accelerators``), so that a team's MIG or AMD capacity never reads as no capacity at all.

- ``nvidia.com/*``: NVIDIA's k8s-device-plugin (github.com/NVIDIA/k8s-device-plugin): ``nvidia.com/gpu``, and
  ``nvidia.com/mig-<profile>`` (``mig-1g.10gb``) under the mixed MIG strategy, ``nvidia.com/gpu.shared`` when
  time-slicing renames its replicas.
- ``amd.com/gpu``: AMD's ROCm device plugin (github.com/ROCm/k8s-device-plugin).
- ``gpu.intel.com/*``: Intel's GPU plugin (github.com/intel/intel-device-plugins-for-kubernetes):
  ``gpu.intel.com/i915``, ``gpu.intel.com/xe``.
- ``habana.ai/*``: the Intel Gaudi device plugin (docs.habana.ai, "Intel Gaudi Device Plugin for Kubernetes"):
  ``habana.ai/gaudi``.
- ``aws.amazon.com/neuron*``: the AWS Neuron device plugin (awsdocs-neuron, "k8s neuron device plugin"):
  ``aws.amazon.com/neuron``, ``aws.amazon.com/neuroncore`` (and ``neurondevice`` before Neuron 2.20).
- ``google.com/tpu``: Cloud TPU on GKE (cloud.google.com/kubernetes-engine/docs/concepts/tpus).
"""


_ACCELERATOR = re.compile("|".join(translate(pattern) for pattern in ACCELERATOR_RESOURCES))
"""``ACCELERATOR_RESOURCES`` as one expression: every container of every Workload is matched on each read."""


def unmanaged_accelerators(resources: Iterable[str], gpu_resources: Collection[str] = DEFAULT_GPU_RESOURCES,
                           ) -> tuple[str, ...]:
    """The names of ``resources`` that are accelerators (``ACCELERATOR_RESOURCES``) gpuaas does not manage (not in
    ``gpu_resources``), sorted, each once."""
    return tuple(sorted({r for r in resources if r not in gpu_resources and _ACCELERATOR.match(r)}))


def _requested(obj: Any) -> set[str]:
    """Every resource a Workload's pod templates request or limit: where an unmanaged accelerator is found."""
    names: set[str] = set()
    for podset in ((obj.get("spec") or {}).get("podSets") or []) if isinstance(obj, dict) else []:
        spec = ((podset or {}).get("template") or {}).get("spec") or {}
        for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
            resources = (container or {}).get("resources") or {}
            names |= {str(r) for part in ("requests", "limits") for r in (resources.get(part) or {})}
    return names


@dataclass(frozen=True)
class AcceleratorRequest:
    """A Workload that asks for accelerators gpuaas does not manage: it counts 0 GPUs, and is never judged or moved."""

    namespace: str
    name: str
    resources: tuple[str, ...]


_CRD_OWNERS = (
    ("RayCluster", "ray.io", "v1", "rayclusters"),
    ("InferenceService", "serving.kserve.io", "v1beta1", "inferenceservices"),
    ("Notebook", "kubeflow.org", "v1", "notebooks"),
)
"""Custom kinds that own GPU pods, listed with Deployments and StatefulSets: the objects reclaim acts on. A
Workload that has no deadline annotation takes theirs, as it takes a batch job's (``JOB_OWNERS``: listed for
their annotations alone, never acted on)."""


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
    cluster_uid: str | None = None
    """The ``kube-system`` Namespace's uid (``KubeLister.cluster_uid``); None where it could not be read."""
    unmanaged_requests: tuple[AcceleratorRequest, ...] = ()
    """The Workloads that ask for accelerators gpuaas does not manage (``unmanaged_accelerators``)."""
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None
    """Every Namespace's labels, by name (``ClusterQueue.namespace_selector`` is matched against them); None where
    they were not read (the role may not list Namespaces)."""
    list_versions: Mapping[str, str] = field(default_factory=dict)
    """Each list's ``metadata.resourceVersion``, by what was listed (``pods/v1``, ``workloads.kueue.x-k8s.io/
    v1beta2``): the version of the cluster each list saw. Lists are read one after the other, each consistent
    in itself, so two of them may differ."""


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
    from gpuaas.sources._kube_client import KubeLister, make_api_client  # the Kubernetes client, on first read

    own_client = api_client is None
    api = api_client or make_api_client(settings)
    try:
        return _read(KubeLister(api, settings), gpu_resources)
    finally:
        if own_client:
            api.close()


T = TypeVar("T")
_BAD_SHAPE = (ValueError, TypeError, AttributeError, KeyError, IndexError)


def _parsed(kind: str, url: str, parse: Callable[[Any], T], obj: Any) -> T:
    """``parse(obj)``, or a ``MalformedResponse`` naming the object and why.

    An object that does not have the documented shape (a GPU request that is not a quantity,
    ``podSets`` that is not a list) fails the source, so the snapshot is degraded with the
    reason and no policy acts on a picture with a hole in it; never a traceback.
    """
    try:
        return parse(obj)
    except _BAD_SHAPE as exc:
        meta = (obj.get("metadata") if isinstance(obj, dict) else None) or {}
        where = "/".join(str(p) for p in (meta.get("namespace"), meta.get("name")) if p) if isinstance(
            meta, dict) else "?"
        detail = str(exc) if isinstance(exc, ValueError) else f"unexpected shape ({type(exc).__name__}: {exc})"
        raise MalformedResponse(f"{kind} {where or '?'}: {detail}"[:300], source="kube", url=url) from exc


_NAMESPACES = "namespaces/v1"
LISTS_AT_ONCE = 3
"""Lists in flight at once: pages of one list follow each other (``continue`` tokens), different kinds
need not, so the API server encodes one page while this process decodes another."""


def with_cluster_queues(workloads: Iterable[Workload], local_queues: Iterable[LocalQueue]) -> tuple[Workload, ...]:
    """Each Workload with its ClusterQueue: the admission's, else its LocalQueue's (a pending one has no admission)."""
    lq_to_cq = {(lq.namespace, lq.name): lq.cluster_queue for lq in local_queues}
    return tuple(wl if wl.cluster_queue else replace(wl, cluster_queue=lq_to_cq.get((wl.namespace, wl.queue or "")))
                 for wl in workloads)


def with_owner_annotations(workloads: Iterable[Workload], owners: DeadlineTable) -> list[Workload]:
    """Each Workload with the deadline annotations it lacks taken from its owner's (``owner_deadlines``, the
    rule the cost report follows too), and its batch job's opt-out (``owner_opt_out``): what the snapshot's
    deadline and reclaim columns are parsed from.

    Applied after ``owned_through_pods``, so a per-pod Workload of a Deployment takes the Deployment's."""
    out = []
    for wl in workloads:
        key = (wl.namespace, wl.owner_kind or "", wl.owner_name or "")
        if key not in owners:
            out.append(wl)
            continue
        own = dict(wl.annotations)
        taken = {**owner_deadlines(own, key, owners), **owner_opt_out(own, key, owners)}
        out.append(replace(wl, annotations=tuple({**own, **taken}.items())))
    return out


def with_roots(pods: Iterable[PodGpus], owners: Iterable[Owner]) -> list[PodGpus]:
    """Each pod (parsed page by page, before its owners were all read) with the root of its owner chain: its
    owner's own controller where the owner is one of ``owners`` (a Deployment's InferenceService), as
    ``parse_pods`` resolves it when given the owners."""
    parents = {(o.namespace, o.kind, o.name): (o.controller_kind, o.controller_name) for o in owners}
    out = []
    for pod in pods:
        kind, name = parents.get((pod.namespace, pod.owner_kind or "", pod.owner_name or ""), (None, None))
        out.append(replace(pod, root_kind=kind, root_name=name) if kind else pod)
    return out


def _read(lister: KubeLister, gpu_resources: tuple[str, ...]) -> KubeState:
    url = lister.url

    def optional(fetch: Callable[[], list[T]]) -> list[T] | None:
        try:
            return fetch()
        except NotFound:
            return None  # the kind is not installed

    def owner(kind: str, obj: Any) -> Owner:
        return _parsed(kind, url, lambda o: parse_owner(o, kind, gpu_resources), obj)

    def template_gpus(kind: str, obj: Any) -> float:
        return _parsed(kind, url, lambda o: pod_spec_gpus(((o.get("spec") or {}).get("template") or {}).get("spec"),
                                                          gpu_resources), obj)

    def owners_of(kind: str, fetch: Callable[[Keep[Owner]], list[Any]], by_template: bool) -> list[Owner] | None:
        return optional(lambda: fetch(lambda objs: [owner(kind, o) for o in objs
                                                    if not by_template or template_gpus(kind, o) > 0]))

    def workloads(objs: list[dict[str, Any]]) -> Iterator[tuple[Workload, AcceleratorRequest | None]]:
        for obj in objs:
            parsed = _parsed("Workload", url, lambda o: parse_workload(o, gpu_resources), obj)
            found = unmanaged_accelerators(_parsed("Workload", url, _requested, obj), gpu_resources)
            yield parsed, AcceleratorRequest(parsed.namespace, parsed.name, found) if found else None

    def gpu_pods(objs: list[dict[str, Any]]) -> Iterator[PodGpus]:
        """The page's running pods that request GPUs, parsed as it arrives (their owners' roots come after)."""
        for obj in objs:
            yield from _parsed("Pod", url, lambda o: parse_pods([o], (), gpu_resources), obj)

    def kueue_list(plural: str) -> list[Any] | None:
        # The small lists are parsed after the join below; Workloads as they arrive.
        keep: Keep[Any] = workloads if plural == "workloads" else list
        return optional(lambda: lister.custom_objects(KUEUE_GROUP, str(version), plural, keep))

    cluster_uid = lister.cluster_uid()
    version, cq_objs = _kueue_version(lister)
    plurals = ("localqueues", "workloads", "cohorts", "resourceflavors") if version is not None else ()
    # Every list keeps of each page only what the snapshot reads, as the page arrives (its raw JSON dies then).
    owner_reads: list[tuple[str, Callable[[], Any]]] = [
        *((f"{plural}.{group}/{ver}",
           partial(owners_of, kind, partial(lister.custom_objects, group, ver, plural), False))
          for kind, group, ver, plural in _CRD_OWNERS),
        ("deployments.apps/v1", lambda: owners_of("Deployment", lister.deployments, True)),
        ("statefulsets.apps/v1", lambda: owners_of("StatefulSet", lister.stateful_sets, True)),
    ]
    job_reads: list[tuple[str, Callable[[], Any]]] = [
        (kind.resource, partial(list_deadline_owners, lister, kind)) for kind in JOB_OWNERS]
    reads: list[tuple[str, Callable[[], Any]]] = [
        *((f"{p}.{KUEUE_GROUP}/{version}", lambda p=p: kueue_list(p)) for p in plurals),
        *owner_reads,
        *job_reads,
        ("pods/v1", lambda: optional(lambda: lister.running_pods(gpu_pods))),
        (_NAMESPACES, lambda: (lister.namespace_labels(),)),  # boxed: None is "may not list", not "not installed"
    ]
    results = dict(zip((name for name, _ in reads), at_once([call for _, call in reads], workers=LISTS_AT_ONCE)))
    skipped = {name for name, _ in job_reads}
    (namespace_labels,) = results.pop(_NAMESPACES)
    missing = ([] if version is not None else [KUEUE_GROUP]) + [
        name for name, got in results.items() if got is None and name not in skipped]
    kueue = {p: results[f"{p}.{KUEUE_GROUP}/{version}"] or [] for p in plurals}
    owners = [o for name, _ in owner_reads for o in results[name] or []]
    pods = with_roots(results["pods/v1"] or [], owners)

    inherited: DeadlineTable = {}
    for name, _ in job_reads:
        inherited.update(results[name] or {})
    for o in owners:
        if found := deadline_annotations(dict(o.annotations)):
            inherited[(o.namespace, o.kind, o.name)] = found
    local_queues = tuple(_parsed("LocalQueue", url, parse_local_queue, o) for o in kueue.get("localqueues", []))
    parsed_workloads = kueue.get("workloads", [])
    workloads_ = with_cluster_queues(with_owner_annotations(
        owned_through_pods([wl for wl, _ in parsed_workloads], pods), inherited), local_queues)
    return KubeState(
        kueue_version=version,
        cluster_queues=tuple(_parsed("ClusterQueue", url, parse_cluster_queue, o) for o in cq_objs),
        local_queues=local_queues,
        workloads=workloads_,
        cohorts=tuple(_parsed("Cohort", url, parse_cohort, o) for o in kueue.get("cohorts", [])),
        resource_flavors=tuple(_parsed("ResourceFlavor", url, parse_resource_flavor, o)
                               for o in kueue.get("resourceflavors", [])),
        owners=tuple(owners),
        pods=tuple(pods),
        not_installed=tuple(missing),
        requests=lister.requests,
        cluster_uid=cluster_uid,
        unmanaged_requests=tuple(request for _, request in parsed_workloads if request is not None),
        namespace_labels=namespace_labels,
        list_versions=dict(lister.versions),
    )
