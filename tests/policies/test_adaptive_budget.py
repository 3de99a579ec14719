"""Streamed idle runs, the live adaptive state, the cold-start budget and the frontier.

Covers: ``RunStream`` over any time chunking equals ``idle_runs``/``observed_seconds`` on
the whole series (property); the live state of a workload at each minute agrees with the
replay's reclaim minute and window (hand-computed); the budget's choice stays within the
budget on the history it was chosen on and reclaims more as the budget grows, and a budget
that no stop fits is met by never stopping; a price of
0 picks the most GPU-hours; the frontier's structure and monotonic sanity on a slice of
the real trace, and no adaptive row above its context's ceiling; the policy file's ``strategy`` and ``cold_start_budget`` validation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuaas.errors import ConfigError
from gpuaas.policies.analysis import BUDGETS, FIXED_WINDOWS_MIN, frontier, ratio_at_equal_wakeups
from gpuaas.policies.reclaim import (
    AdaptiveWindow,
    RunStream,
    adaptive_rules,
    adaptive_state,
    apply_adaptive,
    choose_for_budget,
    history_start,
    idle_runs,
    live_states,
    observed_seconds,
    replay_runs,
    resolve_rule,
)
from gpuaas.policy import ReclaimStrategy, parse_policy
from gpuaas.sources.traces import load_utilization

TRACE = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "traces" / "alibaba-genai-2026"
MIN = 60.0


@st.composite
def series(draw: st.DrawFn) -> pd.DataFrame:
    frames = []
    for pod in draw(st.lists(st.sampled_from("abcd"), min_size=1, max_size=4, unique=True)):
        steps = draw(st.lists(st.sampled_from([60, 60, 60, 120, 180, 600]), min_size=1, max_size=40))
        values = draw(st.lists(st.sampled_from([0.0, 5.0, 40.0]), min_size=len(steps), max_size=len(steps)))
        frames.append(pd.DataFrame({"pod": pod, "t": np.cumsum(steps).astype(float), "value": values}))
    return pd.concat(frames, ignore_index=True)


@settings(max_examples=60, deadline=None)
@given(util=series(), cuts=st.lists(st.integers(0, 8000), max_size=6))
def test_streamed_runs_equal_the_whole_series(util: pd.DataFrame, cuts: list[int]) -> None:
    stream = RunStream(threshold=5.0)
    edges = [-np.inf, *sorted(float(c) for c in cuts), np.inf]
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        stream.add(util[(util["t"] > a) & (util["t"] <= b)])
    want = idle_runs(util, 5.0)
    pd.testing.assert_frame_equal(stream.runs(), want.reset_index(drop=True), check_dtype=False)
    assert stream.observed_s == pytest.approx(observed_seconds(util))
    assert stream.pods == util["pod"].nunique()


def _pod(points: list[tuple[int, float]], pod: str = "p") -> pd.DataFrame:
    return pd.DataFrame({"pod": pod, "t": [m * MIN for m, _ in points], "value": [v for _, v in points]})


def test_live_state_reclaims_at_the_replays_minute() -> None:
    # Idle minutes 1-70 (a 70-min spell), active at 71, idle again from 72: the second spell
    # follows a long one, so its window is 10 min: reclaimed at minute 82.
    points = [(0, 50.0), *((m, 0.0) for m in range(1, 71)), (71, 90.0), *((m, 0.0) for m in range(72, 100))]
    util = _pod(points)
    policy = AdaptiveWindow(1800.0)
    whole = idle_runs(util, 5.0)
    replayed = replay_runs(whole, policy(whole))
    assert replayed["reclaim_at"].tolist() == [41 * MIN, 82 * MIN]  # 40 min window first, then 10 min

    def state_at(minute: int) -> pd.Series:
        seen = util[util["t"] <= minute * MIN]
        stream = RunStream(5.0)
        stream.add(seen)
        runs = stream.runs()
        return adaptive_state(runs, stream.last_samples(), minute * MIN, policy, policy.why(runs),
                              threshold=5.0).iloc[0]

    assert not state_at(81)["due"] and state_at(81)["state"] == "idle"
    now = state_at(82)
    assert now["due"] and now["window_seconds"] == 600.0 and now["idle_since"] == 72 * MIN
    assert now["why"].startswith("long idle spells seen")
    assert state_at(71)["state"] == "active" and not state_at(71)["due"]
    stale = adaptive_state(whole, util.groupby("pod", as_index=False).last(), 104 * MIN, policy, threshold=5.0)
    assert stale.iloc[0]["state"] == "stale" and not stale.iloc[0]["due"]  # newest sample 5 min old


@pytest.fixture(scope="module")
def slice_runs() -> pd.DataFrame:
    util = load_utilization([TRACE / "pod_gpu_duty_cycle_part1.csv"])
    pods = sorted(util["pod"].unique())[:12]
    return idle_runs(util[util["pod"].isin(pods)], 5.0)


def test_budget_is_kept_on_its_history_and_buys_more_when_larger(slice_runs: pd.DataFrame) -> None:
    days = float(slice_runs["end"].max() - slice_runs["start"].min()) / 86400
    pods = int(slice_runs["pod"].nunique())
    chosen = [choose_for_budget(slice_runs, workloads=pods, days=days, wakeups_per_workload_per_day=b)
              for b in (1.0, 4.0, 16.0)]
    for budget, choice in zip((1.0, 4.0, 16.0), chosen, strict=True):
        out = replay_runs(slice_runs, choice.policy(slice_runs))
        assert choice.within_budget and int(out["wakeup"].sum()) / (pods * days) <= budget
        done = (slice_runs["ended_by"] != "end").to_numpy()  # spells still open at the end are not scored
        assert choice.reclaimed_gpu_hours == pytest.approx(float(out["reclaimed"].to_numpy()[done].sum()) / 3600)
    hours = [c.reclaimed_gpu_hours for c in chosen]
    assert hours == sorted(hours) and hours[0] < hours[-1]
    free = choose_for_budget(slice_runs, workloads=pods, days=days, cold_start_gpu_minutes=0)
    assert free.reclaimed_gpu_hours >= max(hours)
    # Three 500-minute spells, the first two ended by activity: any stop wakes the pod twice a day,
    # so half a wake-up a day leaves only "never".
    long = idle_runs(_pod([(m, 0.0 if m % 501 else 90.0) for m in range(0, 1503)]), 5.0)
    never = choose_for_budget(long, workloads=1, days=1.0, wakeups_per_workload_per_day=0.5)
    assert never.within_budget and never.wakeups == 0 and never.reclaimed_gpu_hours == 0.0
    assert np.isinf(never.policy(long)).all()


def test_frontier_structure_and_monotonic_sanity(slice_runs: pd.DataFrame) -> None:
    rows = frontier(slice_runs, budgets=(1.0, 4.0, 16.0))
    fixed = [r for r in rows if r.policy == "fixed"]
    adaptive = [r for r in rows if r.policy == "adaptive"]
    assert [r.parameter for r in fixed] == list(FIXED_WINDOWS_MIN) and [r.parameter for r in adaptive] == [1, 4, 16]
    assert set(rows[0].to_dict()) == {"policy", "parameter", "reclaimed_gpu_hours", "wakeups", "headroom_captured",
                                      "context_ceiling_gpu_hours", "wakeups_per_workload_day"}
    assert [r.policy for r in rows].count("clairvoyant") == len(fixed)
    # Longer windows: fewer GPU-hours and no more wake-ups.
    assert all(a.reclaimed_gpu_hours >= b.reclaimed_gpu_hours and a.wakeups >= b.wakeups
               for a, b in zip(fixed, fixed[1:], strict=False))
    # Chosen and scored on the same runs: a larger budget never reclaims less.
    assert all(a.reclaimed_gpu_hours <= b.reclaimed_gpu_hours for a, b in zip(adaptive, adaptive[1:], strict=False))
    for row, ratio in ratio_at_equal_wakeups(rows):
        inside = fixed[-1].wakeups <= row.wakeups <= fixed[0].wakeups
        assert (ratio is None) == (not inside)
    split = float(slice_runs["start"].median())
    scored = frontier(slice_runs, split_t=split, budgets=(4.0,))
    assert scored[0].wakeups < fixed[0].wakeups  # only the runs after the split are scored


def test_no_row_passes_its_contexts_ceiling(slice_runs: pd.DataFrame) -> None:
    split = float(slice_runs["start"].median())
    for rows in (frontier(slice_runs, budgets=BUDGETS), frontier(slice_runs, split_t=split, budgets=BUDGETS)):
        fixed = [r for r in rows if r.policy == "fixed"]
        adaptive = [r for r in rows if r.policy == "adaptive"]
        assert all(r.context_ceiling_gpu_hours is None for r in rows if r.policy != "adaptive")
        for row in adaptive:
            # The policy gives each spell its context's window, so it is one of the choices the ceiling
            # ranks; so is every fixed window (one window for every context).
            assert row.context_ceiling_gpu_hours is not None
            assert row.reclaimed_gpu_hours <= row.context_ceiling_gpu_hours + 1e-9
            at_or_below = [f.reclaimed_gpu_hours for f in fixed if f.wakeups <= row.wakeups]
            assert max(at_or_below, default=0.0) <= row.context_ceiling_gpu_hours + 1e-9


def test_policy_strategy_per_kind_and_tenant_and_budget_validation() -> None:
    policy = parse_policy({"reclaim": {"kinds": {"Notebook": {"strategy": "adaptive"}},
                                       "adaptive": {"cold_start_budget": {"cold_start_gpu_minutes": 30}}},
                           "tenants": [{"name": "t", "namespaces": ["t"], "reclaim": {"strategy": "fixed",
                                                                                    "window_minutes": 20}}]})
    assert resolve_rule(policy, "Notebook", None).strategy is ReclaimStrategy.adaptive
    assert resolve_rule(policy, "Notebook", "t").strategy is ReclaimStrategy.fixed  # the tenant wins
    assert resolve_rule(policy, "RayCluster", None).strategy is ReclaimStrategy.fixed  # the default
    assert adaptive_rules(policy) == [(0.05, 30.0)]
    assert adaptive_rules(parse_policy({})) == []
    with pytest.raises(ConfigError, match=r"p.yaml: reclaim.adaptive.cold_start_budget: .*exactly one"):
        parse_policy({"reclaim": {"adaptive": {"cold_start_budget": {}}}}, "p.yaml")
    with pytest.raises(ConfigError, match=r"reclaim.strategy: Input should be 'fixed' or 'adaptive'"):
        parse_policy({"reclaim": {"strategy": "clever"}})


def test_live_states_choose_within_the_budget_on_their_history() -> None:
    points = [(0, 50.0), *((m, 0.0) for m in range(1, 71)), (71, 90.0), *((m, 0.0) for m in range(72, 100))]
    stream = RunStream(5.0)
    stream.add(_pod(points, "uid-1"))
    budget = {"reclaim": {"strategy": "adaptive", "adaptive": {"cold_start_budget": {
        "wakeups_per_workload_per_day": 50, "refit_hours": 0.25}}}}  # chosen at minute 90
    states = live_states({5.0: stream}, parse_policy(budget), 99 * MIN)
    row = states.iloc[0]
    assert row["key"] == "uid-1" and row["threshold"] == 0.05 and row["base_window_minutes"] == 30.0
    assert "chosen on the history" in row["why"] and row["state"] == "idle"
    assert row["why"].endswith("; history to 1970-01-01 01:30 UTC")  # the refit boundary, minute 90
    # One earlier 70-min spell and the open one: the survival window says what it expects of the spell.
    assert "expected wake-ups" in row["why"] and row["window_seconds"] == 60.0 and row["due"]
    # The open spell starts after 70 idle minutes of the last 120: the context of the earlier spell.
    assert "spells after 0%-90% of the last 2 h idle last 1 h 10 m at the median (2 seen)" in row["why"]
    builtin = live_states({5.0: stream}, parse_policy({"reclaim": {"strategy": "adaptive"}}), 99 * MIN)
    assert builtin.iloc[0]["window_seconds"] == 600.0 and "built-in adaptive rule" in builtin.iloc[0]["why"]


def _cycles(minutes: int, idle: int) -> list[tuple[int, float]]:
    """``minutes`` of spells ``idle`` minutes long, each ended by one active minute."""
    return [(m, 80.0 if m % (idle + 1) == idle else 0.0) for m in range(minutes)]


def test_live_states_keep_the_window_chosen_at_the_refit_boundary() -> None:
    # Before 00:00 UTC of day 1 the workload's spells last 2 h; after it they last 4 minutes. Priced
    # at 30 GPU-min a wake-up, the long spells call for an early stop, the short ones for none soon.
    day = 1440
    before = [(day - 720 + m, v) for m, v in _cycles(720, 120)]
    after = [(day + m, v) for m, v in _cycles(300, 4)]
    priced = {"reclaim": {"strategy": "adaptive", "adaptive": {"cold_start_budget": {"cold_start_gpu_minutes": 30}}}}

    def window_at(minute: int, policy: dict[str, object], newcomer: bool = False) -> float:
        stream = RunStream(5.0)
        chunk = _pod([(m, v) for m, v in [*before, *after] if m <= minute], "uid-1")
        if newcomer:  # a workload that starts after 00:00 with idle spells of its own
            chunk = pd.concat([chunk, _pod([(day + m, v) for m, v in _cycles(minute - day + 1, 9)], "uid-2")])
        stream.add(chunk.sort_values(["pod", "t"]))
        rows = live_states({5.0: stream}, parse_policy(policy), minute * MIN).set_index("key")
        row = rows.loc["uid-1"]
        assert row["state"] == "idle"
        return float(row["window_seconds"])

    daily = [window_at(day + m, priced) for m in (1, 151, 296)]  # 1, 151 and 296 min into day 1
    assert daily[0] == daily[1] == daily[2] < 4 * MIN  # chosen at 00:00 on the 2-h spells: stop early
    every_cycle = {"reclaim": {"strategy": "adaptive", "adaptive": {"cold_start_budget": {
        "cold_start_gpu_minutes": 30, "refit_hours": 0.25}}}}
    budget = {"reclaim": {"strategy": "adaptive", "adaptive": {"cold_start_budget": {"wakeups_per_workload_per_day": 6}}}}
    assert window_at(day + 296, budget) == window_at(day + 296, budget, newcomer=True)  # same all day
    # Refit at 04:45 on the 4-min spells, the window outlasts them: no stop, no wake-up.
    assert window_at(day + 296, every_cycle) > 4 * MIN > daily[0]
    # The cycle reads history_hours before the boundary, not before now: a fixed span either way.
    assert history_start(day * MIN + 296 * MIN, parse_policy(priced)) == (day - 1440) * MIN
    assert history_start(day * MIN + 296 * MIN, parse_policy({})) == (day + 296 - 1440) * MIN


def test_apply_adaptive_never_idles_without_current_history() -> None:
    idle = pd.DataFrame({
        "uid": ["a", "b", "c", "d", "e"], "strategy": ["adaptive"] * 4 + ["fixed"],
        "activity_decides": [True, True, True, False, True],
        "verdict": ["idle", "busy", "idle", "excluded", "idle"],
        "reason": ["quiet", "GPU activity above the threshold", "quiet", "inside the grace period", "quiet"],
        "window_minutes": [30.0] * 5, "threshold": [0.05] * 5, "idle_seconds": [1800.0] * 5,
    })
    states = pd.DataFrame({"key": ["b", "c", "d"], "state": ["idle", "stale", "idle"],
                           "idle_since": [0.0, np.nan, 0.0], "idle_seconds": [700.0, np.nan, 900.0],
                           "window_seconds": [600.0, np.nan, 600.0], "due": [True, False, True],
                           "why": ["long idle spells seen", None, "long idle spells seen"],
                           "threshold": [0.05] * 3, "base_window_minutes": [30.0] * 3})
    out = apply_adaptive(idle, states).set_index("uid")
    assert out.loc["a", "verdict"] == "unknown" and "no activity history" in out.loc["a", "reason"]
    assert out.loc["b", "verdict"] == "idle" and out.loc["b", "window_minutes"] == 10.0  # busy over 30 m, idle 11 m
    assert out.loc["b", "idle_seconds"] == 700.0 and out.loc["b", "base_window_minutes"] == 30.0
    assert out.loc["c", "verdict"] == "unknown" and "stale" in out.loc["c", "reason"]
    assert out.loc["d", "verdict"] == "excluded"  # the grace period still holds
    assert out.loc["e", "verdict"] == "idle" and out.loc["e", "window_minutes"] == 30.0  # fixed: untouched
    failed = apply_adaptive(idle, None).set_index("uid")  # the history pull failed
    assert set(failed.loc[["a", "b", "c"], "verdict"]) == {"unknown"}
