"""The funnel table foots: per tenant and for the cluster, the stages printed add up to the hours allocated.

Why: the table showed allocated, busy, productive, in-progress and unknown hours, but no idle hours and no busy
hours without a verified outcome, so a reader could not check that each row adds up. The rows are real reports
built from ``test_cost_report``'s hand-checked inputs (tenant a: 19 GPU-h held, 5.76 productive, 2.24 busy
without a verified outcome, 7 idle, 4 without telemetry; tenant b: 5 GPU-h, 2 productive, 3 of a late job).
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from gpuaas.models import GPU_COLS
from gpuaas.policies.cost import build_cost_report
from reports.cost_report import STAGE_COLUMNS, funnel_rows, tenant_tables
from tests.policies.test_cost_report import POLICY, _inputs


def _foots(row: dict[str, str]) -> bool:
    cells = [row[c] for c in STAGE_COLUMNS.values() if row[c] != "unknown"]
    return round(sum(float(c.replace(",", "")) for c in cells), 1) == float(row["allocated GPU-h"].replace(",", ""))


def test_every_row_shows_its_stages_and_they_add_up_to_allocated() -> None:
    rows = {r["tenant"]: r for r in funnel_rows(build_cost_report(_inputs(), POLICY))}
    assert [rows["a"][c] for c in ("allocated GPU-h", *STAGE_COLUMNS.values())] == [
        "19.0", "5.8", "0.0", "2.2", "0.0", "7.0", "4.0"]
    assert [rows["b"][c] for c in ("allocated GPU-h", *STAGE_COLUMNS.values())] == [
        "5.0", "2.0", "0.0", "3.0", "0.0", "0.0", "0.0"]
    assert rows["(cluster)"]["idle GPU-h"] == "7.0" and rows["(cluster)"]["busy, no verified outcome GPU-h"] == "5.2"
    assert all(_foots(r) for r in rows.values())


def test_stages_rounded_apart_still_add_up_to_the_allocated_hours_printed() -> None:
    """Tenant b's pods: 3.35 busy GPU-h of the job done in time and 3.35 of the late one, of 10 held (3.3 idle).
    Each rounded alone they print 3.4 + 3.4 + 3.3 = 10.1 under 10.0: the tenths are shared out instead."""
    inputs = _inputs()
    gpu = inputs.gpu.copy()
    gpu.loc[gpu["pod"] == "etl-daily-head", ["observed_h", "busy_h", "active_h"]] = [3.35, 3.35, 3.0]
    gpu.loc[gpu["pod"] == "etl-late-head", ["observed_h", "busy_h", "active_h"]] = [6.65, 3.35, 3.0]
    assert inputs.costs is not None
    costs = inputs.costs.copy()
    costs.loc[costs["pod"] == "etl-daily-head", "gpu_hours"] = 3.35
    costs.loc[costs["pod"] == "etl-late-head", "gpu_hours"] = 6.65
    b = funnel_rows(build_cost_report(replace(inputs, gpu=gpu, costs=costs), POLICY))[1]
    assert b["allocated GPU-h"] == "10.0"
    assert _foots(b), b


def test_busy_hours_of_unknown_outcome_are_a_column_and_productive_is_unknown() -> None:
    """Without the Kubernetes API, tenant b's 5 busy GPU-hours have no known outcome: productive and "busy, no
    verified outcome" are "unknown" (never 0, which would call them waste), and the 5 hours are "busy, outcome
    unknown", so the row still foots."""
    b = funnel_rows(build_cost_report(_inputs(jobs=False), POLICY))[1]
    assert (b["productive GPU-h"], b["busy, no verified outcome GPU-h"], b["busy, outcome unknown GPU-h"]) == (
        "unknown", "unknown", "5.0")
    assert _foots(b)


def test_a_tenant_without_telemetry_has_every_hour_in_no_telemetry() -> None:
    inputs = _inputs()
    gpu = inputs.gpu[inputs.gpu["namespace"] != "b"].reset_index(drop=True).reindex(columns=GPU_COLS)
    b = funnel_rows(build_cost_report(replace(inputs, gpu=pd.DataFrame(gpu)), POLICY))[1]
    assert b["no telemetry GPU-h"] == "5.0" and b["idle GPU-h"] == b["productive GPU-h"] == "unknown"
    assert _foots(b)


def test_the_funnel_and_the_money_are_two_tables_with_one_row_per_tenant() -> None:
    (hours_title, hours), (money_title, money) = tenant_tables(build_cost_report(_inputs(), POLICY))
    assert "add up" in hours_title and list(hours[0])[:8] == ["tenant", "allocated GPU-h", *STAGE_COLUMNS.values()]
    assert [r["tenant"] for r in hours] == [r["tenant"] for r in money] == ["a", "b", "(cluster)"]
    assert "total cost" in money[0] and "idle GPU-h" not in money[0]
