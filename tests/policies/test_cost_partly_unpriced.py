"""A service or tenant some of whose GPU pods OpenCost's allocation does not list has its cost per outcome unknown,
with a note naming the pods and giving the quotient as the lower bound it is.

Why: chat has a second pod, chat-predictor-1, with 6 GPU-hours of telemetry, that OpenCost does not list. Its
requests are among chat's 72 verified ones, its cost in no total: $45.00 / 72 = $0.625 a request was printed as
chat's cost per outcome, and tenant a's $88.50 / 72 likewise, both too low by whatever that pod cost. Only "none of
its pods" was handled. The inputs are the cost report's hand-checked ones, with that pod's telemetry added.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from gpuaas.models import GPU_COLS, CostInputs
from gpuaas.policies.cost import build_cost_report
from reports.cost_report import funnel_rows, service_rows
from reports.cost_report_html import _daily_rows
from tests.policies.test_cost_report import POLICY, _inputs


def _with_unlisted_pod(days: int = 1, hours: float = 6.0) -> CostInputs:
    base = _inputs()
    extra = pd.DataFrame([("a", "chat-predictor-1", days - 1, hours, hours, hours * 2 / 3)], columns=GPU_COLS)
    return replace(base, gpu=pd.concat([base.gpu, extra], ignore_index=True), days=days)


def test_a_partly_priced_service_and_its_tenant_have_cost_per_outcome_unknown_with_the_bound() -> None:
    report = build_cost_report(_with_unlisted_pod(), POLICY)
    chat, etl = report.services[0], report.services[1]
    assert (chat["verified_outcomes"], chat["total_cost"], chat["cost_per_outcome"]) == (72.0, 45.0, None)
    assert ("service chat: cost per outcome unknown: 1 pod with 6.00 GPU-hours of telemetry is not in OpenCost's "
            "allocation (the most: a/chat-predictor-1, 6.00 GPU-hours), so its total cost leaves out what that pod "
            "cost, while its outcomes count that pod's work; $45.00 over 72 outcomes, at least $0.625 per request") in report.notes
    a, b = report.tenants
    assert (a["total_cost"], a["verified_outcomes"], a["cost_per_outcome"]) == (88.5, 72.0, None)
    assert any(n.startswith("tenant a: cost per outcome unknown: 1 pod with 6.00 GPU-hours") and
               n.endswith("$88.50 over 72 outcomes, at least $1.23 per request") for n in report.notes)
    assert not any(n.startswith("tenant a: total cost") for n in report.notes)  # it has outcomes: not "none"
    assert (b["cost_per_outcome"], etl["cost_per_outcome"]) == (17.5, 17.5)  # every pod priced: as before
    (day,) = [d for d in report.daily if d["service"] == "chat"]
    assert (day["total_cost"], day["verified_outcomes"], day["cost_per_outcome"]) == (45.0, 72.0, None)
    # the tables say unknown, not "no verified outcome" beside 72 verified requests
    key = "cost per outcome (total)"
    assert service_rows(report)[0][key] == funnel_rows(report)[0][key] == "unknown"
    assert _daily_rows(report)[0]["cost per outcome"] == "unknown"


def test_only_the_periods_the_unlisted_pod_ran_in_are_unknown() -> None:
    """Two periods alike (chat's priced pod and its requests in each), the unlisted pod seen in the second only:
    the first period's $45.00 / 72 stands, the second's is unknown."""
    inputs = _with_unlisted_pod(days=2)
    assert inputs.costs is not None
    chat_cost = inputs.costs[inputs.costs["pod"] == "chat-predictor-0"].assign(day=1)
    chat_gpu = inputs.gpu[inputs.gpu["pod"] == "chat-predictor-0"].assign(day=1)
    inputs = replace(inputs, costs=pd.concat([inputs.costs, chat_cost], ignore_index=True),
                     gpu=pd.concat([inputs.gpu, chat_gpu], ignore_index=True),
                     serving=pd.concat([inputs.serving, inputs.serving.assign(day=1)], ignore_index=True))
    first, second = [d for d in build_cost_report(inputs, POLICY).daily if d["service"] == "chat"]
    assert (first["total_cost"], first["verified_outcomes"], first["cost_per_outcome"]) == (45.0, 72.0, 0.625)
    assert (second["total_cost"], second["verified_outcomes"], second["cost_per_outcome"]) == (45.0, 72.0, None)


def test_a_pod_that_held_under_one_percent_leaves_the_figure_standing_with_a_note() -> None:
    """OpenCost misses pods that lived less than its resolution: 0.05 GPU-hours of chat's (under 1 % of its
    GPU-hours) leave chat's and tenant a's cost per outcome as computed, each with a note of what it leaves out,
    and no period unknown."""
    report = build_cost_report(_with_unlisted_pod(hours=0.05), POLICY)
    chat, a = report.services[0], report.tenants[0]
    assert chat["cost_per_outcome"] == 0.625 and a["cost_per_outcome"] is not None
    [said] = [n for n in report.notes if n.startswith("service chat: 1 pod with 0.05 GPU-hours of telemetry is not in ")]
    assert said.endswith("(under 1%): its cost per outcome leaves out what it cost, understated by at most that"), said
    assert any(n.startswith("tenant a: 1 pod with 0.05 ") and "cost per outcome leaves out" in n for n in report.notes)
    assert not any("cost per outcome unknown" in n for n in report.notes)
    (day,) = [d for d in report.daily if d["service"] == "chat"]
    assert day["cost_per_outcome"] == 0.625
