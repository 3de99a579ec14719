"""The kinds the emulator serves, and conversion between their API versions.

Objects are stored in one version per kind (the storage version), as the real API server
stores CRDs. Kueue renamed a few fields between v1beta1 and v1beta2; a client that reads or
writes through v1beta1 must see the old names, so the conversion lives here, next to the
registry, and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["RESOURCES", "Resource", "convert", "resource_for_plural"]

KUEUE = "kueue.x-k8s.io"
ADMISSION = "admissionregistration.k8s.io"


@dataclass(frozen=True)
class Resource:
    """One served kind: where it lives in the URL space and how it behaves."""

    kind: str
    group: str
    versions: tuple[str, ...]
    storage_version: str
    plural: str
    namespaced: bool
    has_status: bool
    short_names: tuple[str, ...] = ()

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def qualified(self) -> str:
        """``workloads.kueue.x-k8s.io`` (or ``pods`` for the core group), as in API messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def api_version(self, version: str | None = None) -> str:
        version = version or self.storage_version
        return f"{self.group}/{version}" if self.group else version


def _r(kind: str, group: str, versions: tuple[str, ...], plural: str, namespaced: bool, has_status: bool,
       *short: str) -> Resource:
    return Resource(kind, group, versions, versions[0], plural, namespaced, has_status, tuple(short))


_KUEUE_VERSIONS = ("v1beta2", "v1beta1")

RESOURCES: dict[str, Resource] = {
    r.kind: r
    for r in (
        _r("ClusterQueue", KUEUE, _KUEUE_VERSIONS, "clusterqueues", False, True, "cq"),
        _r("LocalQueue", KUEUE, _KUEUE_VERSIONS, "localqueues", True, True, "queue", "queues", "lq"),
        _r("Workload", KUEUE, _KUEUE_VERSIONS, "workloads", True, True, "kwl", "kueueworkload", "kueueworkloads"),
        _r("Cohort", KUEUE, _KUEUE_VERSIONS, "cohorts", False, True, "co"),
        _r("ResourceFlavor", KUEUE, _KUEUE_VERSIONS, "resourceflavors", False, False, "flavor", "flavors", "rf"),
        _r("WorkloadPriorityClass", KUEUE, _KUEUE_VERSIONS, "workloadpriorityclasses", False, False, "wpc"),
        _r("RayCluster", "ray.io", ("v1",), "rayclusters", True, True),
        _r("InferenceService", "serving.kserve.io", ("v1beta1",), "inferenceservices", True, True, "isvc"),
        _r("Notebook", "kubeflow.org", ("v1", "v1beta1"), "notebooks", True, True),
        # Batch jobs Kueue admits: gpuaas reads only their deadline annotations; the emulated Kueue runs none.
        _r("Job", "batch", ("v1",), "jobs", True, True),
        _r("RayJob", "ray.io", ("v1",), "rayjobs", True, True),
        _r("JobSet", "jobset.x-k8s.io", ("v1alpha2",), "jobsets", True, True),
        _r("PyTorchJob", "kubeflow.org", ("v1",), "pytorchjobs", True, True),
        _r("TFJob", "kubeflow.org", ("v1",), "tfjobs", True, True),
        _r("MPIJob", "kubeflow.org", ("v2beta1",), "mpijobs", True, True),
        _r("Namespace", "", ("v1",), "namespaces", False, True, "ns"),
        _r("Pod", "", ("v1",), "pods", True, True, "po"),
        _r("Node", "", ("v1",), "nodes", False, True, "no"),
        _r("Deployment", "apps", ("v1",), "deployments", True, True, "deploy"),
        _r("StatefulSet", "apps", ("v1",), "statefulsets", True, True, "sts"),
        _r("Event", "events.k8s.io", ("v1",), "events", True, False, "ev"),
        # The kit's admission policy (admission-policy.yaml), stored and returned as applied: the emulator does not
        # run it. A server older than Kubernetes 1.30 is ``disabled_versions={"admissionregistration.k8s.io/v1"}``.
        _r("ValidatingAdmissionPolicy", ADMISSION, ("v1",), "validatingadmissionpolicies", False, True),
        _r("ValidatingAdmissionPolicyBinding", ADMISSION, ("v1",), "validatingadmissionpolicybindings", False, False),
    )
}

_BY_PLURAL: dict[tuple[str, str, str], Resource] = {
    (r.group, v, r.plural): r for r in RESOURCES.values() for v in r.versions
}


def resource_for_plural(group: str, version: str, plural: str) -> Resource | None:
    """The resource served at ``/apis/<group>/<version>/<plural>``, if any."""
    return _BY_PLURAL.get((group, version, plural))


# --- version conversion -------------------------------------------------------------------
# Each rename is (section, v1beta2 name, v1beta1 name); a structured one is handled below.
_RENAMES: dict[str, tuple[tuple[str, str, str], ...]] = {
    "ClusterQueue": (("spec", "cohortName", "cohort"),),
    "LocalQueue": (("status", "flavorsUsage", "flavorUsage"),),
    "Workload": (("status", "accumulatedPastExecutionTimeSeconds", "accumulatedPastExexcutionTimeSeconds"),),
}

_PRIORITY_SOURCES = {
    "WorkloadPriorityClass": ("kueue.x-k8s.io/workloadpriorityclass", KUEUE),
    "PriorityClass": ("scheduling.k8s.io/priorityclass", "scheduling.k8s.io"),
}
_SOURCE_TO_REF = {src: (kind, group) for kind, (src, group) in _PRIORITY_SOURCES.items()}


def _rename(obj: dict[str, Any], section: str, old: str, new: str) -> None:
    part = obj.get(section)
    if isinstance(part, dict) and old in part:
        part = dict(part)
        part[new] = part.pop(old)
        obj[section] = part


def _workload_priority(obj: dict[str, Any], to_storage: bool) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec = dict(spec)
    if to_storage and "priorityClassName" in spec:
        name = spec.pop("priorityClassName")
        source = spec.pop("priorityClassSource", "")
        if name:
            kind, group = _SOURCE_TO_REF.get(source, ("PriorityClass", "scheduling.k8s.io"))
            spec["priorityClassRef"] = {"group": group, "kind": kind, "name": name}
    elif not to_storage and "priorityClassRef" in spec:
        ref = spec.pop("priorityClassRef") or {}
        spec["priorityClassName"] = ref.get("name", "")
        spec["priorityClassSource"] = _PRIORITY_SOURCES.get(ref.get("kind", ""), ("", ""))[0]
    else:
        return
    obj["spec"] = spec


def convert(obj: dict[str, Any], version: str) -> dict[str, Any]:
    """``obj`` (any served version) as ``version`` of its kind.

    Returns a new top-level dict and copies only the sections it changes, so converting a
    stored object for a response never mutates the store.
    """
    res = RESOURCES[obj["kind"]]
    current = obj.get("apiVersion", "").rpartition("/")[2]
    target = res.api_version(version)
    if obj.get("apiVersion") == target:
        return obj
    out = dict(obj)
    out["apiVersion"] = target
    renames = _RENAMES.get(res.kind, ())
    if current == "v1beta1" and version == "v1beta2":
        for section, new, old in renames:
            _rename(out, section, old, new)
        if res.kind == "Workload":
            _workload_priority(out, to_storage=True)
    elif current == "v1beta2" and version == "v1beta1":
        for section, new, old in renames:
            _rename(out, section, new, old)
        if res.kind == "Workload":
            _workload_priority(out, to_storage=False)
    return out
