"""Collect, as one use case: from the sources to one stored snapshot, without Prefect.

The path of one collect, in order (every caller takes it: the flow, ``gpuaas collect``, the benchmarks):

1. ``read``: one remote source at an instant (I/O). It raises on failure, so that the caller decides
   about retries; ``failed`` is the status of a source that still failed after them.
2. ``assemble``: the readings joined into one snapshot, NVML sampled. One failing source degrades the
   snapshot; only every source failing raises, because missing data is never evidence of idleness.
3. ``plan``: what the store receives and what the run reports, pure: the per-queue and per-tenant
   history rows, the idle candidates, and whether the full document is kept. Whether the
   ``store.full_snapshot_every_minutes`` cadence is due is read from the store beforehand
   (``full_due``) and passed in as data, so ``plan`` can be called in a REPL.
4. ``apply``: the history, the snapshot row (with its document when planned), then the pruning (by the
   wall clock, never by the snapshot's instant).

``read_snapshot`` is 1 and 2 without retries, one source after the other: the plain read a REPL, a
benchmark or a test takes. The flow reads the sources in its own tasks, with retries and timeouts.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from gpuaas.errors import ConfigError
from gpuaas.fleet_history import queue_aggregates, tenant_aggregates
from gpuaas.kueue_gaps import gap_notes
from gpuaas.models import Snapshot, SourceStatus
from gpuaas.policies.reclaim import find_idle
from gpuaas.policy import Policy
from gpuaas.settings import GpuaasSettings
from gpuaas.snapshot import SOURCES, assemble_snapshot, failed_source, read_source, snapshot_windows

if TYPE_CHECKING:  # SQLAlchemy is paid by the step that stores, not by every import of the collect
    from gpuaas.store import Store

__all__ = ["SOURCES", "UNJUDGED_LISTED", "CollectPlan", "Reading", "Unjudged", "apply", "assemble", "failed", "full_due",
           "plan", "read", "read_snapshot", "windows"]

UNJUDGED_LISTED = 50
"""How many unjudged workloads a run's summary names (the most GPUs first); the count is always whole."""

Reading = tuple[Any, SourceStatus]
"""One source's parsed answer (None where it failed) and its health."""


@dataclass(frozen=True)
class Unjudged:
    """A GPU workload the reclaim policy cannot call idle or busy, and what it lacks: it is never reclaimed."""

    workload: str
    """As the team knows it: ``StatefulSet team-b/dark`` (the Workload's owner where it has one)."""
    gpus: float
    why: str

    def as_dict(self) -> dict[str, Any]:
        return {"workload": self.workload, "gpus": self.gpus, "why": self.why}


@dataclass(frozen=True)
class CollectPlan:
    """Everything one collect stores and reports about its snapshot; nothing left to decide."""

    snapshot: Snapshot
    summary: dict[str, Any]
    """The snapshot's counts (``Snapshot.summary``) and its ``notes``: what gpuaas reads but cannot act on
    (``gpuaas.kueue_gaps``: accelerators it does not manage, LocalQueues of a missing ClusterQueue), one sentence
    each. The stored row's payload, the run's report."""
    idle_candidates: int
    """GPU workloads the reclaim policy finds idle now (before the audit log and the cap have their say)."""
    unjudged: tuple[Unjudged, ...]
    """GPU workloads it cannot judge (incomplete telemetry, a serving workload without request metrics, a
    Workload Kueue left without an owner), the most GPUs first."""
    queue_rows: list[dict[str, Any]]
    tenant_rows: list[dict[str, Any]]
    full: bool
    """Whether the full document is stored: when degraded (the cycle an incident review asks about) or due."""
    retention: timedelta
    keep_full: int
    """How many of the newest full documents pruning keeps."""

    @property
    def required_sources(self) -> list[str]:
        """The sources whose failure degrades the snapshot."""
        return [n for n, s in self.snapshot.sources.items() if s.required]


def windows(settings: GpuaasSettings) -> list[float]:
    """The windows every query aggregates over: the collect's, and every reclaim window the policy names."""
    return snapshot_windows(settings)


def read(name: str, settings: GpuaasSettings, now: datetime, windows: Sequence[float]) -> Reading:
    """One remote source (``SOURCES``) read at ``now``; raises on failure, so that the caller decides about retries."""
    return read_source(name, settings, now, windows)


def failed(settings: GpuaasSettings, name: str, error: BaseException, latency_s: float) -> Reading:
    """The reading of a source that failed after its retries: no value, the error in words (never a traceback)."""
    return None, failed_source(settings, name, error, latency_s)


def assemble(settings: GpuaasSettings, now: datetime, windows: Sequence[float],
             readings: Mapping[str, Reading]) -> Snapshot:
    """The readings joined into one snapshot; ``SourceUnavailable`` only when no source answered."""
    return assemble_snapshot(settings, now, windows, dict(readings))


def read_snapshot(settings: GpuaasSettings, now: datetime | None = None) -> Snapshot:
    """Every source read once at ``now`` (default: the current time), without retries, and joined."""
    now = now or datetime.now(UTC)
    spans = windows(settings)
    readings: dict[str, Reading] = {}
    for name in SOURCES:
        started = time.monotonic()
        try:
            readings[name] = read(name, settings, now, spans)
        except Exception as exc:  # noqa: BLE001 - one source failing must only degrade the snapshot
            readings[name] = failed(settings, name, exc, time.monotonic() - started)
    return assemble(settings, now, spans, readings)


def full_due(store: Store, collected_at: datetime, policy: Policy) -> bool:
    """Whether no full document was stored within ``store.full_snapshot_every_minutes`` before ``collected_at``."""
    return store.wants_full_snapshot(collected_at, timedelta(minutes=policy.store.full_snapshot_every_minutes))


def other_cluster(cluster: str | None, stored: tuple[str, datetime] | None) -> str | None:
    """Why a snapshot of ``cluster`` must not go into a store whose newest snapshot came from another one, or None.

    Two clusters sharing one database would mix their queue and tenant history under the same
    ClusterQueue and namespace names: the rebalance would plan one cluster's quotas on both's usage.
    """
    if stored is None or cluster is None or stored[0] == cluster:
        return None
    return (f"this database holds the history of another cluster (kube-system uid {stored[0]}, last collected "
            f"{stored[1]:%Y-%m-%d %H:%M} UTC) than the one gpuaas reads now ({cluster}): give each cluster "
            "its own database, or point gpuaas back at that cluster")


def _unjudged(idle: Any) -> tuple[Unjudged, ...]:
    rows = idle[idle["verdict"] == "unknown"]
    out = []
    for kind, namespace, name, owner_kind, owner_name, gpus, why in zip(
            rows["kind"], rows["namespace"], rows["name"], rows["owner_kind"], rows["owner_name"], rows["gpus"],
            rows["reason"], strict=True):
        known = isinstance(owner_kind, str) and isinstance(owner_name, str) and owner_kind and owner_name
        subject = f"{owner_kind} {namespace}/{owner_name}" if known else f"{kind} {namespace}/{name}"
        out.append(Unjudged(subject, float(gpus), str(why)))
    return tuple(sorted(out, key=lambda u: (-u.gpus, u.workload)))


def plan(snapshot: Snapshot, policy: Policy, *, full_due: bool,
         stored_cluster: tuple[str, datetime] | None = None, database_variable: str = "GPUAAS_DATABASE_URL",
         ) -> CollectPlan:
    """What the store receives and the run reports. Pure: ``full_due`` and ``stored_cluster`` (``Store.latest_cluster``)
    are the store's answers, read beforehand. Raises ``ConfigError`` naming ``database_variable`` (the setting that
    chose the database, ``GpuaasSettings.database_variable``) when the store is another cluster's."""
    problem = other_cluster(snapshot.cluster, stored_cluster)
    if problem:
        raise ConfigError(problem, field=database_variable)
    idle = find_idle(snapshot.workloads, policy, snapshot.collected_at)
    return CollectPlan(
        snapshot=snapshot,
        summary={**snapshot.summary(), "notes": gap_notes(snapshot.data_quality, snapshot.workloads)},
        idle_candidates=int((idle["verdict"] == "idle").sum()),
        unjudged=_unjudged(idle),
        queue_rows=queue_aggregates(snapshot).to_dict(orient="records"),
        tenant_rows=tenant_aggregates(snapshot, policy).to_dict(orient="records"),
        full=snapshot.degraded or full_due,
        retention=timedelta(days=policy.collect.retention_days),
        keep_full=policy.store.keep_full_snapshots,
    )


def apply(collect_plan: CollectPlan, store: Store, *, wall_clock: datetime | None = None) -> int:
    """Store the plan: history, the snapshot row (its document when planned), then prune; returns the snapshot id.

    Rows are stamped with the snapshot's instant but pruned by ``wall_clock`` (default: the current time), never
    by that instant: the retention counts back from now. Pruned by a later instant, a collect would delete rows
    younger than the retention (all of them, a retention ahead); by an earlier one (an incident looked at
    again), it would keep rows past it. So the history rows of a collect for an instant older than the retention
    go with its own pruning, as the next collect's would take them; its snapshot row stays until then, so the id
    it reports names a stored row (``gpuaas reclaim --snapshot-id`` decides on it again).

    The snapshot is also kept in this process's memory for the flows that decide on it
    (``gpuaas.store.load_snapshot``), whether or not its document is stored.
    """
    from gpuaas.store import remember_snapshot

    snap = collect_plan.snapshot
    at = snap.collected_at
    store.save_history(at, collect_plan.queue_rows, collect_plan.tenant_rows)
    record = store.save_snapshot(at, collect_plan.summary, {"snapshot": snap.to_json()} if collect_plan.full else {})
    snapshot_id = int(record.id or 0)
    remember_snapshot(store, snapshot_id, snap)
    now = wall_clock or datetime.now(UTC)
    store.prune_snapshots(collect_plan.retention, now=now, keep_latest=collect_plan.keep_full, keep=snapshot_id)
    store.prune_history(collect_plan.retention, now=now)
    return snapshot_id
