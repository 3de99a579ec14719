"""The quota planner's solver: a day's cap shared between flavors whose weights are orders of magnitude apart
gives the true optimum (against an exact brute force), and HiGHS's prints stay off stdout when two threads
plan at once. Pure, apart from file descriptor 1."""

from __future__ import annotations

import itertools
import os
import threading
import time
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gpuaas.policies.quotas import QueueDemand, QuotaLimits, QuotaPlan, plan_quotas
from gpuaas.policies.quotas.plan import _cells
from tests.policies.test_quotas import allowed

FLAVORS = ("a100", "h100", "l40s")
Value = tuple[int, Fraction, int]


def after(plan: QuotaPlan) -> dict[tuple[str, str], int]:
    return {(c.queue, c.flavor): c.after for c in plan.changes}


def tier(size: Fraction, short: Fraction, slope: Fraction) -> Fraction:
    """The k-th tenth of a tier left unserved costs slope*k a GPU; in fractions, so 10 next to 1e19 still counts."""
    cost = Fraction(0)
    for k in range(1, 11):
        piece = min(size / 10, short)
        cost += slope * k * piece
        short -= piece
    return cost


def value(queues: list[QueueDemand], new: dict[tuple[str, str], int]) -> Value:
    """(guarantee gap, shortfall cost, GPUs moved) of the cells in ``new``, exactly: the objective in its order,
    written out apart from the planner. The owed multiplier is the float the planner states (10 x heaviest /
    lightest weight of the whole cohort + 1)."""
    weights = [q.weight for q in queues]
    owed = Fraction(10 * max(weights) / min(weights) + 1.0)
    gap, cost, moved = 0, Fraction(0), 0
    for q in queues:
        for f, before in q.nominal.items():
            if (q.name, f) not in new:
                continue
            holders = [p for p in queues if f in p.nominal]
            share = Fraction(sum(p.nominal[f] for p in holders) * q.weight / sum(p.weight for p in holders))
            demand = Fraction(q.demand.get(f, 0.0))
            within = min(demand, share)
            short = max(Fraction(0), demand - new[(q.name, f)])
            beyond = min(short, demand - within)
            cost += tier(demand - within, beyond, Fraction(q.weight))
            cost += tier(within, short - beyond, Fraction(q.weight) * owed)
            gap += max(0, q.guaranteed.get(f, 0) - new[(q.name, f)])
            moved += max(0, new[(q.name, f)] - before)
    return gap, cost, moved


def brute_force(queues: list[QueueDemand], limits: QuotaLimits) -> Value:
    """The smallest value over every assignment the rules allow (each cell's rules in ``allowed``): each flavor's
    assignments that keep its total, priced once, then every combination of them within the cap."""
    per_flavor: list[list[Value]] = []
    for f in sorted({f for q in queues for f in q.nominal}):
        holders = [q for q in queues if f in q.nominal]
        total = sum(q.nominal[f] for q in holders)
        ranges = [[v for v in range(total + 1) if allowed(queues, q, f, v, limits)] for q in holders]
        per_flavor.append([value(queues, {(q.name, f): v for q, v in zip(holders, values)})
                           for values in itertools.product(*ranges) if sum(values) == total])
    best: Value | None = None
    for parts in itertools.product(*per_flavor):
        if sum(part[2] for part in parts) <= limits.total_left:
            candidate = (sum(p[0] for p in parts), sum((p[1] for p in parts), Fraction(0)), sum(p[2] for p in parts))
            best = candidate if best is None or candidate < best else best
    assert best is not None, "staying put is always allowed"
    return best


# --- a flavor's plan does not depend on another flavor's costs where the cap binds -------------------------

def _heavy_and_light(light: float) -> list[QueueDemand]:
    """a100: a1 (weight 1,000,000) is owed its share of 6 but a0 is held at its guarantee: a cost near 1e14
    no move can cut. h100: h1 at 0 is owed 4 of its share of 4, and h0's 8 sit idle."""
    return [QueueDemand("a0", {"a100": 12}, {"a100": 20}, guaranteed={"a100": 12}, weight=1e6),
            QueueDemand("a1", {"a100": 0}, {"a100": 12}, weight=1e6),
            QueueDemand("h0", {"h100": 8}, {"h100": 0}, weight=light),
            QueueDemand("h1", {"h100": 0}, {"h100": 4}, weight=light)]


@pytest.mark.parametrize("light", [1.0, 1e-6])
@pytest.mark.parametrize(("cap", "hysteresis"), [(4, 1), (8, 1), (8, 2), (100, 2)])
def test_a_light_flavors_move_is_made_beside_a_flavor_weighted_a_million_where_the_cap_binds(
        light: float, cap: int, hysteresis: int) -> None:
    """One model of both flavors held h100's cost below HiGHS's tolerances next to a100's (weights 1e-6 against
    1e6): with the cap binding it moved nothing, or gave up. h1 gets its 4 whatever the cap, and no note."""
    plan = plan_quotas(_heavy_and_light(light), QuotaLimits(8, 50, cap, hysteresis, min_step_gpus=2))
    assert after(plan) == {("a0", "a100"): 12, ("a1", "a100"): 0, ("h0", "h100"): 4, ("h1", "h100"): 4}
    assert [n for n in plan.notes if "solver" in n] == []


@pytest.mark.parametrize("cap", [5, 100])
def test_a_gain_of_4_is_kept_beside_costs_near_1e13(cap: int) -> None:
    """h0 and h1 (weight 2) are both owed; moving one GPU from h0 (at its demand) to h1 (3 short) cuts the cost by 4,
    next to a100's cost near 1.4e13 and owed pieces near 1e7 in h100. Holding the cost in a row of the model let
    the fewest-moves pass undo the move within the row's tolerance."""
    queues = [QueueDemand("a0", {"a100": 0}, {"a100": 1.0}, weight=1e6),
              QueueDemand("a1", {"a100": 1}, {"a100": 12.0}, weight=1e6),
              QueueDemand("h0", {"h100": 6}, {"h100": 6.0}, weight=2.0),
              QueueDemand("h1", {"h100": 5}, {"h100": 8.0}, weight=2.0)]
    limits = QuotaLimits(max_step_gpus=4, max_step_percent=100, max_total_moved_gpus=cap, hysteresis_gpus=1)
    plan = plan_quotas(queues, limits)
    assert after(plan) == {("a0", "a100"): 0, ("a1", "a100"): 1, ("h0", "h100"): 5, ("h1", "h100"): 6}
    assert value(queues, after(plan)) == brute_force(queues, limits)


@pytest.mark.parametrize(("queues", "limits", "expected"), [
    ([QueueDemand("q0", {"a100": 3}, {"a100": 6.0}, weight=1e-6),
      QueueDemand("q1", {"a100": 2}, {"a100": 8.0}, weight=1e-6),
      QueueDemand("q2", {"h100": 0}, {"h100": 0.0})],
     QuotaLimits(1, 50, 1, 0), {("q0", "a100"): 2, ("q1", "a100"): 3}),
    ([QueueDemand("q0", {"h100": 5}, {"h100": 11.0}, weight=1e3),
      QueueDemand("q1", {"h100": 2}, {"h100": 4.0}, weight=250.0),
      QueueDemand("q2", {"h100": 0}, {"h100": 4.5}, weight=250.0),
      QueueDemand("q3", {"a100": 0}, {"a100": 0.0}, weight=5e-7)],
     QuotaLimits(2, 50, 6, 2, min_step_gpus=2), {("q1", "h100"): 0, ("q2", "h100"): 2}),
], ids=["one-gpu", "hysteresis-2"])
def test_a_small_gain_between_two_owed_queues_is_kept_beside_owed_pieces_1e7_times_as_dear(
        queues: list[QueueDemand], limits: QuotaLimits, expected: dict[tuple[str, str], int]) -> None:
    """A queue of another flavor makes the cohort's owed multiplier 1e7 (weights 1 and 1e-6) or 2e10: this flavor's
    owed pieces then cost that many times its beyond-share ones. Moving GPUs from a queue above its share to one
    below it swaps owed pieces of equal cost and gains a beyond-share piece or two: below HiGHS's relative gap,
    so only the exact finish (one GPU, or ``hysteresis_gpus``, at a time) makes the move."""
    plan = plan_quotas(queues, limits)
    assert {cell: after(plan)[cell] for cell in expected} == expected
    assert value(queues, after(plan)) == brute_force(queues, limits)


@st.composite
def far_apart(draw: st.DrawFn) -> tuple[list[QueueDemand], QuotaLimits]:
    """Two or three flavors of one to three queues, each queue holding one flavor; a flavor's queues weigh within
    4x of each other, flavors up to 1e12 apart (the policy's bounds). Guarantees, no-reversal, hysteresis,
    minimum steps; the cap is drawn small, and the test keeps the draws where it can bind."""
    flavors = FLAVORS[: draw(st.integers(2, 3))]
    scale = {f: draw(st.sampled_from([1e-6, 1e-3, 1.0, 1e3, 1e6])) for f in flavors}
    held = [f for f in flavors for _ in range(draw(st.integers(1, 3)))]
    nominals = [draw(st.integers(0, 6)) for _ in held]
    guarantees = [draw(st.integers(0, n + 3)) if draw(st.booleans()) else 0 for n in nominals]
    for f in flavors:  # guarantees above the cohort's capacity are a configuration error, tested apart
        mine = [i for i, g in enumerate(held) if g == f]
        if sum(guarantees[i] for i in mine) > sum(nominals[i] for i in mine):
            for i in mine:
                guarantees[i] = 0
    queues = [QueueDemand(
        name=f"q{i}", nominal={f: nominals[i]},
        demand={f: draw(st.integers(0, 12)) / draw(st.sampled_from([1, 2]))},
        guaranteed={f: guarantees[i]} if guarantees[i] else {},
        weight=scale[f] * draw(st.sampled_from([1.0, 0.5, 0.25])),
        recent_change={f: draw(st.integers(-3, 3))} if draw(st.booleans()) else {},
    ) for i, f in enumerate(held)]
    limits = QuotaLimits(max_step_gpus=draw(st.integers(1, 5)), max_step_percent=draw(st.sampled_from([50, 100])),
                         max_total_moved_gpus=draw(st.integers(1, 6)), hysteresis_gpus=draw(st.integers(0, 3)),
                         min_step_gpus=draw(st.integers(0, 2)))
    return queues, limits


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(far_apart())
def test_where_the_cap_binds_the_plan_is_the_brute_force_optimum_even_with_weights_far_apart(
        instance: tuple[list[QueueDemand], QuotaLimits]) -> None:
    queues, limits = instance
    assume(sum(c.step_up for c in _cells(queues, limits)) > limits.total_left)  # the cap can bind
    plan = plan_quotas(queues, limits)
    assert value(queues, after(plan)) == brute_force(queues, limits)


# --- HiGHS's prints stay off stdout, with two threads planning at once ---------------------------------------

def test_two_plans_in_two_threads_are_both_right_and_stdout_stays_clean(
        capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard points file descriptor 1 at the null device while HiGHS runs. Two threads doing so at once:
    the second saves the first's null device as stdout; the first, done, points it back while the second still
    solves (the second's prints land in a command's JSON), and the second, done, leaves it at the null device
    (what the process prints next is lost). Here the first two solves wait for each other inside the guard and
    the second prints once the first is out: without the lock both get in; with it the first waits out the
    barrier alone, and the second comes in after it."""
    from gpuaas.policies.quotas import _milp

    real, entered = _milp.milp, itertools.count()  # type: ignore[attr-defined]
    inside = threading.Barrier(2, timeout=1.0)

    def chatty(*args: Any, **kwargs: Any) -> Any:  # HiGHS's C printf, where the guard should hide it
        rank = next(entered)
        result = real(*args, **kwargs)
        try:
            inside.wait()
        except threading.BrokenBarrierError:
            pass
        if rank == 1:  # the second in prints once the first is out
            time.sleep(0.2)
        os.write(1, b"HighsMipSolverData::noise\n")
        return result

    limits = QuotaLimits(max_step_gpus=8, max_step_percent=50, max_total_moved_gpus=32, hysteresis_gpus=1)
    fleets = [[QueueDemand("a", {"a100": 16}, {"a100": 3}, guaranteed={"a100": 4}),
               QueueDemand("b", {"a100": 8}, {"a100": 20})], _heavy_and_light(1.0)]
    expected = [after(plan_quotas(fleet, limits)) for fleet in fleets]
    monkeypatch.setattr(_milp, "milp", chatty)  # the name the guard's caller looks up
    got: list[dict[tuple[str, str], int]] = [{} for _ in fleets]

    def plan(i: int) -> None:
        got[i] = after(plan_quotas(fleets[i], limits))

    threads = [threading.Thread(target=plan, args=(i,)) for i in range(len(fleets))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    os.write(1, b"after the plans\n")
    assert got == expected
    assert capfd.readouterr().out == "after the plans\n"
