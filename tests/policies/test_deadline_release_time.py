"""A hold's or a demotion's release time is written with its date: the reason goes into the audit row and the
Kubernetes Event, read later and on another day, and a hold planned at 23:00 is released after midnight."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd

from gpuaas.cli.deadlines_cmd import _clock_utc
from gpuaas.policies.deadlines import DeadlineJob, PoolProblem, plan_nudges, plan_pools
from gpuaas.policy import DeadlinesPolicy

LATE_EVENING = datetime(2026, 12, 7, 23, 40, tzinfo=UTC)
NO_HOLDS = pd.DataFrame(columns=["namespace", "name", "deadline_hold"])


def _pool(cap: int, jobs: list[DeadlineJob]) -> PoolProblem:
    return PoolProblem("c", "h100", cap, tuple(jobs))


def test_a_hold_released_after_midnight_says_which_day() -> None:
    # Four 2-GPU jobs of an hour on 4 GPUs: the second round starts in an hour, held until 30 min before it.
    policy = DeadlinesPolicy(max_holds_per_run=2, release_margin_minutes=30, runtime_estimate_error=1.0,
                             give_up_lost=False)
    jobs = [DeadlineJob(f"ns/j{i}", 2, 3600, 7200, "h100") for i in range(4)]
    holds = [n for n in plan_nudges(plan_pools([_pool(4, jobs)]), NO_HOLDS, LATE_EVENING, policy)
             if n.action == "hold"]
    assert holds and all(n.release_at == LATE_EVENING + timedelta(minutes=30) for n in holds)
    assert all("held until 2026-12-08 00:10 UTC so that" in n.reason for n in holds)


def test_a_demotion_says_the_day_its_lease_ends() -> None:
    late = DeadlineJob("ns/late", 2, 3 * 3600, 3600, "h100")  # due in 1 h, runs 3 h: lost
    urgent = DeadlineJob("ns/urgent", 2, 3600, 5400, "h100")
    policy = DeadlinesPolicy(max_holds_per_run=2, release_margin_minutes=30, give_up_lease_minutes=60)
    [demotion] = plan_nudges(plan_pools([_pool(2, [late, urgent])]), NO_HOLDS, LATE_EVENING, policy)
    assert demotion.action == "demote"
    assert "until 2026-12-08 00:40 UTC unless the next run renews it" in demotion.reason


def test_the_would_table_writes_the_release_time_as_the_reason_does() -> None:
    """In UTC whatever the offset it was stored with, the date included."""
    assert _clock_utc("2026-12-08T06:08:00+01:00") == "2026-12-08 05:08 UTC"
    assert _clock_utc("2026-12-07T23:59:00-02:00") == "2026-12-08 01:59 UTC"
    assert _clock_utc(None) == ""
