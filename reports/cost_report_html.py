"""The cost report as one self-contained HTML page: plots as inline PNG, the numbers behind each.

No network is needed to open it (no CDN, no web fonts): matplotlib renders with its Agg
backend into base64 ``data:`` URIs, and the tables hold the exact figures each plot shows.
A small inline script replaces a plot that fails to decode with a visible warning, so a
broken page says so instead of showing an empty frame.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from matplotlib.ticker import MaxNLocator

from gpuaas.policies.cost import CostReport
from reports._plots import plt
from reports._plots import png_base64 as _png
from reports.cost_report import change_rows, funnel_rows, money, service_rows, waster_rows

__all__ = ["render_html"]

_COLOURS = {"allocated": "#9aa5b1", "busy": "#4c78a8", "productive": "#59a14f", "unknown": "#f2cf5b"}
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
.note { color: #555; } .broken { color: #b00; font-weight: bold; }
</style>"""


def _img(data: str, alt: str) -> str:
    return f'<img class="plot" alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _table(rows: Sequence[dict[str, Any]]) -> str:
    if not rows:
        return '<p class="note">nothing to show</p>'
    head = "".join(f"<th>{html.escape(str(k))}</th>" for k in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in r.values()) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _funnel_plot(report: CostReport) -> str:
    tenants = [t["tenant"] for t in report.tenants]
    fig, ax = plt.subplots(figsize=(9, 0.6 + 0.7 * max(len(tenants), 1)))
    height = 0.2
    for i, stage in enumerate(_COLOURS):
        values = [t[f"{stage}_gpu_hours"] or 0.0 for t in report.tenants]
        ax.barh([y + (i - 1.5) * height for y in range(len(tenants))], values, height, label=stage,
                color=_COLOURS[stage])
    ax.set_yticks(range(len(tenants)), tenants)
    ax.invert_yaxis()
    ax.set_xlabel("GPU-hours in the window")
    ax.set_title("GPU-hour funnel per tenant (unknown = no telemetry, never idle)")
    ax.legend(loc="lower right")
    return _png(fig)


def _cost_per_outcome_plot(report: CostReport) -> str:
    fig, ax = plt.subplots(figsize=(9, 3.8))
    plotted = False
    if len({d["day"] for d in report.daily}) == 1:  # one period: a bar per service says more than a dot
        known = [d for d in report.daily if d["cost_per_outcome"] is not None]
        if known:
            ax.barh([d["service"] for d in known], [d["cost_per_outcome"] for d in known], color="#4c78a8")
            ax.set_xscale("log")
            ax.invert_yaxis()
        ax.set_xlabel("cost per verified outcome ($, log scale)")
        ax.set_title("Cost per verified outcome per service")
        return _png(fig)
    for service in dict.fromkeys(d["service"] for d in report.daily):
        days = [d for d in report.daily if d["service"] == service]
        xs = [d["day"] + 1 for d in days if d["cost_per_outcome"] is not None]
        ys = [d["cost_per_outcome"] for d in days if d["cost_per_outcome"] is not None]
        if ys:
            ax.plot(xs, ys, marker="o", label=service)
            plotted = True
    if plotted:
        ax.set_yscale("log")
        ax.legend(fontsize="small")
    else:
        ax.text(0.5, 0.5, "no service had both a known cost and a verified outcome", ha="center",
                transform=ax.transAxes)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("day of the window (1 = oldest)")
    ax.set_ylabel("cost per verified outcome ($)")
    ax.set_title("Cost per verified outcome per service")
    return _png(fig)


def _waste_plot(report: CostReport) -> str:
    fig, ax = plt.subplots(figsize=(9, 3.2))
    names = [t["tenant"] for t in report.tenants]
    known = all(t["waste_cost"] is not None for t in report.tenants)
    values = [(t["waste_cost"] if known else t["idle_gpu_hours"]) or 0.0 for t in report.tenants]
    ax.bar(names, values, color="#e15759")
    ax.set_ylabel("waste ($)" if known else "idle GPU-hours (cost unknown)")
    ax.set_title("Waste by tenant: allocated but idle")
    return _png(fig)


def _daily_rows(report: CostReport) -> list[dict[str, Any]]:
    return [{"service": d["service"], "period ends": d["day_end"][:16].replace("T", " "),
             "GPU cost": money(d["gpu_cost"]), "total cost": money(d["total_cost"]),
             "verified outcomes": "unknown" if d["verified_outcomes"] is None else f"{d['verified_outcomes']:,.0f}",
             "cost per outcome": money(d["cost_per_outcome"], "-")} for d in report.daily]


def render_html(report: CostReport, previous: CostReport | None = None) -> str:
    """The whole page; pure (the caller writes it where the settings say)."""
    title = f"gpuaas cost report {report.start:%Y-%m-%d %H:%M} – {report.end:%Y-%m-%d %H:%M} UTC"
    waste_rows = [{"tenant": t["tenant"], "idle GPU-h": f"{t['idle_gpu_hours'] or 0:,.1f}",
                   "waste": money(t["waste_cost"])} for t in report.tenants]
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{html.escape(title)}</title>",
        _STYLE, "</head><body>", f"<h1>{html.escape(title)}</h1>",
        '<p class="note">allocated: GPU-hours held (OpenCost); busy: activity above the policy threshold (DCGM); '
        "productive: busy hours that produced verified outcomes; unknown: held without telemetry.</p>",
        "<h2>Funnel per tenant</h2>", _img(_funnel_plot(report), "GPU-hour funnel per tenant"), _table(funnel_rows(report)),
        "<h2>Cost per verified outcome per service</h2>",
        _img(_cost_per_outcome_plot(report), "cost per outcome per service"), _table(service_rows(report)),
        _table(_daily_rows(report)),
        "<h2>Waste by tenant</h2>", _img(_waste_plot(report), "waste by tenant"), _table(waste_rows),
        "<h2>Top wasters</h2>", _table(waster_rows(report)),
    ]
    if previous is not None:
        parts += ["<h2>Change against the previous period</h2>", _table(change_rows(report, previous))]
    if report.notes:
        parts += ["<h2>Notes</h2>", "<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in report.notes) + "</ul>"]
    parts += [_SCRIPT, "</body></html>"]
    return "\n".join(parts) + "\n"
