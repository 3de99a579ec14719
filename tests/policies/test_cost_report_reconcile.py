"""The cost report's figures reconcile: the cluster row is the sum of the tenant rows, whatever source gave
the hours, and every figure a plot prints is the one its table prints."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
import pytest

from gpuaas.models import COST_COLS, GPU_COLS, SERVING_COLS, CostInputs
from gpuaas.policies.cost import CostReport, build_cost_report
from gpuaas.policy import parse_policy
from tests.policies.test_cost_report import POLICY, _inputs

HOURS = ("allocated_gpu_hours", "unknown_gpu_hours", "busy_gpu_hours", "idle_gpu_hours")


def test_kueue_hours_without_opencost_are_in_the_cluster_total() -> None:
    """Without OpenCost, tenant a is raised to Kueue's 19 GPU-h (DCGM saw 15: 4 unknown); tenant b is 5 GPU-h.
    The cluster row must be 24 allocated and 4 unknown, the sum of its tenants, not DCGM's 20 and 0."""
    kueue = pd.DataFrame([{"cluster_queue": "a-cq", "allocated_h": 19.0}])
    report = build_cost_report(_inputs(costs=False, kueue=kueue), POLICY)
    a, b = report.tenants
    assert (a["allocated_gpu_hours"], a["unknown_gpu_hours"]) == (19.0, 4.0)
    for column in HOURS:
        assert report.cluster[column] == sum(t[column] for t in report.tenants), column
    assert (report.cluster["allocated_gpu_hours"], report.cluster["unknown_gpu_hours"]) == (24.0, 4.0)


def test_kueue_hours_of_a_tenant_dcgm_never_saw_are_reported() -> None:
    """Tenant c's ClusterQueue held 6 GPU-h of quota, and no GPU series carried its pods: at least Kueue's
    6 GPU-h are its allocation (all unknown, never idle), and they are in the cluster total."""
    policy = parse_policy({
        "tenants": [{"name": "a", "namespaces": ["a"], "cluster_queues": ["a-cq"]},
                    {"name": "b", "namespaces": ["b"], "cluster_queues": ["b-cq"]},
                    {"name": "c", "namespaces": ["c"], "cluster_queues": ["c-cq"]}],
        "services": [{"name": "chat", "namespace": "a", "model_name": "m", "latency_slo_seconds": 2.0},
                     {"name": "etl", "namespace": "b", "kind": "batch"}],
    })
    kueue = pd.DataFrame([{"cluster_queue": "c-cq", "allocated_h": 6.0}])
    report = build_cost_report(_inputs(costs=False, kueue=kueue), policy)
    c = next((t for t in report.tenants if t["tenant"] == "c"), None)
    assert c is not None, [t["tenant"] for t in report.tenants]
    assert (c["allocated_gpu_hours"], c["unknown_gpu_hours"]) == (6.0, 6.0)
    assert c["busy_gpu_hours"] is None and c["idle_gpu_hours"] is None and c["total_cost"] is None
    assert (report.cluster["allocated_gpu_hours"], report.cluster["unknown_gpu_hours"]) == (26.0, 6.0)


def test_waste_plot_labels_are_the_waste_table_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    """The HTML waste plot prints each tenant's waste on its bar: $0.40 of waste must not read "$0" (the label
    of a tenant with no waste) beside a table that says $0.400, nor $28.49 read "$28"."""
    from matplotlib.axes import Axes

    from reports.cost_report import money
    from reports.cost_report_html import render_html

    report = build_cost_report(_inputs(), POLICY)
    wastes = {"a": 0.4, "b": 28.49}
    report = replace(report, tenants=[{**t, "waste_cost": wastes[t["tenant"]]} for t in report.tenants])
    shown: list[list[str]] = []
    original = Axes.bar_label

    def record(self: Axes, container: Any, labels: Any = None, **kwargs: Any) -> Any:
        shown.append([str(label) for label in labels or []])
        return original(self, container, labels, **kwargs)

    monkeypatch.setattr(Axes, "bar_label", record)
    page = render_html(report)
    assert shown == [[money(0.4), money(28.49)]]
    assert all(label in page for label in shown[0])  # the waste table says the same


def _with_unseen_service(name: str, namespace: str) -> CostReport:
    """The report of ``_inputs`` with one more serving service, ``name`` in ``namespace`` (model ``v``), that served
    50 requests, all within its SLO, while no pod of it is in OpenCost or the GPU telemetry."""
    tenants = sorted({"a", "b", namespace})
    policy = parse_policy({
        "tenants": [{"name": t, "namespaces": [t], "cluster_queues": [f"{t}-cq"]} for t in tenants],
        "services": [{"name": "chat", "namespace": "a", "model_name": "m", "latency_slo_seconds": 2.0},
                     {"name": "etl", "namespace": "b", "kind": "batch"},
                     {"name": name, "namespace": namespace, "model_name": "v", "latency_slo_seconds": 2.0}],
    })
    inputs = _inputs()
    extra = pd.DataFrame([(namespace, "v", 0, "requests", "stop", "", 50.0),
                          (namespace, "v", 0, "latency_bucket", "", "2.0", 50.0),
                          (namespace, "v", 0, "latency_bucket", "", "+Inf", 50.0)], columns=SERVING_COLS)
    return build_cost_report(replace(inputs, serving=pd.concat([inputs.serving, extra], ignore_index=True)), policy)


def test_service_with_requests_and_no_pod_found_has_unknown_cost_not_zero() -> None:
    """``chat2`` served 50 requests, all verified, but none of tenant a's pods is its by controller, name or labels
    (its Deployment is named otherwise): its pods' cost is in tenant a's, not in its own row. Its cost is unknown,
    never $0.00 and never "$0.00 per 1,000 requests", in the service row and in its period row alike."""
    from reports.cost_report import service_rows

    report = _with_unseen_service("chat2", "a")
    chat2 = next(s for s in report.services if s["service"] == "chat2")
    assert chat2["verified_outcomes"] == 50.0
    assert (chat2["gpu_cost"], chat2["total_cost"], chat2["cost_per_outcome"]) == (None, None, None)
    assert any(n.startswith("service chat2:") and "unknown" in n for n in report.notes), report.notes
    daily = next(d for d in report.daily if d["service"] == "chat2")
    assert (daily["gpu_cost"], daily["total_cost"], daily["cost_per_outcome"]) == (None, None, None)
    row = next(r for r in service_rows(report) if r["service"] == "chat2")
    assert row["cost per outcome (total)"] == "unknown" and row["total cost"] == "unknown"
    # the other services and the tenant keep their figures: tenant a still pays for every pod of namespace a
    chat = next(s for s in report.services if s["service"] == "chat")
    assert (chat["total_cost"], chat["cost_per_outcome"]) == (45.0, float(f"{45 / 72:.6g}"))
    a = report.tenants[0]
    assert (a["total_cost"], a["verified_requests"]) == (88.5, 122.0)


def test_tenant_money_adds_up_to_the_cluster_total_to_the_cent() -> None:
    """Tenant a costs $88.504 in all, b $17.504: the cluster's $106.008 is $106.01. Each rounded alone, the
    tenants print $88.50 + $17.50 = $106.00 under a total of $106.01. Money is shared out to the cent by the
    largest-remainder rule, as the verified requests are: every printed column adds up to its printed total,
    and each tenant is within a cent of its own figure."""
    from reports.cost_report import funnel_rows

    inputs = _inputs()
    costs = inputs.costs.copy()
    costs.loc[costs["pod"] == "chat-predictor-0", ["gpu_cost", "total_cost"]] = [40.004, 45.004]
    costs.loc[costs["pod"] == "etl-daily-head", ["gpu_cost", "total_cost"]] = [6.004, 7.004]
    report = build_cost_report(replace(inputs, costs=costs), POLICY)
    exact = {"a": {"gpu_cost": 76.004, "total_cost": 88.504}, "b": {"gpu_cost": 15.004, "total_cost": 17.504}}
    assert (report.cluster["gpu_cost"], report.cluster["total_cost"]) == (91.01, 106.01)
    for column in ("gpu_cost", "total_cost", "waste_cost"):
        assert round(sum(t[column] for t in report.tenants), 2) == report.cluster[column], column
    for t in report.tenants:
        for column, value in exact[t["tenant"]].items():
            assert abs(t[column] - value) < 0.01, (t["tenant"], column)
        assert t["cost_per_outcome"] == float(f"{t['total_cost'] / t['verified_outcomes']:.6g}")
    printed = funnel_rows(report)
    total = sum(float(r["total cost"].strip("$").replace(",", "")) for r in printed[:-1])
    assert f"${total:,.2f}" == printed[-1]["total cost"] == "$106.01"


def test_a_period_row_divides_its_cost_by_the_outcomes_it_shows() -> None:
    """A 2-day window: day 1 had 1 good request, 40 % of them within the SLO, so 0.4 verified requests estimated.
    Its row printed "0" verified outcomes beside "$240.00 per request" ($96 / 0.4). Verified requests are whole
    numbers in every row: day 1 shows 0 and no cost per outcome; day 0 shows 900 and $96 / 900."""
    from reports.cost_report_html import _daily_rows

    end = datetime(2026, 11, 3, tzinfo=UTC)
    policy = parse_policy({"tenants": [{"name": "a", "namespaces": ["a"], "cluster_queues": ["a-cq"]}],
                           "services": [{"name": "chat", "namespace": "a", "model_name": "m",
                                         "latency_slo_seconds": 2.0}]})
    gpu = pd.DataFrame([("a", "chat-0", d, 24.0, 24.0, 10.0) for d in (0, 1)], columns=GPU_COLS)
    cost = pd.DataFrame([("a", "deployment", "chat", "chat-0", d, 24.0, 96.0, 96.0) for d in (0, 1)],
                        columns=COST_COLS)
    rows = []
    for day, (n, within) in enumerate([(1000.0, 900.0), (1.0, 0.4)]):
        rows += [("a", "m", day, "requests", "stop", "", n), ("a", "m", day, "latency_bucket", "", "2.0", within),
                 ("a", "m", day, "latency_bucket", "", "+Inf", n)]
    inputs = CostInputs(end - timedelta(days=2), end, 2, gpu, cost, pd.DataFrame(rows, columns=SERVING_COLS), [])
    report = build_cost_report(inputs, policy)
    assert [(d["verified_outcomes"], d["cost_per_outcome"]) for d in report.daily] == [
        (900.0, float(f"{96 / 900:.6g}")), (0.0, None)]
    printed = _daily_rows(report)
    assert [(r["verified outcomes"], r["cost per outcome"]) for r in printed] == [
        ("900", "$0.107 per request"), ("0", "no verified outcome")]


def test_a_tenant_whose_pods_were_not_found_has_a_row_and_the_tenants_add_up() -> None:
    """Tenant c's service ``vis`` served 50 requests, all verified, and no pod of namespace c is in OpenCost or the
    GPU telemetry. Its 50 outcomes are in the cluster's 122, so c has a row with them, no GPU-hours and its cost
    unknown (never $0), and the tenants' outcomes add up to the cluster's; the known money still foots."""
    report = _with_unseen_service("vis", "c")
    c = next((t for t in report.tenants if t["tenant"] == "c"), None)
    assert c is not None, [t["tenant"] for t in report.tenants]
    assert (c["verified_requests"], c["allocated_gpu_hours"], c["total_cost"], c["cost_per_outcome"]) == (
        50.0, 0.0, None, None)
    assert report.cluster["verified_requests"] == sum(t["verified_requests"] for t in report.tenants) == 122.0
    known = [t for t in report.tenants if t["total_cost"] is not None]
    assert round(sum(t["total_cost"] for t in known), 2) == report.cluster["total_cost"] == 106.0
    assert any(n.startswith("tenant c:") and "unknown, not $0" in n for n in report.notes), report.notes


def test_pods_opencost_does_not_list_are_named_not_priced_at_zero_in_silence() -> None:
    """The telemetry saw ``train-0`` for 2.5 GPU-hours and OpenCost's allocation has no row for it: its hours are in
    the funnel, its cost in no total, and a note says so, naming it."""
    inputs = _inputs()
    gpu = pd.concat([inputs.gpu, pd.DataFrame([("a", "train-0", 0, 2.5, 2.5, 2.0)], columns=GPU_COLS)],
                    ignore_index=True)
    report = build_cost_report(replace(inputs, gpu=gpu), POLICY)
    assert report.cluster["total_cost"] == build_cost_report(inputs, POLICY).cluster["total_cost"]
    assert ("1 pod with 2.50 GPU-hours of telemetry is not in OpenCost's allocation (the most: a/train-0, 2.50 "
            "GPU-hours): its cost is in no total") in report.notes, report.notes
    assert not any("OpenCost's allocation" in n for n in build_cost_report(inputs, POLICY).notes)


def test_names_with_control_characters_are_drawn_written_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tenant and a service named with an ESC (and a tenant with dollar signs): the plots draw them written out, as
    the tables do (``\\x1b``), with no warning from matplotlib about a glyph no font has, and no formula made of
    ``$a$``."""
    import warnings

    from matplotlib.axes import Axes

    from reports.cost_report_html import render_html

    report = build_cost_report(_inputs(), POLICY)
    names = {"a": "team\x1b[31ma", "b": "$b$"}
    report = replace(report, tenants=[{**t, "tenant": names[t["tenant"]]} for t in report.tenants],
                     services=[{**s, "service": f"{s['service']}\x1b"} for s in report.services],
                     daily=[{**d, "service": f"{d['service']}\x1b"} for d in report.daily])
    drawn: list[str] = []
    original = Axes.barh

    def record(self: Axes, y: Any, *args: Any, **kwargs: Any) -> Any:
        drawn.extend(str(label) for label in y)
        return original(self, y, *args, **kwargs)

    monkeypatch.setattr(Axes, "barh", record)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph 27 (\x1b) missing from font(s)" would reach the terminal
        render_html(report)
    assert "team\\x1b[31ma" in drawn and "\\$b\\$" in drawn
    assert not any("\x1b" in label for label in drawn)
