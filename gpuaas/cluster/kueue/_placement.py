"""Pods on nodes: a first-fit stand-in for kube-scheduler, GPU-aware and index-exact.

Kueue itself never looks at nodes; admission is about quota. Once a Workload is admitted its pods
must still land on a node whose labels match the flavor's ``spec.nodeLabels`` and that has free
``nvidia.com/gpu`` in ``status.allocatable``. A pod that fits nowhere stays ``Pending`` (quota is
still reserved, as on a real cluster) and is retried on every pass. Each placed pod records the
GPU indices it holds, so per-GPU telemetry can be generated for exactly those devices.

Only GPUs are counted against nodes; cpu and memory are not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...quantity import GPU, parse_quantity_milli

__all__ = ["GPU_INDICES_ANNOTATION", "NodeBook", "PlacedPod"]

GPU_INDICES_ANNOTATION = "gpuaas.io/gpu-indices"


@dataclass
class PlacedPod:
    """A pod the controller created, and where (if anywhere) it runs."""

    namespace: str
    name: str
    workload: str
    owner_kind: str
    owner_name: str
    gpus: int
    selector: dict[str, str]
    node: str | None = None
    indices: tuple[int, ...] = ()


@dataclass
class _Node:
    name: str
    labels: dict[str, str]
    capacity: int
    used: set[int] = field(default_factory=set)

    @property
    def free(self) -> int:
        return self.capacity - len(self.used)


class NodeBook:
    """Nodes, their GPU indices in use, and the pods holding them."""

    def __init__(self) -> None:
        self._nodes: dict[str, _Node] = {}
        self._order: list[str] = []
        self._by_selector: dict[frozenset[tuple[str, str]], list[str]] = {}
        self._hint: dict[frozenset[tuple[str, str]], int] = {}  # first candidate that may have a free GPU
        self.pods: dict[tuple[str, str], PlacedPod] = {}

    def set_nodes(self, nodes: list[dict[str, Any]]) -> None:
        """Refresh node labels and capacity, keeping the GPUs pods already hold."""
        fresh: dict[str, _Node] = {}
        for obj in nodes:
            meta = obj.get("metadata") or {}
            allocatable = (obj.get("status") or {}).get("allocatable") or {}
            capacity = parse_quantity_milli(allocatable.get(GPU, 0)) // 1000
            old = self._nodes.get(meta["name"])
            fresh[meta["name"]] = _Node(meta["name"], dict(meta.get("labels") or {}), capacity,
                                        old.used if old else set())
        self._nodes = fresh
        self._order = sorted(fresh)
        self._by_selector = {}
        self._hint = {}

    @property
    def count(self) -> int:
        return len(self._order)

    def _candidates(self, selector: dict[str, str]) -> list[str]:
        key = frozenset(selector.items())
        names = self._by_selector.get(key)
        if names is None:
            names = [n for n in self._order if all(self._nodes[n].labels.get(k) == v for k, v in key)]
            self._by_selector[key] = names
        return names

    def place(self, pod: PlacedPod) -> bool:
        """Bind ``pod`` to the first matching node with room; False leaves it Pending."""
        if pod.node is not None:
            return True
        candidates = self._candidates(pod.selector)
        if pod.gpus == 0:
            # Prefer a node without GPUs for cpu-only pods (a Ray head), like a real cluster would.
            plain = next((n for n in candidates if self._nodes[n].capacity == 0), None)
            chosen = plain or (candidates[0] if candidates else None)
            if chosen is None:
                return False
            pod.node = chosen
            return True
        key = frozenset(pod.selector.items())
        start = self._hint.get(key, 0)
        while start < len(candidates) and self._nodes[candidates[start]].free == 0:
            start += 1
        self._hint[key] = start
        for name in candidates[start:]:
            node = self._nodes[name]
            if node.free >= pod.gpus:
                free = [i for i in range(node.capacity) if i not in node.used][: pod.gpus]
                node.used.update(free)
                pod.node, pod.indices = name, tuple(free)
                return True
        return False

    def adopt(self, pod: PlacedPod) -> None:
        """Track a pod found already bound (after a restart), claiming its GPU indices."""
        self.pods[(pod.namespace, pod.name)] = pod
        node = self._nodes.get(pod.node or "")
        if node is not None:
            node.used.update(pod.indices)

    def release(self, namespace: str, name: str) -> PlacedPod | None:
        pod = self.pods.pop((namespace, name), None)
        if pod is not None and pod.node is not None:
            node = self._nodes.get(pod.node)
            if node is not None:
                node.used.difference_update(pod.indices)
                self._hint.clear()
        return pod

    def unplaced(self) -> list[PlacedPod]:
        return [p for p in self.pods.values() if p.node is None]
