"""A stand-in of ours for the Job controller, kube-scheduler and the kubelet on the real backend.

The real backend runs no kube-controller-manager, kube-scheduler or kubelet, so without this
thread no pod would ever exist: Kueue admits Workloads and unsuspends their jobs, and nothing runs.
``PodStandIn`` plays the part those three play for the jobs Kueue starts, through the real API
server (so the API's own validation and the Kueue webhooks see every pod it writes):

* Job controller / KubeRay operator: for each batch Job and RayCluster with ``spec.suspend: false``
  (which Kueue writes when it admits one), the pods its controller would make: a Job's
  ``parallelism`` pods, a RayCluster's head and each worker group's ``replicas``, from the
  templates as Kueue left them on start (its injected ``nodeSelector`` included), with a
  controller ``ownerReference`` to the job. Pods of a job that is suspended, deleted or has fewer
  replicas are deleted (grace period 0, the kubelet's confirmation being part of the stand-in).
* kube-scheduler: first fit on the nodes whose labels match the pod's ``nodeSelector`` and with
  free ``nvidia.com/gpu`` in ``allocatable`` (the emulator's ``NodeBook``); the GPU indices a pod
  holds are kept in the ``gpuaas.io/gpu-indices`` annotation, as the emulator does. A pod that fits
  nowhere stays ``Pending`` (PodScheduled False, Unschedulable) and is bound later through the
  ``binding`` subresource once a node has room.
* kubelet: the status subresource of a bound pod gets ``phase: Running``, PodScheduled,
  Initialized, ContainersReady and Ready, a ``podIP`` and ``startTime``.

* Deployment controller: a Deployment's ``replicas`` pods, owned by the ReplicaSet its controller
  would name (``<deployment>-<pod-template-hash>``; the ReplicaSet object itself is not created:
  neither Kueue nor gpuaas reads it). Kueue's webhooks mark the template ``pod-suspending-parent``,
  so its pod webhook gates each pod (``kueue.x-k8s.io/admission``) and Kueue's pod integration
  makes one Workload per pod; a gated pod is bound only once Kueue has admitted it and removed the gate.
* StatefulSet controller: pods ``<name>-0`` ... owned by the StatefulSet; Kueue's webhook gates them too,
  and its statefulset integration joins them to the Workload it made for the set.
* garbage collector: a Workload all of whose owners are pods that no longer exist is deleted (a
  Deployment's pod-level Workloads, or a StatefulSet's once Kueue has dropped the set as its owner
  on a scale to zero, when the pods are gone).

It does not run containers, count cpu or memory, honour taints, affinity or topology, finish a
Job (its pods run until the Job is suspended or deleted), restart anything, roll a Deployment out
(a changed template replaces its pods at once), or make pods for Notebooks or InferenceServices. Each pass (about one a second) costs seven list requests and at most
``max_writes`` writes, so a large change converges over a few passes.
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gpuaas.cluster._scenario_objects import rfc3339
from gpuaas.cluster.kueue import GPU_INDICES_ANNOTATION, NodeBook, PlacedPod
from gpuaas.cluster.real._kubeapi import KubeHTTP, path_of
from gpuaas.quantity import GPU
from gpuaas.sources import pod_spec_gpus

__all__ = ["BoundPod", "PodStandIn", "desired_pods", "owner_reference"]

_OWNED = {"Job": "batch/v1", "RayCluster": "ray.io/v1", "Deployment": "apps/v1", "StatefulSet": "apps/v1"}
# Kinds whose template Kueue's webhook marks ``pod-suspending-parent``: their pods are created gated.
_GATED = ("Deployment", "StatefulSet")
_HASH_LABEL = "pod-template-hash"


@dataclass(frozen=True)
class _Wanted:
    """One pod a started job should have."""

    name: str
    podset: str
    template: dict[str, Any]


@dataclass(frozen=True)
class BoundPod:
    """A Running pod of the stand-in and the GPUs it holds (what the telemetry exporter reads)."""

    namespace: str
    name: str
    owner_kind: str
    owner_name: str
    node: str
    indices: tuple[int, ...]
    container: str
    started: datetime


def _pod_name(kind: str, job: str, uid: str, podset: str, index: int) -> str:
    """Names the job's controller would choose: ``<job>-<5 hex>`` (Job; a Deployment's ``job`` is its
    ReplicaSet's name), KubeRay's head/worker names."""
    digest = hashlib.sha1(f"{uid}/{podset}/{index}".encode()).hexdigest()[:5]
    if kind == "RayCluster":
        return f"{job}-head-{digest}" if podset == "head" else f"{job}-{podset}-worker-{digest}"
    if kind == "StatefulSet":
        return f"{job}-{index}"
    return f"{job}-{digest}"


def _template_hash(template: dict[str, Any]) -> str:
    """A digest of the pod template, standing for the ``pod-template-hash`` of the Deployment controller."""
    return hashlib.sha1(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]


def owner_reference(job: dict[str, Any]) -> dict[str, Any]:
    """The controller ``ownerReference`` of the job's pods: the job itself, or a Deployment's ReplicaSet
    for the current template (its uid derived from the Deployment's, so every pass agrees on it)."""
    kind, meta = job["kind"], job["metadata"]
    ref = {"apiVersion": _OWNED[kind], "kind": kind, "name": meta["name"], "uid": meta["uid"],
           "controller": True, "blockOwnerDeletion": True}
    if kind == "Deployment":
        digest = _template_hash((job.get("spec") or {}).get("template") or {})
        ref.update(kind="ReplicaSet", name=f"{meta['name']}-{digest}",
                   uid=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{meta['uid']}/{digest}")))
    return ref


def desired_pods(job: dict[str, Any]) -> list[_Wanted]:
    """The pods a started Job or RayCluster has (none while it is suspended), or a Deployment's or a
    StatefulSet's replicas."""
    spec, meta = job.get("spec") or {}, job["metadata"]
    if spec.get("suspend"):
        return []
    kind, name, uid = job["kind"], meta["name"], meta["uid"]
    sets: list[tuple[str, int, dict[str, Any]]]
    if kind == "Job":
        sets = [("main", int(spec.get("parallelism", 1)), spec.get("template") or {})]
    elif kind in _GATED:
        if kind == "Deployment":
            ref = owner_reference(job)
            name, uid = ref["name"], ref["uid"]
        replicas = spec.get("replicas")
        sets = [("main", 1 if replicas is None else int(replicas), spec.get("template") or {})]
    else:
        head = (spec.get("headGroupSpec") or {}).get("template") or {}
        sets = [("head", 1, head)] + [(str(g.get("groupName")), int(g.get("replicas") or 0), g.get("template") or {})
                                      for g in spec.get("workerGroupSpecs") or []]
    return [_Wanted(_pod_name(kind, name, uid, podset, i), podset, template)
            for podset, count, template in sets for i in range(count)]


def _controller(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The pod's controller ``ownerReference`` when it is a Job, a RayCluster or a Deployment's ReplicaSet."""
    return next((ref for ref in pod["metadata"].get("ownerReferences") or []
                 if ref.get("controller") and (ref.get("kind") in _OWNED or ref.get("kind") == "ReplicaSet")), None)


def _owner(pod: dict[str, Any], ref: dict[str, Any]) -> tuple[str, str]:
    """(kind, name) of the object the pod was made for: a ReplicaSet stands for its Deployment."""
    digest = (pod["metadata"].get("labels") or {}).get(_HASH_LABEL, "")
    if ref["kind"] == "ReplicaSet" and digest and ref["name"].endswith(f"-{digest}"):
        return "Deployment", ref["name"][: -len(digest) - 1]
    return ref["kind"], ref["name"]


def _placed(namespace: str, name: str, *, spec: dict[str, Any], node: str | None = None,
            indices: tuple[int, ...] = ()) -> PlacedPod:
    """The scheduler's view of a pod: its GPUs and ``nodeSelector`` (owner fields are not needed here)."""
    return PlacedPod(namespace, name, workload="", owner_kind="", owner_name="",
                     gpus=int(pod_spec_gpus(spec, (GPU,))), selector=dict(spec.get("nodeSelector") or {}),
                     node=node, indices=indices)


def _indices(pod: dict[str, Any]) -> tuple[int, ...]:
    text = (pod["metadata"].get("annotations") or {}).get(GPU_INDICES_ANNOTATION, "")
    return tuple(int(i) for i in text.split(",") if i)


def _gpu_container(spec: dict[str, Any]) -> str:
    containers = spec.get("containers") or [{}]
    return str(next((c.get("name") for c in containers if pod_spec_gpus({"containers": [c]}, (GPU,)) > 0),
                    containers[0].get("name", "")))


def _address(prefix: str, key: str) -> str:
    """A stable made-up IPv4 address under ``prefix`` (two octets) for ``key``: pods' and nodes' IPs."""
    h = int(hashlib.sha1(key.encode()).hexdigest()[:4], 16)
    return f"{prefix}.{h >> 8}.{(h & 0xFF) or 1}"


def _running(pod_uid: str, now: str, node_ip: str) -> dict[str, Any]:
    conditions = [{"type": t, "status": "True", "lastTransitionTime": now}
                  for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")]
    ip = _address("10.244", pod_uid)
    return {"phase": "Running", "conditions": conditions, "podIP": ip,
            "podIPs": [{"ip": ip}], "hostIP": node_ip, "startTime": now}


def _gated(now: str) -> dict[str, Any]:
    return {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated", "lastTransitionTime": now,
         "message": "Scheduling is blocked due to non-empty scheduling gates"}]}


def _unschedulable(now: str, nodes: int) -> dict[str, Any]:
    return {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": now,
         "message": f"0/{nodes} nodes are available: insufficient {GPU}"}]}


class PodStandIn:
    """The reconcile loop (``step``) and the thread that runs it until ``stop``."""

    def __init__(self, api: KubeHTTP, *, interval: float = 1.0, max_writes: int = 40) -> None:
        self.api = api
        self.interval = interval
        self.max_writes = max_writes
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._bound: list[BoundPod] = []
        self.last_error = ""

    # --- thread -----------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="pod-stand-in", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.step()
                self.last_error = ""
            except Exception as exc:  # noqa: BLE001 - the next pass retries; tests read last_error
                self.last_error = f"{type(exc).__name__}: {exc}"

    def bound(self) -> list[BoundPod]:
        """The Running pods as of the last pass."""
        with self._lock:
            return list(self._bound)

    # --- one pass ---------------------------------------------------------------------------
    def step(self) -> None:
        api = self.api
        nodes = api.list("Node")
        # Items of a list carry no ``kind``: it is set from the list asked for.
        jobs = [{**job, "kind": kind} for kind in _OWNED for job in api.list(kind)]
        # Listed before the pods: a Workload's owner pod made since is then in the pod list.
        workloads = api.list("Workload")
        all_pods = api.list("Pod")
        pods = [p for p in all_pods if _controller(p) is not None]
        book = NodeBook()
        book.set_nodes(nodes)
        node_ip = {n["metadata"]["name"]: _address("10.0", n["metadata"]["name"]) for n in nodes}
        by_uid = {owner_reference(j)["uid"]: j for j in jobs}
        existing = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in pods}
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if node:
                meta = pod["metadata"]
                book.adopt(_placed(meta["namespace"], meta["name"], spec=pod["spec"], node=node, indices=_indices(pod)))
        writes = _Budget(self.max_writes)
        now = rfc3339(datetime.now(UTC))
        for pod in pods:  # the job's controller and the garbage collector: pods no job wants go
            meta = pod["metadata"]
            owner = _controller(pod)
            owner_job = by_uid.get(str(owner["uid"])) if owner else None
            names = {w.name for w in desired_pods(owner_job)} if owner_job else set()
            if meta["name"] not in names and writes.take():
                api.request("DELETE", path_of("Pod", meta["namespace"], meta["name"]),
                            params={"gracePeriodSeconds": "0"})
                existing.pop((meta["namespace"], meta["name"]), None)
                book.release(meta["namespace"], meta["name"])
        gone = {p["metadata"]["uid"] for p in pods if (p["metadata"]["namespace"], p["metadata"]["name"]) not in existing}
        self._collect_garbage(workloads, {p["metadata"]["uid"] for p in all_pods} - gone, writes)
        for job in sorted(jobs, key=lambda j: (j["metadata"].get("creationTimestamp", ""), j["metadata"]["name"])):
            for wanted in desired_pods(job):
                live = existing.get((job["metadata"]["namespace"], wanted.name))
                if live is None:
                    self._create(job, wanted, book, node_ip, now, writes)
                elif not (live.get("spec") or {}).get("nodeName"):
                    if not live["spec"].get("schedulingGates"):  # a gated pod waits for Kueue
                        self._bind_later(live, book, node_ip, now, writes)
                elif (live.get("status") or {}).get("phase") != "Running" and writes.take(1):
                    node = live["spec"]["nodeName"]
                    self._status(live, _running(live["metadata"]["uid"], now, node_ip.get(node, "")))
        with self._lock:
            self._bound = list(_bound_pods(api.list("Pod")))

    def _collect_garbage(self, workloads: list[dict[str, Any]], alive: set[str], writes: _Budget) -> None:
        """The garbage collector's part: Workloads whose owner pods (uids not in ``alive``) are all gone."""
        for wl in workloads:
            meta = wl["metadata"]
            refs = meta.get("ownerReferences") or []
            if (refs and all(r.get("kind") == "Pod" for r in refs) and not any(r.get("uid") in alive for r in refs)
                    and not meta.get("deletionTimestamp") and writes.take()):
                self.api.request("DELETE", path_of("Workload", meta["namespace"], meta["name"]))

    def _create(self, job: dict[str, Any], wanted: _Wanted, book: NodeBook, node_ip: dict[str, str], now: str,
                writes: _Budget) -> None:
        if not writes.take(2):
            return
        meta, template = job["metadata"], wanted.template
        spec = dict(template.get("spec") or {})
        if job["kind"] == "Job":
            spec.setdefault("restartPolicy", "Never")
        placed = _placed(meta["namespace"], wanted.name, spec=spec)
        annotations = dict((template.get("metadata") or {}).get("annotations") or {})
        # Kueue's pod webhook gates these on create: bound later, once admitted.
        if job["kind"] not in _GATED and book.place(placed):
            book.pods[(placed.namespace, placed.name)] = placed
            spec["nodeName"] = placed.node
            if placed.indices:
                annotations[GPU_INDICES_ANNOTATION] = ",".join(map(str, placed.indices))
        labels = {**((template.get("metadata") or {}).get("labels") or {}), **_controller_labels(job, wanted.podset)}
        created = self.api.create({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": wanted.name, "namespace": meta["namespace"], "labels": labels,
                         "annotations": annotations, "ownerReferences": [owner_reference(job)]},
            "spec": spec,
        })
        if created is not None:
            status = (_running(created["metadata"]["uid"], now, node_ip.get(placed.node, "")) if placed.node
                      else _gated(now) if created["spec"].get("schedulingGates") else _unschedulable(now, book.count))
            self._status(created, status)

    def _bind_later(self, pod: dict[str, Any], book: NodeBook, node_ip: dict[str, str], now: str,
                    writes: _Budget) -> None:
        """The scheduler's retry: a Pending pod gets a node once one has room (binding subresource)."""
        meta, spec = pod["metadata"], pod.get("spec") or {}
        placed = _placed(meta["namespace"], meta["name"], spec=spec)
        if not writes.take(3) or not book.place(placed):
            return
        book.pods[(placed.namespace, placed.name)] = placed
        self.api.merge_patch("Pod", meta["name"], {"metadata": {"annotations": {
            GPU_INDICES_ANNOTATION: ",".join(map(str, placed.indices)) or None}}}, meta["namespace"])
        self.api.request("POST", path_of("Pod", meta["namespace"], meta["name"]) + "/binding", {
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": meta["name"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": placed.node}})
        self._status(pod, _running(meta["uid"], now, node_ip.get(placed.node or "", "")))

    def _status(self, pod: dict[str, Any], status: dict[str, Any]) -> None:
        meta = pod["metadata"]
        self.api.merge_patch("Pod", meta["name"], {"status": status}, meta["namespace"], subresource="status")


class _Budget:
    """Writes left in this pass."""

    def __init__(self, left: int) -> None:
        self.left = left

    def take(self, n: int = 1) -> bool:
        if self.left < n:
            return False
        self.left -= n
        return True


def _controller_labels(job: dict[str, Any], podset: str) -> dict[str, str]:
    """Labels the Job controller or KubeRay put on their pods."""
    name, uid = job["metadata"]["name"], job["metadata"]["uid"]
    if job["kind"] == "Deployment":
        return {_HASH_LABEL: owner_reference(job)["name"][len(name) + 1:]}
    if job["kind"] == "StatefulSet":
        return {}
    if job["kind"] == "Job":
        return {"batch.kubernetes.io/job-name": name, "job-name": name,
                "batch.kubernetes.io/controller-uid": uid, "controller-uid": uid}
    return {"ray.io/cluster": name, "ray.io/node-type": "head" if podset == "head" else "worker",
            "ray.io/group": "headgroup" if podset == "head" else podset,
            "app.kubernetes.io/created-by": "kuberay-operator"}


def _bound_pods(pods: list[dict[str, Any]]) -> Iterator[BoundPod]:
    for pod in pods:
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        ref = _controller(pod)
        if ref is None or status.get("phase") != "Running" or not spec.get("nodeName"):
            continue
        started = datetime.fromisoformat(str(status.get("startTime")).replace("Z", "+00:00"))
        kind, name = _owner(pod, ref)
        yield BoundPod(meta["namespace"], meta["name"], kind, name, spec["nodeName"],
                       _indices(pod), _gpu_container(spec), started)
