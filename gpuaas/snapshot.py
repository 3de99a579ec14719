"""Collect every source into one ``Snapshot``, and the pure joins that build its views.

``read_source`` reads one source, times it and records its health; ``assemble_snapshot`` joins the
readings: one failing source degrades the snapshot (its status says why), only all failing is an error.
The use case that calls them, with or without retries, is ``gpuaas.operations.collect``.
``build_snapshot`` is the pure part: records and frames in, joined views out, vectorised
with merge/groupby. A window in which a workload's GPUs are not all observed throughout
(sample-count floor and longest gap, ``gpuaas.policies.reclaim.coverage``) is incomplete
(``complete_Wm``), and a verdict that needs it is ``unknown``: missing or stale data is never
evidence of idleness. ``telemetry="unknown"`` when even the shortest window is incomplete: the
data is missing, not merely shorter than a longer window (a workload 45 minutes old is judged
by a 30-minute rule and waits for a 60-minute one; neither makes the run degraded).

Views (columns):
- workloads: WORKLOAD_COLUMNS, then per window W minutes ``activity_avg_Wm``,
  ``activity_max_Wm``, ``coverage_Wm``, ``gap_Wm`` (longest stretch without a sample, s),
  ``complete_Wm`` (the rule of ``gpuaas.policies.reclaim.coverage``), ``requests_Wm`` (NaN = no serving
  metrics); ``telemetry_age_s`` (the oldest newest-sample of its GPUs) and ``telemetry``
  (complete | unknown | n/a for workloads that hold no GPUs); ``pods`` and ``pod_names``, the pods its
  telemetry is joined through (the reclaim's per-GPU evidence lists their GPUs).
- queues: QUEUE_COLUMNS. quotas: one row per ClusterQueue flavor/resource cell.
- cohorts: COHORT_COLUMNS, one row per Cohort object's flavor/resource cell (a Cohort without quota: one
  row without a flavor), so the pools see a Cohort's own quota and the cohort tree (``spec.parentName``).
- gpus: ``gpuaas.sources.prometheus.GPU_COLUMNS`` (+ NVML samples, ``signal="nvml"``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from gpuaas.errors import SourceUnavailable
from gpuaas.kueue_gaps import STRANDED, missing_queues, with_gap_rows
from gpuaas.models import GpuSample, Snapshot, SourceStatus, WorkloadState, is_elastic
from gpuaas.policies.reclaim import (
    COMPLETE_COVERAGE,
    OPT_OUT_ANNOTATION,
    telemetry_complete,
)
from gpuaas.policy import Policy
from gpuaas.settings import GpuaasSettings
from gpuaas.snapshot_deadlines import DEADLINE_COLUMNS as _DEADLINE_COLUMNS
from gpuaas.snapshot_deadlines import deadline_columns
from gpuaas.snapshot_health import untrusted_sources
from gpuaas.snapshot_links import (
    flat,
    inherit_owner_opt_out,
    own_pods,
    pod_links,
    pod_names,
    resolve_owner_opt_out,
    workload_pods,
)
from gpuaas.sources.failures import describe_failure
from gpuaas.sources.kube import DEFAULT_GPU_RESOURCES, KubeState, read_kube
from gpuaas.sources.nvml import sample_nvml
from gpuaas.sources.opencost import read_opencost
from gpuaas.sources.prometheus import (
    GPU_COLUMNS,
    WORST_ACTIVITY,
    PrometheusReading,
    pod_activity,
    read_prometheus,
    with_unknown_flag,
    worst_activity,
)

__all__ = [
    "COHORT_COLUMNS", "COMPLETE_COVERAGE", "QUEUE_COLUMNS", "SOURCES", "WORKLOAD_COLUMNS", "assemble_snapshot", "build_snapshot",
    "failed_source", "read_source", "snapshot_windows", "workload_pods",
]

WORKLOAD_COLUMNS = [
    "kind", "namespace", "name", "uid", "tenant", "queue", "cluster_queue", "cohort", "priority",
    "priority_class", "state", "active", "gpus", "flavor", "created_at", "admitted_at", "queued_at", "requeue_at",
    "age_seconds",
    "owner_kind", "owner_name", "reclaim", "deadline", "expected_runtime", "pods", "pod_names", "gpus_observed",
    "resource_version", "api_version",
    "max_exec_time", "deadline_at", "runtime_seconds", "runtime_source", "deadline_hold",
    "job_owner_gvk", "job_owner_name",
]
QUEUE_COLUMNS = [
    "name", "cohort", "tenant", "nominal_gpus", "borrowing_limit_gpus", "lending_limit_gpus",
    "reserved_gpus", "admitted_gpus", "borrowed_gpus", "pending_workloads", "pending_gpus",
    "oldest_pending_seconds", "admitted_workloads",
]
_ANNOTATION_COLUMNS = {"gpuaas.io/reclaim": "reclaim", "gpuaas.io/deadline": "deadline",
                       "gpuaas.io/expected-runtime": "expected_runtime", "gpuaas.io/deadline-hold": "deadline_hold",
                       "kueue.x-k8s.io/job-owner-gvk": "job_owner_gvk", "kueue.x-k8s.io/job-owner-name": "job_owner_name"}
_HOLDING = (WorkloadState.admitted.value, WorkloadState.quota_reserved.value)


def _tenants(policy: Policy, namespaces: pd.Series, queues: pd.Series) -> pd.Series:
    by_ns = {ns: t.name for t in reversed(policy.tenants) for ns in t.namespaces}
    by_cq = {cq: t.name for t in reversed(policy.tenants) for cq in t.cluster_queues}
    return namespaces.map(by_ns).astype(object).combine_first(queues.map(by_cq).astype(object))


def _workload_frame(kube: KubeState, policy: Policy, now: datetime) -> pd.DataFrame:
    rows = []
    for wl in kube.workloads:
        row = flat(wl)
        row["state"] = wl.state.value
        annotations = dict(row.pop("annotations"))
        row.update({col: annotations.get(key) for key, col in _ANNOTATION_COLUMNS.items()})
        rows.append(row)
    frame = pd.DataFrame(rows, columns=[c for c in WORKLOAD_COLUMNS if c not in (
        "tenant", "cohort", "age_seconds", "pods", "pod_names", "gpus_observed", *_DEADLINE_COLUMNS)])
    frame["created_at"] = pd.to_datetime(frame["created_at"], utc=True)
    frame["admitted_at"] = pd.to_datetime(frame["admitted_at"], utc=True)
    frame["queued_at"] = pd.to_datetime(frame["queued_at"], utc=True)
    frame["requeue_at"] = pd.to_datetime(frame["requeue_at"], utc=True)
    frame["age_seconds"] = (pd.Timestamp(now) - frame["created_at"]).dt.total_seconds()
    cohorts = {cq.name: cq.cohort for cq in kube.cluster_queues}
    frame["cohort"] = frame["cluster_queue"].map(cohorts)
    frame["tenant"] = _tenants(policy, frame["namespace"], frame["cluster_queue"])
    return frame


def _telemetry(frame: pd.DataFrame, kube: KubeState, prom: PrometheusReading | None,
               windows: Sequence[float]) -> pd.DataFrame:
    links = pod_links(kube).rename(columns={"kind": "owner_kind", "name": "owner_name"})
    wl_pods = own_pods(frame[["uid", "namespace", "owner_kind", "owner_name"]].merge(
        links, on=["namespace", "owner_kind", "owner_name"]), kube)
    frame = frame.merge(wl_pods.groupby("uid").size().rename("pods").reset_index(), on="uid", how="left")
    frame["pods"] = frame["pods"].fillna(0).astype(int)
    frame["pod_names"] = pod_names(frame["uid"], wl_pods)
    observed = pd.Series(0, index=frame.index, dtype=float)
    age = pd.Series(float("nan"), index=frame.index)
    complete = pd.Series(prom is not None, index=frame.index)
    activity = pod_activity(prom.gpus) if prom is not None else pd.DataFrame()
    shortest = min(windows, default=None)
    for minutes in windows:
        suffix = f"_{minutes:g}m"
        stats = pd.DataFrame(columns=["uid", "activity_avg", "activity_max", "coverage", "longest_gap_s", "age_s",
                                      "gpus_observed"])
        requests = pd.DataFrame(columns=["uid", "requests"])
        if prom is not None:
            acts = activity[activity["window_minutes"] == float(minutes)]
            # a pod whose activity is unknown or below 0 makes its Workload's unknown: another pod's quiet GPUs
            # must not speak for it (``worst_activity``)
            stats = worst_activity(with_unknown_flag(wl_pods.merge(acts, on=["namespace", "pod"])).groupby(
                "uid", as_index=False).agg(
                activity_avg=("activity_avg", "mean"), **WORST_ACTIVITY,
                coverage=("coverage", "min"), longest_gap_s=("longest_gap_s", "max"), age_s=("age_s", "max"),
                gpus_observed=("gpus_observed", "sum")))
            served = prom.serving[(prom.serving["stat"] == "requests")
                                  & (prom.serving["window_minutes"] == float(minutes))]
            requests = wl_pods.merge(served, on=["namespace", "pod"]).groupby("uid", as_index=False).agg(
                requests=("value", "sum"))
        merged = frame[["uid"]].merge(stats, on="uid", how="left").merge(requests, on="uid", how="left")
        for col in ("activity_avg", "activity_max", "coverage", "requests"):
            frame[col + suffix] = merged[col].astype(float).to_numpy()
        # Infinite (a GPU without the figure) is stored as missing: the JSON snapshot has no infinity.
        frame["gap" + suffix] = merged["longest_gap_s"].astype(float).replace(np.inf, np.nan).to_numpy()
        ages = merged["age_s"].astype(float).replace(np.inf, np.nan).to_numpy()
        age = age.where(age.notna(), pd.Series(ages, index=frame.index))
        seen = merged["gpus_observed"].astype(float).fillna(0).to_numpy()
        observed = observed.where(observed > 0, pd.Series(seen, index=frame.index))
        interval = prom.sample_interval_s if prom is not None else 1.0
        window_complete = telemetry_complete(merged["coverage"], merged["longest_gap_s"], interval).to_numpy() & (
            seen >= frame["gpus"].to_numpy()) & (merged["activity_max"].astype(float) >= 0).to_numpy()
        frame["complete" + suffix] = window_complete
        if minutes == shortest:
            complete &= window_complete
    frame["gpus_observed"] = observed
    frame["telemetry_age_s"] = age
    holding = frame["state"].isin(_HOLDING) & (frame["gpus"] > 0)
    frame["telemetry"] = "n/a"
    frame.loc[holding, "telemetry"] = complete[holding].map({True: "complete", False: "unknown"})
    return frame


def _quota_frame(kube: KubeState) -> pd.DataFrame:
    rows = [{"cluster_queue": cq.name, "cohort": cq.cohort, **asdict(q), "reclaim_within_cohort": cq.reclaim_within_cohort,
             "within_cluster_queue": cq.within_cluster_queue,
             "priority_preemption": cq.priority_preemption, "inactive": cq.inactive}
            for cq in kube.cluster_queues for q in cq.quotas]
    cols = ["cluster_queue", "cohort", "flavor", "resource", "nominal", "borrowing_limit", "lending_limit",
            "reserved", "usage", "borrowed", "reclaim_within_cohort", "within_cluster_queue", "priority_preemption",
            "inactive"]
    return pd.DataFrame(rows, columns=cols)


COHORT_COLUMNS = ["cohort", "parent", "flavor", "resource", "nominal", "borrowing_limit", "lending_limit"]


def _cohort_frame(kube: KubeState) -> pd.DataFrame:
    """One row per Cohort quota cell; a Cohort without quota keeps one row, so that its parent is still known."""
    rows = [{"cohort": c.name, "parent": c.parent, "flavor": q.flavor, "resource": q.resource, "nominal": q.nominal,
             "borrowing_limit": q.borrowing_limit, "lending_limit": q.lending_limit}
            for c in kube.cohorts for q in c.quotas]
    rows += [{"cohort": c.name, "parent": c.parent} for c in kube.cohorts if not c.quotas]
    return pd.DataFrame(rows, columns=COHORT_COLUMNS)


def _queue_frame(kube: KubeState, workloads: pd.DataFrame, quotas: pd.DataFrame, policy: Policy,
                 gpu_resources: Sequence[str], data_quality: pd.DataFrame) -> pd.DataFrame:
    gpu = quotas[quotas["resource"].isin(list(gpu_resources))]
    cells = gpu.groupby("cluster_queue").agg(
        nominal_gpus=("nominal", "sum"), borrowing_limit_gpus=("borrowing_limit", lambda s: s.sum(min_count=1)),
        lending_limit_gpus=("lending_limit", lambda s: s.sum(min_count=1)), reserved_gpus=("reserved", "sum"),
        admitted_gpus=("usage", "sum"), borrowed_gpus=("borrowed", "sum"))
    # Kueue's Status() calls a deactivated Workload (spec.active=false) pending, but its queue
    # manager drops it from the queue: it is not backlog, and counting it would report every
    # Workload the reclaim flow deactivated as demand.
    queued = (workloads["state"] == WorkloadState.pending.value) & workloads["active"].astype(bool)
    # Nor is the work of a stopped LocalQueue (spec.stopPolicy): Kueue drops the LocalQueue from its queueing.
    # Nor that of a LocalQueue its ClusterQueue never admits from (its namespaceSelector), which Kueue still
    # counts pending: it is said in a note instead (``gpuaas.kueue_gaps``).
    stopped = {(lq.namespace, lq.name) for lq in kube.local_queues if lq.stop_policy}
    stopped |= set(missing_queues(data_quality, *STRANDED))
    if stopped:
        queued &= ~pd.Series([(ns, q) in stopped for ns, q in zip(workloads["namespace"], workloads["queue"])],
                             index=workloads.index, dtype=bool)
    pending = workloads[queued]
    backlog = pending.groupby("cluster_queue").agg(
        pending_workloads=("uid", "size"), pending_gpus=("gpus", "sum"), oldest_pending_seconds=("age_seconds", "max"))
    admitted = workloads[workloads["state"] == WorkloadState.admitted.value].groupby("cluster_queue").size()
    base = pd.DataFrame({"name": pd.Series([cq.name for cq in kube.cluster_queues], dtype=object),
                         "cohort": pd.Series([cq.cohort for cq in kube.cluster_queues], dtype=object)})
    frame = base.join(cells, on="name").join(backlog, on="name").join(admitted.rename("admitted_workloads"), on="name")
    for col in ("nominal_gpus", "reserved_gpus", "admitted_gpus", "borrowed_gpus", "pending_gpus"):
        frame[col] = frame[col].fillna(0.0)
    for col in ("pending_workloads", "admitted_workloads"):
        frame[col] = frame[col].fillna(0).astype(int)
    frame["tenant"] = _tenants(policy, pd.Series([None] * len(frame), dtype=object), frame["name"])
    return frame.reindex(columns=QUEUE_COLUMNS)


def _gpu_frame(prom: PrometheusReading | None, nvml: Sequence[GpuSample]) -> pd.DataFrame:
    frames = [prom.gpus] if prom is not None and not prom.gpus.empty else []
    if nvml:
        local = pd.DataFrame([asdict(g) for g in nvml])
        frames.append(pd.DataFrame({
            "host": local["host"], "gpu": local["index"].astype(str), "uuid": local["uuid"], "model": local["model"],
            "activity_avg": local["utilization_percent"] / 100, "signal": "nvml", "fb_used_mib":
            local["memory_used_bytes"] / 2**20, "power_w": local["power_watts"], "temperature_c": local["temperature_c"],
        }))
    return pd.concat(frames, ignore_index=True).reindex(columns=GPU_COLUMNS) if frames else pd.DataFrame(
        columns=GPU_COLUMNS)


def _costs_with_owners(costs: pd.DataFrame | None, kube: KubeState) -> pd.DataFrame:
    """OpenCost's rows with each running pod's direct and root owner, as the cluster resolves them.

    OpenCost names a pod's controller one step up (a Deployment, a StatefulSet): for an
    InferenceService or a Notebook that is an object gpuaas never stops, so the price of what it
    stops is found through the pod's owner chain instead. Empty owner columns where the pod has ended."""
    if costs is None or costs.empty or "pod" not in costs:
        return costs if costs is not None else pd.DataFrame()
    cols = ["owner_kind", "owner_name", "root_kind", "root_name"]
    pods = pd.DataFrame([flat(p) for p in kube.pods], columns=["namespace", "pod", *cols])
    pods = pods.drop_duplicates(["namespace", "pod"]).fillna("")
    out = costs.drop(columns=[c for c in cols if c in costs]).merge(pods, on=["namespace", "pod"], how="left")
    out[cols] = out[cols].fillna("")
    return out


def build_snapshot(
    now: datetime,
    windows: Sequence[float],
    sources: dict[str, SourceStatus],
    *,
    kube: KubeState | None,
    prom: PrometheusReading | None,
    costs: pd.DataFrame | None = None,
    nvml: Sequence[GpuSample] = (),
    policy: Policy | None = None,
    gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES,
) -> Snapshot:
    """Join what the sources returned (any may be None) into the snapshot's views. Pure."""
    policy = policy or Policy()
    kube = kube or KubeState(None, (), (), (), (), (), (), (), (), 0)
    workloads = _telemetry(_workload_frame(kube, policy, now), kube, prom, windows)
    quotas = _quota_frame(kube)
    owners = pd.DataFrame([{**flat(o), "annotations": dict(o.annotations)} for o in kube.owners])
    if not owners.empty:
        owners["reclaim"] = owners["annotations"].map(lambda a: a.get(OPT_OUT_ANNOTATION))
        owners["elastic"] = owners["annotations"].map(is_elastic)
        owners = resolve_owner_opt_out(owners)
        workloads = inherit_owner_opt_out(workloads, owners)
    workloads, data_quality = deadline_columns(workloads)
    data_quality = with_gap_rows(data_quality, kube, gpu_resources)  # what gpuaas reads and cannot act on
    return Snapshot(
        collected_at=now,
        windows_minutes=tuple(float(w) for w in windows),
        sources=dict(sources),
        workloads=workloads,
        queues=_queue_frame(kube, workloads, quotas, policy, gpu_resources, data_quality),
        quotas=quotas,
        gpus=_gpu_frame(prom, nvml),
        owners=owners.drop(columns=["annotations"]) if not owners.empty else owners,
        costs=_costs_with_owners(costs, kube),
        serving=prom.serving if prom is not None else pd.DataFrame(),
        data_quality=data_quality,
        cohorts=_cohort_frame(kube),
        cluster=kube.cluster_uid,
    )


def kueue_snapshot(now: datetime, kube: KubeState, policy: Policy | None = None) -> Snapshot:
    """The snapshot's Kueue views alone: Workloads with their deadline columns, and quotas. Pure.

    The same rows ``build_snapshot`` gives for the columns the deadline plan reads, without the
    telemetry and queue views it does not read: the deadline replay builds one every flow interval.
    """
    workloads, data_quality = deadline_columns(_workload_frame(kube, policy or Policy(), now))
    data_quality = with_gap_rows(data_quality, kube)
    return Snapshot(collected_at=now, windows_minutes=(), sources={"kube": SourceStatus("kube", True)},
                    workloads=workloads, queues=pd.DataFrame(), quotas=_quota_frame(kube), gpus=pd.DataFrame(),
                    owners=pd.DataFrame(), costs=pd.DataFrame(), serving=pd.DataFrame(), data_quality=data_quality)


SOURCES = ("kube", "prometheus", "opencost")
"""The remote sources, each read by ``read_source``; NVML is local and sampled separately."""


def _staleness(name: str, value: Any) -> float | None:
    """A source's age for the freshness no action may lack. Prometheus's is that of the telemetry decisions read
    (DCGM, serving), not of Kueue's gauges, which no decision reads (the cost report, the dashboard and KEDA do): a
    Kueue scrape that stopped must not hold back every reclaim under a reason that names the GPU telemetry. Their
    age stays in the reading, and one from the future fails the snapshot (``gpuaas.snapshot_health``)."""
    if name == "prometheus":
        ages = [age for source, age in value.staleness.items() if source != "kueue"]
        return float(max(ages)) if ages else None
    return 0.0 if name == "kube" else None


def read_source(name: str, settings: GpuaasSettings, now: datetime, windows: Sequence[float]) -> tuple[Any, SourceStatus]:
    """Read one remote source; raises on failure so that the caller decides about retries."""
    started = time.monotonic()
    if name == "kube":
        value: Any = read_kube(settings)
    elif name == "prometheus":
        value = read_prometheus(settings, now, windows)
    elif name == "opencost":
        value = read_opencost(settings, now, max(windows))
    else:
        raise ValueError(f"unknown source {name!r}; expected one of {', '.join(SOURCES)}")
    return value, SourceStatus(name, ok=True, latency_s=time.monotonic() - started, staleness_s=_staleness(name, value))


def failed_source(settings: GpuaasSettings, name: str, exc: BaseException, latency_s: float = 0.0) -> SourceStatus:
    """The status of a source that failed (after its retries): which source, where it points and the error in
    words (``gpuaas.sources.failures``), never a traceback."""
    return SourceStatus(name, ok=False, latency_s=latency_s, error=describe_failure(settings, name, exc))


def assemble_snapshot(
    settings: GpuaasSettings,
    now: datetime,
    windows: Sequence[float],
    readings: dict[str, tuple[Any, SourceStatus]],
) -> Snapshot:
    """Join the readings of every source (value None where one failed) and sample NVML.

    Raises ``SourceUnavailable`` only when no source answered at all.
    """
    sources = {name: status for name, (_, status) in readings.items()}
    sources.update(untrusted_sources(settings, now, windows, readings))  # answers whose data cannot be used
    nvml: tuple[GpuSample, ...] = ()
    if settings.nvml != "off":
        nvml, nvml_status = sample_nvml()
        sources[nvml_status.name] = replace(nvml_status, required=settings.nvml == "on")
    if not any(s.ok for s in sources.values()):
        detail = "; ".join(s.error or f"{s.name}: no answer" for s in sources.values())
        raise SourceUnavailable(f"every source failed: {detail}", source="snapshot")
    value = {name: reading for name, (reading, _) in readings.items()}
    return build_snapshot(now, windows, sources, kube=value.get("kube"), prom=value.get("prometheus"),
                          costs=value.get("opencost"), nvml=nvml, policy=settings.policy)


def snapshot_windows(settings: GpuaasSettings) -> list[float]:
    """Collect windows plus every reclaim window, so the reclaim policy always finds its evidence."""
    policy = settings.policy
    windows = {float(w) for w in policy.collect.windows_minutes} | {float(policy.reclaim.window_minutes)}
    windows |= {float(r.window_minutes) for r in policy.reclaim.kinds.values() if r.window_minutes}
    windows |= {float(t.reclaim.window_minutes) for t in policy.tenants if t.reclaim.window_minutes}
    return sorted(windows)
