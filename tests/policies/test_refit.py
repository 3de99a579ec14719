"""The budget's window replayed over days (``RefitRule``) decides as the live flow does at each minute.

The live flow (``live_states``) reads ``history_hours`` before the last refit boundary and chooses the
window there; ``RefitRule`` replays a whole history the same way. On three synthetic days of two
workloads, every reclaim the replay makes is the first minute the live decision, fed only the samples a
cycle at that minute reads, says the workload is due, with the same window and reason.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gpuaas.policies.reclaim import RefitRule, RunStream, history_start, idle_runs, live_states, replay_runs
from gpuaas.policy import ColdStartBudget, parse_policy

MIN = 60.0
DAY = 1440


def _workload(pod: str, seed: int) -> pd.DataFrame:
    """Three days of one-minute samples: bursts of 1-10 busy minutes between idle spells, most short,
    some of 30 minutes to 4 hours, from 00:00 UTC of day 1 (the epoch's day 1, so boundaries fall on it)."""
    rng = np.random.default_rng(seed)
    values: list[float] = []
    while len(values) < 3 * DAY:
        values += [70.0] * int(rng.integers(1, 11))
        long = rng.random() < 0.3
        values += [0.0] * int(rng.integers(30, 241) if long else rng.integers(1, 11))
    minutes = np.arange(3 * DAY)
    return pd.DataFrame({"pod": pod, "t": (DAY + minutes) * MIN, "value": values[: 3 * DAY]})


@pytest.fixture(scope="module")
def util() -> pd.DataFrame:
    return pd.concat([_workload("uid-a", 1), _workload("uid-b", 2)], ignore_index=True)


def _live_at(util: pd.DataFrame, policy_doc: dict[str, object], minute: int) -> pd.Series:
    """What a cycle at ``minute`` decides for each workload, from the samples it reads."""
    policy = parse_policy(policy_doc)
    now = minute * MIN
    stream = RunStream(5.0)
    stream.add(util[(util["t"] >= history_start(now, policy)) & (util["t"] <= now)])
    return live_states({5.0: stream}, policy, now).set_index("key")


@pytest.mark.parametrize("refit_hours", [6.0, 24.0])
def test_the_replay_reclaims_at_the_live_flows_minute(util: pd.DataFrame, refit_hours: float) -> None:
    budget = ColdStartBudget(wakeups_per_workload_per_day=16, refit_hours=refit_hours)
    policy_doc: dict[str, object] = {"reclaim": {"strategy": "adaptive", "adaptive": {"cold_start_budget": {
        "wakeups_per_workload_per_day": 16, "refit_hours": refit_hours}}}}
    runs = idle_runs(util, 5.0)
    rule = RefitRule(budget, history_hours=24.0, base_s=30 * MIN)
    windows, why = rule.decide(runs)
    out = replay_runs(runs, windows)
    reclaimed = out[out["reclaim_at"].notna()]
    # Enough reclaims on both sides of the boundaries to mean something, some by a survival window.
    assert len(reclaimed) >= 50
    assert any("survival window" in why[i] for i in reclaimed.index)
    assert any("no completed idle spell" in why[i] for i in reclaimed.index)  # day 1: nothing before it
    checked = reclaimed.groupby(reclaimed["reclaim_at"] // (refit_hours * 3600)).head(3)  # a few per period
    for i, run in checked.iterrows():
        minute = int(run["reclaim_at"] // MIN)
        assert run["reclaim_at"] == minute * MIN
        now = _live_at(util, policy_doc, minute).loc[run["pod"]]
        assert now["state"] == "idle" and now["idle_since"] == run["start"] and bool(now["due"])
        # The same window, or, reclaimed at a boundary, a new one the spell had already outlasted.
        at_boundary = run["reclaim_at"] % (refit_hours * 3600) == 0
        assert now["window_seconds"] == windows[i] or (at_boundary and now["window_seconds"] < windows[i])
        assert now["why"] == why[i]
        before = _live_at(util, policy_doc, minute - 1).loc[run["pod"]]
        assert not bool(before["due"]), (run["pod"], minute)


def test_a_spell_past_the_new_window_at_a_boundary_is_reclaimed_there() -> None:
    # Day 1 (1970-01-02): 2-hour idle spells, then one that starts at 23:45 and lasts past 01:00. With
    # no history before day 1 the fixed 30-min window holds until 00:00, so this spell is not due before
    # it; at 00:00 the window chosen on day 1's long spells is shorter than the 15 minutes it has lasted.
    values = [80.0 if (m < DAY - 16 and m % 121 == 120) or m == DAY - 16 else 0.0 for m in range(DAY + 60)]
    util = pd.DataFrame({"pod": "w", "t": [(DAY + m) * MIN for m in range(DAY + 60)], "value": values})
    runs = idle_runs(util, 5.0)
    rule = RefitRule(ColdStartBudget(cold_start_gpu_minutes=30, refit_hours=24), history_hours=24.0, base_s=30 * MIN)
    windows, why = rule.decide(runs)
    assert runs["start"].iloc[-1] == (2 * DAY - 15) * MIN
    assert windows[-1] == 15 * MIN
    assert "survival window" in why[-1] and why[-1].endswith("history to 1970-01-03 00:00 UTC")
    assert windows[0] == 30 * MIN and "no completed idle spell" in why[0]  # day 1 itself: the fixed window
    # Replayed from 00:00 only (first_s): day 1 is history, the spell open at 00:00 is decided the same.
    from_midnight = RefitRule(rule.budget, history_hours=24.0, base_s=30 * MIN, first_s=2 * DAY * MIN)(runs)
    assert from_midnight[-1] == 15 * MIN and np.isinf(from_midnight[:-1]).all()
    empty_windows, empty_why = rule.decide(runs.iloc[:0])
    assert len(empty_windows) == 0 and empty_why == []
