"""Workload transitions and the writes each one makes.

Every transition updates three things together, so they never disagree: the in-memory record,
the quota counters, and the store (the Workload's conditions and admission, the job's suspend
field, the pods). The transitions, with the conditions Kueue sets:

==================  ==========================================================================
admit               QuotaReserved=True, Admitted=True, ``status.admission``; job resumed, pods made
release (internal)  quota given back, pods deleted
hold                QuotaReserved=False(OnHold), Admitted=False; a client stopped the job
resume              QuotaReserved=False(Pending), Requeued=True; queued again, position kept (creation time)
deactivate          Evicted=True(Deactivated), QuotaReserved=False, Requeued=False(Deactivated)
reactivate          Requeued=True(Reactivated), Evicted kept until the next admission; queued again,
                    position kept (creation time)
preempt             Evicted=True(Preempted), Preempted=True(reason), QuotaReserved=False,
                    Requeued=True(Preempted); job suspended, queue position kept (creation time)
finish              Finished=True(Succeeded|Failed)
==================  ==========================================================================
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from ...quantity import GPU, format_quantity
from ..apiserver import ApiError, ObjectStore
from ._admission import Assignment
from ._jobs import JobView, owner_reference, pod_labels, suspend_patch
from ._model import PodSetInfo, ReconcileResult, WorkloadRecord, WorkloadState
from ._placement import GPU_INDICES_ANNOTATION, NodeBook, PlacedPod
from ._quota import QuotaBook, Usage
from ._status import rfc3339, state_conditions

__all__ = ["Engine", "usage_of"]

WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"


def usage_of(podsets: list[PodSetInfo], flavors: list[dict[str, str]]) -> Usage:
    """Quota charged for ``podsets`` under an admission's flavors (uncovered resources are free)."""
    usage: Usage = {}
    for podset, assigned in zip(podsets, flavors):
        for resource, flavor in assigned.items():
            amount = podset.per_pod.get(resource, 0) * podset.count
            usage[(flavor, resource)] = usage.get((flavor, resource), 0) + amount
    return usage


class Engine:
    """Shared state of one controller plus the transitions; see the table in the module docstring."""

    def __init__(self, store: ObjectStore, clock: Callable[[], datetime]) -> None:
        self.store = store
        self.clock = clock
        self.book = QuotaBook()
        self.nodes = NodeBook()
        self.records: dict[tuple[str, str], WorkloadRecord] = {}
        self.jobs: dict[tuple[str, str, str], JobView] = {}
        self.flavor_labels: dict[str, dict[str, str]] = {}
        self.priorities: dict[str, int] = {}  # WorkloadPriorityClass name -> value
        self.owned: dict[tuple[str, str, str], set[tuple[str, str]]] = {}  # job -> its Workloads
        self.result = ReconcileResult()
        self._seq = 0

    def now(self) -> datetime:
        moment = self.clock()
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    # --- store helpers -----------------------------------------------------------------------
    def _write(self, record: WorkloadRecord, changes: list[tuple[str, bool, str, str]],
               **status: Any) -> None:
        """Apply condition changes (and other status fields; None deletes) to the stored Workload.

        The conditions come from the record's copy (refreshed whenever the Workload is read), so a
        transition costs one store write, not a read and a write.
        """
        record.conditions = state_conditions(record.conditions, changes, self.now())
        try:
            self.store.patch("Workload", record.namespace, record.name,
                             {"status": {"conditions": record.conditions, **status}}, subresource="status")
        except ApiError as exc:
            if exc.status != 404:
                raise

    def _delete(self, kind: str, namespace: str, name: str) -> None:
        try:
            self.store.delete(kind, namespace, name)
        except ApiError as exc:
            if exc.status != 404:
                raise

    def _job_of(self, record: WorkloadRecord) -> JobView | None:
        owner = record.owner
        return self.jobs.get((owner["kind"], record.namespace, owner["name"])) if owner else None

    def adopt(self, record: WorkloadRecord) -> None:
        """Start tracking ``record`` (indexed by its owning job)."""
        self.records[record.key] = record
        if record.owner:
            self.owned.setdefault((record.owner["kind"], record.namespace, record.owner["name"]), set()).add(record.key)

    def disown(self, record: WorkloadRecord) -> None:
        self.records.pop(record.key, None)
        if record.owner:
            job = (record.owner["kind"], record.namespace, record.owner["name"])
            keys = self.owned.get(job)
            if keys is not None:
                keys.discard(record.key)
                if not keys:
                    del self.owned[job]

    def set_job_suspended(self, view: JobView, suspended: bool) -> JobView:
        patch = suspend_patch(view, suspended)
        if patch is None:
            return view
        try:
            self.store.patch(view.kind, view.namespace, view.name, patch)
        except ApiError as exc:
            if exc.status != 404:
                raise
        updated = replace(view, suspended=suspended, stopped=suspended)
        self.jobs[view.key] = updated
        return updated

    # --- transitions -------------------------------------------------------------------------
    def admit(self, cq: str, record: WorkloadRecord, assignment: Assignment) -> None:
        flavors, usage = assignment
        self.book.add(cq, usage)
        record.state, record.cluster_queue, record.flavors, record.usage = WorkloadState.RESERVED, cq, flavors, usage
        record.pending_message = ""
        record.admitted_at = self.now()
        admission = {
            "clusterQueue": cq,
            "podSetAssignments": [
                {
                    "name": podset.name,
                    "flavors": dict(assigned),
                    "resourceUsage": {r: format_quantity(r, m * podset.count) for r, m in podset.per_pod.items()},
                    "count": podset.count,
                }
                for podset, assigned in zip(record.podsets, flavors)
            ],
        }
        self._write(record, [
            ("QuotaReserved", True, "QuotaReserved", f"Quota reserved in ClusterQueue {cq}"),
            ("Admitted", True, "Admitted", "The workload is admitted"),
        ] + self._clear_evicted(record), admission=admission)
        self.result.admitted.append(f"{record.namespace}/{record.name}")
        view = self._job_of(record)
        if view is not None:
            self.set_job_suspended(view, False)
            self.start_pods(record)

    @staticmethod
    def _clear_evicted(record: WorkloadRecord) -> list[tuple[str, bool, str, str]]:
        """Kueue's ``resetActiveCondition`` on admission: Evicted and Preempted turn False."""
        changes = []
        for kind in ("Evicted", "Preempted"):
            found = next((c for c in record.conditions if c.get("type") == kind and c.get("status") == "True"), None)
            if found is not None:
                changes.append((kind, False, "QuotaReserved", f"Previously: {found.get('message', '')}"))
        return changes

    def preempt(self, record: WorkloadRecord, reason: str, message: str) -> float:
        """Evicted(Preempted) + Preempted(reason), quota released, requeued; returns the GPU-hours lost.

        The lost work is what ran since the last admission: a trace job restarts from scratch.
        The queue position is kept (Kueue orders a preempted Workload by its creation time).
        """
        since = record.admitted_at or self.now()
        gpus = sum(amount for (_, resource), amount in record.usage.items() if resource == GPU) / 1000
        lost = gpus * max(0.0, (self.now() - since).total_seconds()) / 3600
        self.release(record)
        record.state, record.admitted_at = WorkloadState.PENDING, None
        self._write(record, [("Evicted", True, "Preempted", message), ("Preempted", True, reason, message)]
                    + self._unreserve("Pending", message) + [("Requeued", True, "Preempted", message)],
                    admission=None)
        view = self._job_of(record)
        if view is not None:
            self.set_job_suspended(view, True)
        self.result.preempted.append(f"{record.namespace}/{record.name}")
        self.result.preempted_gpu_hours += lost
        return lost

    def release(self, record: WorkloadRecord) -> None:
        if record.state is WorkloadState.RESERVED and record.cluster_queue:
            self.book.add(record.cluster_queue, record.usage, -1)
            self.result.released.append(f"{record.namespace}/{record.name}")
        self.stop_pods(record)
        record.cluster_queue, record.flavors, record.usage = None, [], {}

    def _unreserve(self, reason: str, message: str) -> list[tuple[str, bool, str, str]]:
        return [("QuotaReserved", False, reason, message), ("Admitted", False, "NoReservation", "The workload has no reservation")]

    def hold(self, record: WorkloadRecord, message: str) -> None:
        self.release(record)
        record.state = WorkloadState.HELD
        self._write(record, self._unreserve("OnHold", message), admission=None)

    def resume(self, record: WorkloadRecord, message: str) -> None:
        # The queue position is kept: Kueue orders by creation time (``GetQueueOrderTimestamp``).
        record.state = WorkloadState.PENDING
        self._write(record, [("QuotaReserved", False, "Pending", message),
                             ("Requeued", True, "Resumed", message)])

    def deactivate(self, record: WorkloadRecord) -> None:
        self.release(record)
        record.state = WorkloadState.INACTIVE
        message = "The workload is deactivated"
        self._write(record, [("Evicted", True, "Deactivated", message)] + self._unreserve("Pending", message)
                    + [("Requeued", False, "Deactivated", message)], admission=None, requeueState=None)
        view = self._job_of(record)
        if view is not None:
            self.set_job_suspended(view, True)

    def reactivate(self, record: WorkloadRecord) -> None:
        """Pending again, at its creation-time position: Kueue's queue order is the creation timestamp
        (``GetQueueOrderTimestamp``) unless a PodsReady timeout or an admission check evicted it.
        ``Evicted`` stays true until the next admission clears it, as the real Kueue v0.17 leaves it."""
        record.state = WorkloadState.PENDING
        self._write(record, [("Requeued", True, "Reactivated", "The workload was reactivated")])

    def finish(self, record: WorkloadRecord, succeeded: bool, message: str) -> None:
        self.release(record)
        record.state = WorkloadState.FINISHED
        reason = "Succeeded" if succeeded else "Failed"
        self._write(record, [("Finished", True, reason, message or f"Job finished: {reason.lower()}")])

    def delete_workload(self, record: WorkloadRecord) -> None:
        self.release(record)
        self.disown(record)
        self._delete("Workload", record.namespace, record.name)
        self.result.deleted.append(f"{record.namespace}/{record.name}")

    def shrink(self, record: WorkloadRecord, podsets: list[PodSetInfo]) -> None:
        """Elastic scale-down in place: lower counts, less usage, the reservation stays."""
        assert record.cluster_queue is not None
        new_usage = usage_of(podsets, record.flavors)
        self.book.add(record.cluster_queue, record.usage, -1)
        self.book.add(record.cluster_queue, new_usage)
        counts = {p.name: p.count for p in podsets}
        record.podsets, record.usage = podsets, new_usage
        for entry in [e for e in record.pods if e[1] >= counts.get(e[0], 0)]:
            record.pods.remove(entry)
            self.nodes.release(record.namespace, entry[2])
            self._delete("Pod", record.namespace, entry[2])

    def mark_pending(self, record: WorkloadRecord, reason: str, message: str) -> None:
        """QuotaReserved=False with why; written only when the reason, not just a number in it, changes.

        ("..., 2 more needed" becoming "..., 3 more needed" is not worth rewriting every queued
        Workload each time some quota moves.)
        """
        if _message_key(record.pending_message) == _message_key(message):
            return
        record.pending_message = message
        self._write(record, [("QuotaReserved", False, reason, message)])

    # --- pods --------------------------------------------------------------------------------
    def start_pods(self, record: WorkloadRecord) -> None:
        view = self._job_of(record)
        if view is None:
            return
        for podset, assigned in zip(record.podsets, record.flavors):
            selector: dict[str, str] = {}
            for flavor in dict.fromkeys(assigned.values()):
                selector.update(self.flavor_labels.get(flavor, {}))
            for index in range(podset.count):
                name = _pod_name(view, record, podset.name, index)
                pod = PlacedPod(record.namespace, name, record.name, view.kind, view.name,
                                podset.per_pod.get(GPU, 0) // 1000, selector)
                self.nodes.place(pod)
                self.nodes.pods[(pod.namespace, name)] = pod
                record.pods.append((podset.name, index, name))
                self.store.create(self._pod_object(view, record, podset, pod))
                self.result.pods_created += 1

    def _pod_object(self, view: JobView, record: WorkloadRecord, podset: PodSetInfo, pod: PlacedPod) -> dict[str, Any]:
        template = podset.template
        meta = template.get("metadata") or {}
        labels = {**{str(k): str(v) for k, v in (meta.get("labels") or {}).items()}, **pod_labels(view, podset.name)}
        annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
        annotations[WORKLOAD_ANNOTATION] = record.name
        spec = dict(template.get("spec") or {})
        if pod.selector:
            spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **pod.selector}
        obj: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": pod.name, "namespace": pod.namespace, "labels": labels, "annotations": annotations,
                         "ownerReferences": [owner_reference(view)]},
            "spec": spec,
        }
        self._bind(obj, pod)
        return obj

    def _bind(self, obj: dict[str, Any], pod: PlacedPod) -> None:
        now = rfc3339(self.now())
        if pod.node is None:
            obj["status"] = {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": now,
                 "message": f"0/{self.nodes.count} nodes are available: insufficient {GPU}"}]}
            return
        obj["spec"]["nodeName"] = pod.node
        if pod.indices:
            obj["metadata"]["annotations"][GPU_INDICES_ANNOTATION] = ",".join(map(str, pod.indices))
        obj["status"] = {"phase": "Running", "startTime": now, "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
            {"type": "Ready", "status": "True", "lastTransitionTime": now}]}

    def stop_pods(self, record: WorkloadRecord) -> None:
        for _, _, name in record.pods:
            self.nodes.release(record.namespace, name)
            self._delete("Pod", record.namespace, name)
        record.pods = []

    def retry_unplaced(self) -> None:
        """Bind pods left Pending once GPUs free up (the kube-scheduler's retry)."""
        for pod in sorted(self.nodes.unplaced(), key=lambda p: (p.namespace, p.name)):
            if not self.nodes.place(pod):
                self.result.pods_unplaced += 1
                continue
            try:
                obj = self.store.get("Pod", pod.namespace, pod.name)
            except ApiError:
                continue
            self._bind(obj, pod)
            self.store.patch("Pod", pod.namespace, pod.name, {"spec": {"nodeName": pod.node},
                                                                "metadata": {"annotations": obj["metadata"]["annotations"]}})
            self.store.patch("Pod", pod.namespace, pod.name, {"status": obj["status"]}, subresource="status")


def _message_key(message: str) -> str:
    return re.sub(r", \S+ more needed", "", message)


def _pod_name(view: JobView, record: WorkloadRecord, podset: str, index: int) -> str:
    """Names the job's own controller would choose (KubeRay, StatefulSet, ReplicaSet)."""
    digest = hashlib.sha1(f"{record.uid}/{podset}/{index}".encode()).hexdigest()[:5]
    if view.kind == "RayCluster":
        return f"{view.name}-head-{digest}" if podset == "head" else f"{view.name}-{podset}-worker-{digest}"
    if view.kind in ("Notebook", "StatefulSet"):
        return f"{view.name}-{index}"
    if view.kind == "InferenceService":
        return f"{view.name}-predictor-{digest}"
    return f"{view.name}-{digest}"
