"""Reclaim decisions: which idle workloads to stop this run, in which order, and which not.

Pure: a snapshot, its idle verdicts (``find_idle``), the policy, the mode and what the audit
log already holds go in; decisions come out. Nothing here reads or writes the cluster.

* A decision names the object to stop: the Kueue Workload's owner when gpuaas knows how to
  stop that kind (InferenceService, Notebook, Deployment, StatefulSet, an elastic RayCluster
  asked to free compute), else the Workload itself (``spec.active: false``): a Job, and a
  RayCluster whose ``spec.suspend`` Kueue owns. A Deployment has one Workload per pod: the
  owner is idle only if every one of its Workloads is.
* Never on missing parts: a snapshot whose Kubernetes or Prometheus source failed, or whose
  telemetry is older than ``collect.max_staleness_seconds``, yields only skipped decisions; an
  owner absent from the snapshot or already stopped is skipped. In apply mode the same limit
  holds between the snapshot's instant and the wall clock: a run evaluated at a past ``at``
  reads live objects but old telemetry, and a notebook busy since then looks idle.
* Opt-outs hold on the owner too: ``gpuaas.io/reclaim: "never"`` on the RayCluster, Notebook,
  ... skips it even when its Workload carries another value (the team annotates what it owns).
* Not what KEDA scales: a workload whose rule says ``actuator: keda`` is skipped (KEDA acts on
  the published idle signal; two actuators on one object would fight).
* Not right after an undo: an object gpuaas restored less than one window ago is skipped,
  because that window's evidence includes the time it was down because of gpuaas.
* A decision carries what the snapshot read of its target: uid and resourceVersion (a Workload
  target too), and a Workload's negotiated API version; the action refuses a write to an
  object whose uid or resourceVersion differs.
* Idempotent: a decision's key is (mode, object, uid, window end). A key the audit log already
  holds as planned (dry-run) or applied is skipped ("already decided"), so re-running the same
  window acts once.
* The cap: at most ``max_actions_per_run`` planned; the most wasteful first (GPUs x idle time),
  the rest deferred with their rank.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, cast

import numpy as np
import pandas as pd

from gpuaas.instant import utc_stamp
from gpuaas.models import Outcome, Snapshot, bounded_key
from gpuaas.phrases import counted, verdict_phrase
from gpuaas.policies.reclaim.causes import SkipCause
from gpuaas.policies.reclaim.opt_out import is_opted_out
from gpuaas.policy import WORKLOAD_KINDS, Actuator, FreeGoal, Mode, Policy

__all__ = [
    "STOPPABLE_KINDS",
    "Decision",
    "finalize_decisions",
    "plan_reclaim",
    "reclaim_key",
    "snapshot_cause",
    "snapshot_problem",
]

STOPPABLE_KINDS = frozenset(WORKLOAD_KINDS) - {"Workload"}
"""Owner kinds gpuaas stops itself; a Workload owned by anything else is deactivated instead."""


@dataclass(frozen=True)
class Decision:
    """One idle target and what the policy says about it (``outcome`` planned | skipped | deferred)."""

    kind: str
    namespace: str
    name: str
    uid: str | None
    tenant: str | None
    gpus: float
    idle_seconds: float
    free: FreeGoal
    """The goal the policy asked for: ``compute`` or ``quota`` (the action reports what it freed)."""
    outcome: Outcome
    reason: str
    resource_version: str | None
    """The target's resourceVersion in the snapshot: the write is refused when it (or the uid) changed."""
    idempotency_key: str
    mode: Mode
    evidence: dict[str, Any] = field(default_factory=dict)
    api_version: str | None = None
    """A Workload target's API version as the reader negotiated it (None: the writer's default for the kind)."""
    decided_by: int | None = None
    """The audit row that already decided this key (``finalize_decisions``): nothing new is recorded."""
    cause: SkipCause | None = None
    """Why it is skipped or deferred, as a type (None when planned): what a later run compares, never the reason."""

    @property
    def waste(self) -> float:
        """GPU-seconds held idle so far: the cap's ranking."""
        return self.gpus * self.idle_seconds

    @property
    def ref(self) -> str:
        """The object written: ``Workload team-a/raycluster-ray-3f2a1`` for a RayCluster stopped through Kueue."""
        return f"{self.kind} {self.namespace}/{self.name}"

    @property
    def stops(self) -> tuple[str, str]:
        """(kind, name) of what the decision stops, as the team knows it: a Workload target's owner when it has one."""
        owner = str(self.evidence.get("owner") or "")
        kind, _, name = owner.partition(" ")
        return (kind, name) if name else (self.kind, self.name)

    @property
    def subject(self) -> str:
        """``RayCluster team-a/ray``: ``stops`` as tables and headlines name it."""
        kind, name = self.stops
        return f"{kind} {self.namespace}/{name}"


def reclaim_key(mode: Mode, kind: str, namespace: str, name: str, uid: str | None, window_end: datetime) -> str:
    """Same mode, object and window: same decision (the window's end in UTC: one instant, one key, whatever its offset);
    bounded to the audit log's column (``bounded_key``): a legal name can make it longer."""
    return bounded_key(f"reclaim/{mode}/{kind}/{namespace}/{name}/{uid or '-'}/{utc_stamp(window_end)}")


def snapshot_problem(snapshot: Snapshot, max_staleness_seconds: float,
                     wall_clock: datetime | None = None) -> str | None:
    """Why this snapshot must not be acted on, or None when it may (``snapshot_cause``'s words)."""
    found = snapshot_cause(snapshot, max_staleness_seconds, wall_clock)
    return None if found is None else found[1]


def snapshot_cause(snapshot: Snapshot, max_staleness_seconds: float,
                   wall_clock: datetime | None = None) -> tuple[SkipCause, str] | None:
    """Why this snapshot must not be acted on, as (cause, words), or None when it may.

    ``wall_clock`` (apply mode): the instant the writes would happen; a snapshot evaluated
    more than ``max_staleness_seconds`` before it describes the past, not the live objects.
    """
    if wall_clock is not None:
        age = (wall_clock - snapshot.collected_at).total_seconds()
        if age > max_staleness_seconds:
            return SkipCause.past_evidence, (f"the snapshot is evaluated {age:.0f}s before now (limit "
                                             f"{max_staleness_seconds:.0f}s): no writes on past evidence")
    for name in ("kube", "prometheus"):
        status = snapshot.sources.get(name)
        if status is None or not status.ok:
            return SkipCause.source_missing, f"{name} did not answer for this snapshot: no action on missing data"
    # Any other required source (OpenCost where configured): a degraded snapshot is decided and shown, never
    # acted on, whichever source failed, as the rebalance does; an optional one (NVML in auto mode) degrades nothing.
    if failed := snapshot.failed_sources:
        return SkipCause.degraded, f"{failed[0]} did not answer for this snapshot: no action on a degraded snapshot"
    staleness = snapshot.sources["prometheus"].staleness_s
    if staleness is not None and staleness > max_staleness_seconds:
        return SkipCause.stale_telemetry, (f"telemetry is {staleness:.0f}s old (limit {max_staleness_seconds:.0f}s): "
                                           "no action on stale data")
    return None


def _none(value: Any) -> Any:
    return None if value is None or (isinstance(value, float) and pd.isna(value)) else value


def _owners(snapshot: Snapshot) -> dict[tuple[str, str, str], dict[str, Any]]:
    if snapshot.owners.empty:
        return {}
    records: list[dict[str, Any]] = snapshot.owners.to_dict(orient="records")
    return {(str(r["kind"]), str(r["namespace"]), str(r["name"])): r for r in records}


def _inactive_uids(snapshot: Snapshot) -> set[str]:
    """Workloads whose ``spec.active`` is false: stopped already, whatever Kueue has done about it yet."""
    frame = snapshot.workloads
    if frame.empty or "active" not in frame:
        return set()
    return {str(uid) for uid in frame.loc[~frame["active"].astype(bool), "uid"]}


def _workload_versions(snapshot: Snapshot) -> dict[str, tuple[str | None, str | None]]:
    """uid -> (resourceVersion, apiVersion) of each Workload as the snapshot read it."""
    frame = snapshot.workloads
    if frame.empty or "resource_version" not in frame:
        return {}
    api = frame["api_version"] if "api_version" in frame else pd.Series(None, index=frame.index)
    def text(value: Any) -> str | None:
        value = _none(value)
        return None if value is None or value == "" else str(value)

    return {str(uid): (text(rv), text(version)) for uid, rv, version in zip(frame["uid"], frame["resource_version"], api)}


class _Columns:
    """The idle frame's columns as arrays, read per target by row positions: a pandas slice per
    target cost milliseconds, and a full fleet has thousands of targets each cycle."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame
        self.cols: dict[str, np.ndarray] = {str(c): frame[c].to_numpy() for c in frame.columns}
        self._floats: dict[str, np.ndarray] = {}

    def has(self, name: str) -> bool:
        return name in self.cols

    def at(self, name: str, rows: np.ndarray) -> np.ndarray:
        return cast(np.ndarray, self.cols[name][rows])

    def first(self, name: str, rows: np.ndarray) -> Any:
        return self.cols[name][rows[0]]

    def floats(self, name: str) -> np.ndarray:
        """The column as floats, missing values (None, NA, text) as NaN: converted once."""
        if name not in self._floats:
            self._floats[name] = pd.to_numeric(self.frame[name], errors="coerce").to_numpy(dtype=float,
                                                                                         na_value=np.nan)
        return self._floats[name]

    def stat(self, name: str, rows: np.ndarray, how: str, empty: float = float("nan")) -> float:
        """``how`` (max, min, mean, sum) over the values that are not NaN, as pandas skips them."""
        values = self.floats(name)[rows]
        values = values[~np.isnan(values)]
        return float(getattr(values, how)()) if values.size else empty


def _kueue_owns_the_stop(frame: pd.DataFrame, owners: Mapping[tuple[str, str, str], Mapping[str, Any]]) -> pd.Series:
    """Rows whose owner Kueue would restart if gpuaas stopped it: the Workload is deactivated instead.

    Kueue's Ray integration owns an admitted RayCluster's ``spec.suspend``: a client's suspend
    is set back to false and the quota stays reserved. Deactivating the Workload makes Kueue
    evict it, release the quota and suspend the RayCluster itself. Only an elastic RayCluster
    asked to free ``compute`` is stopped on the object (its workers go to zero in place).
    """
    elastic = {(ns, name) for (kind, ns, name), o in owners.items() if kind == "RayCluster" and o.get("elastic")}
    keys = pd.Series(list(zip(frame["namespace"].astype(str), frame["owner_name"].astype(str))), index=frame.index,
                     dtype=object)
    shrinks = keys.isin(elastic) & (frame["free"] == "compute")
    return (frame["owner_kind"] == "RayCluster") & ~shrinks


def _evidence(c: _Columns, rows: np.ndarray) -> dict[str, Any]:
    return {**_window_evidence(c, rows),
        "threshold": float(c.floats("threshold")[rows[0]]),
        "activity_max": _none(c.stat("activity_max", rows, "max")),
        "activity_avg": _none(c.stat("activity_avg", rows, "mean")),
        "coverage": _none(c.stat("coverage", rows, "min")),
        "requests": _none(c.stat("requests", rows, "sum")),
        "gpus_requested": c.stat("gpus", rows, "sum", empty=0.0),
        "gpus_observed": c.stat("gpus_observed", rows, "sum", empty=0.0),
        "held_seconds": c.stat("held_seconds", rows, "min"),
        "workloads": [str(n) for n in c.at("name", rows)],
    }


def _window_evidence(c: _Columns, rows: np.ndarray) -> dict[str, Any]:
    """The window used (the longest of the target's Workloads) and, for the adaptive strategy, why."""
    out: dict[str, Any] = {"window_minutes": c.stat("window_minutes", rows, "max")}
    if c.has("strategy") and str(c.first("strategy", rows)) == "adaptive":
        longest = rows[int(np.nanargmax(c.floats("window_minutes")[rows]))]
        base = _none(c.cols["base_window_minutes"][longest]) if c.has("base_window_minutes") else None
        why = _none(c.cols["window_reason"][longest]) if c.has("window_reason") else None
        out.update(strategy="adaptive", base_window_minutes=None if base is None else float(base),
                   window_reason=None if why is None else str(why))
    return out


def _opted_out_idle(frame: pd.DataFrame) -> pd.Series:
    """The workloads idle by every test but their opt-out (``find_idle``'s ``idle_opted_out``; False where a frame
    made before it lacks the column)."""
    if "idle_opted_out" not in frame:
        return pd.Series(False, index=frame.index)
    return frame["idle_opted_out"].fillna(False).astype(bool)


def plan_reclaim(snapshot: Snapshot, idle: pd.DataFrame, policy: Policy, mode: Mode,
                 wall_clock: datetime | None = None) -> list[Decision]:
    """One decision per target with at least one idle Workload: planned, or skipped and why.

    ``idle`` is ``find_idle(snapshot.workloads, policy, snapshot.collected_at)``;
    ``wall_clock`` is the real time of the run (checked in apply mode only: a dry-run of a
    past window is a harmless what-if). Call ``finalize_decisions`` next for the
    idempotency check, recent restores and the cap.
    """
    if idle.empty:
        return []
    problem = snapshot_cause(snapshot, policy.collect.max_staleness_seconds,
                             wall_clock if mode is Mode.apply else None)
    owners = _owners(snapshot)
    versions = _workload_versions(snapshot)
    inactive = _inactive_uids(snapshot)
    frame = idle.copy()
    stoppable = frame["owner_kind"].isin(STOPPABLE_KINDS) & frame["owner_name"].notna()
    stoppable &= ~_kueue_owns_the_stop(frame, owners)
    frame["target_kind"] = frame["owner_kind"].where(stoppable, "Workload")
    frame["target_name"] = frame["owner_name"].where(stoppable, frame["name"])
    targets = ["target_kind", "namespace", "target_name"]
    # Only targets with an idle Workload get a decision, and those whose every Workload is idle but for an opt-out
    # (skipped, saying so): the others are dropped in one pass, not one group at a time.
    frame["idle_opted_out"] = _opted_out_idle(frame)
    frame["idle_or_opted_out"] = (frame["verdict"] == "idle") | frame["idle_opted_out"]
    by_target = [frame[c] for c in targets]
    frame = frame[(frame["verdict"] == "idle").groupby(by_target, dropna=False).transform("any")
                  | frame["idle_or_opted_out"].groupby(by_target, dropna=False).transform("all")]
    frame = frame.reset_index(drop=True)
    c = _Columns(frame)
    groups = frame.groupby(targets).indices  # target -> row positions, in the frame's order
    decisions = []
    for kind, namespace, name in sorted(groups):
        rows = groups[(kind, namespace, name)]
        idle_mask = c.at("idle_or_opted_out", rows)
        if not idle_mask.any():
            continue
        idle_rows = rows[idle_mask]
        owner = owners.get((str(kind), str(namespace), str(name)) if kind != "Workload" else (
            str(c.first("owner_kind", rows)), str(namespace), str(c.first("owner_name", rows))))
        uid: str | None
        if kind == "Workload":
            uid = str(c.first("uid", rows))
            rv, api_version = versions.get(uid, (None, None))
        else:
            uid = str(owner["uid"]) if owner is not None else None
            rv, api_version = (str(owner["resource_version"]) if owner is not None else None), None
        outcome, reason = Outcome.planned, str(c.first("reason", idle_rows))
        cause: SkipCause | None = None
        if problem:
            cause, reason = problem
        elif len(idle_rows) == len(rows) and (opted := c.at("idle_opted_out", rows)).any():
            cause, reason = SkipCause.opted_out, str(c.first("reason", rows[opted]))
        elif c.has("actuator") and (c.at("actuator", rows) == Actuator.keda.value).any():
            cause, reason = SkipCause.keda, "KEDA scales it on gpuaas's idle signal (policy actuator: keda)"
        elif len(idle_rows) < len(rows):
            busy = rows[~idle_mask][0]
            why = verdict_phrase(str(c.cols["verdict"][busy]), str(c.cols["reason"][busy]),
                                 c.floats("activity_max")[busy], c.floats("threshold")[busy],
                                 c.floats("idle_seconds")[busy] if c.has("idle_seconds") else None)
            cause, reason = SkipCause.partly_busy, f"not every Workload of it is idle ({c.cols['name'][busy]}: {why})"
        elif owner is None and (kind != "Workload" or c.first("owner_kind", rows) in STOPPABLE_KINDS):
            cause, reason = SkipCause.owner_missing, "owner not in the snapshot: no action on missing data"
        elif owner is not None and is_opted_out(owner.get("reclaim")):
            cause, reason = SkipCause.opted_out, f'opted out on the {owner["kind"]} (gpuaas.io/reclaim: "never")'
        elif owner is not None and bool(owner.get("stopped")):
            cause, reason = SkipCause.already_stopped, "already stopped"
        elif kind == "RayCluster" and owner is not None and owner.get("elastic") and _none(owner.get("replicas")) == 0:
            # Its stop is the workers to zero (an elastic one asked for compute): done, the head is all that is left.
            cause, reason = SkipCause.no_workers, "already stopped (no workers left to scale to zero)"
        elif kind == "Workload" and uid in inactive:
            # Deactivated, and Kueue has not evicted it yet: the snapshot still shows it admitted.
            cause, reason = SkipCause.already_deactivated, "already deactivated (spec.active: false)"
        if cause is not None:
            outcome = Outcome.skipped
        evidence = _evidence(c, rows)
        if kind == "Workload" and owner is not None:
            evidence["owner"] = f"{owner['kind']} {owner['name']}"
        idle_seconds = c.stat("idle_seconds", idle_rows, "min")
        if outcome == Outcome.planned:  # why it is a target, with its numbers: the words of the idle table and the CLI
            reason = verdict_phrase("idle", reason, evidence["activity_max"], evidence["threshold"], idle_seconds)
        decisions.append(Decision(
            kind=str(kind), namespace=str(namespace), name=str(name), uid=uid,
            tenant=_none(c.first("tenant", rows)), gpus=c.stat("gpus", rows, "sum", empty=0.0),
            idle_seconds=idle_seconds, free=FreeGoal(str(c.first("free", rows))),
            outcome=outcome, reason=reason,
            resource_version=rv,
            idempotency_key=reclaim_key(mode, str(kind), str(namespace), str(name), uid, snapshot.collected_at),
            mode=mode, evidence=evidence, api_version=api_version, cause=cause,
        ))
    return decisions


def finalize_decisions(decisions: Sequence[Decision], decided: Mapping[str, int], cap: int,
                       restored: Mapping[tuple[str, str, str], tuple[int, datetime]] | None = None,
                       now: datetime | None = None) -> list[Decision]:
    """Skip what the audit log already decided for this window or restored inside it, then cap by waste.

    ``decided`` maps idempotency keys to the audit id of the decision that counts;
    ``restored`` maps (kind, namespace, name) to the latest restore's audit id and time
    (``now`` is the window's end). Returned most wasteful first.
    """
    out: list[Decision] = []
    for d in decisions:
        if d.outcome == Outcome.planned and d.idempotency_key in decided:
            d = replace(d, outcome=Outcome.skipped, decided_by=decided[d.idempotency_key],
                        cause=SkipCause.already_decided, reason=f"already decided for this window (audit #{decided[d.idempotency_key]})")
        last = (restored or {}).get((d.kind, d.namespace, d.name))
        if d.outcome == Outcome.planned and last is not None and now is not None:
            window = float(d.evidence.get("window_minutes") or 0) * 60
            if (now - last[1]).total_seconds() < window:
                d = replace(d, outcome=Outcome.skipped, cause=SkipCause.restored_recently, reason=(
                    f"restored by undo (audit #{last[0]}) less than one window ago: its evidence covers "
                    "the time gpuaas had stopped it"))
        out.append(d)
    ranked = sorted(out, key=lambda d: (-d.waste, d.namespace, d.kind, d.name))
    planned = 0
    final = []
    for d in ranked:
        if d.outcome == Outcome.planned:
            planned += 1
            if planned > cap:
                d = replace(d, outcome=Outcome.deferred, cause=SkipCause.over_cap,
                            reason=f"over the cap of {counted(cap, 'action')} per run (rank {planned} by GPUs x idle time)")
        final.append(d)
    return final
