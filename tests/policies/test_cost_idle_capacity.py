"""What the nodes cost beside what workloads were allocated (OpenCost's ``__idle__``), in the report, by hand.

On ``test_cost_report``'s inputs (the cluster: $106 total, $91 GPU; a free GPU seen 7.0 h by the telemetry) with
an ``__idle__`` of $13.004 GPU and $20.005 in all: the nodes' GPUs cost $104.00 ($91.00 + $13.00) and the nodes
$126.01 ($106.00 + $20.01, half up), each line footing as printed; the JSON carries the figures and the period. The
idle cost is unknown, said so and null, never $0: an allocation answer without ``__idle__``, costs from OpenCost's
metrics, a null idle GPU cost, one below 0 (OpenCost's "negative idle", its node prices below what it allocated), and
a period with allocations but no ``__idle__``.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from gpuaas.models import CostInputs, IdlePeriod, SourceStatus, with_idle
from gpuaas.policies.cost import build_cost_report
from reports.cost_report import cost_report_json, costs_note, node_cost_line, summary_markdown
from reports.cost_report_html import render_html
from tests.policies.test_cost_report import POLICY, _inputs


def _read(idle: list[IdlePeriod] | None, api: bool = True) -> CostInputs:
    """``_inputs`` as the reader hands them: the allocation API answered (``api``) or the metrics stood in, the
    answer's ``__idle__`` periods with the costs (None: the answer held none)."""
    inputs = _inputs()
    assert inputs.costs is not None
    costs = with_idle(inputs.costs, idle) if idle is not None else inputs.costs
    sources = {"prometheus": SourceStatus("prometheus", ok=True), "opencost": SourceStatus("opencost", ok=api)}
    return replace(inputs, costs=costs, sources=sources)


def test_the_nodes_cost_is_the_allocated_plus_the_idle_to_the_cent() -> None:
    report = build_cost_report(_read([IdlePeriod(0, 13.004, 20.005)]), POLICY)
    line = ("The nodes' GPUs cost $104.00 at OpenCost's prices: $91.00 allocated to workloads, $13.00 idle (7.0 "
            "GPU-hours nobody held); with the rest OpenCost prices, $126.01 in all (GPU, CPU, RAM, and the volumes, "
            "network, load balancers and external costs OpenCost charges workloads), $20.01 of it idle.")
    assert node_cost_line(report) == line
    doc = cost_report_json(report, None)["node_cost"]
    assert {k: v for k, v in doc.items() if k != "periods"} == {
        "gpu_cost": 104.0, "allocated_gpu_cost": 91.0, "idle_gpu_cost": 13.0, "total_cost": 126.01,
        "allocated_total_cost": 106.0, "idle_total_cost": 20.01, "unheld_gpu_hours": 7.0, "idle_unknown": None}
    assert doc["periods"] == [{"day": 0, "day_end": "2026-11-02T00:00:00+00:00", "data": True, "idle_gpu_cost": 13.0,
                               "idle_total_cost": 20.01, "unheld_gpu_hours": 7.0}]
    assert f"- {line}" in summary_markdown(report, None, None).splitlines()
    page = render_html(report)
    assert f'<p class="lead">{line.replace(chr(39), "&#x27;")}</p>' in page
    assert "<span>$13.00</span><small>GPUs no workload held (idle node capacity)</small>" in page
    assert ("unallocated node capacity (OpenCost's __idle__) is not included: $20.01 over the window, read apart from "
            "OpenCost's __idle__ (the nodes' cost line); nor is cost OpenCost assigns to no namespace (its "
            "__unallocated__ row), which the report does not read.") in costs_note(report)
    assert costs_note(report).endswith("Neither these figures nor the nodes' cost are the cluster's bill: OpenCost "
                                       "does not discount GPUs, and its prices match a cloud bill only where "
                                       "reconciliation is set up.")


def test_the_terminal_says_the_nodes_cost_under_the_headline(capsys: pytest.CaptureFixture[str]) -> None:
    from gpuaas.cli.cost_report_cmd import print_cost_tables

    report = build_cost_report(_read([IdlePeriod(0, 13.004, 20.005)]), POLICY)
    print_cost_tables({**cost_report_json(report, None), "headline": "the headline", "degraded": False})
    said = " ".join(capsys.readouterr().out.split())  # wrapped at the terminal's width
    assert said.startswith("the headline The nodes' GPUs cost $104.00 at OpenCost's prices: $91.00 allocated to "
                           "workloads, $13.00 idle (7.0 GPU-hours nobody held); with the rest OpenCost prices, $126.01 "
                           "in all")


@pytest.mark.parametrize(("idle", "api", "why"), [
    (None, True, "OpenCost's allocation answer held no __idle__: includeIdle not answered, or no node priced"),
    (None, False, "the costs came from OpenCost's metrics in Prometheus, which do not price idle capacity"),
    ([IdlePeriod(0, float("nan"), 20.0)], True,
     "OpenCost left the idle GPU cost null for 1 of the window's 1 periods (ending 2026-11-02 00:00 UTC)"),
    ([IdlePeriod(0, -12.5, 20.0)], True,
     "OpenCost's __idle__ is below 0 in 1 of the window's 1 periods (down to -12.50): its node prices are below what "
     "it allocated on the nodes"),
], ids=["no-idle-row", "metrics-fallback", "null-idle-gpu-cost", "negative-idle"])
def test_an_idle_cost_that_cannot_be_known_is_said_unknown_never_0(idle: list[IdlePeriod] | None, api: bool,
                                                                     why: str) -> None:
    report = build_cost_report(_read(idle, api), POLICY)
    assert node_cost_line(report) == (f"The nodes' GPUs cost unknown at OpenCost's prices: $91.00 allocated to "
                                      f"workloads, idle capacity unknown ({why}), never $0; 7.0 GPU-hours nobody held.")
    doc = cost_report_json(report, None)["node_cost"]
    assert (doc["gpu_cost"], doc["idle_gpu_cost"], doc["allocated_gpu_cost"], doc["idle_unknown"]) == (
        None, None, 91.0, why)
    assert doc["periods"][0]["idle_gpu_cost"] is None
    assert "$0.00" not in node_cost_line(report)
    assert "(OpenCost's __idle__) is not included, unknown here; nor is cost OpenCost assigns to no namespace" in (
        costs_note(report))
    assert "OpenCost's `__idle__`" in summary_markdown(report, None, None)  # markdown would read __idle__ as bold


def test_a_period_with_allocations_and_no_idle_row_makes_the_window_unknown() -> None:
    """Two days: day 0 has its ``__idle__``, day 1 has allocations and none (an answer cut short): the window's idle
    would be a day short, so it is unknown, naming the day; no day reads $0."""
    inputs = _read([IdlePeriod(0, 5.0, 6.0)])
    assert inputs.costs is not None
    day1 = inputs.costs.assign(day=1)
    costs = with_idle(pd.concat([inputs.costs, day1], ignore_index=True), [IdlePeriod(0, 5.0, 6.0)])
    gpu = pd.concat([inputs.gpu, inputs.gpu.assign(day=1)], ignore_index=True)
    two = replace(inputs, start=inputs.start - (inputs.end - inputs.start), days=2, costs=costs, gpu=gpu)
    report = build_cost_report(two, POLICY)
    assert report.node_cost["idle_gpu_cost"] is None and report.node_cost["gpu_cost"] is None
    assert report.node_cost["idle_unknown"] == ("OpenCost's answer held no __idle__ for 1 of the window's 2 periods "
                                                "(ending 2026-11-02 00:00 UTC)")
    assert [p["idle_gpu_cost"] for p in report.node_cost["periods"]] == [None, None]
    assert [p["unheld_gpu_hours"] for p in report.node_cost["periods"]] == [7.0, 7.0]


def test_the_periods_add_up_to_the_window() -> None:
    """$1.005 + $2.005 + $3.004 is $6.014: $6.01, shared out so that the days print $1.00 (or $1.01) ... adding to
    it; a day nothing was read for is no data (null), not $0."""
    inputs = _read(None)
    assert inputs.costs is not None
    days = [inputs.costs.assign(day=d) for d in (0, 1, 2)]
    costs = with_idle(pd.concat(days, ignore_index=True),
                      [IdlePeriod(0, 1.005, 1.0), IdlePeriod(1, 2.005, 2.0), IdlePeriod(2, 3.004, 3.0)])
    gpu = pd.concat([inputs.gpu.assign(day=d) for d in (0, 1, 2)], ignore_index=True)
    length = inputs.end - inputs.start
    four = replace(inputs, start=inputs.start - 3 * length, days=4, costs=costs, gpu=gpu)
    node = build_cost_report(four, POLICY).node_cost
    shares = [p["idle_gpu_cost"] for p in node["periods"]]
    assert node["idle_gpu_cost"] == 6.01 and shares[3] is None and node["periods"][3]["data"] is False
    assert round(sum(shares[:3]), 2) == 6.01 and all(abs(s - t) <= 0.01 for s, t in zip(shares, (1.005, 2.005, 3.004)))
