"""The cost report's plots, as base64 PNG for the HTML page and the markdown summary.

Every value a plot cannot draw is said on it in the words its table uses (``cost_per_outcome_cell``): a period
with no data, with a cost and no verified outcome, or whose cost per outcome is unknown; never a gap left for the
reader to guess at, and never a label that covers another or runs off the plot. A period whose data covers only
part of it is marked, as the table marks it.
"""

from __future__ import annotations

import math
import textwrap
from datetime import datetime
from itertools import groupby
from typing import Any

from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.dates import DateFormatter, date2num
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from gpuaas.phrases import currency_unit
from gpuaas.policies.cost import FUNNEL_STAGES, CostReport, funnel_stages
from reports._plots import drawn, plt
from reports._plots import png_base64 as _png
from reports.cost_report import cost_per_outcome_cell, hours_cell, money, tenant_cell

__all__ = ["BAR_IN", "LABEL_PT", "PERIOD_PT", "cost_per_outcome_plot", "funnel_plot", "partial_label", "waste_plot"]

_COLOURS = ("#59a14f", "#8cd17d", "#4c78a8", "#bab0ac", "#e15759", "#f2cf5b")
"""One colour per stage of ``FUNNEL_STAGES``, left to right; each GPU-hour allocated is in exactly one of them."""
_GAP = "#e8e8e8"
"""The band behind periods no line has a point in."""
_PARTIAL = "#d9a400"
"""The hatching of periods whose data covers part of them only."""
LABEL_PT = 11.0
"""The size of the figures written on bars, in points: at the page's 90 dpi 14 pixels (its text is 16), a little
above the axes' tick labels (10 pt), since they are what the reader looks for. At matplotlib's "small" (8.3 pt) a
``$0.0911`` was 7 pixels tall."""
PERIOD_PT = 10.0
"""The size of the labels on periods (``no data``, ``partial: 6.0 h of data``): the tick labels' size, the largest at
which a one-line label still stands in one period of a 30-day window (else it is a number, said in the legend)."""
BAR_IN = 0.5
"""The height each bar of a one-period plot takes, in inches: the plot grows with its rows, so that one service is a
bar of the same thickness as one of five, not one bar filling the plot."""
_TITLE_IN, _AXIS_IN = 0.45, 0.75
"""The height of a bar plot above its bars (its title) and below them (tick labels and axis label), in inches: fixed,
so that the bars, not the frame, take what the plot grows by."""


def partial_label(period: dict[str, Any]) -> str | None:
    """``partial: 6.0 h of data`` for a period whose data covers part of it only (``partial``); None otherwise. The
    table, the plot and the JSON's ``covered_hours`` say the same hours."""
    if not period.get("partial"):
        return None
    return f"partial: {hours_cell(period.get('covered_hours'))} h of data"


def funnel_plot(report: CostReport) -> str:
    """Per tenant, the allocated GPU-hours as one bar split into stages: a true funnel, nothing counted twice."""
    tenants = [drawn(tenant_cell(t)) for t in report.tenants]
    fig, ax = plt.subplots(figsize=(9, 0.9 + 0.55 * max(len(tenants), 1)))
    left = [0.0] * len(tenants)
    stages = [funnel_stages(t) for t in report.tenants]
    for label, colour in zip(FUNNEL_STAGES, _COLOURS, strict=True):
        values = [s[label] for s in stages]
        ax.barh(tenants, values, left=left, label=label, color=colour)
        left = [a + b for a, b in zip(left, values)]
    ax.invert_yaxis()
    ax.set_xlabel("GPU-hours allocated in the window")
    ax.set_title("Where the allocated GPU-hours went, per tenant")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3, fontsize="medium", frameon=False)
    return _png(fig)


def _date(row: dict[str, Any]) -> float:
    """A period's end as a matplotlib date number (days): what its date axis plots."""
    return float(date2num(datetime.fromisoformat(row["day_end"])))  # type: ignore[no-untyped-call]


def _period_label(rows: list[dict[str, Any]], kind: str) -> str:
    """What one period says where a line has no point (the services of ``rows``, one row each): the table's words,
    once where every service's are the same, else per service; and whether the period is partial."""
    gaps = {r["service"]: cost_per_outcome_cell(r, kind) for r in rows if r["cost_per_outcome"] is None}
    said = set(gaps.values())
    lines = [partial_label(rows[0])] if partial_label(rows[0]) else []
    if len(gaps) == len(rows) and len(said) == 1:
        lines += list(said)
    else:
        lines += [f"{drawn(name)}: {text}" for name, text in gaps.items()]
    return "\n".join(line for line in lines if line)


_LINE_PT = PERIOD_PT * 1.2
"""The height of a line of a period's label (``PERIOD_PT``, spaced 1.2), upright: how many fit side by side in a run."""
_UPRIGHT_CHARS = 33
"""The longest line that stands upright within the plot's height (3.6 in) without reaching its title, at
``PERIOD_PT``."""


def _label_periods(ax: Axes, ends: list[float], periods: list[tuple[str, bool, bool]],
                   width_pt: float) -> list[Artist]:
    """One label for each run of consecutive periods that say the same (``periods``: per period its label, whether
    it is partial, and whether no line has a point in it; ``width_pt``: the axes' width in points); returns the
    legend's entries for the labels said there.

    The label stands upright in the middle of its run, so that neighbouring runs' labels never cover one another,
    and the runs lie within the axis, from its first period to its last, so that no label runs off it. A label too
    wide for its run (many periods, many services) or too long to stand in the plot's height is a number there,
    and the legend says what it stands for. Behind a run no line has a point in lies a grey band, behind a partial
    one a hatched band; a period where another service has its point keeps a plain background."""
    half = (ends[1] - ends[0]) / 2 if len(ends) > 1 else 0.5
    period_pt = width_pt / (len(ends) or 1)
    keys: dict[str, str] = {}
    for (label, part, empty), run in groupby(zip(periods, ends), key=lambda x: x[0]):
        if not label:
            continue
        xs = [x for _, x in run]
        if part:
            ax.axvspan(xs[0] - half, xs[-1] + half, edgecolor=_PARTIAL, hatch="//", fill=False, alpha=0.6, zorder=0,
                       linewidth=0)
        elif empty:
            ax.axvspan(xs[0] - half, xs[-1] + half, color=_GAP, zorder=0, linewidth=0)
        lines = label.split("\n")
        fits = len(lines) * _LINE_PT <= len(xs) * period_pt - 4 and max(map(len, lines)) <= _UPRIGHT_CHARS
        shown = label if fits else keys.setdefault(label, str(len(keys) + 1))
        ax.text((xs[0] + xs[-1]) / 2, 0.5, shown, transform=ax.get_xaxis_transform(), rotation=90 if fits else 0,
                ha="center", va="center", fontsize=PERIOD_PT, color="#444444", zorder=1)
    return [Line2D([], [], linestyle="", marker=f"${key}$", color="#444444",
                   label="\n".join(textwrap.wrap(label.replace("\n", "; "), 36))) for label, key in keys.items()]


def cost_per_outcome_plot(report: CostReport, kind: str) -> str | None:
    """Cost per verified outcome of one kind of service: per 1,000 requests (serving) or per job (batch), never both
    on one axis; against the real dates of the periods when there is more than one. None where the report has no
    period of a service of that kind."""
    names = [s["service"] for s in report.services if s["kind"] == kind]
    rows = [d for d in report.daily if d["service"] in names]
    if not rows:
        return None
    sign = currency_unit(report.currency)  # $, €, or the code (CHF): what the amounts on the axis are in
    scale, unit = ((1000.0, f"{sign} per 1,000 verified requests") if kind == "serving"
                   else (1.0, f"{sign} per job done in time"))
    one_period = len({d["day"] for d in report.daily}) == 1
    height = _TITLE_IN + BAR_IN * len(rows) + _AXIS_IN if one_period else 3.6
    fig, ax = plt.subplots(figsize=(9, height))
    if one_period:
        fig.subplots_adjust(top=1 - _TITLE_IN / height, bottom=_AXIS_IN / height)
        _bars(ax, rows, kind, scale, report.currency)
        ax.set_xlabel(unit + (f" ({partial_label(rows[0])})" if partial_label(rows[0]) else ""))
    else:
        by_day = {day: list(group) for day, group in groupby(sorted(rows, key=lambda d: (d["day"], names.index(
            d["service"]))), key=lambda d: d["day"])}
        days = sorted(by_day)
        ends = [_date(by_day[day][0]) for day in days]
        for name in names:
            # a period without a figure is a break in the line, not a straight line across it
            values = [next((d["cost_per_outcome"] for d in by_day[day] if d["service"] == name), None) for day in days]
            ax.plot(ends, [float("nan") if v is None else v * scale for v in values], marker="o", label=drawn(name))
        keyed = _label_periods(ax, ends, [(_period_label(by_day[day], kind), bool(by_day[day][0].get("partial")),
                                           all(d["cost_per_outcome"] is None for d in by_day[day])) for day in days],
                               ax.get_position().width * fig.get_figwidth() * 72)
        # a tick per period end (the dates the values belong to), at most a dozen of them labelled, the last one
        # always, so that no date covers the next one in a month's window
        ax.set_xticks(ends, minor=True)
        ax.set_xticks(ends[::-math.ceil(len(ends) / 12)][::-1])
        half = (ends[1] - ends[0]) / 2
        ax.set_xlim(ends[0] - half, ends[-1] + half)
        ax.xaxis.set_major_formatter(DateFormatter("%Y-%m-%d %H:%M"))  # type: ignore[no-untyped-call]
        fig.autofmt_xdate()
        ax.set_xlabel("period ending (UTC)")
        ax.set_ylabel(unit)
        ax.set_ylim(bottom=0)  # money from zero: a flat line must not look like a swing
        handles: list[Artist] = [*ax.get_legend_handles_labels()[0], *keyed]
        if any(d.get("partial") for d in rows):
            handles.append(Patch(facecolor="none", edgecolor=_PARTIAL, hatch="//",
                                 label="partial period: its data\ncovers part of it only"))
        ax.legend(handles=handles, fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(f"Cost per verified outcome, {'serving' if kind == 'serving' else 'batch'} services "
                 f"({report.cost_basis} cost)")
    return _png(fig)


def _bars(ax: Axes, rows: list[dict[str, Any]], kind: str, scale: float, currency: str) -> None:
    """One period: a bar per service, its figure at its end; a service without a figure has no bar and says why in
    its table's words (a zero-length bar would read as $0 an outcome). ``currency``: the report's."""
    names = [drawn(d["service"]) for d in rows]
    values = [0.0 if d["cost_per_outcome"] is None else d["cost_per_outcome"] * scale for d in rows]
    ax.barh(names, values, color="#4c78a8")
    ax.invert_yaxis()
    ax.set_xlim(0, max(values, default=0.0) * 1.25 or 1.0)
    for y, (d, value) in enumerate(zip(rows, values)):
        text = (money(value, currency=currency) if d["cost_per_outcome"] is not None
                else cost_per_outcome_cell(d, kind, currency))
        ax.annotate(drawn(text), (value, y), xytext=(4, 0), textcoords="offset points", va="center",
                    fontsize=LABEL_PT, color="#222222" if d["cost_per_outcome"] is not None else "#555555")


def waste_plot(report: CostReport) -> str:
    """Waste per tenant, each bar labelled with the waste table's figure."""
    fig, ax = plt.subplots(figsize=(9, 3.2))
    names = [drawn(tenant_cell(t)) for t in report.tenants]
    # in dollars where the cost source answered (a tenant without telemetry has no waste figure, not $0)
    known = any(t["total_cost"] is not None for t in report.tenants)
    figures = [t["waste_cost"] if known else t["idle_gpu_hours"] for t in report.tenants]
    bars = ax.bar(names, [v or 0.0 for v in figures], color="#e15759")
    # the value on each bar, as the waste table prints it ($0.400 is not "$0", the label of no waste); a tenant
    # without telemetry "unknown", not a gap
    ax.bar_label(bars, labels=["unknown" if v is None else money(v, currency=report.currency) if known
                               else f"{v:,.1f} GPU-h"
                               for v in figures], padding=2, fontsize=LABEL_PT)
    ax.margins(y=0.15)
    ax.set_ylabel(f"waste ({currency_unit(report.currency)})" if known else "idle GPU-hours (cost unknown)")
    ax.set_title("Waste by tenant: GPUs allocated but idle")
    return _png(fig)
