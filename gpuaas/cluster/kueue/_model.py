"""The controller's in-memory view of Workloads, and the values it hands to callers.

The object store stays the source of truth; these records exist so a scheduling pass over
50,000 Workloads needs no store reads and no JSON walking.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, NamedTuple

from ._quota import Usage

__all__ = ["GpuAssignment", "PodSetInfo", "ReconcileResult", "WorkloadRecord", "WorkloadState"]


class WorkloadState(str, Enum):
    """Where a Workload is in Kueue's life cycle (``pkg/workload/workload.go: Status()``, simplified)."""

    PENDING = "pending"  # queued, admissible
    RESERVED = "reserved"  # QuotaReserved=True and Admitted=True (no admission checks are emulated)
    HELD = "held"  # the job was stopped by a client (suspend, stop annotation, 0 replicas): OnHold
    INACTIVE = "inactive"  # spec.active=false: Evicted(Deactivated), Requeued=False
    FINISHED = "finished"


@dataclass(frozen=True)
class PodSetInfo:
    """One ``spec.podSets[]`` entry with its per-pod requests already parsed."""

    name: str
    count: int
    per_pod: dict[str, int]  # resource -> milli-units
    template: dict[str, Any]


@dataclass
class WorkloadRecord:
    namespace: str
    name: str
    uid: str
    queue_name: str
    priority: int
    created: datetime
    queued_at: datetime  # the FIFO key: the creation time (Kueue keeps it across evictions and reactivations)
    podsets: list[PodSetInfo]
    active: bool = True
    state: WorkloadState = WorkloadState.PENDING
    cluster_queue: str | None = None  # set while quota is reserved
    flavors: list[dict[str, str]] = field(default_factory=list)  # per podset: resource -> flavor
    usage: Usage = field(default_factory=dict)
    owner: dict[str, Any] | None = None  # controller ownerReference
    pending_message: str = ""
    conditions: list[dict[str, Any]] = field(default_factory=list)  # as last read or written
    pods: list[tuple[str, int, str]] = field(default_factory=list)  # (pod set, index, pod name) created for it
    seq: int = 0  # tie-breaker within one queueing second: the order the controller first saw it
    admitted_at: datetime | None = None  # when quota was last reserved (the preemption order's key)

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    def order_key(self) -> tuple[int, datetime, int]:
        """Higher priority first, then FIFO by queueing time, then the order first seen."""
        return (-self.priority, self.queued_at, self.seq)


class GpuAssignment(NamedTuple):
    """One running pod's hold on one GPU of a node (one row per GPU index)."""

    namespace: str
    pod: str
    node: str
    gpu_index: int
    workload: str
    owner_kind: str
    owner_name: str


@dataclass
class ReconcileResult:
    """What one scheduling pass changed; counts are for logs and tests."""

    created: list[str] = field(default_factory=list)  # "ns/name" of Workloads created
    admitted: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)  # quota given back (hold, deactivation, finish, delete)
    deleted: list[str] = field(default_factory=list)  # Workloads removed from the store
    pending: int = 0
    pods_created: int = 0
    pods_unplaced: int = 0
    preempted: list[str] = field(default_factory=list)  # "ns/name" evicted to make room (Evicted: Preempted)
    preempted_gpu_hours: float = 0.0  # GPU-hours the preempted Workloads had run since their admission
