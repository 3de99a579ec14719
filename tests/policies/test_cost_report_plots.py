"""The cost report's plots say what their tables say, where they cannot draw a value, without one label covering
another or running off the plot; and a period whose data covers part of it is marked as such everywhere.

* C: the cost-per-outcome line plot labelled every period without a point "no verified outcome in this period",
  a period with no data at all (the table: "no data") and one whose cost per outcome is unknown too; the labels
  overlapped, the first was cut at the left edge; and in a one-period window a service with a cost and no
  outcome was left out of the bar plot, silently.
* F: in a 7-day report the period holding 6 h of data read as a whole one, in the table, the JSON and the plot.

The inputs are ``test_cost_report``'s, one day of them per period from the third on, with chat serving nothing on
the fourth (a cost, no outcome) and a pod OpenCost does not list on the fifth (its cost per outcome unknown).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from gpuaas.models import GPU_COLS, SourceStatus
from gpuaas.policies.cost import CostReport, build_cost_report
from reports.cost_report import cost_report_json
from reports.cost_report_html import _daily_rows, cost_per_outcome_plot
from tests.policies.test_cost_report import END, POLICY, _inputs


def _periods(days: int = 7, hours_first: float = 6.0) -> CostReport:
    """``days`` daily periods: the first two without data, the third with ``hours_first`` of it, then whole days."""
    base = _inputs()
    assert base.costs is not None
    gpu, costs, serving = [], [], []
    for day in range(2, days):
        more = pd.DataFrame([("a", "chat-predictor-1", day, 6.0, 6.0, 4.0)], columns=GPU_COLS)
        gpu.append(pd.concat([base.gpu.assign(day=day), more]) if day % 5 == 0 else base.gpu.assign(day=day))
        costs.append(base.costs.assign(day=day))
        serving.append(base.serving.iloc[0:0] if day % 3 == 1 else base.serving.assign(day=day))
    start = END - timedelta(days=days)
    covered = [0.0, 0.0, hours_first * 3600] + [86400.0] * (days - 3)
    details = (("data_from", (start + timedelta(days=3, hours=-hours_first)).isoformat()), ("span_step_s", "60"),
               *((f"covered_s:{d}", f"{c:g}") for d, c in enumerate(covered)))
    inputs = replace(base, start=start, days=days, gpu=pd.concat(gpu, ignore_index=True),
                     costs=pd.concat(costs, ignore_index=True), serving=pd.concat(serving, ignore_index=True),
                     sources={"prometheus": SourceStatus("prometheus", ok=True, details=details)})
    return build_cost_report(inputs, POLICY)


def _texts(fig: Figure) -> list[str]:
    return [t.get_text() for t in fig.axes[0].texts]


def _legend(fig: Figure) -> list[str]:
    legend = fig.axes[0].get_legend()
    return [t.get_text() for t in legend.get_texts()] if legend is not None else []


def _laid_out_apart(fig: Figure) -> None:
    """Every label on the plot lies inside it, and none covers another."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    area = fig.axes[0].get_window_extent(renderer)
    boxes = [t.get_window_extent(renderer) for t in fig.axes[0].texts]
    for box, text in zip(boxes, _texts(fig)):
        assert area.x0 <= box.x0 and box.x1 <= area.x1 and area.y0 <= box.y0 and box.y1 <= area.y1, text
    for (a, ta), (b, tb) in combinations(zip(boxes, _texts(fig)), 2):
        assert not a.overlaps(b), (ta, tb)


def test_each_period_without_a_point_is_labelled_as_its_table_says(figures: list[Figure]) -> None:
    report = _periods()
    cells = {(r["service"], r["period ends (UTC)"][:16]): r["cost per outcome"] for r in _daily_rows(report)}
    assert [cells[("chat", f"2026-10-{d} 00:00")] for d in (27, 31)] == ["no data", "no verified outcome"]
    assert cells[("chat", "2026-11-01 00:00")] == "unknown"
    cost_per_outcome_plot(report, "serving")
    [fig] = figures
    texts = _texts(fig)
    # the two periods without data are one run, said once; chat's days apart; quiet (no latency histogram) unknown
    assert texts.count("no data") == 1
    assert "chat: no verified outcome\nquiet: unknown" in texts and "unknown" in texts
    assert not any("in this period" in t for t in texts)
    _laid_out_apart(fig)
    # a period without a point breaks chat's line: no straight line drawn across it
    ys = np.asarray(fig.axes[0].get_lines()[0].get_ydata(), dtype=float)
    assert [bool(y) for y in ~np.isnan(ys)] == [False, False, True, True, False, False, True]


def test_a_month_of_periods_keys_the_labels_that_do_not_fit(figures: list[Figure]) -> None:
    report = _periods(days=30)
    long = "research-llm-pretrain-7b-finetune-sweep-0042"
    renamed = [{**d, "service": long} if d["service"] == "chat" else d for d in report.daily]
    report = replace(report, daily=renamed, services=[{**s, "service": long} if s["service"] == "chat" else s
                                                      for s in report.services])
    cost_per_outcome_plot(report, "serving")
    [fig] = figures
    _laid_out_apart(fig)
    # a label two lines wide in a one-day run, or too long to stand in the plot, is a number, said in the legend
    assert {t for t in _texts(fig) if t.isdigit()} == {"1", "2"} and "quiet: unknown" in _texts(fig)
    legend = fig.axes[0].get_legend()
    assert legend is not None
    keys = {str(h.get_marker()): t.get_text() for h, t in zip(legend.legend_handles, legend.get_texts())
            if isinstance(h, Line2D) and str(h.get_marker()).startswith("$")}
    assert keys == {"$1$": "partial: 6.0 h of data; quiet:\nunknown",
                    "$2$": f"{long[:34]}\n{long[34:]}: no verified outcome;\nquiet: unknown"}
    # a dozen dates at most, the last period's among them: none covers the next
    dates = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert len(dates) <= 12 and dates[-1] == "2026-11-02 00:00"


def test_a_service_with_a_cost_and_no_outcome_is_in_the_one_period_bar_plot(figures: list[Figure]) -> None:
    inputs = _inputs()
    report = build_cost_report(replace(inputs, serving=inputs.serving.assign(value=0.0)), POLICY)
    chat = next(s for s in report.services if s["service"] == "chat")
    assert (chat["total_cost"], chat["verified_outcomes"], chat["cost_per_outcome"]) == (45.0, 0.0, None)
    assert cost_per_outcome_plot(report, "serving") is not None
    [fig] = figures
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["chat", "quiet"]
    assert _texts(fig) == ["no verified outcome", "unknown"]
    assert [bar.get_width() for bar in ax.patches if isinstance(bar, Rectangle)] == [0.0, 0.0]  # no bar: $0 an outcome would be a figure


def test_a_partial_period_is_marked_in_the_table_the_json_and_the_plot(figures: list[Figure]) -> None:
    report = _periods()
    days = [d for d in report.daily if d["service"] == "chat"]
    assert [(d["data"], d["partial"], d["covered_hours"]) for d in days] == [
        (False, False, 0.0), (False, False, 0.0), (True, True, 6.0), *[(True, False, 24.0)] * 4]
    assert [d["partial"] for d in cost_report_json(report, None)["daily"]][:3] == [False, False, True]
    periods = [r["period ends (UTC)"] for r in _daily_rows(report) if r["service"] == "chat"]
    assert periods[2] == "2026-10-29 00:00 (partial: 6.0 h of data)" and periods[3] == "2026-10-30 00:00"
    cost_per_outcome_plot(report, "batch")
    [fig] = figures
    assert "partial: 6.0 h of data\nno verified outcome" in _texts(fig)
    assert "partial period: its data\ncovers part of it only" in _legend(fig)
    _laid_out_apart(fig)
    # a whole day, and a window without any telemetry (said once, in the headline), is not partial
    assert not any(d["partial"] for d in _periods(hours_first=24.0).daily)


def _figure_kinds(report: CostReport) -> dict[str, Any]:
    return {kind: cost_per_outcome_plot(report, kind) for kind in ("serving", "batch")}


def test_a_report_without_periods_has_no_cost_per_outcome_plot() -> None:
    report = replace(build_cost_report(_inputs(), POLICY), daily=[])
    assert _figure_kinds(report) == {"serving": None, "batch": None}
