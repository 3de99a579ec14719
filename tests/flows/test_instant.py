"""The instant a flow run decides for (``flows._instant``), without a cluster.

Every flow with an ``at`` reads it as UTC through Prefect's parameter validation, which a run through
Prefect and the command line's direct run both call: naive is UTC, an offset is converted. A writing run
in apply mode refuses an ``at`` further than ``collect.max_staleness_seconds`` from now, either way, in
one line naming ``at`` and the limit; a dry-run may look at any instant.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from flows._instant import decision_instant
from gpuaas.errors import ActionRefused
from gpuaas.policy import Mode, Policy

POLICY = Policy()
LIMIT = POLICY.collect.max_staleness_seconds
WALL = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)


def _flows() -> list[Any]:
    from flows.collect import collect
    from flows.cost_report import cost_report
    from flows.deadlines import deadlines
    from flows.rebalance import rebalance
    from flows.reclaim import reclaim

    return [collect, cost_report, deadlines, rebalance, reclaim]


@pytest.mark.parametrize("given", [datetime(2026, 12, 1, 10, 0), "2026-12-01T10:00:00",
                                   datetime(2026, 12, 1, 12, 0, tzinfo=timezone(timedelta(hours=2))),
                                   "2026-12-01T05:00:00-05:00", "2026-12-01T10:00:00Z"])
def test_every_flows_at_is_validated_into_utc(given: datetime | str) -> None:
    """What Prefect and the command line's direct run both call before the body runs."""
    for flow in _flows():
        at = flow.validate_parameters({"at": given})["at"]
        assert at == datetime(2026, 12, 1, 10, 0, tzinfo=UTC) and at.utcoffset() == timedelta(0), flow.name
        assert at.tzinfo is UTC, flow.name  # formats with a literal Z, compares with any aware instant


def test_an_empty_at_stays_empty() -> None:
    for flow in _flows():
        assert flow.validate_parameters({"at": None})["at"] is None, flow.name


def test_no_at_is_the_wall_clock() -> None:
    assert decision_instant(None, Mode.apply, POLICY, WALL) == WALL


@pytest.mark.parametrize("apart", [timedelta(seconds=LIMIT + 1), -timedelta(seconds=LIMIT + 1), timedelta(hours=20),
                                   -timedelta(days=3)])
def test_apply_refuses_an_at_far_from_now_in_either_direction(apart: timedelta) -> None:
    with pytest.raises(ActionRefused) as refused:
        decision_instant(WALL + apart, Mode.apply, POLICY, WALL)
    line = str(refused.value)
    assert line.startswith(f"at: {(WALL + apart).isoformat()} is ") and "\n" not in line
    assert f"{'after' if apart > timedelta(0) else 'before'} now" in line
    assert f"the {LIMIT:g}s collect.max_staleness_seconds" in line and "nothing written" in line


@pytest.mark.parametrize("apart", [timedelta(0), timedelta(seconds=LIMIT), -timedelta(seconds=LIMIT),
                                   -timedelta(minutes=1)])
def test_apply_decides_for_an_at_within_the_limit(apart: timedelta) -> None:
    assert decision_instant(WALL + apart, Mode.apply, POLICY, WALL) == WALL + apart


@pytest.mark.parametrize("apart", [timedelta(hours=20), -timedelta(days=30)])
def test_a_dry_run_looks_at_any_instant(apart: timedelta) -> None:
    assert decision_instant(WALL + apart, Mode.dry_run, POLICY, WALL) == WALL + apart


def test_the_limit_is_the_policys() -> None:
    tight = Policy.model_validate({"collect": {"max_staleness_seconds": 60}})
    with pytest.raises(ActionRefused, match="the 60s collect.max_staleness_seconds"):
        decision_instant(WALL + timedelta(seconds=61), Mode.apply, tight, WALL)


def test_a_naive_at_is_read_as_utc() -> None:
    """A caller in Python that bypasses the validation (a flow's ``fn``) still compares aware instants."""
    assert decision_instant(datetime(2026, 12, 1, 2, 5), Mode.apply, POLICY, WALL) == WALL + timedelta(minutes=5)
