"""The Kubernetes side of the cost report: finished and running Kueue Workloads, with their deadlines.

A finished Workload is a batch outcome (its ``Finished`` condition, reason and time, and the
deadline annotation of the Workload, else of the job that owns it: ``_DEADLINE_OWNERS``, looked up as
the snapshot looks it up, ``_deadline_owners.owner_deadlines``); an admitted, unfinished one is a job
still running at the end of the window, whose hours are in progress. Each keeps its creation time: the
attempt it belongs to. Running pods are mapped to the object that controls them through ``ownerReferences``,
so a job's pods are known without OpenCost's allocation API.

An elastic job's scale-up finishes its previous Workload slice (``Finished=True``, reason
``WorkloadSliceReplaced``) while the job goes on under the new slice: that is no outcome, and the
job's attempt began with its first slice, not with the newest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gpuaas.errors import GpuaasError, NotFound, SourceError
from gpuaas.models import JOB_OWNERS, FinishedJob, OwnerKind, RunningJob
from gpuaas.settings import GpuaasSettings
from gpuaas.sources._deadline_owners import DeadlineTable, owner_deadlines, read_deadline_owners
from gpuaas.sources._kube_client import KubeLister, make_api_client
from gpuaas.sources._kube_deadlines import parse_rfc3339
from gpuaas.sources._kube_kueue import parse_time
from gpuaas.sources.failures import describe_failure
from gpuaas.sources.kube import KUEUE_GROUP, KUEUE_VERSIONS

__all__ = ["BATCH_KINDS", "DEADLINE_ANNOTATION", "SLICE_REPLACED", "Jobs", "finished_jobs", "pod_owners", "read_jobs",
           "running_at", "running_jobs"]

DEADLINE_ANNOTATION = "gpuaas.io/deadline"
SLICE_REPLACED = "WorkloadSliceReplaced"
"""The ``Finished`` reason Kueue gives the Workload slice an elastic job's scale-up replaced (its scheduler's
``replaceWorkloadSlice``, ``workloadslicing.IsReplaced``): the job runs on under the new slice, so it is
neither a success nor a failure of the job."""
_REPLACEMENT_FOR = "kueue.x-k8s.io/workload-slice-replacement-for"
"""Kueue's annotation on a new Workload slice: ``<namespace>/<name>`` of the slice it replaces."""
BATCH_KINDS = frozenset({"Job", "JobSet", "RayJob", "RayCluster", "PyTorchJob", "TFJob", "MPIJob", "XGBoostJob",
                         "PaddleJob", "JAXJob", "TrainJob"})
"""Owners of a Kueue Workload that run to an end, whose hours can be *in progress*: Kubernetes and Kubeflow
jobs, and KubeRay's RayJob and RayCluster (each the object whose deadline a Workload without one takes,
``_DEADLINE_OWNERS``, where the kind is listed).
An InferenceService, Notebook, Deployment or StatefulSet is admitted for good: it never finishes, so its
busy hours without a verified outcome are just that, never "in progress"."""
_DEADLINE_OWNERS: tuple[OwnerKind, ...] = (OwnerKind("RayCluster", "ray.io", "v1", "rayclusters"), *JOB_OWNERS)
"""The batch kinds whose deadline annotation a finished Workload without one takes: Kueue copies no job
annotation onto the Workload it creates. Each kind is one list per report; one not installed is skipped."""


def finished_jobs(objs: Sequence[dict[str, Any]], owners: DeadlineTable | None = None,
                  notes: list[str] | None = None) -> list[FinishedJob]:
    """Kueue Workloads with ``Finished=True``: when, why, and the deadline annotation.

    The deadline is read from the Workload, else from its owner (``owners``, keyed by namespace, kind,
    name, through ``owner_deadlines``): teams annotate the job they submit, and Kueue does not copy job
    annotations onto the Workload it creates. It is parsed as the snapshot parses it (RFC 3339 with a
    zone): a value that is not, an empty one included, is no deadline, and ``notes`` gets a line naming the
    object that carries it, so one bad annotation neither crashes the report nor passes unseen.

    A slice replaced by an elastic job's scale-up (``SLICE_REPLACED``) is skipped: the job has not ended.
    """
    out = []
    starts = _attempt_starts(objs)
    for obj in objs:
        meta = obj.get("metadata") or {}
        cond = next((c for c in (obj.get("status") or {}).get("conditions") or []
                     if c.get("type") == "Finished" and c.get("status") == "True"), None)
        finished_at = parse_time(cond.get("lastTransitionTime")) if cond else None
        if cond is None or finished_at is None or cond.get("reason") == SLICE_REPLACED:
            continue
        namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        refs = meta.get("ownerReferences") or []
        owner = next((r for r in refs if r.get("controller")), refs[0] if refs else {})
        owner_kind, owner_name = str(owner.get("kind") or ""), str(owner.get("name") or "")
        own = meta.get("annotations") or {}
        text = owner_deadlines(own, (namespace, owner_kind, owner_name), owners or {}).get(DEADLINE_ANNOTATION)
        where = (f"Workload {namespace}/{name}" if DEADLINE_ANNOTATION in own
                 else f"{owner_kind} {namespace}/{owner_name}")
        out.append(FinishedJob(
            namespace=namespace, workload=name, uid=str(meta.get("uid", "")),
            owner_kind=owner_kind or "Workload", owner_name=owner_name or name,
            finished_at=finished_at, reason=str(cond.get("reason", "")), deadline=_deadline(text, where, notes),
            created_at=starts.get((namespace, name))))
    return out


def _deadline(text: str | None, where: str, notes: list[str] | None) -> datetime | None:
    """``text`` as an aware datetime; None (and a note) when it is not RFC 3339 with a zone: the job is
    then judged as one without a deadline, never against a guessed time zone. An empty value is such a
    value, as the snapshot reports it (the annotation is there, with no time in it): only an absent
    annotation (None) is no deadline without a word."""
    if text is None:
        return None
    try:
        return parse_rfc3339(str(text))
    except ValueError as exc:
        if notes is not None:
            notes.append(f"{where}: annotation {DEADLINE_ANNOTATION}={str(text)!r} ignored ({exc}); "
                         "the job is counted as one without a deadline")
        return None


def _created(meta: dict[str, Any]) -> datetime | None:
    try:
        return parse_time(meta.get("creationTimestamp"))
    except ValueError:
        return None


def _attempt_starts(objs: Sequence[dict[str, Any]]) -> dict[tuple[str, str], datetime | None]:
    """(namespace, Workload) -> when its attempt began: its creation, or, for an elastic job's slice, the
    creation of the first slice of its chain (``_REPLACEMENT_FOR``), so that the pods the job ran before a
    scale-up stay pods of the attempt. A replaced slice already deleted ends the chain there."""
    metas = {(str(m.get("namespace", "")), str(m.get("name", ""))): m
             for m in ((o.get("metadata") or {}) for o in objs)}
    out: dict[tuple[str, str], datetime | None] = {}
    for key, meta in metas.items():
        first, seen = meta, {key}
        while True:
            ns, _, name = str((first.get("annotations") or {}).get(_REPLACEMENT_FOR) or "").partition("/")
            before = metas.get((ns, name))
            if before is None or (ns, name) in seen:
                break
            first = before
            seen.add((ns, name))
        out[key] = _created(first)
    return out


def running_jobs(objs: Sequence[dict[str, Any]]) -> list[RunningJob]:
    """Kueue Workloads of batch jobs (``BATCH_KINDS``) admitted (or holding quota) and not finished: jobs whose
    outcome is still to come."""
    out = []
    starts = _attempt_starts(objs)
    for obj in objs:
        meta = obj.get("metadata") or {}
        state = {c.get("type"): c.get("status") for c in (obj.get("status") or {}).get("conditions") or []}
        if state.get("Finished") == "True" or "True" not in (state.get("Admitted"), state.get("QuotaReserved")):
            continue
        refs = meta.get("ownerReferences") or []
        owner = next((r for r in refs if r.get("controller")), refs[0] if refs else {})
        if owner.get("kind") not in BATCH_KINDS:
            continue
        out.append(RunningJob(namespace=str(meta.get("namespace", "")), owner_kind=str(owner.get("kind") or "Workload"),
                              owner_name=str(owner.get("name") or meta.get("name", "")),
                              created_at=starts.get((str(meta.get("namespace", "")), str(meta.get("name", ""))))))
    return out


def running_at(finished: Sequence[FinishedJob] | None, running: Sequence[RunningJob], end: datetime) -> list[RunningJob]:
    """The batch jobs running at ``end`` (a window's end), from the Workloads as they are read now: those still
    running that were created by then, and those finished since that were created by then.

    The Workloads are listed when the report runs, not at the window's end: for the window before (the
    comparison), a job that ran then and has finished since would not be in progress, and one created since
    would be. A Workload without a creation time is kept: its pods are in progress only where they were seen in
    the window. A Workload deleted since (with its job) cannot be known, and is not.
    """
    def by_then(created: datetime | None) -> bool:
        return created is None or created <= end

    out = [r for r in running if by_then(r.created_at)]
    out += [RunningJob(namespace=f.namespace, owner_kind=f.owner_kind, owner_name=f.owner_name, created_at=f.created_at)
            for f in finished or () if f.owner_kind in BATCH_KINDS and f.finished_at > end and by_then(f.created_at)]
    return out


@dataclass
class Jobs:
    """What the Kubernetes API said about batch work: None for ``finished`` when it did not answer."""

    finished: list[FinishedJob] | None = None
    running: list[RunningJob] = field(default_factory=list)
    pod_owners: dict[tuple[str, str], str] = field(default_factory=dict)
    """(namespace, pod) of each running pod -> the name of the object that controls it (ownerReferences)."""
    requests: int = 0
    why: str | None = None
    failure: str | None = None
    """The configured Kubernetes API failed: its one line (``describe_failure``); None when it answered or
    is not configured (then only ``why`` says so: nothing failed)."""
    notes: list[str] = field(default_factory=list)
    """Data problems that did not stop the read, one line each (a deadline annotation that is not RFC 3339
    with a zone, naming the object): for the report's notes."""


def pod_owners(pods: Sequence[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """Each pod's controller by ``ownerReferences`` (a Job's or a RayCluster's pods name it directly)."""
    out = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        refs = meta.get("ownerReferences") or []
        owner = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
        if owner and owner.get("name"):
            out[(str(meta.get("namespace", "")), str(meta.get("name", "")))] = str(owner["name"])
    return out


def read_jobs(settings: GpuaasSettings) -> Jobs:
    """Finished and running Kueue Workloads, the deadline owners and the running pods' owners (paginated
    lists); the reason when the Kubernetes API is not configured or did not answer (batch outcomes are
    then unknown)."""
    if not (settings.kubeconfig or settings.in_cluster):
        return Jobs(why="Kubernetes API not configured (GPUAAS_KUBECONFIG or GPUAAS_IN_CLUSTER)")
    try:
        api = make_api_client(settings)
    except GpuaasError as exc:
        return Jobs(why=_kube_why(exc), failure=describe_failure(settings, "kube", exc))
    lister = KubeLister(api, settings)
    try:
        deadlines = read_deadline_owners(lister, _DEADLINE_OWNERS)
        owners = pod_owners(lister.running_pods())
        for version in KUEUE_VERSIONS:
            try:
                objs = lister.custom_objects(KUEUE_GROUP, version, "workloads")
            except NotFound:
                continue
            notes: list[str] = []
            finished = finished_jobs(objs, deadlines, notes)
            return Jobs(finished, running_jobs(objs), owners, lister.requests, notes=list(dict.fromkeys(notes)))
        return Jobs([], [], owners, lister.requests)
    except GpuaasError as exc:
        return Jobs(requests=lister.requests, why=_kube_why(exc), failure=describe_failure(settings, "kube", exc))
    finally:
        api.close()


def _kube_why(exc: GpuaasError) -> str:
    """``Kubernetes API at URL: …`` once: a source's error names its source itself, an API error status does not."""
    return str(exc) if isinstance(exc, SourceError) else f"Kubernetes API: {exc}"
