"""The clairvoyant limit and the frontier's clairvoyant rows and headroom.

Covers: on a small hand-made trace the curve equals hand-computed GPU-hours and a brute
force over every assignment of windows (the detection delay, later stops, never) to every
run, at every number of wake-ups; the frontier's clairvoyant rows, one per fixed row at its
wake-ups, equal that brute force; the clairvoyant never reclaims less than a fixed window
no shorter than the detection delay at that window's wake-ups (property); headroom is
(adaptive - fixed) / (clairvoyant - fixed) at the adaptive row's wake-ups.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuaas.policies.analysis import FrontierRow, clairvoyant_curve, frontier, headroom_captured
from gpuaas.policies.reclaim import idle_runs, replay_runs

MIN = 60.0
DETECT = 5 * MIN


def _pod(pod: str, points: list[tuple[int, float]]) -> pd.DataFrame:
    return pd.DataFrame({"pod": pod, "t": [m * MIN for m, _ in points], "value": [v for _, v in points]})


def _idle(first: int, last: int) -> list[tuple[int, float]]:
    return [(m, 0.0) for m in range(first, last + 1)]


@pytest.fixture(scope="module")
def trace() -> pd.DataFrame:
    """Five pods, one minute apart, each with one kind of idle run:

    a: idle 60 min, ended by activity (55 min gained at 5 min, one wake-up);
    b: idle 20 min, ended by activity (15 min, one wake-up);
    c: idle 40 min up to the end of the data (35 min, no wake-up: never woke);
    d: idle 30 min, then 10 minutes of missing data, then active (25 min, one wake-up);
    e: idle 3 min, ended by activity (shorter than the detection delay: nothing to gain);
    f: idle 10 min, 10 minutes of missing data, then idle (5 min, no wake-up: resumed up),
       then a 1-minute idle run ended by activity.
    """
    return pd.concat([
        _pod("a", [(0, 50.0), *_idle(1, 60), (61, 90.0), (62, 90.0)]),
        _pod("b", [(0, 50.0), *_idle(1, 20), (21, 90.0)]),
        _pod("c", [(0, 50.0), *_idle(1, 41)]),
        _pod("d", [(0, 50.0), *_idle(1, 31), (42, 90.0)]),
        _pod("e", [(0, 50.0), *_idle(1, 3), (4, 90.0)]),
        _pod("f", [(0, 50.0), *_idle(1, 11), (22, 0.0), (23, 80.0)]),
    ], ignore_index=True)


def _assignments(runs: pd.DataFrame) -> list[tuple[int, float]]:
    """(wake-ups, GPU-hours) of every choice of window per run (the detection delay, 20 min,
    never), each replayed as one window vector."""
    out = []
    for pick in itertools.product([DETECT, 20 * MIN, np.inf], repeat=len(runs)):
        replayed = replay_runs(runs, np.array(pick, dtype=float))
        out.append((int(replayed["wakeup"].sum()), float(replayed["reclaimed_gpu_s"].sum()) / 3600.0))
    return out


@pytest.fixture(scope="module")
def table(trace: pd.DataFrame) -> list[tuple[int, float]]:
    return _assignments(idle_runs(trace, 5.0))


def _brute_force(table: list[tuple[int, float]], wakeups: int) -> float:
    """The most GPU-hours of any assignment within ``wakeups`` wake-ups."""
    return max(hours for k, hours in table if k <= wakeups)


def test_curve_matches_hand_computed_hours_and_the_brute_force(trace: pd.DataFrame,
                                                              table: list[tuple[int, float]]) -> None:
    runs = idle_runs(trace, 5.0)
    curve = clairvoyant_curve(runs, detect_s=DETECT)
    # Free: c (35) and f (5); costly, largest first: a (55), d (25), b (15).
    assert curve.free_gpu_s == pytest.approx(40 * MIN) and curve.max_wakeups == 3
    want_min = {0: 40, 1: 95, 2: 120, 3: 135, 4: 135}
    for k, minutes in want_min.items():
        assert curve.hours_at(k) == pytest.approx(minutes / 60), k
    for k in (0, 1, 2, 3):
        assert curve.hours_at(k) == pytest.approx(_brute_force(table, k)), k
    assert curve.wakeups_at(4) == 3 and curve.hours_at(1.5) == pytest.approx((95 + 120) / 2 / 60)


def test_frontier_clairvoyant_rows_sit_at_each_fixed_rows_wakeups(trace: pd.DataFrame,
                                                                 table: list[tuple[int, float]]) -> None:
    runs = idle_runs(trace, 5.0)
    rows = frontier(runs, windows_min=(5.0, 10.0, 30.0, 90.0), budgets=(1.0,), detect_s=DETECT)
    fixed = [r for r in rows if r.policy == "fixed"]
    seer = [r for r in rows if r.policy == "clairvoyant"]
    assert [r.parameter for r in seer] == [r.parameter for r in fixed]
    # Fixed 5 and 10 min wake a, b and d; 30 min wakes a, and d at its last idle sample (0 min gained).
    assert [r.wakeups for r in fixed] == [3, 3, 2, 0]
    # 5 min: a 55 + b 15 + c 35 + d 25 + f 5; 10 min: 50 + 10 + 30 + 20 + 0 (f is idle 10 min); 30 min: a 30 + c 10.
    assert [r.reclaimed_gpu_hours * 60 for r in fixed] == pytest.approx([135, 110, 40, 0])
    for f, c in zip(fixed, seer, strict=True):
        assert c.wakeups == f.wakeups
        assert c.reclaimed_gpu_hours == pytest.approx(_brute_force(table, f.wakeups))
        assert c.reclaimed_gpu_hours >= f.reclaimed_gpu_hours - 1e-9
    # A later detection delay gains less.
    late = frontier(runs, windows_min=(30.0,), budgets=(), detect_s=10 * MIN)
    assert late[-1].policy == "clairvoyant" and late[-1].reclaimed_gpu_hours == pytest.approx((30 + 50 + 20) / 60)


def test_headroom_is_the_share_of_the_gap_to_the_limit(trace: pd.DataFrame) -> None:
    curve = clairvoyant_curve(idle_runs(trace, 5.0), detect_s=DETECT)
    fixed = [FrontierRow("fixed", 30.0, 1.0, 1), FrontierRow("fixed", 5.0, 2.0, 3)]
    # At 2 wake-ups: fixed 1.5 h (interpolated), clairvoyant 2.0 h; 1.75 h is half the gap.
    assert headroom_captured(FrontierRow("adaptive", 1.0, 1.75, 2), fixed, curve) == pytest.approx(0.5)
    assert headroom_captured(FrontierRow("adaptive", 1.0, 1.25, 2), fixed, curve) == pytest.approx(-0.5)
    assert headroom_captured(FrontierRow("adaptive", 1.0, 1.0, 7), fixed, curve) is None  # past the fixed rows


@st.composite
def series(draw: st.DrawFn) -> pd.DataFrame:
    frames = []
    for pod in draw(st.lists(st.sampled_from("abcd"), min_size=1, max_size=4, unique=True)):
        steps = draw(st.lists(st.sampled_from([60, 60, 60, 60, 180, 600]), min_size=1, max_size=80))
        values = draw(st.lists(st.sampled_from([0.0, 0.0, 0.0, 40.0]), min_size=len(steps), max_size=len(steps)))
        frames.append(pd.DataFrame({"pod": pod, "t": np.cumsum(steps).astype(float), "value": values}))
    return pd.concat(frames, ignore_index=True)


@settings(max_examples=60, deadline=None)
@given(util=series(), window_min=st.sampled_from([5.0, 6.0, 10.0, 20.0, 45.0]))
def test_clairvoyant_never_below_a_fixed_window_at_its_wakeups(util: pd.DataFrame, window_min: float) -> None:
    runs = idle_runs(util, 5.0)
    out = replay_runs(runs, np.full(len(runs), window_min * MIN))
    curve = clairvoyant_curve(runs, detect_s=DETECT)
    wakeups = int(out["wakeup"].sum())
    assert curve.hours_at(wakeups) >= float(out["reclaimed_gpu_s"].sum()) / 3600 - 1e-9
    assert curve.wakeups_at(wakeups) <= wakeups
