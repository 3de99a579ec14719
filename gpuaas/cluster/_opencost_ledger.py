"""What OpenCost would have recorded: per container, the GPU time it held and at what price.

The simulation appends one segment per running pod per step; queries intersect segments
with a window. OpenCost charges requested GPUs x hours x the node's GPU price whatever the
utilisation, so the ledger keeps utilisation only to report ``gpuUsageAverage``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

__all__ = ["Accumulator", "AllocationKey", "CostLedger"]


@dataclass(frozen=True)
class AllocationKey:
    """One container of one pod: OpenCost's unit of allocation, with its properties and prices."""

    cluster: str
    node: str
    namespace: str
    pod: str
    container: str
    controller: str
    controller_kind: str
    provider_id: str
    labels: tuple[tuple[str, str], ...]
    annotations: tuple[tuple[str, str], ...]
    gpu_model: str
    gpu_uuids: tuple[str, ...]
    gpu_price: float
    cpu_cores: float
    ram_bytes: float
    cpu_price: float
    ram_gib_price: float

    @property
    def name(self) -> str:
        return "/".join((self.cluster, self.node, self.namespace, self.pod, self.container))

    def properties(self) -> dict[str, Any]:
        props: dict[str, Any] = {
            "cluster": self.cluster, "node": self.node, "container": self.container,
            "controller": self.controller, "controllerKind": self.controller_kind,
            "namespace": self.namespace, "pod": self.pod, "providerID": self.provider_id,
            "labels": dict(self.labels), "annotations": dict(self.annotations),
        }
        return {k: v for k, v in props.items() if v not in ("", {})}


@dataclass
class _Segment:
    start: float
    end: float
    usage_seconds: float  # sum over the segment of utilisation (0-1) x seconds, per GPU
    has_usage: bool


@dataclass
class Accumulator:
    """Sums over a window for one allocation or an aggregate of several."""

    start: float = float("inf")
    end: float = float("-inf")
    gpu_hours: float = 0.0
    gpu_usage_hours: float = 0.0
    usage_known_gpu_hours: float = 0.0
    cpu_core_hours: float = 0.0
    ram_byte_hours: float = 0.0
    gpu_cost: float = 0.0
    cpu_cost: float = 0.0
    ram_cost: float = 0.0
    properties: dict[str, Any] | None = None
    uuids: set[str] = field(default_factory=set)
    models: set[str] = field(default_factory=set)
    members: int = 0

    def add_segment(self, key: AllocationKey, start: float, end: float, usage_seconds: float, has_usage: bool) -> None:
        hours = (end - start) / 3600.0
        gpus = len(key.gpu_uuids)
        self.start, self.end = min(self.start, start), max(self.end, end)
        self.gpu_hours += gpus * hours
        if has_usage:
            self.gpu_usage_hours += gpus * usage_seconds / 3600.0
            self.usage_known_gpu_hours += gpus * hours
        self.cpu_core_hours += key.cpu_cores * hours
        self.ram_byte_hours += key.ram_bytes * hours
        self.gpu_cost += gpus * hours * key.gpu_price
        self.cpu_cost += key.cpu_cores * hours * key.cpu_price
        self.ram_cost += key.ram_bytes / 2**30 * hours * key.ram_gib_price

    def merge(self, other: Accumulator) -> None:
        for name in ("gpu_hours", "gpu_usage_hours", "usage_known_gpu_hours", "cpu_core_hours", "ram_byte_hours",
                     "gpu_cost", "cpu_cost", "ram_cost"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.start, self.end = min(self.start, other.start), max(self.end, other.end)
        self.uuids |= other.uuids
        self.models |= other.models
        self.members += other.members
        if self.properties is None:
            self.properties = dict(other.properties or {})
        else:
            theirs = other.properties or {}
            self.properties = {k: v for k, v in self.properties.items() if theirs.get(k) == v}


class CostLedger:
    """Append-only GPU holding history, queried by window."""

    def __init__(self) -> None:
        self._segments: dict[AllocationKey, list[_Segment]] = {}

    def record(self, key: AllocationKey, start: datetime, end: datetime, utilisation: float | None) -> None:
        """``key`` held its GPUs during ``[start, end)`` at mean ``utilisation`` (None: unknown)."""
        s, e = start.timestamp(), end.timestamp()
        if e <= s:
            return
        segments = self._segments.setdefault(key, [])
        usage = (utilisation or 0.0) * (e - s)
        last = segments[-1] if segments else None
        if last is not None and last.end == s and last.has_usage == (utilisation is not None):
            last.end = e
            last.usage_seconds += usage
        else:
            segments.append(_Segment(s, e, usage, utilisation is not None))

    def allocations(self, start: datetime, end: datetime) -> dict[AllocationKey, Accumulator]:
        """Every allocation that overlaps ``[start, end)``, clipped to it."""
        ws, we = start.timestamp(), end.timestamp()
        out: dict[AllocationKey, Accumulator] = {}
        for key, segments in self._segments.items():
            acc: Accumulator | None = None
            for seg in segments:
                s, e = max(seg.start, ws), min(seg.end, we)
                if e <= s:
                    continue
                if acc is None:
                    acc = Accumulator(properties=key.properties(), uuids=set(key.gpu_uuids),
                                      models={key.gpu_model}, members=1)
                acc.add_segment(key, s, e, seg.usage_seconds * (e - s) / (seg.end - seg.start), seg.has_usage)
            if acc is not None:
                out[key] = acc
        return out
