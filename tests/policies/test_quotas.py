"""``plan_quotas``: every constraint on random inputs, the optimum against brute force, no flapping,
no starvation (a queue at 0 gains, short queues share by weight, a guarantee out of reach tonight
is reached over nights without blocking the cohort, a team back from a holiday recovers), worked
examples by hand, and the errors for contradictory input. Pure."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuaas.errors import ConfigError
from gpuaas.policies.quotas import QueueDemand, QuotaLimits, QuotaPlan, plan_quotas

EXAMPLE_LIMITS = QuotaLimits(max_step_gpus=8, max_step_percent=50, max_total_moved_gpus=32, hysteresis_gpus=1)
TEAM_A = QueueDemand("team-a", {"a100": 16}, {"a100": 3}, guaranteed={"a100": 4}, weight=1)
TEAM_B = QueueDemand("team-b", {"a100": 8}, {"a100": 20}, recent_change={"a100": -2})
FLAVORS = ("a100", "h100")


def after(plan: QuotaPlan) -> dict[tuple[str, str], int]:
    return {(c.queue, c.flavor): c.after for c in plan.changes}


def step_of(before: int, guaranteed: int, limits: QuotaLimits) -> int:
    return min(limits.max_step_gpus, max(limits.min_step_gpus,
                                         int(max(before, guaranteed) * limits.max_step_percent / 100 + 1e-9)))


def tier(size: float, short: float, slope: float) -> float:
    """The k-th tenth of a tier left unserved costs slope*k a GPU."""
    cost = 0.0
    for k in range(1, 11):
        piece = min(size / 10, short)
        cost += slope * k * piece
        short -= piece
    return cost


def fair_cost(queues: list[QueueDemand], new: dict[tuple[str, str], int]) -> float:
    """The shortfall cost written out: per flavor, a queue's share is the flavor's GPUs times its weight over
    the weights; demand within the share is owed, and a GPU short of it costs more than any GPU beyond."""
    weights = [q.weight for q in queues]
    owed = 10 * max(weights) / min(weights) + 1
    cost = 0.0
    for q in queues:
        for f in q.nominal:
            holders = [p for p in queues if f in p.nominal]
            share = sum(p.nominal[f] for p in holders) * q.weight / sum(p.weight for p in holders)
            demand = q.demand.get(f, 0.0)
            within = min(demand, share)
            short = max(0.0, demand - new[(q.name, f)])
            beyond = min(short, demand - within)
            cost += tier(demand - within, beyond, q.weight) + tier(within, short - beyond, q.weight * owed)
    return cost


def wanted(q: QueueDemand, flavor: str) -> int:
    return math.ceil(q.demand.get(flavor, 0.0) - 1e-9)


# --- the worked example, computed by hand ------------------------------------------------------------

def test_a_recent_loss_does_not_stop_a_short_queue_from_regaining_up_to_its_demand() -> None:
    # team-b lost 2 GPUs recently but is 12 short: moving back toward its demand is recovery, not flapping.
    # Its step is min(8, 50% of 8) = 4; team-a has 12 above its guarantee: +4 / -4.
    plan = plan_quotas([TEAM_A, TEAM_B], EXAMPLE_LIMITS)
    assert after(plan) == {("team-a", "a100"): 12, ("team-b", "a100"): 12}
    assert plan.moved_gpus == 4 and plan.weighted_shortfall == 8.0


def test_the_worked_example_without_the_recent_loss_moves_one_relative_step() -> None:
    # team-b's step is min(8, 50% of 8) = 4; team-a can give 16-4=12 above its guarantee, step 8: +4 / -4.
    plan = plan_quotas([TEAM_A, replace(TEAM_B, recent_change={})], EXAMPLE_LIMITS)
    assert after(plan) == {("team-a", "a100"): 12, ("team-b", "a100"): 12}
    assert plan.moved_gpus == 4 and plan.weighted_shortfall == 8.0 and plan.weighted_shortfall_before == 12.0
    a, b = plan.changes
    assert a.reason == "team-a a100: 16 -> 12 (-4 to team-b): demand 3, guaranteed 4, 9 above demand after the move"
    assert b.reason == ("team-b a100: 8 -> 12 (+4 from team-a): demand 20, shortfall 12 -> 8; "
                        "limited by the step of 4 (50% of 8)")


def test_evidence_is_quoted_in_the_reason() -> None:
    b = replace(TEAM_B, recent_change={}, evidence={"a100": "12 GPUs waited 3 h, p90 use 14"})
    plan = plan_quotas([TEAM_A, b], EXAMPLE_LIMITS)
    assert "(+4 from team-a): 12 GPUs waited 3 h, p90 use 14; demand 20" in plan.changes[1].reason


# --- random instances: every constraint holds -----------------------------------------------------------

@st.composite
def instances(draw: st.DrawFn, max_queues: int = 6, max_quota: int = 24) -> tuple[list[QueueDemand], QuotaLimits]:
    flavors = FLAVORS[: draw(st.integers(1, 2))]
    n = draw(st.integers(1, max_queues))
    nominals = [{f: draw(st.integers(0, max_quota)) for f in flavors} for _ in range(n)]
    guarantees: list[dict[str, int]] = [
        {f: draw(st.integers(0, nominal[f] + 8)) for f in flavors if draw(st.booleans())} for nominal in nominals]
    for f in flavors:  # guarantees above the cohort's capacity are a configuration error, tested apart
        if sum(g.get(f, 0) for g in guarantees) > sum(nominal[f] for nominal in nominals):
            for g in guarantees:
                g.pop(f, None)
    queues = [QueueDemand(
        name=f"q{i}",
        nominal=nominal,
        demand={f: draw(st.integers(0, 2 * max_quota)) / draw(st.sampled_from([1, 2])) for f in flavors},
        guaranteed=guarantees[i],
        weight=draw(st.sampled_from([0.5, 1.0, 2.0, 3.0])),
        recent_change={f: draw(st.integers(-4, 4)) for f in flavors if draw(st.booleans())},
        reclaims=draw(st.booleans()),
        busiest={f: float(draw(st.integers(0, 2 * max_quota))) for f in flavors if draw(st.booleans())},
        moved_24h={f: (draw(st.integers(0, 6)), draw(st.integers(0, 6))) for f in flavors if draw(st.booleans())},
        history_seconds={f: draw(st.sampled_from([0.0, 3600.0, 86400.0, 7 * 86400.0]))
                         for f in flavors if draw(st.booleans())},
    ) for i, nominal in enumerate(nominals)]
    limits = QuotaLimits(
        max_step_gpus=draw(st.integers(0, 10)),
        max_step_percent=draw(st.sampled_from([0, 10, 25, 50, 100, 200])),
        max_total_moved_gpus=draw(st.integers(0, 30)),
        hysteresis_gpus=draw(st.integers(0, 4)),
        min_step_gpus=draw(st.integers(0, 3)),
        no_reclaim_keep_factor=draw(st.sampled_from([0.0, 1.0, 2.5, 12.0])),
        reclaiming_lends=draw(st.booleans()),
        reclaiming_keep_factor=draw(st.sampled_from([0.0, 1.0, 4.0])),
        reclaiming_keep_gpus=draw(st.sampled_from([0, 2])),
        moved_24h_gpus=draw(st.sampled_from([0, 0, 3, 12, 40])),
        min_lend_history_s=draw(st.sampled_from([0.0, 0.0, 86400.0, 2 * 86400.0])),
        no_reclaim_keep_gpus=draw(st.sampled_from([0, 0, 2, 5])),
    )
    return queues, limits


def share_of(queues: list[QueueDemand], q: QueueDemand, flavor: str) -> float:
    holders = [p for p in queues if flavor in p.nominal]
    return sum(p.nominal[flavor] for p in holders) * q.weight / sum(p.weight for p in holders)


def full(queues: list[QueueDemand], flavor: str) -> bool:
    """The cohort's queues, each at its busiest (or tonight's demand, if larger), want all its GPUs of the flavor."""
    holders = [p for p in queues if flavor in p.nominal]
    return sum(max(p.demand.get(flavor, 0.0), p.busiest.get(flavor, 0.0)) for p in holders) >= sum(
        p.nominal[flavor] for p in holders)


def allowed(queues: list[QueueDemand], q: QueueDemand, flavor: str, new: int, limits: QuotaLimits) -> bool:
    """Every per-cell rule of the model, written out independently of it."""
    before, guaranteed = q.nominal[flavor], q.guaranteed.get(flavor, 0)
    delta, recent = new - before, q.recent_change.get(flavor, 0)
    gained, lost = q.moved_24h.get(flavor, (0, 0))  # a step is a night's: what plans of the last 22 h moved is spent,
    step = step_of(max(0, before - gained + lost), guaranteed, limits)  # and a share of the quota before them
    owed = math.floor(share_of(queues, q, flavor) + 1e-9)
    if new < min(before, guaranteed):  # never below a guarantee it has, never lower while below it
        return False
    if delta > 0 and delta + gained > step and new + gained > min(wanted(q, flavor), owed):  # past it only to its share
        return False
    if delta < 0 and lost - delta > step and new - lost < owed:  # ... or down to it
        return False
    if delta and abs(delta) < limits.hysteresis_gpus:
        return False
    if recent < 0 < delta and new > max(before, wanted(q, flavor)):  # no reversal past the demand
        return False
    if recent > 0 > delta and new < min(before, wanted(q, flavor), owed):  # ... or past demand and share
        return False
    if q.reclaims and not limits.reclaiming_lends and new < min(before, owed):  # lends nothing below its share
        return False
    floor = limits.reclaiming_keep_gpus if q.reclaims else limits.no_reclaim_keep_gpus
    if new < min(before, owed, floor):  # never lends its last GPUs
        return False
    new_queue = q.history_seconds.get(flavor, math.inf) < limits.min_lend_history_s
    if new_queue and new < min(before, owed):  # too little history of its own: lends nothing below its share
        return False
    if delta < 0 and full(queues, flavor):  # keeps a margin over its busiest: wider where it cannot take back
        busiest = max(q.demand.get(flavor, 0.0), q.busiest.get(flavor, 0.0))
        factor = limits.reclaiming_keep_factor if q.reclaims else limits.no_reclaim_keep_factor
        if new < min(owed, math.ceil(factor * busiest - 1e-9)):
            return False
    return True


def check_constraints(queues: list[QueueDemand], limits: QuotaLimits, plan: QuotaPlan) -> None:
    new = after(plan)
    assert set(new) == {(q.name, f) for q in queues for f in q.nominal}
    for flavor in {f for q in queues for f in q.nominal}:  # conservation
        assert sum(new[(q.name, flavor)] for q in queues if flavor in q.nominal) == sum(
            q.nominal[flavor] for q in queues if flavor in q.nominal)
    gains = 0
    for q in queues:
        for flavor, before in q.nominal.items():
            assert allowed(queues, q, flavor, new[(q.name, flavor)], limits), (q, flavor, new[(q.name, flavor)])
            gains += max(0, new[(q.name, flavor)] - before)
    assert gains == plan.moved_gpus <= max(0, limits.max_total_moved_gpus - limits.moved_24h_gpus)  # a day's cap
    if all(q.guaranteed.get(f, 0) <= b for q in queues for f, b in q.nominal.items()):
        assert plan.shortfall_cost <= plan.shortfall_cost_before + 1e-6  # never worse than staying put
    assert plan.shortfall_cost == pytest.approx(fair_cost(queues, new), rel=1e-9, abs=1e-6)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_every_constraint_holds_on_random_inputs(instance: tuple[list[QueueDemand], QuotaLimits]) -> None:
    queues, limits = instance
    check_constraints(queues, limits, plan_quotas(queues, limits))


# --- the optimum equals brute force on small instances --------------------------------------------------

def brute_force(queues: list[QueueDemand], limits: QuotaLimits) -> tuple[int, float, int]:
    """(guarantee gap, shortfall cost, GPUs moved) of the lexicographically best assignment."""
    cells = [(q, f) for q in queues for f in q.nominal]
    ranges = []
    for q, f in cells:
        total = sum(p.nominal[f] for p in queues if f in p.nominal)
        ranges.append([v for v in range(0, total + 1) if allowed(queues, q, f, v, limits)])
    best: tuple[int, float, int] | None = None
    for values in itertools.product(*ranges):
        gains = sum(max(0, v - q.nominal[f]) for (q, f), v in zip(cells, values))
        if gains > max(0, limits.max_total_moved_gpus - limits.moved_24h_gpus):
            continue
        if any(sum(v for (q, f), v in zip(cells, values) if f == flavor)
               != sum(q.nominal[f] for q, f in cells if f == flavor) for flavor in {f for _, f in cells}):
            continue
        gap = sum(max(0, q.guaranteed.get(f, 0) - v) for (q, f), v in zip(cells, values))
        cost = fair_cost(queues, {(q.name, f): v for (q, f), v in zip(cells, values)})
        key = (gap, round(cost, 6), gains)
        best = key if best is None or key < best else best
    assert best is not None, "staying put is always feasible here"
    return best


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(max_queues=3, max_quota=7))
def test_the_objective_matches_a_brute_force_optimum(instance: tuple[list[QueueDemand], QuotaLimits]) -> None:
    queues, limits = instance
    plan = plan_quotas(queues, limits)
    gap, cost, moved = brute_force(queues, limits)
    new = after(plan)
    assert sum(max(0, q.guaranteed.get(f, 0) - new[(q.name, f)]) for q in queues for f in q.nominal) == gap
    assert plan.shortfall_cost == pytest.approx(cost, rel=1e-7, abs=1e-5)
    assert plan.moved_gpus == moved


# --- no flapping --------------------------------------------------------------------------------------

def next_night(queues: list[QueueDemand], plan: QuotaPlan) -> list[QueueDemand]:
    new = after(plan)
    return [replace(q, nominal={f: new[(q.name, f)] for f in q.nominal},
                    recent_change={f: new[(q.name, f)] - q.nominal[f] for f in q.nominal}) for q in queues]


def test_a_stable_demand_moves_nothing_on_the_second_night() -> None:
    queues = [QueueDemand("a", {"a100": 16}, {"a100": 10}), QueueDemand("b", {"a100": 8}, {"a100": 11}),
              QueueDemand("c", {"a100": 8}, {"a100": 8})]
    limits = QuotaLimits(max_step_gpus=8, max_step_percent=100, max_total_moved_gpus=32, hysteresis_gpus=1)
    first = plan_quotas(queues, limits)
    assert after(first) == {("a", "a100"): 13, ("b", "a100"): 11, ("c", "a100"): 8} and first.moved_gpus == 3
    second = plan_quotas(next_night(queues, first), limits)
    assert second.moved_gpus == 0 and all(c.before == c.after for c in second.changes)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(max_queues=4))
def test_later_nights_move_only_to_cut_shortfall_and_never_reverse(
        instance: tuple[list[QueueDemand], QuotaLimits]) -> None:
    queues, limits = instance
    plan = plan_quotas(queues, limits)
    for _ in range(3):
        queues = next_night(queues, plan)
        following = plan_quotas(queues, limits)
        check_constraints(queues, limits, following)  # includes: no move against last night's change past demand
        gap_before = sum(max(0, q.guaranteed.get(f, 0) - b) for q in queues for f, b in q.nominal.items())
        assert (following.moved_gpus == 0 or following.shortfall_cost < following.shortfall_cost_before - 1e-9
                or len(following.unmet_guarantees) < gap_before or gap_before > 0)
        plan = following


def test_a_second_run_the_same_day_moves_only_what_is_left_of_the_days_step() -> None:
    queues = [QueueDemand("a", {"a100": 16}, {"a100": 3}), QueueDemand("b", {"a100": 4}, {"a100": 20})]
    limits = QuotaLimits(max_step_gpus=8, max_step_percent=100, max_total_moved_gpus=32, hysteresis_gpus=1)
    first = plan_quotas(queues, limits)
    assert after(first) == {("a", "a100"): 10, ("b", "a100"): 10}  # b back to its share (10 of 20) at once
    assert first.changes[1].reason.endswith("back to its weighted share of 10 in one plan (beyond the step of 4 "
                                            "(100% of 4))")
    # The same day: b gained 6 and a lost 6. b's step is 100 % of its 4 before the day, all spent (and more:
    # the return to its share), so it gains nothing, however far below its demand; without the day it would
    # take another step of 8 from its new 10.
    again = [replace(q, nominal={"a100": after(first)[(q.name, "a100")]}, moved_24h={"a100": m})
             for q, m in zip(queues, [(0, 6), (6, 0)], strict=True)]
    second = plan_quotas(again, limits)
    assert second.moved_gpus == 0
    assert second.changes[1].reason.endswith("the step of 4 (100% of 4, 6 of it gained in the last 22 hours) "
                                             "allows no gain")
    # The cohort's cap is a day's too: 30 of 32 moved already leaves 2, which b takes.
    room = [replace(q, moved_24h={}) for q in again]
    capped = plan_quotas(room, replace(limits, moved_24h_gpus=30))
    assert capped.moved_gpus == 2 and after(capped)[("b", "a100")] == 12
    assert "limited by max_total_moved_gpus=32 a night, 30 of it moved in the last 22 hours" in capped.changes[1].reason


def test_a_tie_in_shortfall_is_broken_by_moving_less() -> None:
    # Both donors are above demand; the cheapest plan moves exactly the shortfall, not more.
    queues = [QueueDemand("a", {"a100": 10}, {"a100": 2}), QueueDemand("b", {"a100": 10}, {"a100": 2}),
              QueueDemand("c", {"a100": 10}, {"a100": 13})]
    plan = plan_quotas(queues, QuotaLimits(8, 100, 32, 1))
    assert plan.moved_gpus == 3 and plan.weighted_shortfall == 0.0


def test_hysteresis_forbids_a_small_move_but_allows_a_large_one() -> None:
    queues = [QueueDemand("a", {"a100": 10}, {"a100": 0}), QueueDemand("b", {"a100": 10}, {"a100": 11})]
    assert plan_quotas(queues, QuotaLimits(8, 100, 32, 2)).moved_gpus == 2  # +1 is too small: +2 (shortfall 0)
    assert plan_quotas(queues, QuotaLimits(8, 100, 1, 2)).moved_gpus == 0  # the cap allows 1, below hysteresis


def test_when_every_queue_is_short_the_gpus_are_shared_instead_of_frozen() -> None:
    # Both want 20 of 14 GPUs: each one's share is 7, and a GPU short of a share costs more than any beyond it.
    # b (4) is raised to its share from a (10); past it, a and b are equally short. A linear cost moves nothing.
    queues = [QueueDemand("a", {"a100": 10}, {"a100": 20}), QueueDemand("b", {"a100": 4}, {"a100": 20})]
    plan = plan_quotas(queues, QuotaLimits(8, 100, 32, 1))
    assert after(plan) == {("a", "a100"): 7, ("b", "a100"): 7}
    assert plan.notes == ["a100: every queue wants at least its share (40 GPUs wanted of 14): moving quota can only "
                          "bring each queue toward its share; more GPUs can (see the deadline plan's extra GPUs, "
                          "gpuaas_extra_gpus_needed)"]
    assert plan.overloaded == ["a100"]


def test_weights_decide_who_gets_the_scarce_quota() -> None:
    # Shares of 20: heavy (weight 2) 13.3, light 6.7. 13/7 and 14/6 leave the same owed shortfall (2 x 1/3 or
    # 1 x 2/3 of a GPU, weighted); beyond the shares heavy's 6.7 and light's 13.3 pieces cost 143.3 at 13/7
    # and 133.3 at 14/6 (worked piece by piece), so heavy 14, light 6.
    queues = [QueueDemand("heavy", {"a100": 10}, {"a100": 20}, weight=2.0),
              QueueDemand("light", {"a100": 10}, {"a100": 20})]
    plan = plan_quotas(queues, QuotaLimits(8, 100, 32, 1))
    assert after(plan) == {("heavy", "a100"): 14, ("light", "a100"): 6}
    assert "another queue is shorter for its weight" in plan.changes[1].reason


def test_a_queue_that_asks_for_everything_cannot_take_a_share_in_use() -> None:
    # greedy wants the whole cohort; modest uses its 10 (its share) exactly: nothing moves.
    queues = [QueueDemand("greedy", {"a100": 10}, {"a100": 20}), QueueDemand("modest", {"a100": 10}, {"a100": 10})]
    assert plan_quotas(queues, QuotaLimits(8, 100, 32, 1)).moved_gpus == 0
    assert plan_quotas(queues, QuotaLimits(8, 100, 32, 1)).notes[0].startswith("a100: every queue wants")
    # modest needs 6 of its 10: 4 are lent.
    queues[1] = replace(queues[1], demand={"a100": 6})
    assert after(plan_quotas(queues, QuotaLimits(8, 100, 32, 1)))[("greedy", "a100")] == 14


def test_a_queue_at_zero_regains_its_share_at_once_and_more_by_the_minimum_step() -> None:
    # 4 GPUs, shares of 2. a (at 0) wants 8, b (at 4) wants none. 50% of 0 is a step of 0: only the share
    # comes back (2); with min_step_gpus=3 a may take 3, and b may give 3 (its step: max(3, 50% of 4)).
    queues = [QueueDemand("idle-then-busy", {"a100": 0}, {"a100": 8}), QueueDemand("b", {"a100": 4}, {"a100": 0})]
    assert after(plan_quotas(queues, QuotaLimits(8, 50, 32, 1)))[("idle-then-busy", "a100")] == 2
    plan = plan_quotas(queues, QuotaLimits(8, 50, 32, 1, min_step_gpus=3))
    assert after(plan)[("idle-then-busy", "a100")] == 3
    assert "the step of 3 (min_step_gpus)" in plan.changes[0].reason


def test_a_guarantee_out_of_reach_is_reached_step_by_step_while_the_cohort_is_planned() -> None:
    # a is owed 12 but has 4: its step is 50% of 12 = 6 tonight. b gives 8 (its step): 6 to a, 2 to c
    # (c's step is 4). Night 2: a +2 reaches 12; b (8, step 4) gives 4: 2 to a, 2 to c.
    queues = [QueueDemand("a", {"a100": 4}, {}, guaranteed={"a100": 12}), QueueDemand("b", {"a100": 16}, {}),
              QueueDemand("c", {"a100": 8}, {"a100": 14})]
    first = plan_quotas(queues, EXAMPLE_LIMITS)
    assert after(first) == {("a", "a100"): 10, ("b", "a100"): 8, ("c", "a100"): 10}
    assert first.unmet_guarantees == ["a a100: 10 of guaranteed 12 (+6 a run at most)"]
    assert "not reached yet" in first.changes[0].reason
    second = plan_quotas(next_night(queues, first), EXAMPLE_LIMITS)
    assert after(second) == {("a", "a100"): 12, ("b", "a100"): 4, ("c", "a100"): 12}
    assert second.unmet_guarantees == []


def test_a_team_back_from_a_holiday_recovers_its_share_the_first_night() -> None:
    # Three teams of 16 GPUs; the policy's defaults (step 8 or 50%, at least 2; no reversal over 7 nights).
    # A is away 14 nights while B and C want 24: A goes 16 -> 8 -> 4 -> 2 -> 0. When A wants 16 again, all
    # three are short (64 wanted, 48 there), and A's demand is within its share (16 of 48): owed before B's
    # and C's extra, and not limited by the step (B and C, above their shares, give down to them): 16 at once.
    limits = QuotaLimits(8, 50, 32, 1, min_step_gpus=2)
    quotas = {"a": 16, "b": 16, "c": 16}
    moves: dict[str, list[int]] = {q: [] for q in quotas}
    a_quota: list[int] = []
    for night in range(14 + 3):
        want_a = 0.0 if night < 14 else 16.0
        queues = [QueueDemand(q, {"a100": quotas[q]}, {"a100": want_a if q == "a" else 24.0},
                              recent_change={"a100": sum(moves[q][-7:])} if moves[q] else {}) for q in quotas]
        plan = plan_quotas(queues, limits)
        for c in plan.changes:
            moves[c.queue].append(c.delta)
            quotas[c.queue] = c.after
        a_quota.append(quotas["a"])
    assert a_quota[:5] == [8, 4, 2, 0, 0]
    assert a_quota[14:] == [16, 16, 16] and quotas == {"a": 16, "b": 16, "c": 16}


@pytest.mark.parametrize(("busiest_a", "busiest_b", "a_after"), [(4.0, 40.0, 16), (1.0, 40.0, 12), (1.0, 20.0, 8)])
def test_a_queue_that_cannot_reclaim_keeps_a_margin_over_its_busiest_in_a_full_cohort(
        busiest_a: float, busiest_b: float, a_after: int) -> None:
    # A (16 GPUs, quiet, reclaimWithinCohort: Never) and B (16, wants 24 tonight). Where B at its busiest of the
    # window wanted 40, the cohort (32) was full: A keeps 12 times its busiest, up to its share (busiest 4: all
    # 16; busiest 1: 12, and lends 4). Where B's busiest was 20 (never full), A lends the 8 B wants.
    queues = [QueueDemand("a", {"a100": 16}, {"a100": busiest_a}, reclaims=False, busiest={"a100": busiest_a}),
              QueueDemand("b", {"a100": 16}, {"a100": 24.0}, busiest={"a100": busiest_b})]
    limits = QuotaLimits(16, 100, 32, 1, no_reclaim_keep_factor=12)
    plan = plan_quotas(queues, limits)
    assert after(plan)[("a", "a100")] == a_after
    assert any("a cannot reclaim" in note for note in plan.notes) == (busiest_b == 40.0)
    reclaiming = plan_quotas([replace(queues[0], reclaims=True), queues[1]], limits)
    assert after(reclaiming)[("a", "a100")] == 8  # a queue that can reclaim lends what it does not use
    keeping = plan_quotas([replace(queues[0], reclaims=True), queues[1]], replace(limits, reclaiming_lends=False))
    assert after(keeping)[("a", "a100")] == 16 and keeping.moved_gpus == 0  # ... unless told not to lend



@pytest.mark.parametrize(("b_wants", "busiest_b", "busiest_a", "factor", "floor", "a_after", "note"), [
    (32.0, 40.0, 3.0, 4.0, 2, 12, "h100: the cohort was full at its busiest this window; a lends only beyond "
                                 "reclaiming_keep_factor times the busiest demand"),
    (32.0, 40.0, 0.0, 4.0, 2, 2, "a keeps reclaiming_keep_gpus of its share"),
    (32.0, 40.0, 3.0, 0.0, 0, 0, None),
    (28.0, 20.0, 3.0, 4.0, 2, 4, None),
])
def test_a_queue_that_can_reclaim_lends_keeping_its_own_margins(
        b_wants: float, busiest_b: float, busiest_a: float, factor: float, floor: int, a_after: int,
        note: str | None) -> None:
    # A (16 GPUs, reclaims, uses nothing tonight) and B (16, wants 32). Where B's busiest (40) filled the cohort, A
    # keeps reclaiming_keep_factor times its busiest (4 x 3 = 12), and always reclaiming_keep_gpus (its busiest 0:
    # the factor keeps nothing, the floor 2); with neither it lends all 16. Where the cohort was never full (B
    # wants 28, its busiest 20, A's 3), A lends the 12 B wants and keeps 4: no margin held it back.
    queues = [QueueDemand("a", {"h100": 16}, {"h100": 0.0}, busiest={"h100": busiest_a}),
              QueueDemand("b", {"h100": 16}, {"h100": b_wants}, busiest={"h100": busiest_b})]
    plan = plan_quotas(queues, QuotaLimits(16, 100, 32, 1, reclaiming_keep_factor=factor, reclaiming_keep_gpus=floor))
    assert after(plan)[("a", "h100")] == a_after
    assert plan.notes == ([] if note is None else [note])



def test_both_margins_held_in_one_flavor_are_one_note() -> None:
    # A cannot reclaim (keeps 12 x 1), C can and lends (keeps 4 x 3): B, wanting 48 of the 48 GPUs, gets the rest.
    queues = [QueueDemand("a", {"h100": 16}, {"h100": 0.0}, reclaims=False, busiest={"h100": 1.0}),
              QueueDemand("b", {"h100": 16}, {"h100": 48.0}, busiest={"h100": 48.0}),
              QueueDemand("c", {"h100": 16}, {"h100": 0.0}, busiest={"h100": 3.0})]
    plan = plan_quotas(queues, QuotaLimits(32, 100, 32, 1, reclaiming_keep_factor=4, no_reclaim_keep_factor=12))
    assert after(plan) == {("a", "h100"): 12, ("b", "h100"): 24, ("c", "h100"): 12}
    assert plan.notes == [
        "h100: the cohort was full at its busiest this window; a cannot reclaim what it lends (no cohort, or "
        "reclaimWithinCohort: Never) and lends only beyond no_reclaim_keep_factor times the busiest demand; c lends "
        "only beyond reclaiming_keep_factor times the busiest demand"]


@pytest.mark.parametrize(("a_nominal", "a_weight", "keep", "a_after"),
                         [(3, 1.0, 2, 2), (3, 1.0, 0, 0), (1, 1.0, 2, 1), (6, 1.0, 4, 4), (3, 1 / 15, 2, 1)])
def test_a_queue_that_cannot_reclaim_keeps_its_last_gpus_however_quiet(
        a_nominal: int, a_weight: float, keep: int, a_after: int) -> None:
    # A (cannot reclaim) has used nothing all window; B wants 40 more of the 16 GPUs. A's busiest is 0, so the
    # keep factor keeps nothing: without a floor (keep 0) it lends all. With no_reclaim_keep_gpus it keeps that
    # many (a queue at 1 GPU: its one GPU; a share of 1 GPU, weight 1/15: that one), so a burst after a silence
    # longer than the window starts at once. A queue that can reclaim lends all: it preempts to get it back.
    queues = [QueueDemand("a", {"a100": a_nominal}, {"a100": 0.0}, reclaims=False, busiest={"a100": 0.0},
                          weight=a_weight),
              QueueDemand("b", {"a100": 16 - a_nominal}, {"a100": 48.0}, reclaims=False, busiest={"a100": 48.0})]
    limits = QuotaLimits(16, 100, 32, 1, no_reclaim_keep_gpus=keep)
    plan = plan_quotas(queues, limits)
    assert after(plan)[("a", "a100")] == a_after
    held = keep > 0  # the floor stopped the lending (at 1 GPU, a 1-GPU share: all a holds or is owed)
    note = "a cannot reclaim what it lends: it keeps no_reclaim_keep_gpus of its share"
    assert (note in plan.notes) == held
    [a] = [c for c in plan.changes if c.queue == "a"]
    assert a.reason.endswith("; it cannot reclaim what it lends: it keeps no_reclaim_keep_gpus of its share") == held
    assert after(plan_quotas([replace(queues[0], reclaims=True), queues[1]], limits))[("a", "a100")] == 0


def test_a_queue_with_too_little_history_of_its_own_lends_nothing_below_its_share() -> None:
    # A (16 GPUs) was created yesterday and has not started its work; B (16) wants 24. With a day of A's own
    # history, where two are asked for, A keeps its share and the note names it; with two days it lends 8.
    # Above its share it still gives back: created at 24 of 32, it returns 8 to B on its first night.
    def queues(a_nominal: int, seconds: float) -> list[QueueDemand]:
        return [QueueDemand("a", {"a100": a_nominal}, {"a100": 0.0}, history_seconds={"a100": seconds}),
                QueueDemand("b", {"a100": 32 - a_nominal}, {"a100": 24.0}, history_seconds={"a100": 30 * 86400.0})]
    limits = QuotaLimits(16, 100, 32, 1, min_lend_history_s=2 * 86400)
    young = plan_quotas(queues(16, 86400.0), limits)
    assert after(young)[("a", "a100")] == 16 and young.moved_gpus == 0
    assert "a has less than min_history_days of its own history: it lends nothing below its share until it has that much" in (
        young.notes)
    assert after(plan_quotas(queues(16, 2 * 86400.0), limits))[("a", "a100")] == 8
    assert after(plan_quotas(queues(16, 86400.0), replace(limits, min_lend_history_s=0.0)))[("a", "a100")] == 8
    assert after(plan_quotas(queues(24, 3600.0), limits))[("a", "a100")] == 16
    twins = [QueueDemand(name, {"a100": 16}, {"a100": 0.0}, history_seconds={"a100": 3600.0}) for name in "ac"]
    both = plan_quotas([*twins, QueueDemand("b", {"a100": 16}, {"a100": 40.0})], limits)
    assert both.moved_gpus == 0 and both.notes == [
        "a, c have less than min_history_days of their own history: they lend nothing below their share until they "
        "have that much"]


def test_a_queue_that_can_reclaim_and_may_not_lend_still_gives_back_what_it_holds_above_its_share() -> None:
    # A (24 of a 32-GPU cohort, 8 above its share, quiet) and B (8, wants 16). A gives back down to its share,
    # not below it, although it uses only 2.
    queues = [QueueDemand("a", {"a100": 24}, {"a100": 2.0}), QueueDemand("b", {"a100": 8}, {"a100": 16.0})]
    plan = plan_quotas(queues, QuotaLimits(16, 100, 32, 1, reclaiming_lends=False))
    assert after(plan) == {("a", "a100"): 16, ("b", "a100"): 16}


def test_quota_lent_to_a_queue_that_cannot_reclaim_still_goes_back_in_a_full_cohort() -> None:
    # B (cannot reclaim) holds 24 of a 32-GPU cohort, 8 above its share; A wants its 16 back. Full: B gives back
    # down to its share, not below it.
    queues = [QueueDemand("a", {"a100": 8}, {"a100": 16.0}, reclaims=False),
              QueueDemand("b", {"a100": 24}, {"a100": 24.0}, reclaims=False)]
    plan = plan_quotas(queues, QuotaLimits(16, 100, 32, 1))
    assert after(plan) == {("a", "a100"): 16, ("b", "a100"): 16}


# --- errors -------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("queues", "field", "words"), [
    ([QueueDemand("a", {"a100": 4}, {"a100": 1}, guaranteed={"a100": 4}),
      QueueDemand("b", {"a100": 4}, {"a100": 1}, guaranteed={"a100": 6})],
     "queues[0].guaranteed.a100, queues[1].guaranteed.a100", "sum to 10 GPUs of a100, above the cohort's 8"),
    ([QueueDemand("a", {"a100": 4}, {"h100": 1})], "queues[0].demand.h100", "no queue has nominal quota"),
    ([QueueDemand("a", {"a100": 4}, {}), QueueDemand("b", {"h100": 4}, {"a100": 1})],
     "queues[1].demand.a100", "queue 'b' has no nominal quota of flavor 'a100'"),
    ([QueueDemand("a", {"a100": 4}, {}), QueueDemand("a", {"a100": 4}, {})], "queues[1].name", "also queues[0]"),
    ([QueueDemand("a", {"a100": -1}, {})], "queues[0].nominal.a100", "from 0 to 10,000,000"),
    # Past 2**53 the solver's floats cannot hold a count to the GPU, and a cap could be broken by rounding.
    ([QueueDemand("a", {"a100": 10**26}, {})], "queues[0].nominal.a100", "from 0 to 10,000,000"),
    ([QueueDemand("a", {"a100": 8}, {"a100": 1e30})], "queues[0].demand.a100", "from 0 to 10,000,000"),
    ([QueueDemand("a", {"a100": 1}, {}, weight=0)], "queues[0].weight", "above 0"),
    ([QueueDemand("a", {"a100": 1}, {}, history_seconds={"a100": float("nan")})], "queues[0].history_seconds.a100",
     "number of seconds >= 0"),
    ([QueueDemand("a", {"a100": 1}, {}, history_seconds={"h100": 60.0})], "queues[0].history_seconds.h100",
     "no queue has nominal quota"),
], ids=["guarantees-above-capacity", "flavor-no-queue-has", "flavor-this-queue-lacks", "duplicate", "negative",
        "absurd-nominal", "absurd-demand", "zero-weight", "history-not-a-number", "history-of-no-flavor"])
def test_contradictory_input_names_the_field(queues: list[QueueDemand], field: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        plan_quotas(queues, EXAMPLE_LIMITS)
    assert info.value.field == field and words in str(info.value)


def test_a_solver_out_of_time_keeps_a_feasible_plan_and_says_so() -> None:
    """A nightly run on a big fleet must not fail because HiGHS needs longer than its budget: with no time at
    all, staying put (always feasible) is the plan, and the note names the pass that ran out."""
    from gpuaas.policies.quotas._milp import solve_lexicographic
    from gpuaas.policies.quotas.plan import _cells

    queues = [QueueDemand("a", {"a100": 10}, {"a100": 20}, guaranteed={"a100": 12}),
              QueueDemand("b", {"a100": 4}, {"a100": 20})]
    limits = QuotaLimits(8, 100, 32, 1)
    cells = _cells(queues, limits)
    solution = solve_lexicographic(cells, limits.hysteresis_gpus, limits.max_total_moved_gpus, time_limit=0.0)
    assert solution is not None
    assert solution.after == [10, 4]
    assert solution.notes == ["the solver found no plan for raising queues to their guarantees within 0 s: "
                              "kept the previous step's plan"]
    unhurried = solve_lexicographic(cells, limits.hysteresis_gpus, limits.max_total_moved_gpus)
    assert unhurried is not None and unhurried.notes == [] and unhurried.after != [10, 4]


def test_the_overloaded_note_says_a_move_helps_where_the_plan_makes_one() -> None:
    """Both queues want more than their share of 20, but one holds 2 of its 10: the plan moves 8 and the note must
    not call that useless; where both already hold their share, no move helps and the note says so."""
    from gpuaas.policies.quotas import QueueDemand, QuotaLimits, plan_quotas

    limits = QuotaLimits(max_step_gpus=8, max_step_percent=50, max_total_moved_gpus=32, hysteresis_gpus=1)
    uneven = plan_quotas([QueueDemand("a", {"a100": 2}, {"a100": 12}), QueueDemand("b", {"a100": 18}, {"a100": 12})],
                         limits)
    assert uneven.moved_gpus == 8 and uneven.overloaded == ["a100"]
    [note] = [n for n in uneven.notes if n.startswith("a100: every queue wants")]
    assert "moving quota can only bring each queue toward its share" in note and "cannot help" not in note
    even = plan_quotas([QueueDemand("a", {"a100": 10}, {"a100": 12}), QueueDemand("b", {"a100": 10}, {"a100": 12})],
                       limits)
    assert even.moved_gpus == 0 and any("moving quota cannot help" in n for n in even.notes)


def test_weights_a_million_apart_keep_a_plan_instead_of_failing_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Weights at the policy's bounds (1e6 and 1e-6) put owed pieces near 1e20 in the model, a cost HiGHS takes
    for infinite; scaled below it, the model solves: a, far below its share, is raised toward it up to the cap.
    Where the solver still gives up on a pass, the plan of the step before stands (here: staying put) and says
    so, as after a time-out."""
    from scipy.optimize import OptimizeResult

    from gpuaas.policies.quotas import _milp

    limits = QuotaLimits(max_step_gpus=8, max_step_percent=50, max_total_moved_gpus=32, hysteresis_gpus=1)
    queues = [QueueDemand("a", {"f": 500}, {"f": 9000}, weight=1_000_000),
              QueueDemand("b", {"f": 6000}, {"f": 6500}, weight=0.000001)]
    plan = plan_quotas(queues, limits)
    assert after(plan) == {("a", "f"): 532, ("b", "f"): 5968}
    assert [n for n in plan.notes if n.startswith("the solver")] == []
    monkeypatch.setattr(_milp, "milp", lambda *args, **kwargs: OptimizeResult(
        status=4, x=None, fun=None, message="Solve error"))
    stuck = plan_quotas(queues, limits)
    assert after(stuck) == {("a", "f"): 500, ("b", "f"): 6000}
    assert [n for n in stuck.notes if n.startswith("the solver")] == [
        "the solver could not settle the smallest shortfall (HiGHS: Solve error): kept the previous step's plan"]


def test_a_flavors_plan_does_not_depend_on_another_flavors_costs_while_the_cap_leaves_room() -> None:
    """Weights a million apart make one flavor's cost near 1e19; a tolerance relative to the whole model's cost
    then swallowed the other flavor's plan, which moved nothing. Each flavor now gets its own model."""
    limits = QuotaLimits(max_step_gpus=8, max_step_percent=50, max_total_moved_gpus=100_000, hysteresis_gpus=1)
    weights = {"q0": 1e-6, "q1": 1e-6, "q2": 1, "q3": 1e3}
    h100 = {"q0": (50, 10000), "q1": (0, 200), "q2": (100, 10000)}

    def h100_plan(a100: dict[str, tuple[int, int]]) -> dict[str, int]:
        fleet = [QueueDemand(n, {f: v[n][0] for f, v in (("a100", a100), ("h100", h100)) if n in v},
                             {f: v[n][1] for f, v in (("a100", a100), ("h100", h100)) if n in v}, weight=w)
                 for n, w in weights.items()]
        return {c.queue: c.after for c in plan_quotas(fleet, limits).changes if c.flavor == "h100"}

    calm = h100_plan({"q0": (100, 100), "q1": (1000, 1000), "q2": (100, 100), "q3": (50, 50)})
    short = h100_plan({"q0": (100, 10000), "q1": (1000, 10000), "q2": (100, 0), "q3": (50, 10000)})
    assert calm != {"q0": 50, "q1": 0, "q2": 100}  # the h100 plan moves quota on its own
    assert short == calm
