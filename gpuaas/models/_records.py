"""Frozen records for what the sources read: Kueue objects, their owners, GPUs, source health.

Records are plain frozen dataclasses, not pydantic models: they are built by the thousand
on every collect, and the policies only read them. Quantities are already parsed into
floats (GPUs as counts), times are timezone-aware UTC ``datetime`` values, and fields whose
name changed between Kueue API versions carry the v1beta2 meaning whatever version was read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum

from gpuaas.models._selector import EVERY_NAMESPACE, LabelSelector

__all__ = [
    "ELASTIC_ANNOTATION",
    "is_elastic",
    "ClusterQueue",
    "Cohort",
    "GpuSample",
    "LocalQueue",
    "Owner",
    "PodGpus",
    "QuotaEntry",
    "ResourceFlavor",
    "SourceStatus",
    "Workload",
    "WorkloadState",
]

ELASTIC_ANNOTATION = "kueue.x-k8s.io/elastic-job"
"""Kueue's opt-in for elastic jobs: an admitted one may shrink in place and keep its reservation."""


def is_elastic(annotations: Mapping[str, object]) -> bool:
    """Whether Kueue reads the object as an elastic job: its annotation is exactly ``"true"``, as Kueue's
    ``workloadslicing.Enabled`` compares it (``"True"`` is not elastic there, so a shrink would be a restart)."""
    return annotations.get(ELASTIC_ANNOTATION) == "true"


class WorkloadState(str, Enum):
    """Kueue's ``workload.Status()`` order: finished, admitted, quota-reserved, pending."""

    finished = "finished"
    admitted = "admitted"
    quota_reserved = "quota-reserved"
    pending = "pending"


@dataclass(frozen=True)
class Workload:
    """One Kueue Workload and its GPUs: what Kueue holds for it while its quota is reserved (``workload_gpus``),
    else what it asks for (count x per-pod GPUs over its pod sets)."""

    kind: str
    namespace: str
    name: str
    uid: str
    queue: str | None
    cluster_queue: str | None
    priority: int
    priority_class: str | None
    state: WorkloadState
    active: bool
    gpus: float
    flavor: str | None
    created_at: datetime | None
    admitted_at: datetime | None
    owner_kind: str | None
    owner_name: str | None
    annotations: tuple[tuple[str, str], ...] = ()
    """Only the ``gpuaas.io/*`` annotations of interest (reclaim, deadline, expected-runtime)."""
    resource_version: str = ""
    """As read: a write on a Workload target is refused when it changed (or the uid did)."""
    api_version: str = ""
    """``kueue.x-k8s.io/v1beta2`` or ``/v1beta1``: the version the reader negotiated, used by writes too."""
    max_exec_time: str | None = None
    """``spec.maximumExecutionTimeSeconds`` (or the job's ``kueue.x-k8s.io/max-exec-time-seconds`` label), raw."""
    queued_at: datetime | None = None
    """Where Kueue's FIFO places it: the creation time, or the time of its last eviction by a PodsReady timeout or
    an admission check (Kueue's ``GetQueueOrderTimestamp`` with the default ``Eviction`` requeuing timestamp)."""
    requeue_at: datetime | None = None
    """``status.requeueState.requeueAt``: after an eviction with a requeue backoff, Kueue keeps the Workload out of
    its queue until then (``backoffWaitingTimeExpired``); cleared once the backoff has elapsed."""
    pod: str | None = None
    """The pod a per-pod Workload admits (Kueue's pod integration), once its owner is read as the pod's root
    (a Deployment): its telemetry and requests are that pod's alone, not every pod of the Deployment's."""

    def annotation(self, key: str) -> str | None:
        return dict(self.annotations).get(key)

    def age_seconds(self, now: datetime) -> float | None:
        return (now - self.created_at).total_seconds() if self.created_at else None


@dataclass(frozen=True)
class QuotaEntry:
    """One flavor/resource cell of a ClusterQueue or Cohort: spec limits and status figures."""

    flavor: str
    resource: str
    nominal: float
    borrowing_limit: float | None = None
    lending_limit: float | None = None
    reserved: float = 0.0
    usage: float = 0.0
    borrowed: float = 0.0


@dataclass(frozen=True)
class ClusterQueue:
    name: str
    cohort: str | None
    quotas: tuple[QuotaEntry, ...]
    pending_workloads: int = 0
    reserving_workloads: int = 0
    admitted_workloads: int = 0
    reclaim_within_cohort: str = "Never"
    """``spec.preemption.reclaimWithinCohort`` (Kueue's default ``Never``): whether it can take back quota it lent."""
    within_cluster_queue: str = "Never"
    """``spec.preemption.withinClusterQueue`` (Kueue's default ``Never``): which of its own Workloads a pending one
    may preempt (``LowerPriority``, ``LowerOrNewerEqualPriority``)."""
    priority_preemption: bool = False
    """Whether any of its preemption rules compares priorities (``withinClusterQueue``, ``reclaimWithinCohort``
    or ``borrowWithinCohort`` at ``LowerPriority``/``LowerOrNewerEqualPriority``): a lowered priority then
    also makes a running Workload easier to preempt."""
    stop_policy: str | None = None
    """``spec.stopPolicy`` when it stops the queue (``Hold``, ``HoldAndDrain``; None for Kueue's ``None``)."""
    inactive_reason: str | None = None
    """The reason of ``status.conditions[type=Active]`` when its status is ``False`` (``Stopped``,
    ``FlavorNotFound``...); None while Kueue reports the queue active."""
    namespace_selector: LabelSelector = EVERY_NAMESPACE
    """``spec.namespaceSelector``: the namespaces Kueue admits its Workloads from (none where the field is unset)."""

    @property
    def inactive(self) -> str | None:
        """Why Kueue's scheduler leaves the queue out (it admits nothing into it), in words; None when it admits.

        Kueue's ``skipInactiveCQReason``: a stopped queue (``spec.stopPolicy``), or one whose ``Active`` condition
        is ``False``. Its quota still counts in its cohort's, so active queues may borrow it."""
        if self.stop_policy:
            return f"stopped (spec.stopPolicy: {self.stop_policy})"
        if self.inactive_reason is not None:
            return f"inactive (status Active=False, reason {self.inactive_reason})"
        return None


@dataclass(frozen=True)
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str
    pending_workloads: int = 0
    reserving_workloads: int = 0
    admitted_workloads: int = 0
    usage: tuple[QuotaEntry, ...] = ()
    """``status.flavorsUsage`` (v1beta1 ``flavorUsage``): only ``usage`` is meaningful here."""
    stop_policy: str | None = None
    """``spec.stopPolicy`` when it stops the queue (``Hold``, ``HoldAndDrain``): Kueue drops it from its queueing,
    so its pending Workloads are no ClusterQueue's backlog."""


@dataclass(frozen=True)
class Cohort:
    name: str
    parent: str | None
    quotas: tuple[QuotaEntry, ...] = ()


@dataclass(frozen=True)
class ResourceFlavor:
    name: str
    node_labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Owner:
    """An object that owns GPU pods and can be stopped: RayCluster, InferenceService, ..."""

    kind: str
    namespace: str
    name: str
    uid: str
    resource_version: str
    gpus: float
    """GPUs the object asks for at its current replica count."""
    replicas: int | None
    stopped: bool
    """``spec.suspend``, the stop annotations, or zero replicas, depending on the kind."""
    annotations: tuple[tuple[str, str], ...] = ()
    controller_kind: str | None = None
    controller_name: str | None = None


@dataclass(frozen=True)
class PodGpus:
    """A running pod that requests GPUs, with its owner chain resolved up to the root object."""

    namespace: str
    pod: str
    node: str | None
    gpus: float
    owner_kind: str | None
    owner_name: str | None
    root_kind: str | None
    root_name: str | None


@dataclass(frozen=True)
class GpuSample:
    """One GPU as sampled locally through NVML (units: percent, bytes, watts, Celsius)."""

    index: int
    uuid: str
    model: str
    utilization_percent: float | None
    memory_used_bytes: float | None
    memory_total_bytes: float | None
    power_watts: float | None
    temperature_c: float | None
    process_pids: tuple[int, ...] = ()
    host: str | None = None


@dataclass(frozen=True)
class SourceStatus:
    """Whether a source answered this cycle, how long it took and how old its newest data is."""

    name: str
    ok: bool
    latency_s: float = 0.0
    staleness_s: float | None = None
    error: str | None = None
    details: tuple[tuple[str, str], ...] = field(default=())
    required: bool = True
    """False for a source that is only used where present (NVML in auto mode): its absence degrades nothing."""

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "ok": self.ok,
            "latency_s": self.latency_s,
            "staleness_s": self.staleness_s,
            "error": self.error,
            "details": [list(d) for d in self.details],
            "required": self.required,
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> SourceStatus:
        details = tuple((str(k), str(v)) for k, v in data.get("details") or [])  # type: ignore[attr-defined]
        return cls(
            name=str(data["name"]),
            ok=bool(data["ok"]),
            latency_s=float(data.get("latency_s") or 0.0),  # type: ignore[arg-type]
            staleness_s=None if data.get("staleness_s") is None else float(data["staleness_s"]),  # type: ignore[arg-type]
            error=None if data.get("error") is None else str(data["error"]),
            details=details,
            required=bool(data.get("required", True)),
        )
