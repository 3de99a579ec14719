"""The daily preflight runs before the nightly rebalance, as shipped and with the fleet's own zone set on both.

A preflight that fails reaches the failure notification before the rebalance writes quota. Read with
Prefect's own schedule, the one its scheduler runs, over the nights the clocks change.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from prefect.server.schemas.schedules import CronSchedule

ROOT = Path(__file__).resolve().parents[1]
DEPLOYMENTS = {d["name"]: d for d in yaml.safe_load((ROOT / "prefect.yaml").read_text())["deployments"]}
SPANS = [datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 10, 1, tzinfo=UTC)]  # both changes of the clocks in each
DAYS = 45


def _schedule(name: str) -> dict[str, Any]:
    (schedule,) = DEPLOYMENTS[name]["schedules"]
    return dict(schedule)


def _runs(schedule: dict[str, Any], timezone: str, start: datetime) -> list[datetime]:
    dates = asyncio.run(CronSchedule(cron=schedule["cron"], timezone=timezone).get_dates(n=DAYS, start=start))
    return [datetime.fromtimestamp(d.timestamp(), UTC) for d in dates]


def _unchecked(preflight_zone: str, rebalance_zone: str) -> list[datetime]:
    """The rebalance runs with no preflight run in the two hours before them."""
    out = []
    for start in SPANS:
        preflights = _runs(_schedule("preflight"), preflight_zone, start)
        for run in _runs(_schedule("rebalance"), rebalance_zone, start)[1:]:  # the first may precede any preflight
            if not any(run - timedelta(hours=2) <= p < run for p in preflights):
                out.append(run)
    return out


def test_the_shipped_schedules_run_the_preflight_first_in_one_zone() -> None:
    preflight, rebalance = _schedule("preflight"), _schedule("rebalance")
    assert preflight["timezone"] == rebalance["timezone"] == "UTC"
    assert _unchecked(preflight["timezone"], rebalance["timezone"]) == []


@pytest.mark.parametrize("zone", ["Europe/Berlin", "Asia/Kolkata", "America/Los_Angeles"])
def test_the_same_zone_set_on_both_keeps_the_preflight_first_on_every_night(zone: str) -> None:
    assert _unchecked(zone, zone) == []


def test_a_zone_set_on_the_rebalance_alone_runs_it_before_the_preflight() -> None:
    """Why the advice names both schedules: 02:00 in Berlin is 01:00 UTC in winter, before 01:45 UTC."""
    assert _unchecked("UTC", "Europe/Berlin")
