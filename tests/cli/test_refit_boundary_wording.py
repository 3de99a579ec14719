"""Where ``replay reclaim --budget`` says the refit boundaries fall is where the live flow puts them: at 00:00 UTC
each day only for a period that divides a day; any other period is counted from 1970-01-01 00:00 UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gpuaas.cli.replay_cmd import _apart
from gpuaas.policies.reclaim.refit import refit_boundary


@pytest.mark.parametrize("hours", [0.25, 1, 3, 8, 24, 5, 7, 48, 168])
def test_the_note_says_from_00_00_utc_only_where_each_midnight_is_a_boundary(hours: float) -> None:
    midnights = [datetime(2026, 12, 1, tzinfo=UTC) + timedelta(days=d) for d in range(7)]
    each_midnight = all(refit_boundary(m.timestamp(), hours) == m.timestamp() for m in midnights)
    assert ("from 00:00 UTC" in _apart(hours)) == each_midnight
    assert f"{hours:g} h apart" in _apart(hours)


def test_a_weekly_refit_falls_on_thursdays() -> None:
    """1970-01-01 was a Thursday: the help's example."""
    at = refit_boundary(datetime(2026, 12, 7, 18, tzinfo=UTC).timestamp(), 168)
    assert datetime.fromtimestamp(at, UTC).strftime("%a %H:%M") == "Thu 00:00"
