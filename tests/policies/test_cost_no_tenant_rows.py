"""A namespace that no tenant of the policy names is marked as such wherever its row shows, and the rows still add up.

Why: the report gives such a namespace (kube-system, monitoring, a GPU namespace nobody configured) a row under its own
name, so that every dollar is in a row; unmarked, the row read as one more tenant, charged as one, and a reader could
take the tenants' rows for the cluster's cost shared out over them. The inputs are the cost report's hand-checked ones
(``tests/policies/test_cost_report``), with a monitoring pod ($20, no GPU) and a GPU pod in ``sandbox`` (5 GPU-hours
seen, all idle, $12.50 GPU cost) added.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pandas as pd

from gpuaas.models import COST_COLS, GPU_COLS, CostInputs
from gpuaas.policies.cost import build_cost_report
from reports.cost_report import change_rows, cost_report_json, funnel_rows, summary_markdown, waster_rows
from reports.cost_report_html import render_html
from tests.policies.test_cost_report import POLICY, _inputs


def _with_namespaces_of_no_tenant() -> CostInputs:
    base = _inputs()
    assert base.costs is not None
    costs = pd.DataFrame([("monitoring", "statefulset", "prometheus-k8s", "prometheus-k8s-0", 0, 0.0, 0.0, 20.0),
                          ("sandbox", "deployment", "scratch", "scratch-0", 0, 5.0, 12.5, 12.5)], columns=COST_COLS)
    gpu = pd.DataFrame([("sandbox", "scratch-0", 0, 5.0, 0.0, 0.0)], columns=GPU_COLS)
    return replace(base, costs=pd.concat([base.costs, costs], ignore_index=True),
                   gpu=pd.concat([base.gpu, gpu], ignore_index=True))


def test_rows_of_no_tenant_are_marked_in_the_json_and_the_tables() -> None:
    report = build_cost_report(_with_namespaces_of_no_tenant(), POLICY)
    marked = {t["tenant"]: t["configured_tenant"] for t in report.tenants}
    assert marked == {"a": True, "b": True, "monitoring": False, "sandbox": False}
    doc = json.loads(json.dumps(cost_report_json(report, None)))
    assert {t["tenant"]: t["configured_tenant"] for t in doc["tenants"]} == marked
    assert [r["tenant"] for r in funnel_rows(report)] == ["a", "b", "monitoring (no tenant)", "sandbox (no tenant)",
                                                          "(cluster)"]
    assert [r["tenant"] for r in change_rows(report, report)] == ["a", "b", "monitoring (no tenant)",
                                                                  "sandbox (no tenant)"]
    [scratch] = [w for w in waster_rows(report) if w["workload"] == "scratch"]
    assert scratch["tenant"] == "sandbox (no tenant)"
    page = render_html(report)
    assert "<td>sandbox (no tenant)</td>" in page or ">sandbox (no tenant)<" in page


def test_the_rows_still_add_up_to_the_cluster() -> None:
    report = build_cost_report(_with_namespaces_of_no_tenant(), POLICY)
    total = sum(t["total_cost"] for t in report.tenants)
    assert round(total, 2) == report.cluster["total_cost"] == 106.0 + 20.0 + 12.5
    assert sum(t["allocated_gpu_hours"] for t in report.tenants) == report.cluster["allocated_gpu_hours"] == 29.0


def test_a_note_says_which_and_that_shared_overhead_is_not_spread_over_the_tenants() -> None:
    report = build_cost_report(_with_namespaces_of_no_tenant(), POLICY)
    [said] = [n for n in report.notes if n.startswith("namespaces monitoring, sandbox are in no tenant of the policy")]
    assert '"(no tenant)"' in said and "not spread over the tenants" in said
    assert said in summary_markdown(report, None, None)


def test_a_policy_that_names_every_namespace_marks_no_row() -> None:
    report = build_cost_report(_inputs(), POLICY)
    assert all(t["configured_tenant"] for t in report.tenants)
    assert not any("no tenant of the policy" in n for n in report.notes)
    assert all("(no tenant)" not in r["tenant"] for r in funnel_rows(report))
