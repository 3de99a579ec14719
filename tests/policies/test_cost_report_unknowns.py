"""What the cost report says where its data runs short: no GPU telemetry, fewer hours than the window, and
whole counts that add up. On ``test_cost_report``'s inputs (tenant ``a``: serving ``chat``, $88.5 total,
$76 GPU, 19 GPU-h held; tenant ``b``: batch ``etl``, $17.5 total, $15 GPU, 5 GPU-h held; the cluster:
$106 total, $91 GPU, 24 GPU-h), changed where a case needs it; every expected figure is worked out here.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import timedelta

import pandas as pd

from gpuaas.models import COST_COLS, GPU_COLS, SERVING_COLS, CostInputs, SourceStatus
from gpuaas.policies.cost import build_cost_report
from gpuaas.policy import parse_policy
from reports.cost_report import cost_first_line, cost_report_metrics, funnel_rows, service_rows, summary_markdown
from tests.policies.test_cost_report import END, POLICY, START, _inputs

TELEMETRY = ("busy_gpu_hours", "productive_gpu_hours", "in_progress_gpu_hours", "idle_gpu_hours",
             "active_gpu_hours", "waste_cost")


def _spanned(inputs: CostInputs, *covered: float, data_from: str | None = None,
             metrics: str = "FOO_METRIC or BAR_METRIC") -> CostInputs:
    """``inputs`` with what the reader records beside Prometheus' answer: the span per period, the first
    sample (none: no telemetry in the window), and the metrics the telemetry was looked for in."""
    details = [("span_step_s", "60"), *((f"covered_s:{d}", f"{c:g}") for d, c in enumerate(covered)),
               ("gpu_metrics", metrics)]
    if data_from:
        details.insert(0, ("data_from", data_from))
    return replace(inputs, sources={"prometheus": SourceStatus("prometheus", ok=True, details=tuple(details))})


# --- no GPU telemetry -----------------------------------------------------------------------------------------


def test_no_telemetry_in_the_window_is_unknown_not_zero() -> None:
    """The GPU metrics are renamed away: Prometheus answers, with no GPU sample in the window. OpenCost still
    says what was held and paid, vLLM and Kueue what was verified; busy, idle and waste are unknown."""
    report = build_cost_report(_spanned(replace(_inputs(), gpu=_inputs().gpu.iloc[0:0]), 0.0), POLICY)
    a, b = report.tenants
    assert (a["allocated_gpu_hours"], a["unknown_gpu_hours"], a["total_cost"], a["gpu_cost"]) == (19.0, 19.0, 88.5, 76.0)
    assert (b["allocated_gpu_hours"], b["unknown_gpu_hours"], b["total_cost"]) == (5.0, 5.0, 17.5)
    for row in (a, b, report.cluster):
        assert all(row[k] is None for k in TELEMETRY), row
    # the outcomes are not telemetry: cost per outcome stands ($88.5 / 72 requests, $17.5 / 1 job)
    assert (a["verified_outcomes"], a["cost_per_outcome"]) == (72.0, float(f"{88.5 / 72:.6g}"))
    assert (b["verified_outcomes"], b["cost_per_outcome"]) == (1.0, 17.5)
    assert (report.cluster["allocated_gpu_hours"], report.cluster["unknown_gpu_hours"],
            report.cluster["total_cost"]) == (24.0, 24.0, 106.0)
    assert all(s[k] is None for s in report.services for k in ("busy_gpu_hours", "productive_gpu_hours",
                                                                "waste_cost"))
    assert report.telemetry_missing == "no GPU telemetry in Prometheus (FOO_METRIC or BAR_METRIC) in the window"
    assert any(n.startswith("no GPU telemetry in Prometheus (FOO_METRIC or BAR_METRIC) in the 24.0 h window: busy")
               for n in report.notes)
    assert report.wasters == []

    # every view: "unknown" in the tables and the HTML, absent from the metrics, and no $ of waste in the headline
    for row in funnel_rows(report):
        assert (row["busy GPU-h"], row["productive GPU-h"], row["active GPU-h"], row["waste"]) == ("unknown",) * 4
    assert cost_first_line(report) == ("24 h of GPUs: $106.00 allocated to workloads ($91.00 on GPUs), idle-GPU waste unknown "
                                       "(no GPU telemetry in Prometheus); 72 verified requests and 1 batch job done "
                                       "in time.")
    assert "**unknown** busy" in summary_markdown(report, None, None)
    families = {f.name: f for f in cost_report_metrics(report)}
    assert families["gpuaas_waste_cost"].samples == []
    assert {labels[0] for labels, _ in families["gpuaas_gpu_hours"].samples} == {"allocated", "unknown"}
    from reports.cost_report_html import render_html

    page = render_html(report)
    cells = re.sub(r' class="(num|text)"', "", page)  # the cells as read, without their alignment
    assert "<tr><td>a</td><td>unknown</td><td>unknown</td></tr>" in cells  # the waste table: idle GPU-h, waste
    assert "<span>unknown</span><small>waste (idle GPUs)</small>" in page


def test_inputs_without_a_recorded_span_and_no_sample_are_unknown_too() -> None:
    """Built by hand (no span recorded), every pod held GPUs and none had a sample: the same unknowns."""
    report = build_cost_report(replace(_inputs(), gpu=_inputs().gpu.iloc[0:0]), POLICY)
    assert report.telemetry_missing == "no GPU telemetry for any of the 24.0 GPU-hours allocated"
    assert all(report.cluster[k] is None for k in TELEMETRY)
    assert all(t[k] is None for t in report.tenants for k in TELEMETRY)


def test_a_tenant_without_telemetry_is_unknown_and_the_rest_is_computed() -> None:
    """Tenant b's pods (etl-daily-head, etl-late-head: 5 GPU-h held) have no sample; a's have. b's busy, idle
    and waste are unknown, with a note; a's and the cluster's stay figures, the unknown share stated."""
    base = _inputs()
    report = build_cost_report(replace(base, gpu=base.gpu[base.gpu["namespace"] != "b"]), POLICY)
    a, b = report.tenants
    assert all(b[k] is None for k in TELEMETRY) and (b["unknown_gpu_hours"], b["total_cost"]) == (5.0, 17.5)
    assert (a["busy_gpu_hours"], a["idle_gpu_hours"], a["waste_cost"], a["productive_gpu_hours"]) == (
        8.0, 7.0, 28.0, 5.76)
    c = report.cluster  # partial telemetry: 4 (dark-0) + 5 (b) GPU-h unknown of 24; a's 8 busy, 7 idle, $28 waste
    assert (c["allocated_gpu_hours"], c["unknown_gpu_hours"], c["busy_gpu_hours"], c["idle_gpu_hours"],
            c["waste_cost"]) == (24.0, 9.0, 8.0, 7.0, 28.0)
    assert report.telemetry_missing is None
    etl = report.services[1]
    assert (etl["busy_gpu_hours"], etl["productive_gpu_hours"], etl["waste_cost"]) == (None, None, None)
    assert "tenant b: no GPU telemetry for any of its GPU-hours: busy, productive, idle and active GPU-hours and " \
           "the waste are unknown, not 0" in report.notes
    assert [r["waste"] for r in funnel_rows(report)] == ["$28.00", "unknown", "$28.00"]


# --- the hours the data covers --------------------------------------------------------------------------------


def test_the_headline_states_the_hours_of_data_when_fewer_than_the_window() -> None:
    six = _spanned(_inputs(), 6 * 3600.0, data_from=(END - timedelta(hours=6)).isoformat())
    assert cost_first_line(build_cost_report(six, POLICY)).startswith(
        "6.0 h of data in a 24 h window: $106.00 allocated to workloads ($91.00 on GPUs), $28.00 of it on allocated "
        "but idle")
    # 7 daily periods, the last one with 6 h of data
    week = _spanned(replace(_inputs(), start=END - timedelta(days=7), days=7, gpu=_inputs().gpu.assign(day=6),
                            costs=_inputs().costs.assign(day=6),  # type: ignore[union-attr]
                            serving=_inputs().serving.assign(day=6)),
                    0, 0, 0, 0, 0, 0, 6 * 3600.0, data_from=(END - timedelta(hours=6)).isoformat())
    assert cost_first_line(build_cost_report(week, POLICY)).startswith("6.0 h of data in a 168 h window: $106.00")
    minutes = _spanned(_inputs(), 45 * 60.0, data_from=(END - timedelta(minutes=45)).isoformat())
    assert cost_first_line(build_cost_report(minutes, POLICY)).startswith("45 min of data in a 24 h window: ")
    # the whole window, or short of it by less than a step: the window
    for covered in (86400.0, 86400.0 - 59):
        whole = _spanned(_inputs(), covered, data_from=START.isoformat())
        assert cost_first_line(build_cost_report(whole, POLICY)).startswith("24 h of GPUs: $106.00 allocated to workloads")


# --- counts that add up ---------------------------------------------------------------------------------------

SPLIT = parse_policy({
    "tenants": [{"name": "a", "namespaces": ["a"]}, {"name": "c", "namespaces": ["c"]}],
    "services": [{"name": f"s{i}", "namespace": ns, "model_name": f"m{i}", "latency_slo_seconds": 2.0}
                 for i, ns in ((1, "a"), (2, "a"), (3, "c"), (4, "c"))],
})


def _split_inputs() -> CostInputs:
    """Four services, each with 10 % of its requests within the 2 s SLO (a bucket bound: exact) and every
    request good: 103, 204, 305 and 4 requests -> 10.3, 20.4, 30.5 and 0.4 verified. Each holds one pod,
    1 GPU-h, busy, $4."""
    serving, gpu, cost = [], [], []
    for (i, ns), good in zip(((1, "a"), (2, "a"), (3, "c"), (4, "c")), (103.0, 204.0, 305.0, 4.0)):
        serving += [(ns, f"m{i}", 0, "requests", "stop", "", good),
                    (ns, f"m{i}", 0, "latency_bucket", "", "2.0", 10.0),
                    (ns, f"m{i}", 0, "latency_bucket", "", "+Inf", 100.0)]
        gpu.append((ns, f"s{i}-0", 0, 1.0, 1.0, 1.0))
        cost.append((ns, "deployment", f"s{i}", f"s{i}-0", 0, 1.0, 4.0, 4.0))
    return CostInputs(START, END, 1, pd.DataFrame(gpu, columns=GPU_COLS), pd.DataFrame(cost, columns=COST_COLS),
                      pd.DataFrame(serving, columns=SERVING_COLS), [])


def test_printed_verified_requests_add_up_to_the_printed_totals() -> None:
    """10.3 + 20.4 + 30.5 + 0.4 = 61.6 -> 62 in all. Tenants a (30.7) and c (30.9) get their floors, 30 each,
    and one each of the 2 left: 31 and 31. Inside a, 10 and 20 plus one for the larger remainder (s2's .4):
    10 and 21; inside c, 30 and 0 plus one for s3's .5: 31 and 0. Rounded one by one they read 10, 20, 30, 0."""
    report = build_cost_report(_split_inputs(), SPLIT)
    assert [s["verified_outcomes"] for s in report.services] == [10.0, 21.0, 31.0, 0.0]
    assert [t["verified_requests"] for t in report.tenants] == [31.0, 31.0]
    assert report.cluster["verified_requests"] == 62.0
    shown = {r["service"]: r["verified outcomes"] for r in service_rows(report)}
    assert shown == {"s1": "10", "s2": "21", "s3": "31", "s4": "0"}
    tenants = {r["tenant"]: r["verified requests"] for r in funnel_rows(report)}
    assert tenants == {"a": "31", "c": "31", "(cluster)": "62"}
    assert "62 verified requests" in cost_first_line(report)
    # cost per outcome is the cost shown over the outcomes shown: $4 / 21 for s2, $8 / 31 for tenant a
    assert report.services[1]["cost_per_outcome"] == float(f"{4 / 21:.6g}")
    assert report.tenants[0]["cost_per_outcome"] == float(f"{8 / 31:.6g}")
    # one period: its row in the HTML's per-period table is the service's count
    assert [d["verified_outcomes"] for d in report.daily] == [10.0, 21.0, 31.0, 0.0]
    # the productive share keeps the estimate: s2's 1 busy GPU-h x 20.4 / 204 verified = 0.1
    assert report.services[1]["productive_gpu_hours"] == 0.1
