"""The metrics fallback is said as what it is, and a change between two periods priced by different sources is not
shown as a change in cost.

Why: OpenCost's allocation API applies custom-pricing discounts to CPU and RAM and adds reconciliation adjustments
(``*CostAdjustment``); the ``node_*_hourly_cost`` metrics the fallback reads are list prices without either (+26 % on
the embedded cluster with an adjustment, its API then failing). The report said the two "can differ by about 1 %",
and a day priced by the API against one priced by the metrics printed the difference in prices as a change in cost.
"""

from __future__ import annotations

from dataclasses import replace

from gpuaas.policies.cost import CostReport, build_cost_report
from reports.cost_report import change_rows, summary_markdown
from reports.cost_report_html import render_html
from tests.policies.test_cost_report import POLICY, _inputs
from tests.policies.test_cost_report_signable import _with_sources


def test_the_fallback_is_said_to_be_list_prices_without_discounts_or_adjustments() -> None:
    metrics = build_cost_report(_with_sources(_inputs(), opencost=False), POLICY)
    said = summary_markdown(metrics, None, None)
    assert "about 1 %" not in said
    assert "list prices" in said and "discounts" in said and "reconciliation adjustments" in said


def _now_and_before(now_api: bool, before_api: bool) -> tuple[CostReport, CostReport]:
    inputs = _inputs()
    assert inputs.costs is not None
    dearer = replace(inputs, costs=inputs.costs.assign(total_cost=inputs.costs["total_cost"] * 1.26,
                                                       gpu_cost=inputs.costs["gpu_cost"] * 1.26))
    now = build_cost_report(_with_sources(dearer, opencost=now_api), POLICY)
    before = build_cost_report(_with_sources(replace(inputs, start=inputs.start - inputs.period,
                                                     end=inputs.end - inputs.period), opencost=before_api), POLICY)
    return now, before


def test_periods_priced_by_different_sources_show_no_change_in_cost() -> None:
    now, before = _now_and_before(now_api=False, before_api=True)
    rows = change_rows(now, before)
    assert {r["cost change"] for r in rows} == {r["waste change"] for r in rows} == {
        "not comparable: other cost source"}
    assert all(not r["cost change"].endswith("%") for r in rows)
    summary = summary_markdown(now, before, None)
    [line] = [ln for ln in summary.splitlines() if ln.startswith("- previous ")]
    assert "%" not in line and "not a change in cost" in line and "OpenCost's allocation API" in line
    page = render_html(now, before)
    assert "not a change in cost" in page


def test_periods_priced_by_the_same_source_still_show_the_change() -> None:
    now, before = _now_and_before(now_api=True, before_api=True)
    rows = change_rows(now, before)
    assert {r["tenant"]: r["cost change"] for r in rows} == {"a": "+26%", "b": "+26%"}
    assert "not a change in cost" not in summary_markdown(now, before, None)
