"""The hindsight bound of a context family: the best window per context on the very runs it scores.

A hand-made case whose windows and curve are worked out by hand, and a brute force over every
assignment of windows to contexts on random small tables: no assignment may beat the bound's value
at its price, none lies above the curve, and every corner of the curve is an assignment.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuaas.policies.analysis import hindsight_bound, hindsight_curve
from gpuaas.policies.reclaim import Outcomes

# Windows of 1 min, 10 min and never; four runs, the first two in context "a", the last two in "b".
HAND = Outcomes(
    windows_s=(60.0, 600.0, math.inf),
    saved_gpu_min=np.array([[50.0, 5.0, 100.0, 3.0], [41.0, 0.0, 91.0, 0.0], [0.0, 0.0, 0.0, 0.0]]),
    wakeups=np.array([[1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]]),
)
CONTEXTS = np.array(["a", "a", "b", "b"])


@pytest.mark.parametrize(("price", "windows", "gpu_min", "wakeups"), [
    (10.0, (60.0, 60.0), 158.0, 4),  # a: 55 - 20 beats 41 - 10; b: 103 - 20 beats 91 - 10
    (30.0, (600.0, 600.0), 132.0, 2),  # a: 41 - 30 beats 55 - 60; b: 91 - 30 beats 103 - 60
    (45.0, (math.inf, 600.0), 91.0, 1),  # a: never (41 - 45 < 0); b: 91 - 45 beats 103 - 90
    (100.0, (math.inf, math.inf), 0.0, 0),  # no stop pays for either
])
def test_each_context_gets_its_own_best_window(price: float, windows: tuple[float, float], gpu_min: float,
                                               wakeups: int) -> None:
    point = hindsight_bound(HAND, CONTEXTS, price)
    assert point.windows_s == windows
    assert point.reclaimed_gpu_hours == pytest.approx(gpu_min / 60.0)
    assert point.wakeups == wakeups


def test_the_family_beats_one_window_for_all_where_the_contexts_differ() -> None:
    one = hindsight_bound(HAND, np.zeros(4, dtype=int), 45.0)
    assert one.windows_s == (600.0,)  # 132 - 90 = 42, against 46 for the two contexts apart
    both = hindsight_bound(HAND, CONTEXTS, 45.0)
    assert (both.reclaimed_gpu_hours * 60 - 45.0 * both.wakeups) > (one.reclaimed_gpu_hours * 60 - 45.0 * one.wakeups)


def test_the_curve_takes_the_steepest_steps_first() -> None:
    # a: never (0, 0), 10 min (1, 41), 1 min (2, 55); b: never (0, 0), 10 min (1, 91), 1 min (2, 103).
    # Steps per wake-up: b's 91, a's 41, a's 14, b's 12.
    curve = hindsight_curve(HAND, CONTEXTS)
    assert curve.wakeups == (0.0, 1.0, 2.0, 3.0, 4.0)
    assert [round(h * 60.0, 9) for h in curve.gpu_hours] == [0.0, 91.0, 132.0, 146.0, 158.0]
    assert curve.hours_at(1.5) == pytest.approx((91.0 + 132.0) / 2 / 60.0)  # half of each corner's windows
    assert curve.hours_at(9.0) == pytest.approx(158.0 / 60.0)  # more wake-ups buy nothing more


def test_below_the_fewest_wake_ups_the_curve_has_no_value() -> None:
    always = Outcomes((60.0,), np.array([[10.0, 20.0]]), np.array([[1.0, 1.0]]))  # one window, both runs wake
    curve = hindsight_curve(always, np.array([0, 1]))
    assert curve.hours_at(1.0) is None
    assert curve.hours_at(2.0) == pytest.approx(30.0 / 60.0)


def test_one_context_per_run_or_a_precise_error() -> None:
    with pytest.raises(ValueError, match="one context per run: 3 contexts for 4 runs"):
        hindsight_bound(HAND, np.array(["a", "a", "b"]), 10.0)


@st.composite
def tables(draw: st.DrawFn) -> tuple[Outcomes, np.ndarray, float]:
    n_windows, n_runs = draw(st.integers(1, 4)), draw(st.integers(1, 6))
    saved = np.array(draw(st.lists(st.lists(st.integers(0, 60), min_size=n_runs, max_size=n_runs),
                                   min_size=n_windows, max_size=n_windows)), dtype=float)
    wakes = np.array(draw(st.lists(st.lists(st.integers(0, 1), min_size=n_runs, max_size=n_runs),
                                   min_size=n_windows, max_size=n_windows)), dtype=float)
    contexts = np.array(draw(st.lists(st.integers(0, 2), min_size=n_runs, max_size=n_runs)))
    price = draw(st.sampled_from([0.0, 1.0, 7.5, 20.0, 45.0]))
    return Outcomes(tuple(60.0 * (w + 1) for w in range(n_windows)), saved, wakes), contexts, price


@settings(max_examples=300, deadline=None)
@given(tables())
def test_no_assignment_of_windows_to_contexts_does_better(table: tuple[Outcomes, np.ndarray, float]) -> None:
    outcomes, contexts, price = table
    point = hindsight_bound(outcomes, contexts, price)
    labels = list(np.unique(contexts))
    assert len(point.windows_s) == len(labels)

    def value(choice: tuple[int, ...]) -> float:
        rows = np.array([choice[labels.index(c)] for c in contexts])
        columns = np.arange(len(contexts))
        return float(outcomes.saved_gpu_min[rows, columns].sum() - price * outcomes.wakeups[rows, columns].sum())

    brute = max(value(c) for c in itertools.product(range(len(outcomes.windows_s)), repeat=len(labels)))
    chosen = tuple(outcomes.windows_s.index(w) for w in point.windows_s)
    assert value(chosen) == pytest.approx(brute)
    assert point.reclaimed_gpu_hours * 60.0 - price * point.wakeups == pytest.approx(brute)


@settings(max_examples=300, deadline=None)
@given(tables())
def test_the_curve_is_the_upper_edge_of_every_assignment(table: tuple[Outcomes, np.ndarray, float]) -> None:
    outcomes, contexts, price = table
    curve = hindsight_curve(outcomes, contexts)
    labels = list(np.unique(contexts))
    points = set()
    for choice in itertools.product(range(len(outcomes.windows_s)), repeat=len(labels)):
        rows = np.array([choice[labels.index(c)] for c in contexts])
        columns = np.arange(len(contexts))
        points.add((float(outcomes.wakeups[rows, columns].sum()), float(outcomes.saved_gpu_min[rows, columns].sum())))
    for wakeups, saved in points:  # no assignment lies above the curve
        at = curve.hours_at(wakeups)
        assert at is not None
        assert saved <= at * 60.0 + 1e-9
    for wakeups, hours in zip(curve.wakeups, curve.gpu_hours, strict=True):  # every corner is an assignment
        assert any(k == wakeups and s == pytest.approx(hours * 60.0) for k, s in points)
    # at any price, the best corner is worth what the best window per context is worth
    point = hindsight_bound(outcomes, contexts, price)
    best = max(h * 60.0 - price * k for k, h in zip(curve.wakeups, curve.gpu_hours, strict=True))
    assert best == pytest.approx(point.reclaimed_gpu_hours * 60.0 - price * point.wakeups)
