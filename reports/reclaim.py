"""Rows, markdown and metrics for the reclaim flow's artifacts, the CLI and the Pushgateway. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pandas as pd

from gpuaas.actions import ActionResult
from gpuaas.models import Snapshot
from gpuaas.policies.coverage import blind_run_line
from gpuaas.pushgateway import MetricFamily
from reports._format import duration

__all__ = ["ASSUMED_GPU_HOURLY_PRICE", "SUCCESS_METRIC", "blind_line", "decision_dicts", "decision_rows", "gpu_price",
           "idle_metrics", "summary_line", "summary_markdown", "telemetry_counts"]

ASSUMED_GPU_HOURLY_PRICE = 3.0
"""$ per GPU-hour used only when OpenCost has no figure for the fleet at all (the report says so)."""


def decision_dicts(results: Sequence[ActionResult]) -> list[dict[str, Any]]:
    """The machine form (``gpuaas reclaim --format json``)."""
    return [{
        "audit_id": r.audit_id, "kind": r.decision.kind, "namespace": r.decision.namespace, "name": r.decision.name,
        "tenant": r.decision.tenant, "gpus": r.decision.gpus, "idle_seconds": r.decision.idle_seconds,
        "action": r.method or "-", "frees": r.frees or "-", "mode": r.decision.mode, "result": r.result,
        "reason": r.reason, "window_minutes": r.decision.evidence.get("window_minutes"),
        "window_reason": r.decision.evidence.get("window_reason"),
    } for r in results]


def _evidence_text(evidence: dict[str, Any]) -> str:
    act = evidence.get("activity_max")
    req = evidence.get("requests")
    parts = [f"max activity {act:.3f}" if act is not None else "max activity -",
             f"<= {evidence.get('threshold')}", f"over {evidence.get('window_minutes'):g}m",
             f"coverage {evidence.get('coverage') or 0:.0%}",
             f"{evidence.get('gpus_observed', 0):g}/{evidence.get('gpus_requested', 0):g} GPUs seen"]
    if req is not None:
        parts.append(f"{req:g} requests")
    if evidence.get("window_reason"):
        parts.append(f"adaptive: {evidence['window_reason']}")
    return ", ".join(parts)


def decision_rows(results: Sequence[ActionResult]) -> list[dict[str, Any]]:
    """The people form: the table artifact and ``--format table``."""
    return [{
        "audit id": r.audit_id, "workload": r.decision.ref, "tenant": r.decision.tenant or "-",
        "GPUs": r.decision.gpus, "idle for": duration(r.decision.idle_seconds),
        "evidence": _evidence_text(r.decision.evidence),
        "action": f"{r.method} (frees {r.frees})" if r.method else "-", "result": r.result, "reason": r.reason,
    } for r in results]


def gpu_price(snapshot: Snapshot, kind: str, namespace: str, name: str) -> tuple[float, str]:
    """$ per GPU-hour for this object and where the figure comes from."""
    costs = snapshot.costs
    if not costs.empty and {"gpu_cost", "gpu_hours"} <= set(costs.columns):
        rows = costs[(costs["namespace"] == namespace) & (costs["controller"] == name)
                     & (costs["controller_kind"].astype(str).str.lower() == kind.lower())]
        for scope, frame in (("OpenCost, this workload", rows), ("OpenCost, fleet average", costs)):
            hours = float(frame["gpu_hours"].sum())
            if hours > 0:
                return float(frame["gpu_cost"].sum()) / hours, scope
    return ASSUMED_GPU_HOURLY_PRICE, f"assumed ${ASSUMED_GPU_HOURLY_PRICE:g}/GPU-hour (no OpenCost data)"


def telemetry_counts(snapshot: Snapshot) -> tuple[int, int]:
    """GPU-holding workloads whose telemetry was incomplete, and all GPU-holding workloads."""
    if "telemetry" not in snapshot.workloads:
        return 0, 0
    telemetry = snapshot.workloads["telemetry"]
    return int((telemetry == "unknown").sum()), int(telemetry.isin(["complete", "unknown"]).sum())


def blind_line(results: Sequence[ActionResult], snapshot: Snapshot) -> str | None:
    """``telemetry incomplete for 19 of 19 GPU workloads — nothing judged idle`` on a degraded run, else None."""
    unknown, total = telemetry_counts(snapshot)
    return blind_run_line(unknown, total, len(results))


def summary_line(results: Sequence[ActionResult], snapshot: Snapshot) -> str:
    """One line for the CLI and logs: the blind-run warning first when there is one."""
    blind = blind_line(results, snapshot)
    if blind:
        return blind
    counts = pd.Series([r.result for r in results], dtype=object).value_counts().to_dict()
    return f"{len(results)} idle targets: " + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none")


def summary_markdown(results: Sequence[ActionResult], snapshot: Snapshot, mode: str, cap: int) -> str:
    acted = [r for r in results if r.result in ("applied", "planned")]
    gpus = sum(r.decision.gpus for r in acted)
    idle_hours = sum(r.decision.gpus * r.decision.idle_seconds / 3600 for r in acted)
    cost, sources = 0.0, set()
    for r in acted:
        price, source = gpu_price(snapshot, r.decision.kind, r.decision.namespace, r.decision.name)
        cost += price * r.decision.gpus
        sources.add(source)
    verb = "freed" if mode == "apply" else "would be freed (dry-run: nothing was changed)"
    counts = pd.Series([r.result for r in results], dtype=object).value_counts().to_dict()
    quota = sum(r.decision.gpus for r in acted if r.frees == "quota")
    blind = blind_line(results, snapshot)
    lines = [
        f"# gpuaas reclaim ({mode}): degraded — {blind}" if blind else f"# gpuaas reclaim ({mode})", "",
        f"- **{gpus:g}** GPUs {verb}: **{quota:g}** with their quota returned to the queue, "
        f"**{gpus - quota:g}** compute only (the reservation is kept)",
        f"- **{idle_hours:.1f}** GPU-hours had already been held idle by them",
        f"- **${cost:,.2f} per hour** {verb}; price: {', '.join(sorted(sources)) or '-'}",
        f"- results: {', '.join(f'{k} {v}' for k, v in sorted(counts.items())) or 'no idle workloads'}"
        f" (cap {cap} actions per run)",
    ]
    if snapshot.degraded:
        lines.append("- :warning: degraded snapshot: no action was taken on its missing parts")
    return "\n".join(lines) + "\n"


SUCCESS_METRIC = "gpuaas_last_success_timestamp_seconds"


def idle_metrics(idle: pd.DataFrame, *, mode: str = "dry-run", evidence_at: datetime | None = None) -> list[MetricFamily]:
    """Per GPU-holding object (the Workload's owner, named as ``kubectl`` names it): idle 1/0 and
    idle seconds, for Grafana and a KEDA ScaledObject; and when the evidence was taken.

    Only where the signal may act: objects whose rule says ``actuator: keda`` always, the others in
    apply mode only (a dry-run must change nothing, and KEDA acts on whatever is published).
    ``gpuaas_last_success_timestamp_seconds`` is the instant of the snapshot the verdicts come from:
    consumers ignore verdicts older than they tolerate (the shipped ScaledObject: 30 minutes).
    """
    labels = ("namespace", "kind", "name", "tenant")
    flag = MetricFamily("gpuaas_workload_idle", "1 when every GPU of the workload was idle for the whole window",
                        labels)
    seconds = MetricFamily("gpuaas_workload_idle_seconds", "How long the workload has been idle (0 when not idle)",
                           labels)
    success = MetricFamily(SUCCESS_METRIC, "Unix time of the snapshot behind the idle verdicts of the last good run")
    families = [flag, seconds] + ([success.add(evidence_at.timestamp())] if evidence_at is not None else [])
    if not idle.empty and mode != "apply":
        idle = idle[idle.get("actuator", pd.Series("gpuaas", index=idle.index)) == "keda"]
    if idle.empty:
        return families
    frame = idle.assign(
        target=idle["owner_name"].where(idle["owner_name"].notna(), idle["name"]),
        is_idle=(idle["verdict"] == "idle").astype(float),
        idle_s=idle["idle_seconds"].where(idle["verdict"] == "idle", 0.0).astype(float),
        tenant=idle["tenant"].astype(object).where(idle["tenant"].notna(), ""))
    # One series per object gpuaas would stop (a Deployment has one Workload per pod): idle only if all are.
    grouped = frame.groupby(["namespace", "kind", "target", "tenant"], sort=True).agg(
        is_idle=("is_idle", "min"), idle_s=("idle_s", "min"))
    row: Any
    for row in grouped.reset_index().itertuples(index=False):
        values = (str(row.namespace), str(row.kind), str(row.target), str(row.tenant))
        flag.add(float(row.is_idle), *values)
        seconds.add(float(row.idle_s) if row.is_idle else 0.0, *values)
    return families
