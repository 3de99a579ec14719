"""The funnel's stages per report row: unknown outcomes stay unknown, and the stages add up to what was held.

Why: the funnel plot draws each tenant's allocated GPU-hours as stages. Busy hours whose outcome is unknown (batch
outcomes without the Kubernetes API) drawn as "busy, no verified outcome" call them waste, while the table beside
the plot says "unknown". The rows are real reports built from the cost report's hand-checked inputs.
"""

from __future__ import annotations

import pytest

from gpuaas.policies.cost import FUNNEL_STAGES, build_cost_report, funnel_stages
from tests.policies.test_cost_report import POLICY, _inputs
from tests.policies.test_cost_report_unknowns import _spanned


def _rows(report: object) -> list[dict[str, object]]:
    return [*report.tenants, *report.services, report.cluster]  # type: ignore[attr-defined]


def test_busy_hours_of_unknown_outcome_are_their_own_stage() -> None:
    """Without the Kubernetes API tenant b's 5 busy GPU-hours (batch service etl) have no known outcome: they are
    "busy, outcome unknown", not "busy, no verified outcome"; tenant a (serving only) keeps its split."""
    report = build_cost_report(_inputs(jobs=False), POLICY)
    a, b = report.tenants
    assert b["productive_gpu_hours"] is None and b["busy_gpu_hours"] == 5.0
    assert funnel_stages(b) == {"productive": 0.0, "in progress": 0.0, "busy, no verified outcome": 0.0,
                                "busy, outcome unknown": 5.0, "idle": 0.0, "unknown (no telemetry)": 0.0}
    assert funnel_stages(a) == pytest.approx({
        "productive": 5.76, "in progress": 0.0, "busy, no verified outcome": 2.24, "busy, outcome unknown": 0.0,
        "idle": 7.0, "unknown (no telemetry)": 4.0})
    assert funnel_stages(report.cluster)["busy, no verified outcome"] == 0.0
    for row in _rows(report):
        assert list(funnel_stages(row)) == list(FUNNEL_STAGES)
        assert sum(funnel_stages(row).values()) == pytest.approx(row.get("allocated_gpu_hours") or 0.0)


def test_known_outcomes_put_the_late_job_in_no_verified_outcome() -> None:
    """With the Kubernetes API, etl-late (3 busy GPU-hours, finished after its deadline) is busy with no verified
    outcome and etl-daily's 2 are productive: nothing is left unknown."""
    b = build_cost_report(_inputs(), POLICY).tenants[1]
    assert funnel_stages(b)["productive"] == 2.0
    assert funnel_stages(b)["busy, no verified outcome"] == 3.0
    assert funnel_stages(b)["busy, outcome unknown"] == 0.0


def test_a_window_without_telemetry_is_all_unknown_and_still_adds_up() -> None:
    """No GPU telemetry at all: busy and idle hours are unknown, so every GPU-hour held is "unknown (no
    telemetry)", none idle and none without an outcome."""
    report = build_cost_report(_spanned(_inputs(), 0.0), POLICY)
    assert report.telemetry_missing is not None
    for row in _rows(report):
        stages = funnel_stages(row)
        assert stages["unknown (no telemetry)"] == pytest.approx(row.get("allocated_gpu_hours") or 0.0)
        assert stages["busy, no verified outcome"] == stages["idle"] == 0.0
