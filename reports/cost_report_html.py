"""The cost report as one self-contained HTML page: plots as inline PNG, the numbers behind each.

No network is needed to open it (no CDN, no web fonts): matplotlib renders with its Agg
backend into base64 ``data:`` URIs (``reports._cost_plots``), and the tables hold the exact figures
each plot shows. A small inline script replaces a plot that fails to decode with a visible warning,
so a broken page says so instead of showing an empty frame. A degraded run's page says so in its
first line, as its headline does, and the page says where its costs came from and what they leave out.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any

from gpuaas.policies.cost import CostReport
from reports._cost_plots import cost_per_outcome_plot, funnel_plot, partial_label, waste_plot
from reports.cost_report import (
    change_note,
    change_rows,
    cost_degraded,
    cost_headline,
    cost_notes,
    cost_per_outcome_cell,
    costs_note,
    count_cell,
    hours_cell,
    money,
    node_cost_line,
    previous_complete,
    same_money,
    service_rows,
    tenant_cell,
    tenant_tables,
    waster_rows,
)

__all__ = ["cost_per_outcome_plot", "funnel_plot", "render_html"]
_SCRIPT = """<script>
window.addEventListener('load', function () {
  var ok = 0, imgs = document.querySelectorAll('img.plot');
  imgs.forEach(function (img) {
    if (img.complete && img.naturalWidth > 0) { ok += 1; return; }
    var p = document.createElement('p'); p.className = 'broken';
    p.textContent = 'plot could not be displayed: ' + img.alt; img.replaceWith(p);
  });
  document.body.setAttribute('data-plots-shown', String(ok));
});
</script>"""
_STYLE = """<style>
body { font-family: sans-serif; margin: 2em; color: #222; max-width: 1100px; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
th.num, td.num { text-align: right; }
.note { color: #555; } .broken { color: #b00; font-weight: bold; } .lead { font-size: 1.15em; }
.degraded { color: #b00; font-weight: bold; }
caption { text-align: left; font-weight: bold; padding: 0.3em 0; }
.kpis { display: flex; flex-wrap: wrap; gap: 0.8em; margin: 1em 0; }
.kpis div { border: 1px solid #ccc; border-radius: 6px; padding: 0.5em 0.9em; min-width: 8em; }
.kpis span { display: block; font-size: 1.4em; font-weight: bold; } .kpis small { color: #555; }
</style>"""


def _img(data: str, alt: str) -> str:
    return f'<img class="plot" alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


_NUMBER = re.compile(r"[+−-]?[^\w\s]{0,3}[+−-]?\d[\d,]*(\.\d+)?(%| [A-Z]{3})?")
"""A cell that is one figure: ``1,234.5``, ``$1,174.37``, ``-$4.00``, ``+50%``, ``+<0.1%``, ``1,234.56 CHF``."""
_NOT_A_FIGURE = frozenset({"", "unknown", "no data", "no data before", "no change"})
"""What a column of figures holds where it has none: it stays a column of figures."""


def _aligned(rows: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Each column's class: ``num`` (right-aligned, so that digits line up) where every cell is a figure or says
    there is none, else ``text`` (left-aligned, as names and phrases are read)."""
    cells = {k: [str(r[k]) for r in rows] for k in rows[0]}
    return {k: "num" if any(_NUMBER.fullmatch(v) for v in vs)
            and all(_NUMBER.fullmatch(v) or v in _NOT_A_FIGURE for v in vs) else "text" for k, vs in cells.items()}


def _table(title: str, rows: Sequence[dict[str, Any]]) -> str:
    if not rows:
        return f'<h3>{html.escape(title)}</h3><p class="note">nothing to show</p>'
    kind = _aligned(rows)
    head = "".join(f'<th class="{kind[k]}">{html.escape(str(k))}</th>' for k in rows[0])
    body = "".join("<tr>" + "".join(f'<td class="{kind[k]}">{html.escape(str(v))}</td>' for k, v in r.items())
                   + "</tr>" for r in rows)
    return (f"<table><caption>{html.escape(title)}</caption><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>")


def _daily_rows(report: CostReport) -> list[dict[str, Any]]:
    """One row per service and period; a period the data does not reach reads "no data", not $0 or unknown, and one
    it reaches part of is marked partial, with the hours it covers (a 6-hour day beside whole ones is no dip)."""
    kinds = {s["service"]: s["kind"] for s in report.services}
    cur = report.currency
    rows = []
    for d in report.daily:
        missing = "no data" if d.get("data") is False else "unknown"
        outcomes = d["verified_outcomes"]
        end = d["day_end"][:16].replace("T", " ")
        rows.append({"service": d["service"],
                     "period ends (UTC)": f"{end} ({partial})" if (partial := partial_label(d)) else end,
                     "GPU cost": money(d["gpu_cost"], missing, cur), "total cost": money(d["total_cost"], missing, cur),
                     "verified outcomes": missing if outcomes is None else f"{outcomes:,.0f}",
                     "cost per outcome": cost_per_outcome_cell(d, kinds.get(d["service"], "serving"), cur)})
    return rows


def _gpu_hours(value: float | None) -> str:
    """A card's GPU-hours with their unit (``21.3 GPU-h``), as its money has its currency; ``unknown`` alone."""
    return "unknown" if value is None else f"{hours_cell(value)} GPU-h"


def _headline(report: CostReport) -> str:
    """The headline figures as cards, each with its unit; one that cannot be known reads "unknown", never 0. The
    money is what was allocated to workloads, as the lead says, not the cluster's bill. The GPUs' part of it has a
    card only where it differs from the whole: where OpenCost prices nothing else, a second card with the same
    figure would say nothing new (the lead says "all of it on GPUs")."""
    c, cur = report.cluster, report.currency
    gpus = ([] if same_money(c.get("gpu_cost"), c.get("total_cost"), cur)
            else [("of it on GPUs", money(c.get("gpu_cost"), currency=cur))])
    cells = [("allocated to workloads (total cost)", money(c.get("total_cost"), currency=cur)), *gpus,
             ("waste (idle GPUs)", money(c.get("waste_cost"), currency=cur)),
             ("GPUs no workload held (idle node capacity)", money(report.node_cost.get("idle_gpu_cost"), currency=cur)),
             ("verified requests", count_cell(c.get("verified_requests"))),
             ("jobs done in time", count_cell(c.get("verified_jobs"))),
             ("allocated (held by workloads)", _gpu_hours(c.get("allocated_gpu_hours"))),
             ("productive (busy, with verified outcomes)", _gpu_hours(c.get("productive_gpu_hours")))]
    return '<div class="kpis">' + "".join(f'<div><span>{html.escape(v)}</span><small>{html.escape(k)}</small></div>'
                                          for k, v in cells) + "</div>"


def _lead_class(report: CostReport, previous: CostReport | None) -> str:
    """The lead's style: in red where the run is degraded (a failed source, or no GPU telemetry)."""
    return "lead degraded" if cost_degraded(report, previous) else "lead"


def render_html(report: CostReport, previous: CostReport | None = None) -> str:
    """The whole page; pure (the caller writes it where the settings say)."""
    title = f"GPU cost report {report.start:%Y-%m-%d %H:%M} – {report.end:%Y-%m-%d %H:%M} UTC"
    waste_rows = [{"tenant": tenant_cell(t), "idle GPU-h": "unknown" if t["idle_gpu_hours"] is None
                   else f"{t['idle_gpu_hours']:,.1f}", "waste": money(t["waste_cost"], currency=report.currency)}
                  for t in report.tenants]
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{html.escape(title)}</title>",
        _STYLE, "</head><body>", f"<h1>{html.escape(title)}</h1>",
        f'<p class="{_lead_class(report, previous)}">{html.escape(cost_headline(report, previous))}</p>',
        f'<p class="lead">{html.escape(node_cost_line(report))}</p>',
        _headline(report), f'<p class="note">{html.escape(costs_note(report))}</p>',
        '<p class="note">allocated: GPU-hours held (OpenCost); busy: activity above the policy threshold (DCGM); '
        "productive: busy hours that produced verified outcomes; in progress: busy hours of jobs still running; "
        "busy, outcome unknown: busy hours whose outcome cannot be known (never waste); no telemetry: held without "
        "telemetry (never counted as idle). Each GPU-hour allocated is in one stage: they add up to it. Total cost is OpenCost's total: GPU, CPU, RAM, and the "
        "volumes, network, load balancers and external costs it charges the pods, at OpenCost's prices; cost per "
        f"outcome uses the {html.escape(report.cost_basis)} cost.</p>",
        "<h2>Where the GPU-hours went</h2>", _img(funnel_plot(report), "GPU-hour funnel per tenant"),
        *(_table(title, rows) for title, rows in tenant_tables(report)),
        "<h2>Cost per verified outcome</h2>",
    ]
    for kind in ("serving", "batch"):
        plot = cost_per_outcome_plot(report, kind)
        if plot is not None:
            parts.append(_img(plot, f"cost per outcome, {kind} services"))
    parts += [_table("Outcomes and cost per service", service_rows(report)),
              _table("Cost per service and period", _daily_rows(report)),
              "<h2>Waste</h2>", _img(waste_plot(report), "waste by tenant"), _table("Waste by tenant", waste_rows),
              _table("Top wasters: allocated but idle", waster_rows(report))]
    if previous is not None and previous_complete(previous):
        apart = change_note(report, previous)
        parts += ["<h2>Change against the previous period</h2>",
                  *([f'<p class="note">{html.escape(apart[0].upper() + apart[1:])}.</p>'] if apart else []),
                  _table("Change against the previous period of the same length", change_rows(report, previous))]
    elif previous is not None:
        parts += ["<h2>Change against the previous period</h2>",
                  f'<p class="note">The previous period ({previous.start:%Y-%m-%d %H:%M} – {previous.end:%Y-%m-%d %H:%M} '
                  "UTC) has no data from its start, so no change is shown: a percentage against a part of a period "
                  "would mislead.</p>"]
    if report.notes:
        notes = cost_notes(report.notes)
        parts += ["<h2>Notes</h2>", "<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>"]
    parts += [_SCRIPT, "</body></html>"]
    return "\n".join(parts) + "\n"
