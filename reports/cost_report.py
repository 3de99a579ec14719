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

from gpuaas.phrases import DEFAULT_CURRENCY, half_up, money, per_outcome, zero_money
from gpuaas.policies.cost import (
    FUNNEL_STAGES,
    NO_OUTCOME,
    CostReport,
    comparison_note,
    period_complete,
    pricing_differs,
    stages_in_tenths,
)
from gpuaas.pushgateway import MetricFamily
from reports._cost_words import (
    NO_SERVICES,
    cost_degraded,
    cost_first_line,
    cost_headline,
    cost_source_errors,
    costs_note,
    count_cell,
    hours_cell,
    node_cost_line,
    same_money,
    tenant_cell,
    window_length,
)
from reports._format import grouped_notes

__all__ = [
    "HOURS_COLUMNS",
    "NO_SERVICES",
    "PER_SERVICE",
    "STAGES",
    "STAGE_COLUMNS",
    "OTHER_PRICES",
    "change_note",
    "change_rows",
    "cost_degraded",
    "cost_first_line",
    "cost_headline",
    "cost_notes",
    "cost_per_outcome_cell",
    "cost_report_json",
    "cost_report_metrics",
    "cost_source_errors",
    "costs_note",
    "count_cell",
    "funnel_rows",
    "hours_cell",
    "money",
    "node_cost_line",
    "per_outcome",
    "previous_complete",
    "previous_note",
    "same_money",
    "service_rows",
    "stage_cells",
    "summary_markdown",
    "tenant_cell",
    "tenant_tables",
    "waster_rows",
    "window_length",
]

STAGES = ("allocated", "busy", "productive", "in_progress", "unknown", "idle", "active")


def cost_per_outcome_cell(row: dict[str, Any], kind: str = "serving", currency: str = DEFAULT_CURRENCY) -> str:
    """A row's cost per outcome as every table and plot says it: the figure (``per_outcome``); "no data" for a
    period nothing was read for; NO_OUTCOME where it has a cost and no verified outcome to divide it by; else
    "unknown": its cost or its outcomes cannot be known (None, never 0 or "no outcome"), or it has outcomes and no
    quotient (the notes say why: a pod of it that OpenCost does not list, so that it would only be a lower bound).
    ``currency``: the report's (``CostReport.currency``)."""
    if row["cost_per_outcome"] is not None:
        return per_outcome(row["cost_per_outcome"], kind, currency)
    if row.get("data") is False:
        return "no data"
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
        "tenant": tenant_cell(r),
        **stage_cells(r),
        "busy GPU-h": hours_cell(r["busy_gpu_hours"]),
        "active GPU-h": hours_cell(r["active_gpu_hours"]),
        "GPU cost": money(r["gpu_cost"], currency=report.currency),
        "total cost": money(r["total_cost"], currency=report.currency),
        "waste": money(r["waste_cost"], currency=report.currency),
        "verified requests": count_cell(r.get("verified_requests")),
        "jobs in time": count_cell(r.get("verified_jobs")),
        f"cost per outcome ({report.cost_basis})": (_tenant_per_outcome(r, report.currency)
                                                  if r["tenant"] != "(cluster)" else ""),
    } for r in rows]


def tenant_tables(report: CostReport) -> list[tuple[str, list[dict[str, Any]]]]:
    """``funnel_rows`` as two tables that each fit a page: the GPU-hour funnel (its stages add up to the allocated
    hours, row by row) and the cost and outcomes per tenant."""
    rows = funnel_rows(report)
    hours = [{k: v for k, v in r.items() if k == "tenant" or k in HOURS_COLUMNS} for r in rows]
    money_rows = [{k: v for k, v in r.items() if k not in HOURS_COLUMNS} for r in rows]
    return [("GPU-hour funnel per tenant: the stages add up to the hours allocated", hours),
            ("Cost and verified outcomes per tenant", money_rows)]


PER_SERVICE = "see per service (requests and jobs)"
"""A tenant's cost per outcome, and its change, where it has both kinds of outcome: a request is not a job."""


def _both_kinds(row: dict[str, Any]) -> bool:
    """Whether a tenant's row has verified requests and jobs done in time: no one cost per outcome divides both."""
    return bool(row.get("verified_requests") and row.get("verified_jobs"))


def _tenant_per_outcome(row: dict[str, Any], currency: str) -> str:
    """A tenant's cost per outcome only where its outcomes are of one kind (``PER_SERVICE`` otherwise)."""
    if _both_kinds(row):
        return PER_SERVICE
    return cost_per_outcome_cell(row, "batch" if row.get("verified_jobs") else "serving", currency)


def service_rows(report: CostReport) -> list[dict[str, Any]]:
    out = []
    for s in report.services:
        slo = "unknown" if s["slo_fraction"] is None else f"{100 * s['slo_fraction']:.1f}%"
        if s["slo_error_bound"]:
            slo += f" ±{100 * s['slo_error_bound']:.1f}%"
        out.append({
            "service": s["service"], "tenant": s["tenant"], "kind": s["kind"],
            "requests" if s["kind"] == "serving" else "jobs": count_cell(s["requests"]),
            "verified outcomes": count_cell(s["verified_outcomes"]),
            "within SLO": slo if s["kind"] == "serving" else ("in time: " + slo),
            "GPU cost": money(s["gpu_cost"], currency=report.currency),
            "total cost": money(s["total_cost"], currency=report.currency),
            f"cost per outcome ({report.cost_basis})": cost_per_outcome_cell(s, s["kind"], report.currency),
            "replicas needed": _replicas(s),
        })
    return [{("requests/jobs" if k in ("requests", "jobs") else k): v for k, v in r.items()} for r in out]


def waster_rows(report: CostReport) -> list[dict[str, Any]]:
    return [{"tenant": tenant_cell(w), "namespace": w["namespace"], "workload": w["workload"],
             "idle GPU-h": hours_cell(w["idle_gpu_hours"]), "allocated GPU-h": hours_cell(w["allocated_gpu_hours"]),
             "waste": money(w["waste_cost"], currency=report.currency)} for w in report.wasters]


def _delta(now: float | None, before: float | None, currency: str = DEFAULT_CURRENCY) -> str:
    """Change against the previous period; "no data before" where that period had nothing to compare (None).
    A previous $0 is data: no percentage of it exists, so the change is said "from $0". "no change" only where the
    amount did not change (the same to a billionth): a $4,000 rise on $1,000,000 reads "+0.4%", never "no change",
    in a table a reviewer signs; under 0.1 % it reads "+<0.1%". Whole percents are rounded half up, as money is; the amounts are in ``currency``."""
    if now is None:
        return "unknown"
    if before is None:
        return "no data before"
    if before == 0:
        return "no change" if now == 0 else f"from {zero_money(currency)} to {money(now, currency=currency)}"
    if math.isclose(now, before, rel_tol=1e-9):
        return "no change"
    percent = 100 * (now - before) / before
    if abs(percent) < 0.1:
        return f"{'+' if percent > 0 else '-'}<0.1%"
    if abs(percent) < 1:
        return f"{half_up(percent, 1):+}%"
    return f"{int(half_up(percent, 0)):+d}%"


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
    # two periods priced by different sources (list prices against discounted, reconciled ones): no change in cost
    apart = previous is not None and pricing_differs(report.cost_source, previous.cost_source) is not None
    cur = report.currency
    rows = []
    for t in report.tenants:
        p = before.get(t["tenant"], {})
        rows.append({"tenant": tenant_cell(t), "cost": money(t[basis], currency=cur),
                     "previous cost": money(p.get(basis), "no data", cur),
                     "cost change": OTHER_PRICES if apart else _delta(t[basis], p.get(basis), cur),
                     "waste change": OTHER_PRICES if apart else _delta(t["waste_cost"], p.get("waste_cost"), cur),
                     # a tenant with requests and jobs has no cost per outcome: its change is said as its cell is
                     "cost per outcome change": PER_SERVICE if _both_kinds(t) else OTHER_PRICES if apart
                     else _delta(t["cost_per_outcome"], p.get("cost_per_outcome"), cur)})
    return rows


OTHER_PRICES = "not comparable: other cost source"
"""A change cell where the two periods' money came from different cost sources (``pricing_differs`` says why)."""


def change_note(report: CostReport, previous: CostReport | None) -> str | None:
    """Why the change table shows no change in money though the previous period is complete: its money came from
    another cost source (``pricing_differs``); None where the change is shown, or none is asked for."""
    if previous is None or not previous_complete(previous):
        return None
    return pricing_differs(report.cost_source, previous.cost_source)


def cost_notes(notes: Sequence[str]) -> list[str]:
    """The report's notes as people read them: one line for a note that several services or tenants share.
    Other notes (about a source or the whole window) are kept as they are."""
    return grouped_notes(notes, shown=8, name_first=False)


def summary_markdown(report: CostReport, previous: CostReport | None, html_path: str | None,
                     plots: Sequence[tuple[str, str]] = ()) -> str:
    """The headline (``cost_headline``: a degraded run says so first, as everywhere), the headline numbers, then the
    plots inlined (``(alt, base64 PNG)``): the Prefect UI shows them without the worker's disk, where the HTML
    report lies."""
    c, cur = report.cluster, report.currency
    hours = {k: hours_cell(c[f"{k}_gpu_hours"]) for k in ("allocated", "busy", "productive", "in_progress",
                                                          "unknown", "active")}
    # where OpenCost prices nothing but the GPUs, their cost is the total: said once
    gpus = ("all of it GPUs" if same_money(c["total_cost"], c["gpu_cost"], cur)
            else f"GPU **{money(c['gpu_cost'], currency=cur)}**")
    lines = [
        cost_headline(report, previous),
        "",
        f"# gpuaas cost report: {report.start:%Y-%m-%d %H:%M} – {report.end:%Y-%m-%d %H:%M} UTC",
        "",
        f"- GPU-hours: **{hours['allocated']}** allocated → **{hours['busy']}** busy → **{hours['productive']}** "
        f"productive (+ **{hours['in_progress']}** of jobs still running); **{hours['unknown']}** without telemetry "
        f"(unknown, not idle); effective utilisation **{hours['active']}** activity-weighted GPU-h",
        f"- allocated to workloads **{money(c['total_cost'], currency=cur)}** in all ({gpus}), of which waste "
        f"(allocated but idle GPUs) **{money(c['waste_cost'], currency=cur)}**; cost per outcome on the "
        f"{report.cost_basis} cost",
        f"- {node_cost_line(report, '`__idle__`')}",
        f"- **{count_cell(c.get('verified_requests'))}** verified requests, **{count_cell(c.get('verified_jobs'))}** "
        "batch jobs done in time",
        f"- {costs_note(report, '`__idle__`')}",
    ]
    if previous is not None and (apart := change_note(report, previous)) is not None:
        p = previous.cluster
        lines.append(f"- previous {window_length(report.window_s)}: allocated to workloads "
                     f"{money(p['total_cost'], 'no data', cur)}, waste {money(p['waste_cost'], 'no data', cur)}; "
                     f"{apart}")
    elif previous is not None and previous_complete(previous):
        p = previous.cluster
        lines.append(f"- previous {window_length(report.window_s)}: allocated to workloads "
                     f"{money(p['total_cost'], 'no data', cur)} ({_delta(c['total_cost'], p['total_cost'], cur)}), "
                     f"waste {money(p['waste_cost'], 'no data', cur)}")
    elif (why := previous_note(previous)) is not None and why not in report.notes:
        lines.append(f"- {why}")
    if report.wasters:
        w = report.wasters[0]
        lines.append(f"- top waster: `{w['namespace']}/{w['workload']}` ({tenant_cell(w)}), "
                     f"{hours_cell(w['idle_gpu_hours'])} idle GPU-h, {money(w['waste_cost'], currency=cur)}")
    if html_path:
        lines.append(f"- HTML report with plots (on the worker): `{html_path}`")
    for alt, data in plots:
        lines += ["", f"![{alt}](data:image/png;base64,{data})"]
    if report.notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in cost_notes(report.notes)]
    return "\n".join(lines) + "\n"


def cost_report_json(report: CostReport, html_path: str | None, previous: CostReport | None = None
                     ) -> dict[str, Any]:
    """The ``--format json`` document: plain values, None where unknown (reasons in ``notes``). ``summary`` is the
    headline (``cost_headline``: led by what failed, as the flow's ``headline``); ``cost_source`` says where the
    money came from (``COST_SOURCES``' keys; None where it is unknown); ``currency`` the ISO 4217 code of every amount
    (OpenCost's prices', never converted); ``node_cost`` what the nodes cost, allocated plus idle (OpenCost's
    ``__idle__``), its idle figures None where unknown (``idle_unknown`` says why)."""
    doc: dict[str, Any] = {
        "summary": cost_headline(report, previous), "cost_basis": report.cost_basis,
        "cost_source": report.cost_source, "currency": report.currency,
        "window_s": report.window_s,
        "start": report.start.isoformat(), "end": report.end.isoformat(),
        "tenants": report.tenants, "services": report.services, "cluster": report.cluster,
        "node_cost": report.node_cost,
        "top_wasters": report.wasters, "batch_jobs": report.batch, "daily": report.daily,
        "notes": report.notes, "queries": report.queries, "report": html_path,
    }
    if previous is not None:
        doc["previous"] = {"start": previous.start.isoformat(), "end": previous.end.isoformat(),
                           "tenants": previous.tenants, "cluster": previous.cluster}
    return doc


def cost_report_metrics(report: CostReport) -> list[MetricFamily]:
    """What the flow pushes; an unknown value is left out (absent), never pushed as 0. The money families say their
    currency (the report's ISO 4217 code, OpenCost's prices') in their help text, so that their names and labels stay
    the same whatever the currency, and a dashboard's queries with them."""
    unit = f" (OpenCost, in {report.currency})"
    hours = MetricFamily("gpuaas_gpu_hours", "GPU-hours in the report window by funnel stage", ("stage", "tenant"))
    gpu_cost = MetricFamily("gpuaas_gpu_cost", f"GPU cost over the report window{unit}", ("tenant",))
    total_cost = MetricFamily("gpuaas_total_cost", f"Total cost (GPU, CPU, RAM) over the report window{unit}",
                              ("tenant",))
    waste = MetricFamily("gpuaas_waste_cost", f"Cost of allocated but idle GPU-hours in the window{unit}", ("tenant",))
    tenant_cpo = MetricFamily("gpuaas_tenant_cost_per_outcome", f"Tenant cost per verified outcome{unit}", ("tenant",))
    cpo = MetricFamily("gpuaas_cost_per_outcome", f"Service cost per verified outcome{unit}", ("service", "tenant"))
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
