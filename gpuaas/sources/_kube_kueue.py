"""Kueue objects (as JSON dicts) to records, for either served API version.

Kueue v1beta2 renamed fields a reader depends on (``spec.cohort`` -> ``spec.cohortName``,
``priorityClassName`` -> ``priorityClassRef``, LocalQueue ``flavorUsage`` ->
``flavorsUsage``). Both spellings are accepted here, whatever version was asked for, so
the rest of gpuaas only ever sees the v1beta2 meaning.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from gpuaas.models import (
    ClusterQueue,
    Cohort,
    LabelSelector,
    LocalQueue,
    QuotaEntry,
    ResourceFlavor,
    Workload,
    WorkloadState,
)
from gpuaas.quantity import parse_quantity

__all__ = [
    "ANNOTATIONS_OF_INTEREST",
    "parse_cluster_queue",
    "parse_cohort",
    "parse_local_queue",
    "parse_resource_flavor",
    "parse_time",
    "parse_workload",
    "pod_spec_gpus",
    "workload_gpus",
    "workload_state",
]

ANNOTATIONS_OF_INTEREST = ("gpuaas.io/reclaim", "gpuaas.io/deadline", "gpuaas.io/expected-runtime",
                           "gpuaas.io/deadline-hold", "kueue.x-k8s.io/job-owner-gvk", "kueue.x-k8s.io/job-owner-name")
JOB_KINDS = ("RayCluster", "InferenceService", "Notebook", "Deployment", "StatefulSet")

Obj = Mapping[str, Any]


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 timestamp from the API (``2026-01-02T03:04:05Z``) as an aware datetime."""
    if not value:
        return None
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def _conditions(obj: Obj) -> dict[str, Obj]:
    return {c.get("type", ""): c for c in (obj.get("status") or {}).get("conditions") or []}


def workload_state(obj: Obj) -> WorkloadState:
    """Kueue's ``Status()``: Finished, else Admitted, else QuotaReserved, else pending."""
    conds = _conditions(obj)
    for ctype, state in (
        ("Finished", WorkloadState.finished),
        ("Admitted", WorkloadState.admitted),
        ("QuotaReserved", WorkloadState.quota_reserved),
    ):
        if conds.get(ctype, {}).get("status") == "True":
            return state
    return WorkloadState.pending


def _container_gpus(container: Obj, gpu_resources: Iterable[str]) -> float:
    resources = container.get("resources") or {}
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    total = 0.0
    for res in gpu_resources:
        # Extended resources default their request to the limit.
        value = requests.get(res, limits.get(res))
        if value is not None:
            total += parse_quantity(value)
    return total


def pod_spec_gpus(pod_spec: Obj | None, gpu_resources: Iterable[str]) -> float:
    """GPUs one pod asks for: containers summed, or the largest init container if bigger."""
    if not pod_spec:
        return 0.0
    names = tuple(gpu_resources)
    main = sum(_container_gpus(c, names) for c in pod_spec.get("containers") or [])
    init = max((_container_gpus(c, names) for c in pod_spec.get("initContainers") or []), default=0.0)
    return max(main, init)


def _controller(meta: Obj) -> tuple[str | None, str | None]:
    refs = meta.get("ownerReferences") or []
    chosen = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    return (chosen.get("kind"), chosen.get("name")) if chosen else (None, None)


def _gpu_usage(usage: Obj | None, names: tuple[str, ...]) -> float | None:
    """The GPUs in a podSetAssignment's ``resourceUsage``; None when it names no GPU resource."""
    found = [parse_quantity(usage[res]) for res in names if usage and res in usage]
    return sum(found) if found else None


def workload_gpus(obj: Obj, gpu_resources: Iterable[str]) -> float:
    """GPUs a Workload holds while its quota is reserved, else the GPUs it asks for.

    Kueue's ``totalRequestsFromAdmission``: each podSetAssignment's ``resourceUsage`` (``count`` pods,
    both fixed at admission) scaled to ``min(count, spec count - reclaimablePods)``, so a partial
    admission, pods Kueue freed (Dynamic Reclaim) and an elastic scale-down are not counted as held.
    Without ``resourceUsage`` for a GPU resource, the pod template's request stands in per pod.
    """
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    names = tuple(gpu_resources)
    podsets = {str(ps.get("name") or "main"): ps for ps in spec.get("podSets") or []}
    wanted = {name: int(ps.get("count", 1)) for name, ps in podsets.items()}

    def per_pod(name: str) -> float:
        return pod_spec_gpus(((podsets.get(name) or {}).get("template") or {}).get("spec"), names)

    assignments = (status.get("admission") or {}).get("podSetAssignments") or []
    if workload_state(obj) not in (WorkloadState.admitted, WorkloadState.quota_reserved) or not assignments:
        return float(sum(count * per_pod(name) for name, count in wanted.items()))
    reclaimable = {str(r.get("name") or ""): int(r.get("count") or 0) for r in status.get("reclaimablePods") or []}
    total = 0.0
    for psa in assignments:
        name = str(psa.get("name") or "main")
        asked = wanted.get(name, 0)
        admitted = asked if psa.get("count") is None else int(psa["count"])
        held = min(admitted, asked - min(reclaimable.get(name, 0), asked))
        usage = _gpu_usage(psa.get("resourceUsage"), names)
        if usage is None:
            total += held * per_pod(name)
        elif admitted > 0:
            total += usage * held / admitted
    return total


def parse_workload(obj: Obj, gpu_resources: Iterable[str]) -> Workload:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    names = tuple(gpu_resources)
    gpus = workload_gpus(obj, names)
    admission = status.get("admission") or {}
    flavors = sorted(
        {
            str(flv)
            for psa in admission.get("podSetAssignments") or []
            for res, flv in (psa.get("flavors") or {}).items()
            if res in names
        }
    )
    ref = spec.get("priorityClassRef") or {}
    conds = _conditions(obj)
    admitted = conds.get("Admitted") if conds.get("Admitted", {}).get("status") == "True" else None
    reserved = conds.get("QuotaReserved") if conds.get("QuotaReserved", {}).get("status") == "True" else None
    owner_kind, owner_name = _controller(meta)
    annotations = meta.get("annotations") or {}
    return Workload(
        kind=owner_kind if owner_kind in JOB_KINDS else "Workload",
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        queue=spec.get("queueName"),
        cluster_queue=admission.get("clusterQueue"),
        priority=int(spec.get("priority") or 0),
        priority_class=ref.get("name") or spec.get("priorityClassName"),
        state=workload_state(obj),
        active=spec.get("active", True) is not False,
        gpus=float(gpus),
        flavor=",".join(flavors) or None,
        created_at=parse_time(meta.get("creationTimestamp")),
        admitted_at=parse_time((admitted or reserved or {}).get("lastTransitionTime")),
        owner_kind=owner_kind,
        owner_name=owner_name,
        annotations=tuple((k, str(annotations[k])) for k in ANNOTATIONS_OF_INTEREST if k in annotations),
        resource_version=str(meta.get("resourceVersion", "")),
        api_version=str(obj.get("apiVersion", "")),
        max_exec_time=_max_exec_time(spec, meta),
        queued_at=_queued_at(conds, meta),
        requeue_at=parse_time((status.get("requeueState") or {}).get("requeueAt")),
    )


_REQUEUED_AT_EVICTION = ("PodsReadyTimeout", "AdmissionCheck")
"""Evictions after which Kueue queues a Workload at the eviction's time rather than its creation's."""


def _queued_at(conds: dict[str, Obj], meta: Obj) -> datetime | None:
    """Kueue's queue-order timestamp: an eviction by a PodsReady timeout or an admission check moves the
    Workload to the back of its priority, as of the eviction; otherwise it keeps its creation time."""
    evicted = conds.get("Evicted") or {}
    if evicted.get("status") == "True" and evicted.get("reason") in _REQUEUED_AT_EVICTION:
        at = parse_time(evicted.get("lastTransitionTime"))
        if at is not None:
            return at
    return parse_time(meta.get("creationTimestamp"))


def _max_exec_time(spec: Obj, meta: Obj) -> str | None:
    """Kueue copies the job's label into the spec field; a Workload created by hand may carry either."""
    value = spec.get("maximumExecutionTimeSeconds")
    if value is None:
        value = (meta.get("labels") or {}).get("kueue.x-k8s.io/max-exec-time-seconds")
    return None if value is None else str(value)


def _status_cells(entries: Iterable[Obj] | None) -> dict[tuple[str, str], tuple[float, float]]:
    cells: dict[tuple[str, str], tuple[float, float]] = {}
    for flv in entries or []:
        for res in flv.get("resources") or []:
            total = parse_quantity(res.get("total", 0))
            borrowed = parse_quantity(res.get("borrowed", 0))
            cells[(str(flv.get("name")), str(res.get("name")))] = (total, borrowed)
    return cells


def _quotas(spec: Obj, status: Obj) -> tuple[QuotaEntry, ...]:
    reserved = _status_cells(status.get("flavorsReservation"))
    usage = _status_cells(status.get("flavorsUsage") or status.get("flavorUsage"))
    out = []
    for group in spec.get("resourceGroups") or []:
        for flv in group.get("flavors") or []:
            for res in flv.get("resources") or []:
                key = (str(flv.get("name")), str(res.get("name")))
                borrowing, lending = res.get("borrowingLimit"), res.get("lendingLimit")
                out.append(
                    QuotaEntry(
                        flavor=key[0],
                        resource=key[1],
                        nominal=parse_quantity(res.get("nominalQuota", 0)),
                        borrowing_limit=None if borrowing is None else parse_quantity(borrowing),
                        lending_limit=None if lending is None else parse_quantity(lending),
                        reserved=reserved.get(key, (0.0, 0.0))[0],
                        usage=usage.get(key, (0.0, 0.0))[0],
                        borrowed=usage.get(key, (0.0, 0.0))[1],
                    )
                )
    return tuple(out)


_BY_PRIORITY = ("LowerPriority", "LowerOrNewerEqualPriority")


def _priority_preemption(preemption: dict[str, Any]) -> bool:
    return (preemption.get("withinClusterQueue") in _BY_PRIORITY or preemption.get("reclaimWithinCohort") in _BY_PRIORITY
            or _borrow_policy(preemption) in _BY_PRIORITY)


def _borrow_policy(preemption: dict[str, Any]) -> str:
    borrow = preemption.get("borrowWithinCohort") or {}
    return str((borrow.get("policy") if isinstance(borrow, dict) else None) or "Never")


def parse_cluster_queue(obj: Obj) -> ClusterQueue:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return ClusterQueue(
        name=str((obj.get("metadata") or {}).get("name", "")),
        cohort=spec.get("cohortName") or spec.get("cohort") or None,
        quotas=_quotas(spec, status),
        pending_workloads=int(status.get("pendingWorkloads") or 0),
        reserving_workloads=int(status.get("reservingWorkloads") or 0),
        admitted_workloads=int(status.get("admittedWorkloads") or 0),
        reclaim_within_cohort=str((spec.get("preemption") or {}).get("reclaimWithinCohort") or "Never"),
        within_cluster_queue=str((spec.get("preemption") or {}).get("withinClusterQueue") or "Never"),
        priority_preemption=_priority_preemption(spec.get("preemption") or {}),
        stop_policy=_stop_policy(spec),
        inactive_reason=_inactive_reason(obj),
        namespace_selector=LabelSelector.parse(spec.get("namespaceSelector")),
    )


def _stop_policy(spec: Obj) -> str | None:
    """``spec.stopPolicy`` when it stops the queue; Kueue's ``None`` (or no field) is None."""
    value = spec.get("stopPolicy")
    return str(value) if value and value != "None" else None


def _inactive_reason(obj: Obj) -> str | None:
    """The ``Active`` condition's reason when its status is ``False`` (``Unknown`` when it names none)."""
    active = _conditions(obj).get("Active") or {}
    return str(active.get("reason") or "Unknown") if active.get("status") == "False" else None


def parse_local_queue(obj: Obj) -> LocalQueue:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    usage = _status_cells(status.get("flavorsUsage") or status.get("flavorUsage"))
    return LocalQueue(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        cluster_queue=str(spec.get("clusterQueue", "")),
        pending_workloads=int(status.get("pendingWorkloads") or 0),
        reserving_workloads=int(status.get("reservingWorkloads") or 0),
        admitted_workloads=int(status.get("admittedWorkloads") or 0),
        usage=tuple(QuotaEntry(f, r, 0.0, usage=t) for (f, r), (t, _) in usage.items()),
        stop_policy=_stop_policy(spec),
    )


def parse_cohort(obj: Obj) -> Cohort:
    spec = obj.get("spec") or {}
    return Cohort(
        name=str((obj.get("metadata") or {}).get("name", "")),
        parent=spec.get("parentName") or None,
        quotas=_quotas(spec, obj.get("status") or {}),
    )


def parse_resource_flavor(obj: Obj) -> ResourceFlavor:
    labels = (obj.get("spec") or {}).get("nodeLabels") or {}
    return ResourceFlavor(
        name=str((obj.get("metadata") or {}).get("name", "")),
        node_labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())),
    )
