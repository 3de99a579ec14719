"""Rows, markdown and metrics for the collect flow's artifacts, the ``gpuaas collect`` table and the Pushgateway. Pure."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from gpuaas.models import Snapshot
from gpuaas.policy import Mode, Policy, WritingFlow, freezes_on, next_freeze
from gpuaas.pushgateway import MetricFamily
from reports._format import counted, duration, kube_unread, source_errors, with_failures

__all__ = ["backlog_rows", "collect_metrics", "headline", "policy_metrics", "quality_rows", "summary_markdown"]


def backlog_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per ClusterQueue, the longest-waiting backlog first."""
    rows = [
        {
            "queue": q["name"],
            "cohort": q["cohort"] or "",
            "pending workloads": q["pending_workloads"],
            "pending GPUs": q["pending_gpus"],
            "oldest pending": duration(q["oldest_pending_seconds"]) if q["oldest_pending_seconds"] else "",
            "admitted GPUs": q["admitted_gpus"],
            "nominal GPUs": q["nominal_gpus"],
        }
        for q in summary["queues"]
    ]
    return sorted(rows, key=lambda r: (-r["pending GPUs"], r["queue"]))


def quality_rows(snapshot: Snapshot) -> list[dict[str, Any]]:
    rows = []
    for name, status in sorted(snapshot.sources.items()):
        rows.append({
            "source": name,
            # An optional source (NVML in auto mode) that is absent is no failure: say so, not "NO".
            "ok": "yes" if status.ok else ("no (optional)" if not status.required else "NO"),
            "latency s": round(status.latency_s, 3),
            "staleness s": "" if status.staleness_s is None else round(status.staleness_s, 1),
            "error": (status.error or "")[:200],
        })
    return rows


def headline(summary: dict[str, Any], idle_candidates: int) -> str:
    """The collect in one sentence (CLI first line, state message, summary artifact): a failed source first."""
    pending = sum(q["pending_gpus"] for q in summary["queues"])
    if kube_unread(summary["sources"]):
        first = (f"Snapshot {summary.get('snapshot_id')}: no workload or queue could be read, so nothing is "
                 "judged; the next collect reads them again.")
    else:
        first = (f"Snapshot {summary.get('snapshot_id')}: {counted(summary['workloads'], 'workload')}, "
                 f"{counted(pending, 'GPU')} waiting, "
                 f"{counted(idle_candidates, 'idle candidate')}, {_unjudged(summary)}; next: gpuaas reclaim shows "
                 "what would be stopped.")
    if summary.get("blind"):
        first = f"Degraded snapshot: {summary['blind']}. {first}"
    return with_failures(first, source_errors(summary["sources"]))


def _unjudged(summary: dict[str, Any]) -> str:
    """The GPU workloads the reclaim policy cannot judge, as the collect lists them: not every workload whose
    telemetry misses a window (a new one is younger than its longest window, an excluded one is not judged at
    all), only those it would judge and cannot."""
    return f"{counted(int(summary.get('unjudged_count') or 0), 'GPU workload')} it cannot judge (never reclaimed)"


def summary_markdown(summary: dict[str, Any], idle_candidates: int, degraded: bool) -> str:
    pending = sum(q["pending_gpus"] for q in summary["queues"])
    admitted = sum(q["admitted_gpus"] for q in summary["queues"])
    failed = list(source_errors(summary["sources"]).values())
    lines = [
        headline(summary, idle_candidates),
        "",
        "# gpuaas collect",
        "",
        f"- **{summary['workloads']}** workloads, **{admitted:g}** GPUs admitted, **{pending:g}** GPUs waiting",
        f"- **{idle_candidates}** idle candidates (decided by the reclaim flow, not here)",
        f"- **{summary['unknown_telemetry']}** workloads with incomplete telemetry (never treated as idle), "
        f"{_unjudged(summary)}",
    ]
    lines += [f"- **Note:** {note}" for note in summary.get("notes") or ()]
    if degraded:
        lines += [f"- **Warning:** degraded snapshot: {error}" for error in failed]
    return "\n".join(lines) + "\n"


def collect_metrics(snapshot: Snapshot, summary: dict[str, Any], idle_candidates: int) -> list[MetricFamily]:
    """What the collect flow pushes: backlog per queue, idle candidates, data quality."""
    backlog = MetricFamily("gpuaas_backlog_gpus", "GPUs requested by pending workloads", ("cluster_queue", "cohort"))
    pending = MetricFamily("gpuaas_pending_workloads", "Pending workloads", ("cluster_queue", "cohort"))
    oldest = MetricFamily("gpuaas_oldest_pending_seconds", "Age of the oldest pending workload",
                          ("cluster_queue", "cohort"))
    for q in summary["queues"]:
        labels = (q["name"], q["cohort"] or "")
        backlog.add(q["pending_gpus"], *labels)
        pending.add(q["pending_workloads"], *labels)
        oldest.add(q["oldest_pending_seconds"] or 0.0, *labels)
    up = MetricFamily("gpuaas_source_up", "1 when the source answered this cycle", ("source",))
    required = MetricFamily("gpuaas_source_required", "1 when the snapshot is degraded without the source, "
                            "0 for one used only where present (NVML in auto mode)", ("source",))
    latency = MetricFamily("gpuaas_source_latency_seconds", "Time the source took to answer", ("source",))
    stale = MetricFamily("gpuaas_source_staleness_seconds", "Age of the newest data from the source", ("source",))
    for name, status in snapshot.sources.items():
        up.add(1.0 if status.ok else 0.0, name)
        required.add(1.0 if status.required else 0.0, name)
        latency.add(status.latency_s, name)
        if status.staleness_s is not None:
            stale.add(status.staleness_s, name)
    return [
        backlog, pending, oldest, up, required, latency, stale,
        MetricFamily("gpuaas_idle_candidates", "Workloads whose GPUs were idle for the whole reclaim window")
        .add(idle_candidates),
        MetricFamily("gpuaas_unknown_telemetry_workloads", "GPU workloads with incomplete telemetry")
        .add(summary["unknown_telemetry"]),
        MetricFamily("gpuaas_unjudged_workloads", "GPU workloads the reclaim policy cannot judge, so never reclaims")
        .add(int(summary.get("unjudged_count") or 0)),
        MetricFamily("gpuaas_collect_timestamp_seconds", "When the snapshot was collected")
        .add(snapshot.collected_at.timestamp()),
    ]


def policy_metrics(policy: Policy, now: datetime) -> list[MetricFamily]:
    """What the policy lets each writing flow do at ``now``: its mode, whether a scheduled run would write, each
    change freeze on and until when, and the next one.

    A flow set to apply that writes nothing during a freeze looks, on a dashboard, like a flow that found
    nothing to do; these say which it is, and when writing resumes.
    """
    mode = MetricFamily("gpuaas_flow_apply_mode", "1 when the policy file sets the flow to apply", ("flow",))
    writes = MetricFamily("gpuaas_flow_writes_enabled", "1 when a scheduled run of the flow writes its changes now "
                          "(stops, quota, holds and demotions): the policy sets it to apply and no change freeze of "
                          "the whole fleet holds it back", ("flow",))
    frozen = MetricFamily("gpuaas_change_freeze_end_timestamp_seconds", "End of each change freeze on now, per flow "
                          "it holds back (tenant empty: the whole fleet)", ("flow", "freeze", "tenant"))
    for flow in WritingFlow:
        run_mode, _ = policy.run_mode(flow, apply=False, now=now)
        mode.add(policy.modes[flow] is Mode.apply, flow.value)
        writes.add(run_mode is Mode.apply, flow.value)
        for on in freezes_on(policy.freezes, flow, now):
            frozen.add(on.until.timestamp(), flow.value, on.name, on.tenant or "")
    upcoming = MetricFamily("gpuaas_next_change_freeze_timestamp_seconds", "Start of the next change freeze",
                            ("freeze",))
    coming = next_freeze(policy.freezes, now)
    if coming is not None:
        upcoming.add(coming[1].timestamp(), coming[0].name)
    return [mode, writes, frozen, upcoming]
