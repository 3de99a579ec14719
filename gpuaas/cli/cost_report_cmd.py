"""``gpuaas cost-report``: run the cost_report flow once, now, over a window, and print it.

``--format json`` is the flow's JSON document (unknown values ``null``, reasons in ``notes``;
``headline``, ``degraded`` and ``source_errors`` as every command that reads the cluster's sources);
``table`` prints the funnel, cost per outcome and top wasters; ``html`` prints only where the
self-contained HTML report was written (it is written in every format). A configured OpenCost or
Kubernetes API that did not answer, or a window without any GPU telemetry, ends the command with exit
code 3, after its output.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any

import typer

from gpuaas.cli._common import OutputFormat, console, end_degraded, flag_error, lead, print_json, settings_or_exit
from gpuaas.cli._flows import run_flow
from gpuaas.cli._tables import print_table
from gpuaas.errors import ConfigError


class ReportFormat(str, Enum):
    table = "table"
    json = "json"
    html = "html"


_OPTIONAL = ("replicas needed", "busy GPU-h", "GPU cost", "active GPU-h", "tenant", "namespace", "kind",
             "requests/jobs", "within SLO", "verified requests", "jobs in time")
"""Left out where they do not fit, the first first (``--wide`` shows them): the cost, waste and outcome columns stay,
and so do the funnel's stages, which add up to the hours allocated only all together."""


def print_cost_tables(doc: dict[str, Any]) -> None:
    """The headline (the failed sources first), what the nodes cost (allocated and idle), the funnel, cost per
    outcome and top wasters from the flow's JSON document, then its notes."""
    from gpuaas.phrases import DEFAULT_CURRENCY
    from gpuaas.policies.cost import CostReport
    from reports.cost_report import (
        STAGE_COLUMNS,
        cost_headline,
        cost_notes,
        node_cost_line,
        service_rows,
        tenant_tables,
        waster_rows,
    )

    report = CostReport(window_s=doc["window_s"], start=doc["start"], end=doc["end"], tenants=doc["tenants"],
                        services=doc["services"], cluster=doc["cluster"], wasters=doc["top_wasters"],
                        daily=doc["daily"], batch=doc["batch_jobs"], notes=doc["notes"], queries=doc["queries"],
                        cost_basis=doc["cluster"].get("cost_basis", "total"), node_cost=doc.get("node_cost") or {},
                        currency=doc.get("currency") or DEFAULT_CURRENCY)  # an older document's money is in USD
    lead({"headline": doc.get("headline") or cost_headline(report), "degraded": doc.get("degraded")},
         OutputFormat.table)
    if report.node_cost:  # what the nodes cost beside what workloads were allocated: idle GPUs are the first waste
        console.print(node_cost_line(report), highlight=False, markup=False)
    for title, rows in (*tenant_tables(report),
                        ("Cost per verified outcome by service", service_rows(report)),
                        ("Top wasters (allocated but idle)", waster_rows(report))):
        if rows:
            # a stage with no hours in any row can go where the table does not fit: the others still add up
            empty = [c for c in STAGE_COLUMNS.values() if c in rows[0] and all(r[c] == "0.0" for r in rows)]
            print_table(title, list(rows[0]), [list(r.values()) for r in rows],
                        optional=[*empty, *(c for c in _OPTIONAL if c in list(rows[0])[1:])],  # never the row's name
                        whole=[c for c in rows[0] if c.startswith("cost per outcome")])  # a figure and its unit
    for note in cost_notes(doc["notes"]):
        console.print(f"note: {note}", highlight=False, markup=False)


def cost_report(
    window: Annotated[str, typer.Option("--window", help="Report window: 6h, 1d, 7d, 30d.")] = "7d",
    format: Annotated[ReportFormat, typer.Option("--format", help="Output format.")] = ReportFormat.table,
    compare: Annotated[bool, typer.Option(help="Also read the previous period of the same length.")] = True,
    whole_days: Annotated[bool, typer.Option("--whole-days", help=(
        "End the window at the last 00:00 UTC: --window 1d --whole-days is yesterday, as a calendar day."))] = False,
) -> None:
    """Cost per verified outcome: the GPU-hour funnel, outcomes against SLO and quality, waste; writes the HTML report."""
    settings = settings_or_exit()
    from gpuaas.quantity import parse_window
    from gpuaas.sources.cost_window import report_periods

    try:
        report_periods(parse_window(window), settings.metrics.sample_interval_seconds)
    except ConfigError as exc:  # a bad flag value: a usage error (exit 2), worded as Click words its own
        raise flag_error(exc) from exc
    from flows.cost_report import cost_report as cost_report_flow

    doc: dict[str, Any] = run_flow(cost_report_flow, f"cost report over {window}", window=window, compare=compare,
                                   whole_days=whole_days)
    if format is ReportFormat.json:
        lead(doc, OutputFormat.json)
        print_json(doc)
    else:
        if format is ReportFormat.table:
            print_cost_tables(doc)
        elif doc.get("degraded"):  # html: stdout stays the path; the failed sources go beside it, on stderr
            lead(doc, OutputFormat.json)
        console.print(f"HTML report: {doc['report']}", highlight=False, soft_wrap=True)
    end_degraded(doc)
