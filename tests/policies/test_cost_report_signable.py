"""What a FinOps reviewer who recomputed every figure of the cost report found wrong in how it is shown (the
figures were right), one test per finding; the plots' findings are in ``test_cost_report_plots``.

On ``test_cost_report``'s inputs (tenant ``a``: serving ``chat``, $88.50 total, $76 GPU, 72 verified requests;
tenant ``b``: batch ``etl``, $17.50 total, 1 job in time; the cluster: $106 total, $91 GPU, 24 GPU-h):

* A: a degraded run's page, markdown summary and JSON ``summary`` read as a normal run's, the failure only a
  note at the bottom: each now starts with the headline's "Degraded: <source>." (one function says it).
* B: the page's cards read "0 verified requests" and "0.0 GPU-hours allocated" where they are unknown.
* D: a period's cost per outcome read "-" (no outcome to divide by) where its outcomes are unknown.
* E: ``money`` rounded the binary float: 9.79 / 2 is 4.895 and read $4.89.
* G: a note's lower bound read "at least $8.33e-05 per outcome".
* H: no change read "+0%", "-0%" or "no change" in different rows; a tenant with requests and jobs read "unknown"
  for its change of cost per outcome, where its cost per outcome reads "see per service".
* I: "$X spent in all" is the cost OpenCost allocated to workloads, without unallocated node capacity, and read
  as the bill.
* J: nothing said whether the money came from OpenCost's allocation API or its metrics in Prometheus.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pandas as pd

from gpuaas.models import CostInputs, SourceStatus
from gpuaas.policies.cost import CostReport, build_cost_report
from gpuaas.policies.cost._unpriced import understated_note
from reports.cost_report import (
    change_rows,
    cost_first_line,
    cost_headline,
    cost_report_json,
    money,
    summary_markdown,
)
from reports.cost_report_html import _daily_rows, _headline, render_html
from tests.policies.test_cost_report import END, POLICY, START, _inputs

REFUSED = "OpenCost at http://127.0.0.1:9: connection refused (nothing listens on that port)"


def _with_sources(inputs: CostInputs, opencost: bool | None = True) -> CostInputs:
    """``inputs`` as the reader records them: Prometheus answered; OpenCost's allocation API answered (True), was
    refused (False: the costs came from its metrics in Prometheus) or is not configured (None)."""
    sources = {"prometheus": SourceStatus("prometheus", ok=True)}
    if opencost is not None:
        sources["opencost"] = SourceStatus("opencost", ok=opencost, error=None if opencost else REFUSED)
    return replace(inputs, sources=sources)


def _lead(page: str) -> str:
    return page.split('<p class="lead', 1)[1].split(">", 1)[1].split("</p>", 1)[0]


def test_a_degraded_run_says_so_first_on_the_page_in_the_summary_and_the_json() -> None:
    report = build_cost_report(_with_sources(_inputs(), opencost=False), POLICY)
    expected = f"Degraded: {REFUSED}. {cost_first_line(report)}"
    assert cost_headline(report) == expected
    assert _lead(render_html(report)) == expected.replace("'", "&#x27;")
    assert '<p class="lead degraded">' in render_html(report)
    assert summary_markdown(report, None, None).splitlines()[0] == expected
    assert cost_report_json(report, None)["summary"] == expected
    # the previous window's failed source leads the line too, as it leads the flow's headline
    fine = build_cost_report(_with_sources(_inputs()), POLICY)
    assert cost_headline(fine) == cost_first_line(fine) and cost_headline(fine, report).startswith("Degraded: ")
    assert '<p class="lead">' in render_html(fine)
    # no GPU telemetry at all: degraded though every source answered, named where it was looked for
    details = (("span_step_s", "60"), ("covered_s:0", "0"), ("gpu_metrics", "FOO or BAR"))
    blind = build_cost_report(replace(_inputs(), gpu=_inputs().gpu.iloc[0:0], sources={
        "prometheus": SourceStatus("prometheus", ok=True, details=details)}), POLICY)
    said = "Degraded: no GPU telemetry in Prometheus (FOO or BAR) in the window. "
    assert _lead(render_html(blind)).startswith(said)
    assert summary_markdown(blind, None, None).startswith(said) and cost_report_json(blind, None)["summary"].startswith(
        said)


def test_the_cards_say_unknown_never_zero() -> None:
    cluster = {"total_cost": 10.0, "gpu_cost": 8.0, "waste_cost": 1.0, "verified_requests": None,
               "verified_jobs": None, "allocated_gpu_hours": None, "productive_gpu_hours": None}
    report = CostReport(window_s=3600, start=START, end=END, tenants=[], services=[], cluster=cluster, wasters=[],
                        daily=[], batch=[], notes=[])
    cards = _headline(report)
    for name in ("verified requests", "allocated (held by workloads)", "jobs done in time",
                 "productive (busy, with verified outcomes)"):
        assert f"<span>unknown</span><small>{name}</small>" in cards, name
    known = _headline(replace(report, cluster={**cluster, "verified_requests": 0.0, "allocated_gpu_hours": 0.0}))
    assert "<span>0</span><small>verified requests</small>" in known
    assert "<span>0.0 GPU-h</span><small>allocated (held by workloads)</small>" in known


def test_a_periods_unknown_outcomes_read_unknown_not_a_dash() -> None:
    """Without the Kubernetes API, etl's jobs are unknown: its period's cost per outcome is unknown, not "-"; a
    period with a cost and none of its requests verified says so in the service table's words."""
    rows = {r["service"]: r for r in _daily_rows(build_cost_report(_inputs(jobs=False), POLICY))}
    assert (rows["etl"]["verified outcomes"], rows["etl"]["cost per outcome"]) == ("unknown", "unknown")
    idle = _inputs()
    idle = replace(idle, serving=idle.serving.assign(value=0.0))  # chat served nothing: $45.00, 0 requests
    rows = {r["service"]: r for r in _daily_rows(build_cost_report(idle, POLICY))}
    assert (rows["chat"]["verified outcomes"], rows["chat"]["cost per outcome"]) == ("0", "no verified outcome")


def test_money_rounds_half_up_on_the_decimal_amount() -> None:
    assert [money(9.79 / 2), money(1.005), money(2.675), money(4.885), money(0.0001235), money(-4.895)] == [
        "$4.90", "$1.01", "$2.68", "$4.89", "$0.000124", "-$4.90"]
    # what it did already stays: three significant digits under a dollar, two decimals above, "unknown" for None
    assert [money(0.000064), money(0.5), money(1234.5), money(0.0), money(12_345_678.125), money(None, "no data")] == [
        "$0.0000640", "$0.500", "$1,234.50", "$0.00", "$12,345,678.13", "no data"]


def test_a_notes_lower_bound_is_priced_as_the_tables_price() -> None:
    pods = pd.DataFrame([{"namespace": "a", "pod": "chat-1", "observed_h": 2.0}])
    serving = understated_note("service chat", pods, 0.01, 120.0, "total")
    assert serving.endswith("$0.0100 over 120 outcomes, at least $0.0833 per 1,000 requests")
    assert "e-0" not in serving
    assert understated_note("service etl", pods, 52.5, 3.0, "total", "batch").endswith(
        "$52.50 over 3 outcomes, at least $17.50 per job")


def _tenant(cost: float, cost_per_outcome: float | None = None, requests: float = 0.0,
            jobs: float = 0.0) -> dict[str, object]:
    return {"tenant": "a", "total_cost": cost, "gpu_cost": cost, "waste_cost": cost / 10,
            "cost_per_outcome": cost_per_outcome, "verified_outcomes": None if requests and jobs else requests + jobs,
            "verified_requests": requests, "verified_jobs": jobs}


def _period(tenant: dict[str, object]) -> CostReport:
    daily = [{"service": "s", "day": 0, "total_cost": tenant["total_cost"], "verified_outcomes": 1.0}]
    return CostReport(window_s=86400, start=START, end=END, tenants=[tenant], services=[], cluster={}, wasters=[],
                      daily=daily, batch=[], notes=[])


def test_no_change_is_said_one_way_and_a_mixed_tenant_as_its_cell() -> None:
    for now, before in ((100.0, 100.0), (0.0, 0.0), (0.1 + 0.2, 0.3)):
        [row] = change_rows(_period(_tenant(now, 1.0, requests=5)), _period(_tenant(before, 1.0, requests=5)))
        assert (row["cost change"], row["cost per outcome change"]) == ("no change", "no change"), (now, before)
    # a change that rounds to 0 % is still a change: $4,000 on $1,000,000 is no "no change" in a signed table
    said = {now: change_rows(_period(_tenant(now)), _period(_tenant(1_000_000.0)))[0]["cost change"]
            for now in (1_004_000.0, 995_500.0, 1_000_400.0, 999_990.0, 1_010_000.0, 1_025_000.0)}
    assert said == {1_004_000.0: "+0.4%", 995_500.0: "-0.5%", 1_000_400.0: "+<0.1%", 999_990.0: "-<0.1%",
                    1_010_000.0: "+1%", 1_025_000.0: "+3%"}  # 2.5 % rounds half up
    mixed = _period(_tenant(100.0, None, requests=50, jobs=2))
    [row] = change_rows(mixed, mixed)
    assert row["cost per outcome change"] == "see per service (requests and jobs)"


def test_the_money_is_said_to_be_allocated_to_workloads_without_unallocated_capacity() -> None:
    report = build_cost_report(_with_sources(_inputs()), POLICY)
    assert cost_first_line(report).startswith("24 h of GPUs: $106.00 allocated to workloads ($91.00 on GPUs)")
    page, markdown = render_html(report), summary_markdown(report, None, None)
    doc = json.dumps(cost_report_json(report, None))
    for text in (page, markdown, doc):
        assert "spent" not in text
    assert "<span>$106.00</span><small>allocated to workloads (total cost)</small>" in page
    assert "unallocated node capacity (OpenCost&#x27;s __idle__) is not included" in page
    assert "- allocated to workloads **$106.00** in all" in markdown
    assert "unallocated node capacity (OpenCost's `__idle__`) is not included" in markdown  # not bold "idle"
    unknown = build_cost_report(_inputs(costs=False), POLICY)
    assert "cost allocated to workloads unknown" in cost_first_line(unknown)


def test_the_page_and_the_json_say_where_the_money_came_from() -> None:
    api = build_cost_report(_with_sources(_inputs()), POLICY)
    metrics = build_cost_report(_with_sources(_inputs(), opencost=False), POLICY)
    unconfigured = build_cost_report(_with_sources(_inputs(), opencost=None), POLICY)
    none = build_cost_report(_with_sources(_inputs(costs=False), opencost=False), POLICY)
    assert [r.cost_source for r in (api, metrics, unconfigured, none)] == [
        "opencost-allocation-api", "opencost-prometheus-metrics", "opencost-prometheus-metrics", None]
    assert cost_report_json(api, None)["cost_source"] == "opencost-allocation-api"
    assert "Costs come from OpenCost&#x27;s allocation API." in render_html(api)
    assert ("Costs come from OpenCost's metrics in Prometheus (the fallback: OpenCost's list prices per node, "
            "without the custom-pricing discounts or the reconciliation adjustments" in summary_markdown(metrics, None, None))
    assert "No cost source answered: the costs are unknown." in summary_markdown(none, None, None)
    assert build_cost_report(_inputs(), POLICY).cost_source is None  # built by hand: not recorded, not guessed
    assert "Where the costs came from was not recorded." in render_html(build_cost_report(_inputs(), POLICY))


def test_every_printed_cent_is_rounded_half_up_so_one_amount_never_prints_two_ways() -> None:
    """Tenant b's total at 9.79 / 2 (4.895, 4.89499... as a binary float): the figures were rounded to the cent
    with Python's ``round`` before ``money`` saw them, so the table read $4.89 where ``money`` alone reads $4.90."""
    import numpy as np

    costs = _inputs().costs
    assert costs is not None
    costs = costs.copy()
    costs.loc[costs["pod"] == "etl-daily-head", ["gpu_cost", "total_cost"]] = [4.0, 9.79 / 2]
    costs.loc[costs["pod"] == "etl-late-head", ["gpu_cost", "total_cost"]] = [0.0, 0.0]
    report = build_cost_report(replace(_inputs(), costs=costs), POLICY)
    [b] = [t for t in report.tenants if t["tenant"] == "b"]
    assert b["total_cost"] == 4.9 and money(b["total_cost"]) == "$4.90"
    assert money(np.float64(9.79 / 2)) == "$4.90"  # a pandas value, as a table cell may hand it over
