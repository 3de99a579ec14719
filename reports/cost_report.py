"""Rows, markdown, JSON and Pushgateway metrics for the cost report. Pure.

The flow's artifacts, ``gpuaas cost-report --format json|table`` and the HTML report all read
these builders, so the three views cannot disagree. Unknown values stay None in JSON (with
the reason in ``notes``) and show as ``unknown`` in tables; a cost with no verified outcome
shows "no verified outcome", never infinity or zero.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from gpuaas.policies.cost import (
    FUNNEL_STAGES,
    NO_OUTCOME,
    CostReport,
    comparison_note,
    data_short_s,
    period_complete,
    stages_in_tenths,
)
from gpuaas.pushgateway import MetricFamily
from reports._format import grouped_notes

__all__ = [
    "HOURS_COLUMNS",
    "STAGES",
    "STAGE_COLUMNS",
    "change_rows",
    "cost_report_json",
    "cost_report_metrics",
    "cost_first_line",
    "cost_notes",
    "funnel_rows",
    "money",
    "per_outcome",
    "previous_complete",
    "previous_note",
    "service_rows",
    "stage_cells",
    "summary_markdown",
    "tenant_tables",
    "waster_rows",
    "window_length",
]

STAGES = ("allocated", "busy", "productive", "in_progress", "unknown", "idle", "active")


def money(value: float | None, unknown: str = "unknown") -> str:
    """Dollars with two decimals, or three significant digits under a dollar: $0.000064 and $0.00012
    must not both read "$0.0001"."""
    if value is None:
        return unknown
    if value == 0 or abs(value) >= 1:
        return f"${value:,.2f}"
    decimals = max(2, 2 - math.floor(math.log10(abs(value))))
    return f"${value:,.{decimals}f}"


def per_outcome(value: float | None, kind: str = "serving") -> str:
    """Cost per outcome; a cost per request under a cent is shown per 1,000 requests, as it is priced."""
    if value is None:
        return "unknown"
    if kind == "serving" and abs(value) < 0.01:
        return f"{money(value * 1000)} per 1,000 requests"
    return money(value) + {"serving": " per request", "batch": " per job"}.get(kind, "")


def _hours(value: float | None) -> str:
    return "unknown" if value is None else f"{value:,.1f}"


def window_length(seconds: float) -> str:
    """The report window as people say it: ``2 h``, ``168 h``, ``1.5 h``; under an hour in minutes (``30 min``,
    ``0.25 min``). At most two decimals, none when whole: a window is what the reader asked for, and
    ``0.0166667 h`` for one minute reads as a measurement."""
    value, unit = (seconds / 3600, "h") if seconds >= 3600 else (seconds / 60, "min")
    text = f"{value:,.2f}".rstrip("0").rstrip(".")
    return f"{text} {unit}"


def _per_outcome(row: dict[str, Any], kind: str = "serving") -> str:
    if row["cost_per_outcome"] is not None:
        return per_outcome(row["cost_per_outcome"], kind)
    # a cost with no outcome is said so; one with outcomes and no quotient is unknown (the notes say why: a pod of
    # it that OpenCost does not list, so that the quotient would only be a lower bound)
    if row["total_cost"] is None or row["verified_outcomes"] != 0:
        return "unknown"
    return NO_OUTCOME


def _replicas(row: dict[str, Any]) -> str:
    """``3 (4/1.5 rps)``: forecast / per-replica rate; blank for batch, ``unknown`` when unmeasured (see notes)."""
    if row["kind"] != "serving":
        return ""
    if row.get("replicas_needed") is None:
        return "unknown"
    return f"{row['replicas_needed']} ({row['forecast_rps']:.3g}/{row['per_replica_rps']:.3g} rps)"


def _count(value: float | None) -> str:
    return "unknown" if value is None else f"{value:,.0f}"


STAGE_COLUMNS = {"productive": "productive GPU-h", "in progress": "in progress GPU-h",
                 "busy, no verified outcome": "busy, no verified outcome GPU-h",
                 "busy, outcome unknown": "busy, outcome unknown GPU-h", "idle": "idle GPU-h",
                 "unknown (no telemetry)": "no telemetry GPU-h"}
"""The funnel table's column for each of ``FUNNEL_STAGES``, in order: with ``allocated GPU-h`` they foot."""
HOURS_COLUMNS = ("allocated GPU-h", *STAGE_COLUMNS.values(), "busy GPU-h", "active GPU-h")
"""The GPU-hour columns of ``funnel_rows``: the funnel table; the other columns are the tenant's cost table."""


def stage_cells(row: dict[str, Any]) -> dict[str, str]:
    """A row's allocated GPU-hours and its ``FUNNEL_STAGES``, printed in tenths that add up to the allocated
    hours as printed (the largest-remainder rule, as for money): 3.35 + 3.35 + 3.3 print 3.4, 3.3 and 3.3 under
    10.0, never 3.4 + 3.4 + 3.3. A stage the row cannot know is "unknown", never 0: every stage but the hours
    without telemetry where the row had no telemetry at all; productive (and in progress) where its outcomes
    are unknown, and then "busy, no verified outcome" too (those hours are in "busy, outcome unknown")."""
    allocated = float(row.get("allocated_gpu_hours") or 0.0)
    cells = {"allocated GPU-h": f"{round(allocated * 10) / 10:,.1f}",
             **{STAGE_COLUMNS[k]: f"{v:,.1f}" for k, v in stages_in_tenths(row).items()}}
    unknown: list[str] = []
    if row.get("busy_gpu_hours") is None or row.get("idle_gpu_hours") is None:
        unknown = list(FUNNEL_STAGES[:-1])
    elif row.get("productive_gpu_hours") is None or row.get("in_progress_gpu_hours") is None:
        unknown = ["busy, no verified outcome", *(k for k, c in (("productive", "productive_gpu_hours"),
                                                                 ("in progress", "in_progress_gpu_hours"))
                                                  if row.get(c) is None)]
    return {**cells, **{STAGE_COLUMNS[k]: "unknown" for k in unknown}}


def funnel_rows(report: CostReport) -> list[dict[str, Any]]:
    """Per tenant, then the cluster total: the funnel (``HOURS_COLUMNS``: allocated, split into its stages, which
    add up to it), then the cost and the outcomes."""
    rows = [{**t} for t in report.tenants] + [{"tenant": "(cluster)", **report.cluster,
                                                "cost_per_outcome": None}]
    return [{
        "tenant": r["tenant"],
        **stage_cells(r),
        "busy GPU-h": _hours(r["busy_gpu_hours"]),
        "active GPU-h": _hours(r["active_gpu_hours"]),
        "GPU cost": money(r["gpu_cost"]),
        "total cost": money(r["total_cost"]),
        "waste": money(r["waste_cost"]),
        "verified requests": _count(r.get("verified_requests")),
        "jobs in time": _count(r.get("verified_jobs")),
        f"cost per outcome ({report.cost_basis})": _tenant_per_outcome(r) if r["tenant"] != "(cluster)" else "",
    } for r in rows]


def tenant_tables(report: CostReport) -> list[tuple[str, list[dict[str, Any]]]]:
    """``funnel_rows`` as two tables that each fit a page: the GPU-hour funnel (its stages add up to the allocated
    hours, row by row) and the cost and outcomes per tenant."""
    rows = funnel_rows(report)
    hours = [{k: v for k, v in r.items() if k == "tenant" or k in HOURS_COLUMNS} for r in rows]
    money_rows = [{k: v for k, v in r.items() if k not in HOURS_COLUMNS} for r in rows]
    return [("GPU-hour funnel per tenant: the stages add up to the hours allocated", hours),
            ("Cost and verified outcomes per tenant", money_rows)]


def _tenant_per_outcome(row: dict[str, Any]) -> str:
    """A tenant's cost per outcome only where its outcomes are of one kind: a request is not a job."""
    if row.get("verified_requests") and row.get("verified_jobs"):
        return "see per service (requests and jobs)"
    return _per_outcome(row, "batch" if row.get("verified_jobs") else "serving")


def service_rows(report: CostReport) -> list[dict[str, Any]]:
    out = []
    for s in report.services:
        slo = "unknown" if s["slo_fraction"] is None else f"{100 * s['slo_fraction']:.1f}%"
        if s["slo_error_bound"]:
            slo += f" ±{100 * s['slo_error_bound']:.1f}%"
        out.append({
            "service": s["service"], "tenant": s["tenant"], "kind": s["kind"],
            "requests" if s["kind"] == "serving" else "jobs": _count(s["requests"]),
            "verified outcomes": _count(s["verified_outcomes"]),
            "within SLO": slo if s["kind"] == "serving" else ("in time: " + slo),
            "GPU cost": money(s["gpu_cost"]), "total cost": money(s["total_cost"]),
            f"cost per outcome ({report.cost_basis})": _per_outcome(s, s["kind"]),
            "replicas needed": _replicas(s),
        })
    return [{("requests/jobs" if k in ("requests", "jobs") else k): v for k, v in r.items()} for r in out]


def waster_rows(report: CostReport) -> list[dict[str, Any]]:
    return [{"tenant": w["tenant"], "namespace": w["namespace"], "workload": w["workload"],
             "idle GPU-h": _hours(w["idle_gpu_hours"]), "allocated GPU-h": _hours(w["allocated_gpu_hours"]),
             "waste": money(w["waste_cost"])} for w in report.wasters]


def _delta(now: float | None, before: float | None) -> str:
    """Change against the previous period; "no data before" where that period had nothing to compare (None).
    A previous $0 is data: no percentage of it exists, so the change is said "from $0"."""
    if now is None:
        return "unknown"
    if before is None:
        return "no data before"
    if before == 0:
        return "no change" if now == 0 else f"from $0 to {money(now)}"
    return f"{100 * (now - before) / before:+.0f}%"


def previous_complete(previous: CostReport | None) -> bool:
    """Whether the previous period's data spans (nearly) all of it (``COMPLETE_SHARE`` of its length): a period
    that began before the telemetry did (a new cluster, a new tenant) would turn every change into thousands
    of percent. ``period_complete`` says how a report that does not record its span is judged."""
    return previous is not None and period_complete(previous)


def previous_note(previous: CostReport | None) -> str | None:
    """Why no change against the previous period is shown; None where it is (or none was asked for)."""
    return None if previous is None else comparison_note(previous)


def change_rows(report: CostReport, previous: CostReport | None) -> list[dict[str, Any]]:
    """Per tenant: cost, waste and cost per outcome against the previous period of the same length, only
    where that period has data (from its start, and for that tenant)."""
    before = {t["tenant"]: t for t in previous.tenants} if previous and previous_complete(previous) else {}
    basis = f"{report.cost_basis}_cost"
    rows = []
    for t in report.tenants:
        p = before.get(t["tenant"], {})
        rows.append({"tenant": t["tenant"], "cost": money(t[basis]), "previous cost": money(p.get(basis), "no data"),
                     "cost change": _delta(t[basis], p.get(basis)),
                     "waste change": _delta(t["waste_cost"], p.get("waste_cost")),
                     "cost per outcome change": _delta(t["cost_per_outcome"], p.get("cost_per_outcome"))})
    return rows


NO_SERVICES = "The policy has no services: section, so no outcome is counted (cost per outcome unknown). "


def cost_first_line(report: CostReport) -> str:
    """What the run found, in one sentence: the span, the cost, the waste and the verified outcomes.

    A policy without services is said first: every outcome figure below would otherwise read as zero work.
    The span is the window asked for, or the hours of data where they are fewer ("6.0 h of data in a 168 h
    window"): the money is that of the hours the data covers. Waste the telemetry cannot tell (none of the
    GPU-hours had any) is said to be unknown, and why, never a dollar figure.
    """
    c = report.cluster
    lead = NO_SERVICES if not report.services else ""
    window = window_length(report.window_s)
    if not c.get("allocated_gpu_hours"):
        if report.telemetry_missing and c.get("total_cost") is None:
            return f"{lead}GPU-hours unknown in the {window} window: no GPU telemetry and no cost source."
        return f"{lead}No GPU-hours allocated in the {window} window: nothing to cost."
    covered = data_short_s(report)
    span = f"{_span(covered)} of data in a {window} window" if covered is not None else f"{window} of GPUs"
    if c.get("waste_cost") is None and c.get("gpu_cost") is None and c.get("total_cost") is not None:
        waste = "idle-GPU waste unknown (the GPU cost is unknown)"  # OpenCost left a GPU cost null
    elif c.get("waste_cost") is None and c.get("total_cost") is not None:  # the money is known, the idleness is not
        waste = "idle-GPU waste unknown (no GPU telemetry in Prometheus)"
    else:
        waste = f"{money(c.get('waste_cost'))} of it on allocated but idle GPUs"
    spent = "spend unknown in all" if c["total_cost"] is None else f"{money(c['total_cost'])} spent in all"
    on_gpus = "GPU spend unknown" if c["gpu_cost"] is None else f"{money(c['gpu_cost'])} on GPUs"
    return (f"{lead}{span}: {spent} ({on_gpus}), {waste}; "
            f"{_count(c.get('verified_requests'))} verified requests and {_jobs_in_time(c)}.")


def _span(seconds: float) -> str:
    """Hours of data as measured (``6.0 h``, ``45 min``): unlike the window, a measurement keeps its decimal."""
    return f"{seconds / 3600:,.1f} h" if seconds >= 3600 else f"{seconds / 60:,.0f} min"


def _jobs_in_time(cluster: dict[str, Any]) -> str:
    """``3 batch jobs done in time``; unknown without the Kubernetes API: never a 0 that reads as none done."""
    jobs = cluster.get("verified_jobs")
    if jobs is None:
        return "batch jobs done in time unknown"
    return f"{_count(jobs)} batch job{'' if round(jobs) == 1 else 's'} done in time"


def cost_notes(notes: Sequence[str]) -> list[str]:
    """The report's notes as people read them: one line for a note that several services or tenants share.
    Other notes (about a source or the whole window) are kept as they are."""
    return grouped_notes(notes, shown=8, name_first=False)


def summary_markdown(report: CostReport, previous: CostReport | None, html_path: str | None,
                     plots: Sequence[tuple[str, str]] = ()) -> str:
    """The headline numbers, then the plots inlined (``(alt, base64 PNG)``): the Prefect UI shows them without
    the worker's disk, where the HTML report lies."""
    c = report.cluster
    lines = [
        cost_first_line(report),
        "",
        f"# gpuaas cost report: {report.start:%Y-%m-%d %H:%M} – {report.end:%Y-%m-%d %H:%M} UTC",
        "",
        f"- GPU-hours: **{_hours(c['allocated_gpu_hours'])}** allocated → **{_hours(c['busy_gpu_hours'])}** busy → "
        f"**{_hours(c['productive_gpu_hours'])}** productive (+ **{_hours(c['in_progress_gpu_hours'])}** of jobs "
        f"still running); **{_hours(c['unknown_gpu_hours'])}** without telemetry (unknown, not idle); effective "
        f"utilisation **{_hours(c['active_gpu_hours'])}** activity-weighted GPU-h",
        f"- total cost **{money(c['total_cost'])}** (GPU **{money(c['gpu_cost'])}**), of which waste (allocated "
        f"but idle GPUs) **{money(c['waste_cost'])}**; cost per outcome on the {report.cost_basis} cost",
        f"- **{_count(c.get('verified_requests'))}** verified requests, **{_count(c.get('verified_jobs'))}** batch "
        "jobs done in time",
    ]
    if previous is not None and previous_complete(previous):
        p = previous.cluster
        lines.append(f"- previous {window_length(report.window_s)}: total cost {money(p['total_cost'], 'no data')} "
                     f"({_delta(c['total_cost'], p['total_cost'])}), waste {money(p['waste_cost'], 'no data')}")
    elif (why := previous_note(previous)) is not None and why not in report.notes:
        lines.append(f"- {why}")
    if report.wasters:
        w = report.wasters[0]
        lines.append(f"- top waster: `{w['namespace']}/{w['workload']}` ({w['tenant']}), "
                     f"{_hours(w['idle_gpu_hours'])} idle GPU-h, {money(w['waste_cost'])}")
    if html_path:
        lines.append(f"- HTML report with plots (on the worker): `{html_path}`")
    for alt, data in plots:
        lines += ["", f"![{alt}](data:image/png;base64,{data})"]
    if report.notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in cost_notes(report.notes)]
    return "\n".join(lines) + "\n"


def cost_report_json(report: CostReport, html_path: str | None, previous: CostReport | None = None
                     ) -> dict[str, Any]:
    """The ``--format json`` document: plain values, None where unknown (reasons in ``notes``)."""
    doc: dict[str, Any] = {
        "summary": cost_first_line(report), "cost_basis": report.cost_basis,
        "window_s": report.window_s,
        "start": report.start.isoformat(), "end": report.end.isoformat(),
        "tenants": report.tenants, "services": report.services, "cluster": report.cluster,
        "top_wasters": report.wasters, "batch_jobs": report.batch, "daily": report.daily,
        "notes": report.notes, "queries": report.queries, "report": html_path,
    }
    if previous is not None:
        doc["previous"] = {"start": previous.start.isoformat(), "end": previous.end.isoformat(),
                           "tenants": previous.tenants, "cluster": previous.cluster}
    return doc


def cost_report_metrics(report: CostReport) -> list[MetricFamily]:
    """What the flow pushes; an unknown value is left out (absent), never pushed as 0."""
    hours = MetricFamily("gpuaas_gpu_hours", "GPU-hours in the report window by funnel stage", ("stage", "tenant"))
    gpu_cost = MetricFamily("gpuaas_gpu_cost", "GPU cost over the report window (OpenCost)", ("tenant",))
    total_cost = MetricFamily("gpuaas_total_cost", "Total cost (GPU, CPU, RAM) over the report window (OpenCost)",
                              ("tenant",))
    waste = MetricFamily("gpuaas_waste_cost", "Cost of allocated but idle GPU-hours in the window", ("tenant",))
    tenant_cpo = MetricFamily("gpuaas_tenant_cost_per_outcome", "Tenant cost per verified outcome", ("tenant",))
    cpo = MetricFamily("gpuaas_cost_per_outcome", "Service cost per verified outcome", ("service", "tenant"))
    outcomes = MetricFamily("gpuaas_verified_outcomes", "Verified outcomes in the window", ("service", "tenant"))
    slo = MetricFamily("gpuaas_slo_fraction", "Share of requests within the latency SLO", ("service", "tenant"))
    replicas = MetricFamily("gpuaas_replicas_needed", "Replicas the peak 5-minute rate (policy quantile) plus "
                            "headroom needs at the measured per-replica capacity", ("service", "tenant"))
    for t in report.tenants:
        for stage in STAGES:
            value = t.get(f"{stage}_gpu_hours")
            if value is not None:
                hours.add(value, stage, t["tenant"])
        for family, key in ((gpu_cost, "gpu_cost"), (total_cost, "total_cost"), (waste, "waste_cost"),
                            (tenant_cpo, "cost_per_outcome")):
            if t[key] is not None:
                family.add(t[key], t["tenant"])
    for s in report.services:
        for family, key in ((cpo, "cost_per_outcome"), (outcomes, "verified_outcomes"), (slo, "slo_fraction"),
                            (replicas, "replicas_needed")):
            if s.get(key) is not None:
                family.add(s[key], s["service"], s["tenant"])
    stamp = MetricFamily("gpuaas_cost_report_timestamp_seconds", "End of the cost report window").add(
        report.end.timestamp())
    window = MetricFamily("gpuaas_cost_report_window_seconds", "Length of the cost report window").add(report.window_s)
    return [hours, gpu_cost, total_cost, waste, tenant_cpo, cpo, outcomes, slo, replicas, stamp, window]
