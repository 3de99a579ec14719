"""Which GPU workloads hold GPUs and do nothing: a pure function of a snapshot.

A workload is idle only on positive evidence: every GPU it holds at or below the activity
threshold for the whole window (``activity_max`` is the maximum over its GPUs and the window; a GPU whose
samples hold no value, NaN, or a value below 0, which no duty cycle reads, makes it unknown),
telemetry complete for that window (the snapshot's sample-count floor and longest-gap rule,
``gpuaas.policies.reclaim.coverage``, which stale telemetry fails, and every requested GPU seen), no serving
requests in the window, older than the grace period, and not opted out. Anything less is
``unknown`` or ``busy`` — missing data is never evidence of idleness.

Rules resolve from the most general to the most specific: the reclaim defaults, then the
rule for the workload's kind, then the rule of the workload's tenant.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from gpuaas.policies.reclaim.coverage import incomplete_detail
from gpuaas.policies.reclaim.opt_out import opted_out as opted_out_values
from gpuaas.policy import Actuator, FreeGoal, Policy, ReclaimRule, ReclaimStrategy

__all__ = ["COMPLETE_COVERAGE", "IDLE_COLUMNS", "EffectiveRule", "GpuEvidence", "find_idle", "gpu_evidence",
           "resolve_rule"]

COMPLETE_COVERAGE = 0.95
"""Fallback only, for frames without the snapshot's ``complete_Wm`` columns (no gap evidence): the share of
expected samples a GPU must have. Snapshots carry the gap-based rule of ``gpuaas.policies.reclaim.coverage``."""

IDLE_COLUMNS = [
    "kind", "namespace", "name", "uid", "tenant", "queue", "cluster_queue", "gpus", "owner_kind", "owner_name",
    "verdict", "reason", "window_minutes", "threshold", "grace_minutes", "free", "activity_max", "activity_avg",
    "coverage", "requests", "held_seconds", "gpus_observed", "idle_seconds",
    "strategy", "activity_decides", "actuator", "idle_opted_out",
]


@dataclass(frozen=True)
class EffectiveRule:
    enabled: bool
    window_minutes: float
    activity_threshold: float
    grace_minutes: float
    free: FreeGoal
    strategy: ReclaimStrategy = ReclaimStrategy.fixed
    actuator: Actuator = Actuator.gpuaas


def resolve_rule(policy: Policy, kind: str | None, tenant: str | None) -> EffectiveRule:
    """Defaults, overridden by the kind's rule, overridden by the tenant's rule."""
    base = policy.reclaim
    layers: list[ReclaimRule] = []
    if kind and kind in base.kinds:
        layers.append(base.kinds[kind])
    for t in policy.tenants:
        if t.name == tenant:
            layers.append(t.reclaim)
    values = {"enabled": True, "window_minutes": base.window_minutes, "activity_threshold": base.activity_threshold,
              "grace_minutes": base.grace_minutes, "free": base.free, "strategy": base.strategy,
              "actuator": base.actuator}
    for layer in layers:
        for key in values:
            value = getattr(layer, key)
            if value is not None:
                values[key] = value
    return EffectiveRule(**values)  # type: ignore[arg-type]


def _column(frame: pd.DataFrame, name: str) -> pd.Series:
    return frame[name].astype(float) if name in frame else pd.Series(np.nan, index=frame.index)


def find_idle(workloads: pd.DataFrame, policy: Policy, now: datetime) -> pd.DataFrame:
    """One row per admitted GPU workload with ``verdict`` idle | busy | unknown | excluded and why.

    ``workloads`` is ``Snapshot.workloads``; the result carries the evidence (window,
    threshold, max/avg activity, coverage, requests) that the audit log records.
    """
    held = workloads[(workloads["state"] == "admitted") & (workloads["gpus"] > 0)].copy()
    if held.empty:
        return pd.DataFrame(columns=IDLE_COLUMNS)
    rules = [resolve_rule(policy, k, t if isinstance(t, str) else None) for k, t in zip(held["kind"], held["tenant"])]
    held["window_minutes"] = [r.window_minutes for r in rules]
    held["threshold"] = [r.activity_threshold for r in rules]
    held["grace_minutes"] = [r.grace_minutes for r in rules]
    held["free"] = [r.free.value for r in rules]
    held["strategy"] = [r.strategy.value for r in rules]
    held["actuator"] = [r.actuator.value for r in rules]
    enabled = np.array([r.enabled for r in rules])

    # Pick each row's evidence from the column of its own window.
    for stat in ("activity_max", "activity_avg", "coverage", "requests"):
        held[stat] = np.nan
        for minutes in held["window_minutes"].unique():
            rows = held["window_minutes"] == minutes
            held.loc[rows, stat] = _column(held, f"{stat}_{minutes:g}m")[rows]
    started = pd.to_datetime(held["admitted_at"], utc=True).fillna(pd.to_datetime(held["created_at"], utc=True))
    held["held_seconds"] = (pd.Timestamp(now) - started).dt.total_seconds()

    observed = held["gpus_observed"].astype(float).fillna(0) if "gpus_observed" in held else 0.0
    held["complete"] = False
    for minutes in held["window_minutes"].unique():
        rows = held["window_minutes"] == minutes
        held.loc[rows, "complete"] = _complete(held, minutes)[rows]
    # NaN samples are counted by count_over_time but carry no activity, and a reading below 0 is no duty cycle:
    # incomplete, never idle (NaN >= 0 is False).
    complete = held["complete"].astype(bool) & (observed >= held["gpus"]) & (held["activity_max"] >= 0)
    serving = held["kind"].isin(policy.reclaim.serving_kinds)
    requests_known_zero = held["requests"].fillna(-1) == 0
    has_requests = held["requests"].fillna(0) > 0
    quiet = held["activity_max"] <= held["threshold"]
    opted_out = opted_out_values(held.get("reclaim", pd.Series(None, index=held.index)))
    excluded_ns = held["namespace"].isin(policy.reclaim.exclude_namespaces)
    excluded_q = held["queue"].isin(policy.reclaim.exclude_queues) | held["cluster_queue"].isin(
        policy.reclaim.exclude_queues)
    # An age nobody recorded (neither admitted nor created) is not an age past the grace period: never idle.
    young = ~(held["held_seconds"] >= held["grace_minutes"] * 60)

    left, left_why = _left_without_owner(held)
    conditions = [
        left, opted_out, excluded_ns, excluded_q, ~enabled, young, ~complete, has_requests,
        serving & ~requests_known_zero, ~quiet,
    ]
    verdicts = ["unknown", "excluded", "excluded", "excluded", "excluded", "excluded", "unknown", "busy", "unknown",
                "busy"]
    reasons: list[Any] = [
        left_why,
        'opted out (gpuaas.io/reclaim: "never")',
        "namespace excluded by policy",
        "queue excluded by policy",
        "reclaim disabled for this tenant or kind",
        "inside the grace period",
        INCOMPLETE,
        "served requests in the window",
        "no request metrics for a serving workload",
        "GPU activity above the threshold",
    ]
    # Rows that only GPU activity decides: the adaptive strategy re-decides these from history.
    held["activity_decides"] = ~np.logical_or.reduce([np.asarray(c, dtype=bool) for c in conditions[:-1]])
    # Idle by every test but the opt-out: the plan skips it as opted out, so that the reclaim table and the audit log
    # say why an idle workload is never stopped.
    held["idle_opted_out"] = np.asarray(opted_out, dtype=bool) & ~np.logical_or.reduce(
        [np.asarray(c, dtype=bool) for c in (left, excluded_ns, excluded_q, ~enabled, *conditions[5:])])
    held["verdict"] = np.select(conditions, verdicts, default="idle")
    held["reason"] = np.select(conditions, reasons, default="every GPU at or below the threshold for the whole window")
    blind = held["reason"] == INCOMPLETE
    held.loc[blind, "reason"] = [_incomplete_reason(held, i, observed) for i in held.index[blind]]
    held["gpus_observed"] = observed
    held["idle_seconds"] = _idle_seconds(held, observed, serving)
    return held.reindex(columns=IDLE_COLUMNS).reset_index(drop=True)


INCOMPLETE = "telemetry incomplete for the window"
"""The reason of a row whose telemetry is incomplete, before it is replaced by the detail of what is missing."""


def _left_without_owner(held: pd.DataFrame) -> tuple[pd.Series, np.ndarray]:
    """Workloads a job controller made and no longer owns: per row, whether, and what to do about it.

    Kueue drops a StatefulSet as its Workload's owner and releases the set's pods in one reconcile,
    concurrently: when the garbage collector sees the last pod go first, it keeps the Workload (the
    set still owns it), then Kueue drops the set, and the Workload is left without an owner. Nothing
    deletes it; it holds its quota and blocks the set's scale back up. It has no pods, so no telemetry:
    without this it would read as a bare Workload with incomplete telemetry."""
    owner = held.get("job_owner_name", pd.Series(None, index=held.index, dtype=object))
    left = held["owner_kind"].isna() & owner.notna()
    gvk = held.get("job_owner_gvk", pd.Series(None, index=held.index, dtype=object))
    rows = zip(left, gvk, held["namespace"], owner, held["name"], held["gpus"].astype(float), strict=True)
    why = np.array([_left_reason(str(g or "").partition("Kind=")[2] or "its job", ns, job, name, gpus)
                    if is_left else "" for is_left, g, ns, job, name, gpus in rows], dtype=object)
    return left, why


def _left_reason(kind: str, namespace: str, job: str, workload: str, gpus: float) -> str:
    return (f"Kueue left this Workload without an owner after {kind} {namespace}/{job} scaled to zero: nothing will "
            f"delete it and it keeps {gpus:g} GPU{'' if gpus == 1 else 's'} of quota; delete it (kubectl delete "
            f"workload -n {namespace} {workload})")


def _complete(held: pd.DataFrame, minutes: float) -> pd.Series:
    """The snapshot's verdict on the window's telemetry (count floor and longest gap), else the count alone."""
    column = f"complete_{minutes:g}m"
    if column in held:
        return held[column].astype(object).fillna(False).astype(bool)
    return _column(held, f"coverage_{minutes:g}m").fillna(0) >= COMPLETE_COVERAGE


def _incomplete_reason(held: pd.DataFrame, i: Any, observed: pd.Series | float) -> str:
    row = held.loc[i]
    gap = row.get(f"gap_{row['window_minutes']:g}m")
    seen = float(observed[i]) if isinstance(observed, pd.Series) else float(observed)
    activity = None if pd.isna(row["activity_max"]) else float(row["activity_max"])  # -inf stays: it is below 0
    detail = incomplete_detail(_finite(row["coverage"]), _finite(gap), _finite(row.get("telemetry_age_s")), seen,
                               float(row["gpus"]), activity_max=activity)
    return f"telemetry incomplete for the window ({detail})"


def _finite(value: Any) -> float | None:
    return None if value is None or pd.isna(value) or not np.isfinite(float(value)) else float(value)


def _windows_of(frame: pd.DataFrame) -> list[float]:
    return sorted({float(c.removeprefix("activity_max_").removesuffix("m")) for c in frame.columns
                   if c.startswith("activity_max_") and c.endswith("m")})


def _idle_seconds(held: pd.DataFrame, observed: pd.Series | float, serving: pd.Series) -> pd.Series:
    """How long an idle workload has been idle, as far as the evidence shows: the longest
    collected window (at least its rule's) that is quiet with complete telemetry and served no
    request (a serving kind: a known zero), as the verdict asks of its own window. It ranks
    reclaims by waste (GPUs x idle time); NaN for every verdict but ``idle``, and for a workload idle but opted out
    (``idle_opted_out``), whose skip says how long it has been idle."""
    seconds = held["window_minutes"].astype(float) * 60
    for minutes in _windows_of(held):
        requests = _column(held, f"requests_{minutes:g}m")
        unserved = (requests == 0) | (requests.isna() & ~serving)
        activity = _column(held, f"activity_max_{minutes:g}m")
        quiet = (activity >= 0) & (activity <= held["threshold"]) & _complete(held, minutes) & (
            observed >= held["gpus"]) & unserved
        longer = quiet & (minutes * 60 > seconds) & (minutes <= held["held_seconds"] / 60)
        seconds = seconds.where(~longer, minutes * 60)
    return seconds.where((held["verdict"] == "idle") | held["idle_opted_out"].astype(bool))


class GpuEvidence:
    """Per-GPU activity over a window for the pods the verdict judged: those the snapshot links to each Workload.

    Evidence for people reading the audit log, not an input of the verdict (that uses the snapshot's
    per-workload maximum, which bounds every GPU). The pods are the snapshot's ``pod_names`` of each
    Workload, the very links its telemetry was joined through (owner chain, and a per-pod Workload's own
    pod only), never a match by name: a Deployment ``llm`` is not shown ``llm-large``'s GPUs, and a target
    named after its Workload (a RayCluster stopped through Kueue) is shown its pods'. The link is one pod
    list a Workload row rather than a Workload uid a GPU row: it is written once per Workload where the
    GPU view has a row per GPU and window, it round-trips through the snapshot's JSON as a list, and a pod
    linked to two Workloads needs no second GPU row. A snapshot without the column (stored before it
    existed) lists no GPUs. The GPUs are grouped by namespace, window and pod once: filtering the whole
    fleet's frame again for each of thousands of idle targets was the largest part of a reclaim run at
    16,000 GPUs.
    """

    def __init__(self, gpus: pd.DataFrame, workloads: pd.DataFrame) -> None:
        self._rows: dict[tuple[str, float, str], list[dict[str, object]]] = {}
        self._pods: dict[tuple[str, str], list[str]] = {}
        if "pod_names" in workloads:
            for namespace, name, pods in zip(workloads["namespace"], workloads["name"], workloads["pod_names"],
                                             strict=True):
                if isinstance(pods, list | tuple | np.ndarray):
                    self._pods[(str(namespace), str(name))] = [str(p) for p in pods]
        if gpus.empty or "pod" not in gpus:
            return
        frame = gpus.assign(pod=gpus["pod"].astype(str), evidence_window=gpus["window_minutes"].astype(float))
        for row in frame.sort_values(["pod", "gpu"]).itertuples(index=False):
            self._rows.setdefault((str(row.namespace), float(row.evidence_window), row.pod), []).append(
                {"pod": row.pod, "host": row.host, "gpu": str(row.gpu), "uuid": row.uuid,
                 "activity_max": _num(row.activity_max), "activity_avg": _num(row.activity_avg),
                 "coverage": _num(row.coverage)})

    def of(self, namespace: str, workloads: Iterable[str], window_minutes: float) -> list[dict[str, object]]:
        """The GPUs of the pods linked to the Workloads named ``workloads`` in ``namespace``, by pod and GPU."""
        pods = sorted({p for name in workloads for p in self._pods.get((namespace, str(name)), ())})
        return [dict(r) for pod in pods for r in self._rows.get((namespace, float(window_minutes), pod), ())]


def gpu_evidence(gpus: pd.DataFrame, workloads: pd.DataFrame, namespace: str, names: Iterable[str],
                 window_minutes: float) -> list[dict[str, object]]:
    """``GpuEvidence(gpus, workloads).of(...)`` for one target (build a ``GpuEvidence`` once for many)."""
    return GpuEvidence(gpus, workloads).of(namespace, names, window_minutes)


def _num(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else round(float(value), 4)
