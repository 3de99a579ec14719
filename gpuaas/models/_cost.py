"""What the cost report is computed from: the frames and records one window's reading hands the policy.

Shared by the reader (``gpuaas.sources.cost_window``) and the report (``gpuaas.policies.cost``), so
neither imports the other.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import pandas as pd

from gpuaas.models._records import SourceStatus

if TYPE_CHECKING:
    from gpuaas.policy import ServiceOutcome

__all__ = ["COST_COLS", "GPU_COLS", "IDLE_CAPACITY", "SERVING_COLS", "SERVING_KEYS", "CapacityEstimate", "CostInputs",
           "FinishedJob", "IdlePeriod", "RunningJob", "idle_capacity", "prom_label", "selects", "with_idle"]

GPU_COLS = ["namespace", "pod", "day", "observed_h", "busy_h", "active_h"]
COST_COLS = ["namespace", "controller_kind", "controller", "pod", "day", "gpu_hours", "gpu_cost", "total_cost"]
SERVING_COLS = ["namespace", "model_name", "day", "stat", "finished_reason", "le", "value"]
SERVING_KEYS = ["pod", "service"]
"""Optional serving columns, read only for services with ``pod_labels``: the series' pod, and the service a
row was measured for (its request-rate quantile over its own pods); "" where absent."""


@dataclass(frozen=True)
class IdlePeriod:
    """OpenCost's ``__idle__`` in one period: what the nodes cost that no allocation held (node cost less allocated
    cost, per resource), GPUs alone and in all (GPU, CPU, RAM). NaN: OpenCost wrote null (unknown, never $0)."""

    day: int
    gpu_cost: float
    total_cost: float


IDLE_CAPACITY = "gpuaas_idle_capacity"
"""The ``attrs`` key of the cost frame under which the allocation API's ``__idle__`` rows travel, per period
(``tuple[IdlePeriod, ...]``). They ride with the answer they came in: where that answer is replaced (OpenCost's
metrics read in its place), the new frame has none, and the idle capacity is unknown, never $0."""


def with_idle(costs: pd.DataFrame, periods: Sequence[IdlePeriod]) -> pd.DataFrame:
    """``costs`` carrying ``periods`` (OpenCost's ``__idle__`` per period): the same frame, for the report to read."""
    costs.attrs[IDLE_CAPACITY] = tuple(periods)
    return costs


def idle_capacity(costs: pd.DataFrame | None) -> tuple[IdlePeriod, ...] | None:
    """The ``__idle__`` periods the costs were read with; None where the answer held none (an OpenCost that does not
    answer ``includeIdle``, OpenCost's metrics, or no cost source): the idle capacity is then unknown."""
    if costs is None:
        return None
    periods = costs.attrs.get(IDLE_CAPACITY)
    return tuple(periods) if periods else None


@dataclass(frozen=True)
class FinishedJob:
    """A Kueue Workload that finished, as the cost report reads it."""

    namespace: str
    workload: str
    uid: str
    owner_kind: str
    owner_name: str
    finished_at: datetime
    reason: str
    deadline: datetime | None
    created_at: datetime | None = None
    """When this attempt's Workload was created: pods last seen before it belong to an earlier attempt."""


@dataclass(frozen=True)
class RunningJob:
    """A Kueue Workload admitted and not finished at the end of the window: its outcome is still to come."""

    namespace: str
    owner_kind: str
    owner_name: str
    created_at: datetime | None


@dataclass(frozen=True)
class CapacityEstimate:
    namespace: str
    name: str
    met: bool
    """False: the measured sweep never met the SLO (the per-replica rate is then None)."""
    per_replica_rps: float | None
    per_gpu_rps: float | None
    sustainable_rate_rps: float | None
    slo_quantile: str
    slo_seconds: float
    source: str
    """``sweep file PATH`` or ``load test #ID`` (the audit row)."""
    measured_at: datetime
    age_seconds: float
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class CostInputs:
    """What the sources read for one window, split into ``days`` equal periods ending at ``end``."""

    start: datetime
    end: datetime
    days: int
    gpu: pd.DataFrame
    """``GPU_COLS``: GPU-hours with telemetry and busy GPU-hours per pod and period."""
    costs: pd.DataFrame | None
    """``COST_COLS`` per pod and period; None when no cost source answered (money unknown)."""
    serving: pd.DataFrame
    """``SERVING_COLS``; ``stat`` is ``requests`` (by reason), ``latency_bucket`` (by ``le``) or
    ``quality_ok:<metric>`` (requests by reason while the metric held its threshold)."""
    jobs: list[FinishedJob] | None
    """Finished Kueue Workloads; None when the Kubernetes API did not answer."""
    running: list[RunningJob] = field(default_factory=list)
    """Admitted, unfinished Kueue Workloads at the end of the window (their pods' hours are in progress)."""
    pod_owners: dict[tuple[str, str], str] = field(default_factory=dict)
    """Per (namespace, pod) still running: the object that controls it (``ownerReferences``)."""
    last_seen: dict[tuple[str, str], float] = field(default_factory=dict)
    """Per (namespace, pod) of the batch services' namespaces: its last GPU sample in the window (unix s)."""
    pod_labels: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    """Per (namespace, pod) of the namespaces of services with ``pod_labels``: its labels (OpenCost's
    allocation labels, else ``kube_pod_labels``), as Prometheus writes their keys."""
    kueue_hours: pd.DataFrame | None = None
    """``cluster_queue, allocated_h``: GPU quota in use x hours, the allocation floor without OpenCost."""
    notes: list[str] = field(default_factory=list)
    queries: int = 0
    capacity: dict[str, CapacityEstimate | None] = field(default_factory=dict)
    """Per serving service name: its sustainable per-replica rate (sweep file or load test), None if unmeasured."""
    sources: dict[str, SourceStatus] = field(default_factory=dict)
    """Per source the reading asked (``prometheus``; ``opencost`` and ``kube`` where configured): whether it
    answered. One that did not makes the run degraded: what it gives came from elsewhere (OpenCost's metrics),
    or is unknown."""

    @property
    def period(self) -> timedelta:
        return (self.end - self.start) / max(self.days, 1)

    @property
    def idle(self) -> tuple[IdlePeriod, ...] | None:
        """OpenCost's ``__idle__`` per period, as the costs were read with it (``idle_capacity``)."""
        return idle_capacity(self.costs)


def prom_label(key: str) -> str:
    """A Kubernetes label key as Prometheus (``kube_pod_labels``) and OpenCost write it:
    ``app.kubernetes.io/name`` is ``app_kubernetes_io_name``. Both sides are compared in this form."""
    return re.sub(r"[^A-Za-z0-9_]", "_", key)


def selects(spec: ServiceOutcome, namespace: str, labels: Mapping[str, str]) -> bool:
    """Whether a pod of ``namespace`` with ``labels`` is one of a label-keyed service's (``matchLabels``)."""
    if not spec.pod_labels or namespace != spec.namespace:
        return False
    have = {prom_label(k): v for k, v in labels.items()}
    return all(have.get(prom_label(k)) == v for k, v in spec.pod_labels.items())
