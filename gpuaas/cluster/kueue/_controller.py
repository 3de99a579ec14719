"""``KueueController``: Kueue's admission, run as explicit passes over the embedded cluster.

A pass (``reconcile()``) has numbered phases, like Kueue's scheduler cycle:

1. read the small cluster-scoped objects (ClusterQueues, Cohorts, LocalQueues, ResourceFlavors,
   WorkloadPriorityClasses; Nodes when they changed);
2. take in Workloads: all of them on the first pass or when not attached, otherwise only those
   a write touched since the last pass;
3. sync jobs (RayCluster, Notebook, InferenceService, StatefulSet, Deployment) the same way;
4. schedule: admit pending Workloads per ClusterQueue (from the namespaces its ``namespaceSelector``
   selects; none where it has none), preempting where ``spec.preemption``
   allows (see ``_admission`` and ``_preemption``);
5. bind pods still Pending where GPUs have freed up;
6. write ClusterQueue and LocalQueue status where it changed.

Client writes (``spec.active``, suspend, replicas, stop annotations) take effect on the next pass;
nothing is acted on inside the store's write callback. Passes are serialised by one lock and are
deterministic for a given store and clock. A pass that wrote nothing, followed by no write to the
store, would write nothing again (time only stamps transitions), so it is not repeated: a long
history on a saturated fleet otherwise re-tries every pending Workload's preemption each step.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from gpuaas.models import LabelSelector

from ..apiserver import ApiError, ObjectStore
from ._admission import Preemption, schedule
from ._jobs import JOB_KINDS
from ._lifecycle import Engine
from ._model import GpuAssignment, ReconcileResult, WorkloadRecord, WorkloadState
from ._placement import PlacedPod
from ._preemption import AdmittedIndex, Target, preemption_message
from ._quota import ClusterQueueQuota, Usage
from ._status import set_condition
from ._sync import forget_workload, ingest_workload, sync_job
from ._visibility import pending_summary

__all__ = ["KueueController"]

_CLUSTER_KINDS = ("ClusterQueue", "Cohort", "LocalQueue", "ResourceFlavor", "WorkloadPriorityClass")
_WATCHED = frozenset((*_CLUSTER_KINDS, "Workload", "Node", "Pod", *JOB_KINDS))

DirtyKey = tuple[str, str, str]

PENDING_STATUS_DEPTH = 20
"""Only the first 20 inadmissible Workloads of a ClusterQueue (in queue order) get their
``QuotaReserved=False`` reason written in a pass. Kueue writes it for every Workload it tries, but
writing 40,000 conditions on a full queue costs more than the whole pass; Workloads further back
keep their last condition, or none (which still reads as pending), until they move up."""


class KueueController:
    """Emulates Kueue's controllers against an ``ObjectStore``; see the module docstring."""

    def __init__(self, store: ObjectStore, clock: Callable[[], datetime]) -> None:
        self._store = store
        self._engine = Engine(store, clock)
        self._lock = threading.RLock()
        self._dirty: set[DirtyKey] = set()
        self._dirty_lock = threading.Lock()
        self._attached = False
        self._synced = False
        self._writer: int | None = None  # the thread running a pass, while it runs
        self._lq_to_cq: dict[tuple[str, str], str] = {}
        self._inactive_cqs: dict[str, str] = {}  # name -> why
        self._closed: dict[str, LabelSelector] = {}  # name -> a namespaceSelector that is not ``{}``
        self._namespace_labels: dict[str, dict[str, str]] = {}
        self._written: dict[tuple[str, str, str], dict[str, Any]] = {}  # last status written per queue
        self._quiet: tuple[str, ReconcileResult] | None = None  # (store rv, result) of a pass that wrote nothing

    # --- events ------------------------------------------------------------------------------
    def attach(self) -> None:
        """Watch the store so later passes only look at what changed."""
        with self._lock:
            if not self._attached:
                self._store.subscribe(self._on_event)
                self._attached = True

    def _on_event(self, event_type: str, obj: dict[str, Any]) -> None:
        """Remember what a client changed. The store calls back in the writing thread, so events
        raised while this controller itself writes (inside a pass) are its own and are skipped."""
        if threading.get_ident() == self._writer:
            return
        kind = obj.get("kind", "")
        if kind == "Pod" and event_type != "DELETED":
            return
        if kind in _WATCHED:
            meta = obj.get("metadata") or {}
            with self._dirty_lock:
                self._dirty.add((kind, meta.get("namespace") or "", meta.get("name", "")))

    # --- the pass ----------------------------------------------------------------------------
    def reconcile(self) -> ReconcileResult:
        """One scheduling pass (phases in the module docstring)."""
        with self._lock:
            rv = self._store.resource_version
            if self._quiet is not None and self._quiet[0] == rv and self._attached and self._synced:
                with self._dirty_lock:
                    unchanged = not self._dirty
                if unchanged:  # same store, same clock-free inputs: the pass would write nothing again
                    return replace(self._quiet[1])
            self._writer = threading.get_ident()
            try:
                result = self._pass()
            finally:
                self._writer = None
            self._quiet = (rv, result) if self._store.resource_version == rv else None
            return result

    def _pass(self) -> ReconcileResult:
        engine = self._engine
        engine.result = result = ReconcileResult()
        full = not (self._attached and self._synced)
        with self._dirty_lock:
            dirty, self._dirty = self._dirty, set()
        self._read_cluster(full or any(k[0] == "Node" for k in dirty))
        resync_jobs = self._sync_workloads(full, dirty)
        self._sync_jobs(full, dirty | resync_jobs)
        self._forget_deleted_pods(dirty)
        self._schedule()
        engine.retry_unplaced()
        result.pending = self._write_queue_statuses()
        self._synced = True
        return result

    def _read_cluster(self, nodes: bool) -> None:
        engine, store = self._engine, self._store
        flavors = {f["metadata"]["name"]: dict((f.get("spec") or {}).get("nodeLabels") or {})
                   for f in store.list("ResourceFlavor")}
        engine.flavor_labels = flavors
        engine.priorities = {w["metadata"]["name"]: int(w.get("value", 0)) for w in store.list("WorkloadPriorityClass")}
        queues = [ClusterQueueQuota.from_object(cq) for cq in store.list("ClusterQueue")]
        engine.book.set_queues(queues, store.list("Cohort"))
        self._inactive_cqs = {}
        for cq in queues:
            missing = sorted({f for _, names in cq.groups for f in names} - flavors.keys())
            if missing:
                self._inactive_cqs[cq.name] = f"Can't admit new workloads: references missing ResourceFlavor(s): {missing}"
        self._lq_to_cq = {(lq["metadata"]["namespace"], lq["metadata"]["name"]): (lq.get("spec") or {}).get(
            "clusterQueue", "") for lq in store.list("LocalQueue")}
        self._closed = {}
        for obj in store.list("ClusterQueue"):
            try:
                selector = LabelSelector.parse((obj.get("spec") or {}).get("namespaceSelector"))
            except ValueError:  # the API server's schema keeps such a selector out
                continue
            if selector.nothing or selector.requirements:
                self._closed[obj["metadata"]["name"]] = selector
        self._namespace_labels = {ns["metadata"]["name"]: dict((ns.get("metadata") or {}).get("labels") or {})
                                  for ns in store.list("Namespace")} if self._closed else {}
        if nodes:
            engine.nodes.set_nodes(store.list("Node"))

    def _sync_workloads(self, full: bool, dirty: set[DirtyKey]) -> set[DirtyKey]:
        """Take in Workloads; returns jobs whose Workload a client deleted (Kueue recreates it)."""
        engine, resync = self._engine, set()
        if full:
            seen = set()
            for obj in self._store.list("Workload"):
                seen.add((obj["metadata"]["namespace"], obj["metadata"]["name"]))
                ingest_workload(engine, obj)
            gone = [key for key in engine.records if key not in seen]
        else:
            gone = []
            for _, namespace, name in sorted(k for k in dirty if k[0] == "Workload"):
                found = self._get("Workload", namespace, name)
                if found is None:
                    gone.append((namespace, name))
                else:
                    ingest_workload(engine, found)
        for key in gone:
            job = forget_workload(engine, key)
            if job is not None:
                resync.add(job)
        return resync

    def _sync_jobs(self, full: bool, dirty: set[DirtyKey]) -> None:
        engine = self._engine
        if full:
            present: set[DirtyKey] = set()
            for kind in JOB_KINDS:
                for obj in self._store.list(kind):
                    meta = obj["metadata"]
                    present.add((kind, meta["namespace"], meta["name"]))
                    sync_job(engine, kind, meta["namespace"], meta["name"], obj)
            for key in sorted((set(engine.owned) | set(engine.jobs)) - present):
                sync_job(engine, *key, None)
            return
        for kind, namespace, name in sorted(k for k in dirty if k[0] in JOB_KINDS):
            sync_job(engine, kind, namespace, name, self._get(kind, namespace, name))

    def _forget_deleted_pods(self, dirty: set[DirtyKey]) -> None:
        """A client deleted one of our pods: its GPUs are free again."""
        for _, namespace, name in sorted(k for k in dirty if k[0] == "Pod"):
            if (namespace, name) in self._engine.nodes.pods and self._get("Pod", namespace, name) is None:
                self._engine.nodes.release(namespace, name)

    def _get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self._store.get(kind, namespace or None, name)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def _schedule(self) -> None:
        """Queue pending Workloads per ClusterQueue in admission order, then admit what fits."""
        engine = self._engine
        queues: dict[str, list[WorkloadRecord]] = {}
        for record in engine.records.values():
            if record.state is not WorkloadState.PENDING:
                continue
            cq = self._lq_to_cq.get((record.namespace, record.queue_name))
            if cq is None:
                engine.mark_pending(record, "Inadmissible", f"LocalQueue {record.queue_name} doesn't exist")
                continue
            if cq not in engine.book.queues:
                engine.mark_pending(record, "Inadmissible", f"ClusterQueue {cq} doesn't exist")
                continue
            if cq in self._closed and not self._closed[cq].selects(self._namespace_labels.get(record.namespace, {})):
                engine.mark_pending(record, "Pending", "Workload namespace doesn't match ClusterQueue selector")
                continue
            queues.setdefault(cq, []).append(record)
        for records in queues.values():
            records.sort(key=WorkloadRecord.order_key)
        runnable = {cq: records for cq, records in queues.items() if cq not in self._inactive_cqs}
        for cq, records in queues.items():
            if cq in self._inactive_cqs:
                for record in records:
                    engine.mark_pending(record, "Inadmissible", f"ClusterQueue {cq} is inactive")
        failures: dict[str, int] = {}

        def reject(cq: str, record: WorkloadRecord, message: str) -> None:
            failures[cq] = failures.get(cq, 0) + 1
            if failures[cq] <= PENDING_STATUS_DEPTH:
                engine.mark_pending(record, "Pending", message)

        schedule(engine.book, runnable, engine.admit, reject, self._preemption())

    def _preemption(self) -> Preemption | None:
        """The preemption hook, when some ClusterQueue's ``spec.preemption`` allows any."""
        engine = self._engine
        if not any(cq.preemption.enabled for cq in engine.book.queues.values()):
            return None
        admitted = AdmittedIndex(r for r in engine.records.values() if r.state is WorkloadState.RESERVED)

        def evict(target: Target, preemptor: WorkloadRecord, cq: str) -> None:
            victim = target.record
            message = preemption_message(preemptor, self._cq_path(cq), self._cq_path(victim.cluster_queue or ""),
                                         target.reason)
            engine.preempt(victim, target.reason, message)

        return Preemption(engine.book, admitted, evict)

    def _cq_path(self, cq: str) -> str:
        """``/cohort/queue`` as Kueue's ``buildCQPath`` writes it (flat cohorts only)."""
        quota = self._engine.book.queues.get(cq)
        return f"/{quota.cohort}/{cq}" if quota is not None and quota.cohort else f"/{cq}"

    # --- queue status --------------------------------------------------------------------------
    def _write_queue_statuses(self) -> int:
        """Write every queue's counts and usage from the records; returns the pending total."""
        engine = self._engine
        pending: dict[str, int] = {}
        reserving: dict[str, int] = {}
        lq_counts: dict[tuple[str, str], list[int]] = {}
        lq_usage: dict[tuple[str, str], Usage] = {}
        for record in engine.records.values():
            lq = (record.namespace, record.queue_name)
            if record.state is WorkloadState.RESERVED and record.cluster_queue:
                reserving[record.cluster_queue] = reserving.get(record.cluster_queue, 0) + 1
                lq_counts.setdefault(lq, [0, 0])[1] += 1
                usage = lq_usage.setdefault(lq, {})
                for fr, amount in record.usage.items():
                    usage[fr] = usage.get(fr, 0) + amount
            elif record.state is WorkloadState.PENDING:
                lq_counts.setdefault(lq, [0, 0])[0] += 1
                cq_name = self._lq_to_cq.get(lq)
                if cq_name is not None:
                    pending[cq_name] = pending.get(cq_name, 0) + 1
        for name, cq in sorted(engine.book.queues.items()):
            flavors = engine.book.flavors_status(name, cq.usage)
            why = self._inactive_cqs.get(name)
            active = ("Active", why is None, "FlavorNotFound" if why else "Ready", why or "Can admit new workloads")
            self._put("ClusterQueue", None, name, {
                "pendingWorkloads": pending.get(name, 0), "reservingWorkloads": reserving.get(name, 0),
                "admittedWorkloads": reserving.get(name, 0), "flavorsReservation": flavors, "flavorsUsage": flavors,
            }, active)
        for (namespace, name), cq_name in sorted(self._lq_to_cq.items()):
            counts = lq_counts.get((namespace, name), [0, 0])
            known = cq_name in engine.book.queues
            flavors = engine.book.flavors_status(cq_name, lq_usage.get((namespace, name), {}),
                                                 with_borrowed=False) if known else []
            active = ("Active", known, "Ready" if known else "ClusterQueueDoesNotExist",
                      "Can submit new workloads to localQueue" if known else f"ClusterQueue {cq_name} doesn't exist")
            self._put("LocalQueue", namespace, name, {
                "pendingWorkloads": counts[0], "reservingWorkloads": counts[1], "admittedWorkloads": counts[1],
                "flavorsReservation": flavors, "flavorsUsage": flavors,
            }, active)
        return sum(pending.values())

    def _put(self, kind: str, namespace: str | None, name: str, status: dict[str, Any],
             active: tuple[str, bool, str, str]) -> None:
        """Write a queue's status when it differs from what this controller last wrote."""
        key = (kind, namespace or "", name)
        last = self._written.get(key)
        old_conditions = last.get("conditions", []) if last else []
        status["conditions"] = set_condition(old_conditions, *active, self._engine.now())
        if last is not None and {**last, "conditions": [dict(c, lastTransitionTime="") for c in last["conditions"]]} == {
                **status, "conditions": [dict(c, lastTransitionTime="") for c in status["conditions"]]}:
            return
        try:
            self._store.patch(kind, namespace, name, {"status": status}, subresource="status")
        except ApiError as exc:
            if exc.status != 404:
                raise
            return
        self._written[key] = status

    # --- public helpers ------------------------------------------------------------------------
    def finish(self, namespace: str, name: str, succeeded: bool = True, message: str = "") -> None:
        """The job of Workload ``namespace/name`` ended: Finished=True, quota freed, pods removed."""
        with self._lock:
            self._quiet = None
            self._writer = threading.get_ident()
            try:
                record = self._engine.records.get((namespace, name))
                if record is None:
                    ingest_workload(self._engine, self._store.get("Workload", namespace, name))  # 404 propagates
                    record = self._engine.records[(namespace, name)]
                if record.state is not WorkloadState.FINISHED:
                    self._engine.finish(record, succeeded, message)
                    self._write_queue_statuses()
            finally:
                self._writer = None

    def pending_workloads(self, kind: str, namespace: str | None, name: str, limit: int = 1000,
                          offset: int = 0) -> dict[str, Any]:
        """``PendingWorkloadsSummary`` for a ClusterQueue or a LocalQueue (visibility API)."""
        with self._lock:
            lower = kind.lower()
            if lower in ("clusterqueue", "clusterqueues"):
                cq, local = name, None
                if cq not in self._engine.book.queues:
                    raise ApiError.not_found("clusterqueues.kueue.x-k8s.io", name, group="kueue.x-k8s.io", kind="clusterqueues")
            elif lower in ("localqueue", "localqueues"):
                local = (namespace or "", name)
                if local not in self._lq_to_cq:
                    raise ApiError.not_found("localqueues.kueue.x-k8s.io", name, group="kueue.x-k8s.io", kind="localqueues")
                cq = self._lq_to_cq[local]
            else:
                raise ValueError(f"pending workloads are served for ClusterQueue or LocalQueue, not {kind!r}")
            ordered = sorted(
                (r for r in self._engine.records.values() if r.state is WorkloadState.PENDING
                 and self._lq_to_cq.get((r.namespace, r.queue_name)) == cq),
                key=WorkloadRecord.order_key)
            return pending_summary(((r, r.queue_name) for r in ordered), local_queue=local, limit=limit, offset=offset)

    def workload_for(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The (first) Workload owned by a job object, as stored; None if there is none."""
        with self._lock:
            for key in sorted(self._engine.owned.get((kind, namespace, name), ())):
                obj = self._get("Workload", *key)
                if obj is not None:
                    return obj
            return None

    def workloads_for(self, kind: str, namespace: str, name: str) -> list[dict[str, Any]]:
        """Every Workload owned by a job (a Deployment has one per replica)."""
        with self._lock:
            found = (self._get("Workload", *key) for key in sorted(self._engine.owned.get((kind, namespace, name), ())))
            return [obj for obj in found if obj is not None]

    def gpu_assignments(self) -> list[GpuAssignment]:
        """One row per GPU index held by a bound pod, sorted by node, index."""
        with self._lock:
            pods: list[PlacedPod] = [p for p in self._engine.nodes.pods.values() if p.node and p.indices]
            rows = [GpuAssignment(p.namespace, p.name, p.node or "", i, p.workload, p.owner_kind, p.owner_name)
                    for p in pods for i in p.indices]
            return sorted(rows, key=lambda r: (r.node, r.gpu_index))
