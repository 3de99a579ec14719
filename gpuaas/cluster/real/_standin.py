"""Stand-ins of ours for the two parts of a GPU cluster the real backend cannot run: the KubeRay
operator and the NVIDIA device plugin.

Everything else that makes pods exist is real: kube-controller-manager (the Job, ReplicaSet,
Deployment, StatefulSet and garbage collector controllers) creates the pods of what Kueue starts,
kube-scheduler binds them (a Deployment's or a StatefulSet's pods only once Kueue has admitted them
and lifted its scheduling gate) and kwok marks them Running on nodes no kubelet runs. Two parts
have no upstream binary to run here:

* the KubeRay operator (its module is a controller-runtime manager we do not build): for each
  RayCluster with ``spec.suspend: false`` (Kueue writes that when it admits one), the head and each
  worker group's ``replicas`` pods, from the templates as Kueue left them (its injected
  ``nodeSelector`` included), named and labelled as KubeRay names them, with a controller
  ``ownerReference`` to the RayCluster. They are created unbound: the scheduler binds them. Pods of a
  RayCluster that is suspended, deleted or has fewer replicas are deleted.
* the device plugin: the scheduler counts ``nvidia.com/gpu`` but says nothing of which GPU a pod got;
  the kubelet's device manager would. Each bound pod asking for GPUs is given the lowest free indices
  of its node, kept in the ``gpuaas.io/gpu-indices`` annotation (the API is the allocation's memory,
  as in the emulator), which the telemetry exporter reads to put the pod's labels on those GPUs.

Each pass (about one a second) costs three list requests and at most ``max_writes`` writes, so a
large change converges over a few passes.
"""

from __future__ import annotations

import hashlib
import threading
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gpuaas.cluster.kueue import GPU_INDICES_ANNOTATION
from gpuaas.cluster.real._kubeapi import KubeHTTP, path_of
from gpuaas.quantity import GPU
from gpuaas.sources import pod_spec_gpus

__all__ = ["BoundPod", "PodStandIn", "desired_pods", "free_indices"]

_HASH_LABEL = "pod-template-hash"
# Controllers whose pods gpuaas attributes to a workload (a ReplicaSet stands for its Deployment).
_CONTROLLERS = ("Job", "RayCluster", "ReplicaSet", "StatefulSet")


@dataclass(frozen=True)
class _Wanted:
    """One pod a started RayCluster should have."""

    name: str
    podset: str
    template: dict[str, Any]


@dataclass(frozen=True)
class BoundPod:
    """A Running pod and the GPUs it holds (what the telemetry exporter reads)."""

    namespace: str
    name: str
    owner_kind: str
    owner_name: str
    node: str
    indices: tuple[int, ...]
    container: str
    started: datetime


def _pod_name(job: str, uid: str, podset: str, index: int) -> str:
    """KubeRay's names: ``<cluster>-head-<5>`` and ``<cluster>-<group>-worker-<5>``."""
    digest = hashlib.sha1(f"{uid}/{podset}/{index}".encode()).hexdigest()[:5]
    return f"{job}-head-{digest}" if podset == "head" else f"{job}-{podset}-worker-{digest}"


def desired_pods(cluster: dict[str, Any]) -> list[_Wanted]:
    """The pods a started RayCluster has (none while it is suspended): its head and each group's replicas."""
    spec, meta = cluster.get("spec") or {}, cluster["metadata"]
    if spec.get("suspend"):
        return []
    head = (spec.get("headGroupSpec") or {}).get("template") or {}
    sets = [("head", 1, head)] + [(str(g.get("groupName")), int(g.get("replicas") or 0), g.get("template") or {})
                                  for g in spec.get("workerGroupSpecs") or []]
    return [_Wanted(_pod_name(meta["name"], meta["uid"], podset, i), podset, template)
            for podset, count, template in sets for i in range(count)]


def _controller(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The pod's controller ``ownerReference`` when it is one gpuaas attributes pods to."""
    return next((ref for ref in pod["metadata"].get("ownerReferences") or []
                 if ref.get("controller") and ref.get("kind") in _CONTROLLERS), None)


def _owner(pod: dict[str, Any], ref: dict[str, Any]) -> tuple[str, str]:
    """(kind, name) of the object the pod was made for: a ReplicaSet stands for its Deployment."""
    digest = (pod["metadata"].get("labels") or {}).get(_HASH_LABEL, "")
    if ref["kind"] == "ReplicaSet" and digest and ref["name"].endswith(f"-{digest}"):
        return "Deployment", ref["name"][: -len(digest) - 1]
    return ref["kind"], ref["name"]


def _gpus(pod: dict[str, Any]) -> int:
    return int(pod_spec_gpus(pod.get("spec") or {}, (GPU,)))


def _indices(pod: dict[str, Any]) -> tuple[int, ...]:
    text = (pod["metadata"].get("annotations") or {}).get(GPU_INDICES_ANNOTATION, "")
    return tuple(int(i) for i in text.split(",") if i)


def free_indices(capacity: int, held: set[int], wanted: int) -> tuple[int, ...] | None:
    """The ``wanted`` lowest GPU indices of a node with ``capacity`` GPUs not in ``held``; None if too few.

    The scheduler never binds more GPUs than a node has, so None means another pod still holds
    indices it is about to give back (it is being deleted): the pod waits for the next pass."""
    free = [i for i in range(capacity) if i not in held][:wanted]
    return tuple(free) if len(free) == wanted else None


def _gpu_container(spec: dict[str, Any]) -> str:
    containers = spec.get("containers") or [{}]
    return str(next((c.get("name") for c in containers if pod_spec_gpus({"containers": [c]}, (GPU,)) > 0),
                    containers[0].get("name", "")))


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
        writes = _Budget(self.max_writes)
        clusters = api.list("RayCluster")
        pods = api.list("Pod")
        self._kuberay(clusters, pods, writes)
        capacity = {n["metadata"]["name"]: int((n.get("status") or {}).get("allocatable", {}).get(GPU, 0) or 0)
                    for n in api.list("Node")}
        self._devices(pods, capacity, writes)
        with self._lock:
            self._bound = list(_bound_pods(pods))

    def _kuberay(self, clusters: list[dict[str, Any]], pods: list[dict[str, Any]], writes: _Budget) -> None:
        """The KubeRay operator's part: a started RayCluster's pods exist, no other pod of it does."""
        wanted = {c["metadata"]["uid"]: {w.name: w for w in desired_pods(c)} for c in clusters}
        have: dict[str, set[str]] = defaultdict(set)
        for pod in pods:
            meta = pod["metadata"]
            ref = _controller(pod)
            if ref is None or ref["kind"] != "RayCluster" or meta.get("deletionTimestamp"):
                continue
            if meta["name"] in wanted.get(str(ref["uid"]), {}):
                have[str(ref["uid"])].add(meta["name"])
            elif writes.take():
                self.api.request("DELETE", path_of("Pod", meta["namespace"], meta["name"]),
                                 params={"gracePeriodSeconds": "0"})
        for cluster in sorted(clusters, key=lambda c: (c["metadata"].get("creationTimestamp", ""),
                                                       c["metadata"]["name"])):
            uid = cluster["metadata"]["uid"]
            for name, want in wanted[uid].items():
                if name not in have[uid] and writes.take():
                    self.api.create(_ray_pod(cluster, want))

    def _devices(self, pods: list[dict[str, Any]], capacity: dict[str, int], writes: _Budget) -> None:
        """The device plugin's part: each bound pod asking for GPUs holds that many indices of its node."""
        held: dict[str, set[int]] = defaultdict(set)
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if node:
                held[node].update(_indices(pod))
        for pod in sorted(pods, key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"])):
            meta, node = pod["metadata"], (pod.get("spec") or {}).get("nodeName")
            gpus = _gpus(pod)
            if not node or not gpus or _indices(pod) or meta.get("deletionTimestamp"):
                continue
            indices = free_indices(capacity.get(node, 0), held[node], gpus)
            if indices is None or not writes.take():
                continue
            held[node].update(indices)
            text = ",".join(map(str, indices))
            self.api.merge_patch("Pod", meta["name"], {"metadata": {"annotations": {GPU_INDICES_ANNOTATION: text}}},
                                 meta["namespace"])
            meta.setdefault("annotations", {})[GPU_INDICES_ANNOTATION] = text


class _Budget:
    """Writes left in this pass."""

    def __init__(self, left: int) -> None:
        self.left = left

    def take(self, n: int = 1) -> bool:
        if self.left < n:
            return False
        self.left -= n
        return True


def _ray_pod(cluster: dict[str, Any], wanted: _Wanted) -> dict[str, Any]:
    """The pod KubeRay makes for ``wanted``, unbound (the scheduler places it)."""
    meta, template = cluster["metadata"], wanted.template
    head = wanted.podset == "head"
    labels = {**((template.get("metadata") or {}).get("labels") or {}),
              "ray.io/cluster": meta["name"], "ray.io/node-type": "head" if head else "worker",
              "ray.io/group": "headgroup" if head else wanted.podset,
              "app.kubernetes.io/created-by": "kuberay-operator"}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": wanted.name, "namespace": meta["namespace"], "labels": labels,
                     "annotations": dict((template.get("metadata") or {}).get("annotations") or {}),
                     "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": meta["name"],
                                          "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]},
        "spec": dict(template.get("spec") or {}),
    }


def _bound_pods(pods: list[dict[str, Any]]) -> Iterator[BoundPod]:
    for pod in pods:
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        ref = _controller(pod)
        if ref is None or status.get("phase") != "Running" or not spec.get("nodeName") or meta.get("deletionTimestamp"):
            continue
        started = datetime.fromisoformat(str(status.get("startTime") or meta["creationTimestamp"]).replace("Z", "+00:00"))
        kind, name = _owner(pod, ref)
        yield BoundPod(meta["namespace"], meta["name"], kind, name, spec["nodeName"],
                       _indices(pod), _gpu_container(spec), started.astimezone(UTC))
