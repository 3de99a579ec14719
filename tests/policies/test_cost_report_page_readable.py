"""The cost report's HTML page, read as a newcomer reads it, on ``test_cost_report``'s inputs (the cluster: $106.00
in all, $91.00 of it GPUs; two serving services and one batch service, one period):

* every headline card's figure has its unit (``$``, ``GPU-h``); the GPUs' part of the cost has a card only where it
  is not the whole (OpenCost pricing nothing else: the same figure twice says nothing);
* the tables left-align text (names, phrases) and right-align figures, per column;
* figures written on the bars, and the labels on periods, are at least ``READABLE_PT``;
* a one-period bar plot grows with its rows, each bar the same height: one batch service is one bar, not one bar
  filling a plot of the height of five;
* the funnel's axis says its unit once;
* where the GPUs' cost is the whole cost, the headline and the nodes' cost line say each figure once, in the page,
  the terminal and the Prefect artifact alike (they share the wording).
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from matplotlib.figure import Figure
from matplotlib.text import Annotation

from gpuaas.models import CostInputs, IdlePeriod, SourceStatus, with_idle
from gpuaas.policies.cost import CostReport, build_cost_report
from reports import _cost_plots
from reports.cost_report import cost_first_line, cost_report_json, node_cost_line, summary_markdown
from reports.cost_report_html import cost_per_outcome_plot, funnel_plot, render_html, waste_plot
from tests.policies.test_cost_report import POLICY, _inputs
from tests.policies.test_cost_report_plots import _periods

READABLE_PT = 10.0
"""The axes' tick labels' size (matplotlib's default): a figure on a bar is read at least as easily as the axis."""


def _report(*, gpus_only: bool) -> CostReport:
    """The inputs with an ``__idle__`` of $13.004 GPU; ``gpus_only``: OpenCost prices nothing but the GPUs (each
    total is its GPU cost, the idle's too), else $20.005 idle in all."""
    inputs = _inputs()
    assert inputs.costs is not None
    costs = inputs.costs.assign(total_cost=inputs.costs["gpu_cost"]) if gpus_only else inputs.costs
    idle = IdlePeriod(0, 13.004, 13.004 if gpus_only else 20.005)
    sources = {"prometheus": SourceStatus("prometheus", ok=True), "opencost": SourceStatus("opencost", ok=True)}
    read: CostInputs = replace(inputs, costs=with_idle(costs, [idle]), sources=sources)
    return build_cost_report(read, POLICY)


def _cards(page: str) -> dict[str, str]:
    return {label: figure for figure, label in re.findall(r"<div><span>([^<]*)</span><small>([^<]*)</small></div>",
                                                          page)}


def test_every_card_has_its_unit_and_the_gpus_card_only_where_it_says_something() -> None:
    cards = _cards(render_html(_report(gpus_only=False)))
    assert cards["of it on GPUs"] == "$91.00" and cards["allocated to workloads (total cost)"] == "$106.00"
    assert cards["productive (busy, with verified outcomes)"].endswith(" GPU-h")
    assert cards["allocated (held by workloads)"].endswith(" GPU-h")
    for label, figure in cards.items():  # money, a count of what the label names, or GPU-hours
        assert figure.startswith("$") or figure.endswith(" GPU-h") or label in ("verified requests",
                                                                                "jobs done in time"), label
    same = _cards(render_html(_report(gpus_only=True)))
    assert "of it on GPUs" not in same and same["allocated to workloads (total cost)"] == "$91.00"
    assert list(same.values()).count("$91.00") == 1


def _columns(page: str, caption: str) -> dict[str, set[str]]:
    """Each column of the table captioned ``caption``: the classes of its header and cells."""
    table = page.split(f"<caption>{caption}</caption>", 1)[1].split("</table>", 1)[0]
    heads = re.findall(r'<th class="(\w+)">([^<]*)</th>', table)
    cells = re.findall(r'<td class="(\w+)">', table)
    return {name: {kind, *cells[k::len(heads)]} for k, (kind, name) in enumerate(heads)}


def test_text_is_left_aligned_and_figures_right_aligned() -> None:
    page = render_html(_report(gpus_only=False))
    wasters = _columns(page, "Top wasters: allocated but idle")
    assert {k: v for k, v in wasters.items()} == {
        "tenant": {"text"}, "namespace": {"text"}, "workload": {"text"}, "idle GPU-h": {"num"},
        "allocated GPU-h": {"num"}, "waste": {"num"}}
    services = _columns(page, "Outcomes and cost per service")
    assert services["service"] == services["kind"] == {"text"} and services["total cost"] == {"num"}
    assert services["verified outcomes"] == {"num"}
    style = page.split("<style>", 1)[1].split("</style>", 1)[0]
    assert "th, td {" in style and "text-align: left" in style.split("th, td {", 1)[1].split("}", 1)[0]
    assert re.search(r"td\.num \{ text-align: right; \}", style)


def test_figures_on_bars_and_labels_on_periods_are_readable(figures: list[Figure]) -> None:
    report = _report(gpus_only=False)
    cost_per_outcome_plot(report, "serving")
    waste_plot(report)
    cost_per_outcome_plot(_periods(), "serving")
    bars, waste, lines = figures
    on_bars = [t for t in bars.axes[0].texts if isinstance(t, Annotation)]
    on_waste = waste.axes[0].texts
    assert on_bars and on_waste and lines.axes[0].texts
    for text in [*on_bars, *on_waste, *lines.axes[0].texts]:
        assert text.get_fontsize() >= READABLE_PT, text.get_text()
    assert min(t.get_fontsize() for t in [*on_bars, *on_waste]) >= _cost_plots.LABEL_PT > READABLE_PT


def test_a_bar_plot_grows_with_its_rows(figures: list[Figure]) -> None:
    report = _report(gpus_only=False)
    cost_per_outcome_plot(report, "serving")  # two services
    cost_per_outcome_plot(report, "batch")  # one
    serving, batch = figures
    assert serving.get_figheight() > batch.get_figheight()
    for fig, rows in ((serving, 2), (batch, 1)):
        axes_in = fig.axes[0].get_position().height * fig.get_figheight()
        assert axes_in == pytest.approx(_cost_plots.BAR_IN * rows), rows
    assert batch.get_figheight() < 2.0  # one bar, not a plot of 3.6 inches


def test_the_funnel_axis_says_its_unit_once(figures: list[Figure]) -> None:
    funnel_plot(_report(gpus_only=False))
    [fig] = figures
    label = fig.axes[0].get_xlabel()
    assert label == "GPU-hours allocated in the window" and "(hours)" not in label


def test_where_the_gpus_are_the_whole_cost_each_figure_is_said_once(capsys: pytest.CaptureFixture[str]) -> None:
    from gpuaas.cli.cost_report_cmd import print_cost_tables

    report = _report(gpus_only=True)
    first = cost_first_line(report)
    assert "$91.00 allocated to workloads (all of it on GPUs)" in first and first.count("$91.00") == 1
    line = node_cost_line(report)
    assert line == ("The nodes' GPUs cost $104.00 at OpenCost's prices: $91.00 allocated to workloads, $13.00 idle "
                    "(7.0 GPU-hours nobody held); OpenCost prices nothing else on the nodes (CPU, RAM, volumes, "
                    "network, load balancers and external costs: $0), so that is their cost in all.")
    assert line.count("$104.00") == line.count("$13.00") == 1
    markdown = summary_markdown(report, None, None)
    assert f"- {line}" in markdown.splitlines() and "**$91.00** in all (all of it GPUs)" in markdown
    page = render_html(report)
    assert f"{line.replace(chr(39), '&#x27;')}</p>" in page
    print_cost_tables({**cost_report_json(report, None), "headline": first, "degraded": False})
    said = " ".join(capsys.readouterr().out.split())
    assert said.startswith(f"{first} {line}")


def test_where_other_costs_are_priced_the_parts_are_said() -> None:
    report = _report(gpus_only=False)
    assert "$106.00 allocated to workloads ($91.00 on GPUs)" in cost_first_line(report)
    assert "with the rest OpenCost prices, $126.01 in all" in node_cost_line(report)
    assert "**$106.00** in all (GPU **$91.00**)" in summary_markdown(report, None, None)
