"""Bringing the controller's records in line with the store: Workloads, then jobs.

Everything here is level-triggered: it compares what the store says *now* with the record and
acts on the difference, so replaying an event, or seeing the controller's own writes come back,
changes nothing. That is what makes ``attach()`` (dirty keys only) and a full resync agree.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ._jobs import JobView, job_view, owner_reference
from ._lifecycle import Engine, usage_of
from ._model import PodSetInfo, WorkloadRecord, WorkloadState
from ._requests import pod_requests
from ._status import condition

__all__ = ["forget_workload", "ingest_workload", "parse_time", "record_from_object", "sync_job"]

Shape = list[tuple[str, int, tuple[tuple[str, int], ...]]]


def parse_time(text: str | None, default: datetime) -> datetime:
    if not text:
        return default
    return datetime.fromisoformat(text).astimezone(UTC)


def _podsets(spec: dict[str, Any]) -> list[PodSetInfo]:
    return [
        PodSetInfo(ps.get("name", "main"), int(ps.get("count", 1)),
                   pod_requests((ps.get("template") or {}).get("spec") or {}), ps.get("template") or {})
        for ps in spec.get("podSets") or []
    ]


def _shape(podsets: list[PodSetInfo]) -> Shape:
    return [(p.name, p.count, tuple(sorted(p.per_pod.items()))) for p in podsets]


def _is_true(conditions: list[dict[str, Any]], kind: str) -> bool:
    found = condition(conditions, kind)
    return bool(found and found.get("status") == "True")


def record_from_object(engine: Engine, obj: dict[str, Any]) -> WorkloadRecord:
    """A record for a Workload as stored, so a controller can pick up an existing cluster."""
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    now = engine.now()
    created = parse_time(meta.get("creationTimestamp"), now)
    conditions = status.get("conditions") or []
    queued_at = created  # Kueue's queue order: the creation time, also after a requeue
    owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
    record = WorkloadRecord(
        namespace=meta["namespace"], name=meta["name"], uid=meta.get("uid", ""),
        queue_name=spec.get("queueName", ""), priority=engine_priority(engine, spec), created=created,
        queued_at=queued_at, podsets=_podsets(spec), active=spec.get("active", True) is not False,
        owner=owner, seq=engine.next_seq(), conditions=list(conditions),
    )
    reserved = condition(conditions, "QuotaReserved") or {}
    admission = status.get("admission") or {}
    if _is_true(conditions, "Finished"):
        record.state = WorkloadState.FINISHED
    elif not record.active:
        record.state = WorkloadState.INACTIVE
    elif reserved.get("status") == "True" and admission.get("clusterQueue"):
        by_name = {a.get("name"): dict(a.get("flavors") or {}) for a in admission.get("podSetAssignments") or []}
        record.state, record.cluster_queue = WorkloadState.RESERVED, admission["clusterQueue"]
        record.admitted_at = parse_time(reserved.get("lastTransitionTime"), now)
        record.flavors = [by_name.get(p.name, {}) for p in record.podsets]
        record.usage = usage_of(record.podsets, record.flavors)
    elif reserved.get("reason") == "OnHold":
        record.state = WorkloadState.HELD
    else:
        record.pending_message = reserved.get("message", "")
    return record


def engine_priority(engine: Engine, spec: dict[str, Any]) -> int:
    if spec.get("priority") is not None:
        return int(spec["priority"])
    ref = spec.get("priorityClassRef") or {}
    return engine.priorities.get(ref.get("name", ""), 0) if ref.get("kind") == "WorkloadPriorityClass" else 0


def ingest_workload(engine: Engine, obj: dict[str, Any]) -> None:
    """Take in a Workload from the store: a new one, or a client's edit of a known one."""
    meta, spec = obj["metadata"], obj.get("spec") or {}
    key = (meta["namespace"], meta["name"])
    record = engine.records.get(key)
    if record is None or record.uid != meta.get("uid", ""):
        if record is not None:
            engine.release(record)
        record = record_from_object(engine, obj)
        if record.state is WorkloadState.RESERVED and record.cluster_queue:
            engine.book.add(record.cluster_queue, record.usage)
        engine.adopt(record)
        return
    record.conditions = list((obj.get("status") or {}).get("conditions") or [])
    if record.state is WorkloadState.FINISHED:
        return
    if _is_true(record.conditions, "Finished"):
        engine.release(record)  # a client finished it
        record.state = WorkloadState.FINISHED
        return
    active = spec.get("active", True) is not False
    if not active and record.state is not WorkloadState.INACTIVE:
        engine.deactivate(record)
        return
    if active and record.state is WorkloadState.INACTIVE:
        engine.reactivate(record)
    record.priority = engine_priority(engine, spec)
    podsets = _podsets(spec)
    if _shape(podsets) == _shape(record.podsets):
        return
    if record.state is WorkloadState.RESERVED:
        if _shrinks(record.podsets, podsets):
            engine.shrink(record, podsets)
        # Any other change of an admitted Workload's pod sets is refused by Kueue's webhook.
    else:
        record.podsets = podsets
        record.queue_name = spec.get("queueName", record.queue_name)


def _shrinks(old: list[PodSetInfo], new: list[PodSetInfo]) -> bool:
    return [(p.name, p.per_pod) for p in old] == [(p.name, p.per_pod) for p in new] and all(
        n.count <= o.count for o, n in zip(old, new))


def forget_workload(engine: Engine, key: tuple[str, str]) -> tuple[str, str, str] | None:
    """A client deleted a Workload: give its quota back; returns the owning job to re-sync."""
    record = engine.records.get(key)
    if record is None:
        return None
    engine.release(record)
    engine.disown(record)
    return (record.owner["kind"], record.namespace, record.owner["name"]) if record.owner else None


def sync_job(engine: Engine, kind: str, namespace: str, name: str, obj: dict[str, Any] | None) -> None:
    """Make a job's Workloads match it: create, stop, resume, resize or delete them."""
    job_key = (kind, namespace, name)
    view = job_view(obj) if obj is not None else None
    owned = sorted(engine.owned.get(job_key, ()))
    if view is None:
        for key in owned:
            engine.delete_workload(engine.records[key])
        engine.jobs.pop(job_key, None)
        return
    engine.jobs[job_key] = view
    desired = {wl_name for wl_name, _ in view.workloads}
    for key in owned:
        if key[1] not in desired:
            engine.delete_workload(engine.records[key])
    for wl_name, podsets in view.workloads:
        view = _sync_one(engine, engine.jobs[job_key], wl_name, podsets)


def _sync_one(engine: Engine, view: JobView, wl_name: str, podsets: list[PodSetInfo] | None) -> JobView:
    record = engine.records.get((view.namespace, wl_name))
    stop_message = f"{view.kind} {view.namespace}/{view.name} was stopped by a client"
    if record is None:
        if podsets is None:
            return view
        record = create_workload(engine, view, wl_name, podsets)
        if view.stopped and not view.suspend_gated:
            engine.hold(record, stop_message)
    elif record.state is not WorkloadState.FINISHED:
        if view.suspend_gated:
            # Kueue owns a suspend-field job's ``spec.suspend``: a client's suspend of an admitted
            # one is set back (the quota stays reserved); stopping it means deactivating its Workload.
            if record.state is WorkloadState.RESERVED and view.suspended:
                view = engine.set_job_suspended(view, False)
        elif view.stopped and record.state in (WorkloadState.PENDING, WorkloadState.RESERVED):
            engine.hold(record, stop_message)
        elif not view.stopped and record.state is WorkloadState.HELD:
            engine.resume(record, f"{view.kind} {view.namespace}/{view.name} was resumed")
        if podsets is not None and _shape(podsets) != _shape(record.podsets):
            record = _resize(engine, view, record, podsets)
    if view.suspend_gated and record.state is not WorkloadState.RESERVED and not view.suspended:
        view = engine.set_job_suspended(view, True)
    return view


def _resize(engine: Engine, view: JobView, record: WorkloadRecord, podsets: list[PodSetInfo]) -> WorkloadRecord:
    """Elastic scale-down shrinks in place; any other change of an admitted job restarts it."""
    spec_patch = {"spec": {"podSets": _podset_specs(podsets)}}
    if record.state is not WorkloadState.RESERVED:
        record.podsets = podsets
        engine.store.patch("Workload", record.namespace, record.name, spec_patch)
        return record
    if view.elastic and _shrinks(record.podsets, podsets):
        engine.shrink(record, podsets)
        engine.store.patch("Workload", record.namespace, record.name, spec_patch)
        return record
    # Non-elastic: Kueue suspends the job, deletes the Workload and creates a new one.
    engine.delete_workload(record)
    view = engine.set_job_suspended(view, True)
    return create_workload(engine, view, record.name, podsets)


def _podset_specs(podsets: list[PodSetInfo]) -> list[dict[str, Any]]:
    return [{"name": p.name, "count": p.count, "template": _template(p.template)} for p in podsets]


def _template(template: dict[str, Any]) -> dict[str, Any]:
    """The pod template as a Workload stores it: every container named, at least one container."""
    spec = dict(template.get("spec") or {})
    containers = [dict(c, name=c.get("name") or f"container-{i}") for i, c in enumerate(spec.get("containers") or [])]
    spec["containers"] = containers or [{"name": "main"}]
    out = {"spec": spec}
    if template.get("metadata"):
        out["metadata"] = template["metadata"]
    return out


def create_workload(engine: Engine, view: JobView, name: str, podsets: list[PodSetInfo]) -> WorkloadRecord:
    spec: dict[str, Any] = {"queueName": view.queue_name, "podSets": _podset_specs(podsets), "active": True}
    if view.priority_class and view.priority_class in engine.priorities:
        spec["priority"] = engine.priorities[view.priority_class]
        spec["priorityClassRef"] = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                    "name": view.priority_class}
    obj = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": view.namespace, "labels": {"kueue.x-k8s.io/job-uid": view.uid},
                     "ownerReferences": [owner_reference(view)]},
        "spec": spec,
    }
    record = record_from_object(engine, engine.store.create(obj))
    engine.adopt(record)
    engine.result.created.append(f"{record.namespace}/{record.name}")
    return record
