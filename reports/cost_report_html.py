"""The cost report as one self-contained HTML page: plots as inline PNG, the numbers behind each.

No network is needed to open it (no CDN, no web fonts): matplotlib renders with its Agg
backend into base64 ``data:`` URIs, and the tables hold the exact figures each plot shows.
A small inline script replaces a plot that fails to decode with a visible warning, so a
broken page says so instead of showing an empty frame.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from matplotlib.dates import DateFormatter, date2num

from gpuaas.policies.cost import FUNNEL_STAGES, CostReport, funnel_stages
from reports._plots import drawn, plt
from reports._plots import png_base64 as _png
from reports.cost_report import (
    change_rows,
    cost_first_line,
    cost_notes,
    money,
    per_outcome,
    previous_complete,
    service_rows,
    tenant_tables,
    waster_rows,
)

__all__ = ["cost_per_outcome_plot", "funnel_plot", "render_html"]

_COLOURS = ("#59a14f", "#8cd17d", "#4c78a8", "#bab0ac", "#e15759", "#f2cf5b")
"""One colour per stage of ``FUNNEL_STAGES``, left to right; each GPU-hour allocated is in exactly one of them."""
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
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.note { color: #555; } .broken { color: #b00; font-weight: bold; } .lead { font-size: 1.15em; }
caption { text-align: left; font-weight: bold; padding: 0.3em 0; }
.kpis { display: flex; flex-wrap: wrap; gap: 0.8em; margin: 1em 0; }
.kpis div { border: 1px solid #ccc; border-radius: 6px; padding: 0.5em 0.9em; min-width: 8em; }
.kpis span { display: block; font-size: 1.4em; font-weight: bold; } .kpis small { color: #555; }
</style>"""


def _img(data: str, alt: str) -> str:
    return f'<img class="plot" alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _table(title: str, rows: Sequence[dict[str, Any]]) -> str:
    if not rows:
        return f'<h3>{html.escape(title)}</h3><p class="note">nothing to show</p>'
    head = "".join(f"<th>{html.escape(str(k))}</th>" for k in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in r.values()) + "</tr>" for r in rows)
    return (f"<table><caption>{html.escape(title)}</caption><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>")


def funnel_plot(report: CostReport) -> str:
    """Per tenant, the allocated GPU-hours as one bar split into stages: a true funnel, nothing counted twice."""
    tenants = [drawn(t["tenant"]) for t in report.tenants]
    fig, ax = plt.subplots(figsize=(9, 0.9 + 0.55 * max(len(tenants), 1)))
    left = [0.0] * len(tenants)
    stages = [funnel_stages(t) for t in report.tenants]
    for label, colour in zip(FUNNEL_STAGES, _COLOURS, strict=True):
        values = [s[label] for s in stages]
        ax.barh(tenants, values, left=left, label=label, color=colour)
        left = [a + b for a, b in zip(left, values)]
    ax.invert_yaxis()
    ax.set_xlabel("GPU-hours allocated in the window (hours)")
    ax.set_title("Where the allocated GPU-hours went, per tenant")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3, fontsize="medium", frameon=False)
    return _png(fig)


def _dates(rows: list[dict[str, Any]]) -> Any:
    """The periods' end dates as matplotlib date numbers (what its date axis plots)."""
    return date2num([datetime.fromisoformat(r["day_end"]) for r in rows])  # type: ignore[no-untyped-call]


def cost_per_outcome_plot(report: CostReport, kind: str) -> str | None:
    """Cost per verified outcome of one kind of service: per 1,000 requests (serving) or per job (batch),
    never both on one axis; against the real dates of the periods when there is more than one."""
    names = [s["service"] for s in report.services if s["kind"] == kind]
    rows = [d for d in report.daily if d["service"] in names and d["cost_per_outcome"] is not None]
    if not rows:
        return None
    scale, unit = (1000.0, "$ per 1,000 verified requests") if kind == "serving" else (1.0, "$ per job done in time")
    fig, ax = plt.subplots(figsize=(9, 3.6))
    if len({d["day"] for d in report.daily}) == 1:
        ax.barh([drawn(d["service"]) for d in rows], [d["cost_per_outcome"] * scale for d in rows], color="#4c78a8")
        ax.invert_yaxis()
        ax.set_xlabel(unit)
    else:
        empty: set[float] = set()
        for name in names:
            mine = [d for d in rows if d["service"] == name]
            if mine:
                ax.plot(_dates(mine), [d["cost_per_outcome"] * scale for d in mine], marker="o", label=drawn(name))
                # a period with no point is said to be empty, not left for the reader to guess at
                empty |= set(_dates([d for d in report.daily if d["service"] == name and d["cost_per_outcome"] is None]))
        for end in sorted(empty):
            ax.annotate("no verified outcome\nin this period", (end, 0.03), xycoords=("data", "axes fraction"),
                        ha="center", va="bottom", fontsize="small", color="#666666")
        ends = _dates([d for d in report.daily if d["service"] == names[0]])
        ax.set_xticks(ends)  # one tick per period end: the dates the values belong to
        ax.set_xlim(ends[0] - 0.5, ends[-1] + 0.5)
        ax.xaxis.set_major_formatter(DateFormatter("%Y-%m-%d %H:%M"))  # type: ignore[no-untyped-call]
        fig.autofmt_xdate()
        ax.set_xlabel("period ending (UTC)")
        ax.set_ylabel(unit)
        ax.set_ylim(bottom=0)  # money from zero: a flat line must not look like a swing
        ax.legend(fontsize="small")
    ax.set_title(f"Cost per verified outcome, {'serving' if kind == 'serving' else 'batch'} services "
                 f"({report.cost_basis} cost)")
    return _png(fig)


def _waste_plot(report: CostReport) -> str:
    fig, ax = plt.subplots(figsize=(9, 3.2))
    names = [drawn(t["tenant"]) for t in report.tenants]
    # in dollars where the cost source answered (a tenant without telemetry has no waste figure, not $0)
    known = any(t["total_cost"] is not None for t in report.tenants)
    figures = [t["waste_cost"] if known else t["idle_gpu_hours"] for t in report.tenants]
    bars = ax.bar(names, [v or 0.0 for v in figures], color="#e15759")
    # the value on each bar, as the waste table prints it ($0.400 is not "$0", the label of no waste); a tenant
    # without telemetry "unknown", not a gap
    ax.bar_label(bars, labels=["unknown" if v is None else money(v) if known else f"{v:,.1f} GPU-h"
                               for v in figures], padding=2, fontsize="small")
    ax.margins(y=0.15)
    ax.set_ylabel("waste ($)" if known else "idle GPU-hours (cost unknown)")
    ax.set_title("Waste by tenant: GPUs allocated but idle")
    return _png(fig)


def _daily_rows(report: CostReport) -> list[dict[str, Any]]:
    """One row per service and period; a period the data does not reach reads "no data", not $0 or unknown."""
    kinds = {s["service"]: s["kind"] for s in report.services}
    rows = []
    for d in report.daily:
        missing = "no data" if d.get("data") is False else "unknown"
        outcomes = d["verified_outcomes"]
        rows.append({"service": d["service"], "period ends (UTC)": d["day_end"][:16].replace("T", " "),
                     "GPU cost": money(d["gpu_cost"], missing), "total cost": money(d["total_cost"], missing),
                     "verified outcomes": missing if outcomes is None else f"{outcomes:,.0f}",
                     "cost per outcome": per_outcome(d["cost_per_outcome"], kinds.get(d["service"], "serving"))
                     if d["cost_per_outcome"] is not None else _no_quotient(d)})
    return rows


def _no_quotient(period: dict[str, Any]) -> str:
    """A period's cost per outcome where there is none: "no data", "-" (no outcome to divide by), or "unknown"
    where it had outcomes (its cost is unknown, or leaves out a pod OpenCost does not list: the notes say)."""
    if period.get("data") is False:
        return "no data"
    return "unknown" if period["verified_outcomes"] else "-"


def _headline(report: CostReport) -> str:
    c = report.cluster
    cells = [("total cost", money(c.get("total_cost"))), ("of it GPUs", money(c.get("gpu_cost"))),
             ("waste (idle GPUs)", money(c.get("waste_cost"))),
             ("verified requests", f"{c.get('verified_requests') or 0:,.0f}"),
             ("jobs done in time", "unknown" if c.get("verified_jobs") is None else f"{c['verified_jobs']:,.0f}"),
             ("GPU-hours allocated", f"{c.get('allocated_gpu_hours') or 0:,.1f}"),
             ("productive", "unknown" if c.get("productive_gpu_hours") is None
              else f"{c['productive_gpu_hours']:,.1f}")]
    return '<div class="kpis">' + "".join(f'<div><span>{html.escape(v)}</span><small>{html.escape(k)}</small></div>'
                                          for k, v in cells) + "</div>"


def render_html(report: CostReport, previous: CostReport | None = None) -> str:
    """The whole page; pure (the caller writes it where the settings say)."""
    title = f"GPU cost report {report.start:%Y-%m-%d %H:%M} – {report.end:%Y-%m-%d %H:%M} UTC"
    waste_rows = [{"tenant": t["tenant"], "idle GPU-h": "unknown" if t["idle_gpu_hours"] is None
                   else f"{t['idle_gpu_hours']:,.1f}", "waste": money(t["waste_cost"])} for t in report.tenants]
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{html.escape(title)}</title>",
        _STYLE, "</head><body>", f"<h1>{html.escape(title)}</h1>",
        f'<p class="lead">{html.escape(cost_first_line(report))}</p>', _headline(report),
        '<p class="note">allocated: GPU-hours held (OpenCost); busy: activity above the policy threshold (DCGM); '
        "productive: busy hours that produced verified outcomes; in progress: busy hours of jobs still running; "
        "busy, outcome unknown: busy hours whose outcome cannot be known (never waste); no telemetry: held without "
        "telemetry (never counted as idle). Each GPU-hour allocated is in one stage: they add up to it. Total cost includes CPU and RAM; cost per "
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
              "<h2>Waste</h2>", _img(_waste_plot(report), "waste by tenant"), _table("Waste by tenant", waste_rows),
              _table("Top wasters: allocated but idle", waster_rows(report))]
    if previous is not None and previous_complete(previous):
        parts += ["<h2>Change against the previous period</h2>",
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
