"""``plan_quotas``: every constraint on random inputs, the optimum against brute force, no flapping,
the worked example by hand, and the errors for contradictory or infeasible input. Pure."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuaas.errors import ConfigError
from gpuaas.policies.quotas import QueueDemand, QuotaLimits, QuotaPlan, QuotaPlanInfeasible, plan_quotas

EXAMPLE_LIMITS = QuotaLimits(max_step_gpus=8, max_step_percent=50, max_total_moved_gpus=32, hysteresis_gpus=1)
TEAM_A = QueueDemand("team-a", {"a100": 16}, {"a100": 3}, guaranteed={"a100": 4}, weight=1)
TEAM_B = QueueDemand("team-b", {"a100": 8}, {"a100": 20}, recent_change={"a100": -2})
FLAVORS = ("a100", "h100")


def after(plan: QuotaPlan) -> dict[tuple[str, str], int]:
    return {(c.queue, c.flavor): c.after for c in plan.changes}


def step_of(before: int, limits: QuotaLimits) -> int:
    return min(limits.max_step_gpus, int(before * limits.max_step_percent / 100 + 1e-9))


# --- the worked example, computed by hand ------------------------------------------------------------

def test_the_worked_example_no_reversal_keeps_team_b_where_it_is() -> None:
    # team-b lost 2 GPUs recently: gaining now would reverse that, and only a gain can cut its shortfall.
    plan = plan_quotas([TEAM_A, TEAM_B], EXAMPLE_LIMITS)
    assert after(plan) == {("team-a", "a100"): 16, ("team-b", "a100"): 8}
    assert plan.moved_gpus == 0
    assert plan.shortfall == {"team-a": {"a100": 0.0}, "team-b": {"a100": 12.0}}
    assert plan.weighted_shortfall == 12.0
    assert "no reversal" in plan.changes[1].reason and "short 12" in plan.changes[1].reason


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
    queues = []
    for i in range(n):
        nominal = {f: draw(st.integers(0, max_quota)) for f in flavors}
        queues.append(QueueDemand(
            name=f"q{i}",
            nominal=nominal,
            demand={f: draw(st.integers(0, 2 * max_quota)) / draw(st.sampled_from([1, 2])) for f in flavors},
            guaranteed={f: draw(st.integers(0, nominal[f])) for f in flavors if draw(st.booleans())},
            weight=draw(st.sampled_from([0.5, 1.0, 2.0, 3.0])),
            recent_change={f: draw(st.integers(-4, 4)) for f in flavors if draw(st.booleans())},
        ))
    limits = QuotaLimits(
        max_step_gpus=draw(st.integers(0, 10)),
        max_step_percent=draw(st.sampled_from([0, 10, 25, 50, 100, 200])),
        max_total_moved_gpus=draw(st.integers(0, 30)),
        hysteresis_gpus=draw(st.integers(0, 4)),
    )
    return queues, limits


def check_constraints(queues: list[QueueDemand], limits: QuotaLimits, plan: QuotaPlan) -> None:
    new = after(plan)
    assert set(new) == {(q.name, f) for q in queues for f in q.nominal}
    for flavor in {f for q in queues for f in q.nominal}:  # conservation
        assert sum(new[(q.name, flavor)] for q in queues if flavor in q.nominal) == sum(
            q.nominal[flavor] for q in queues if flavor in q.nominal)
    gains = 0
    for q in queues:
        for flavor, before in q.nominal.items():
            delta = new[(q.name, flavor)] - before
            gains += max(0, delta)
            assert new[(q.name, flavor)] >= q.guaranteed.get(flavor, 0)  # guarantees
            assert abs(delta) <= step_of(before, limits)  # steps, absolute and relative
            assert delta == 0 or abs(delta) >= limits.hysteresis_gpus  # hysteresis
            recent = q.recent_change.get(flavor, 0)
            assert delta * recent >= 0, (q.name, flavor, delta, recent)  # no reversal
    assert gains == plan.moved_gpus <= limits.max_total_moved_gpus  # total cap
    assert plan.weighted_shortfall <= plan.weighted_shortfall_before + 1e-9  # never worse than staying put


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_every_constraint_holds_on_random_inputs(instance: tuple[list[QueueDemand], QuotaLimits]) -> None:
    queues, limits = instance
    check_constraints(queues, limits, plan_quotas(queues, limits))


# --- the optimum equals brute force on small instances --------------------------------------------------

def brute_force(queues: list[QueueDemand], limits: QuotaLimits) -> tuple[float, int]:
    cells = [(q, f) for q in queues for f in q.nominal]
    ranges = []
    for q, f in cells:
        before, step = q.nominal[f], step_of(q.nominal[f], limits)
        ranges.append(range(max(0, before - step), before + step + 1))
    best: tuple[float, int] | None = None
    for values in itertools.product(*ranges):
        ok = True
        gains = 0
        for (q, f), v in zip(cells, values):
            delta = v - q.nominal[f]
            recent = q.recent_change.get(f, 0)
            if v < q.guaranteed.get(f, 0) or (delta and abs(delta) < limits.hysteresis_gpus) or delta * recent < 0:
                ok = False
                break
            gains += max(0, delta)
        if not ok or gains > limits.max_total_moved_gpus:
            continue
        if any(sum(v for (q, f), v in zip(cells, values) if f == flavor)
               != sum(q.nominal[f] for q, f in cells if f == flavor) for flavor in {f for _, f in cells}):
            continue
        shortfall = sum(q.weight * max(0.0, q.demand.get(f, 0.0) - v) for (q, f), v in zip(cells, values))
        key = (round(shortfall, 9), gains)
        best = key if best is None or key < best else best
    assert best is not None, "staying put is always feasible here"
    return best


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(max_queues=3, max_quota=7))
def test_the_objective_matches_a_brute_force_optimum(instance: tuple[list[QueueDemand], QuotaLimits]) -> None:
    queues, limits = instance
    plan = plan_quotas(queues, limits)
    shortfall, moved = brute_force(queues, limits)
    assert plan.weighted_shortfall == pytest.approx(shortfall, abs=1e-6)
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
        check_constraints(queues, limits, following)  # includes: no move against last night's change
        assert following.moved_gpus == 0 or following.weighted_shortfall < plan.weighted_shortfall - 1e-9
        plan = following


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


def test_weights_decide_who_gets_the_scarce_quota() -> None:
    queues = [QueueDemand("donor", {"a100": 8}, {"a100": 0}), QueueDemand("light", {"a100": 8}, {"a100": 12}),
              QueueDemand("heavy", {"a100": 8}, {"a100": 12}, weight=2.0)]
    plan = plan_quotas(queues, QuotaLimits(8, 100, 4, 1))
    assert after(plan)[("heavy", "a100")] == 12 and after(plan)[("light", "a100")] == 8
    assert "max_total_moved_gpus=4" in plan.changes[1].reason


# --- errors -------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("queues", "field", "words"), [
    ([QueueDemand("a", {"a100": 4}, {"a100": 1}, guaranteed={"a100": 4}),
      QueueDemand("b", {"a100": 4}, {"a100": 1}, guaranteed={"a100": 6})],
     "queues[0].guaranteed.a100, queues[1].guaranteed.a100", "sum to 10 GPUs of a100, above the cohort's 8"),
    ([QueueDemand("a", {"a100": 4}, {"h100": 1})], "queues[0].demand.h100", "no queue has nominal quota"),
    ([QueueDemand("a", {"a100": 4}, {}), QueueDemand("b", {"h100": 4}, {"a100": 1})],
     "queues[1].demand.a100", "queue 'b' has no nominal quota of flavor 'a100'"),
    ([QueueDemand("a", {"a100": 4}, {}), QueueDemand("a", {"a100": 4}, {})], "queues[1].name", "also queues[0]"),
    ([QueueDemand("a", {"a100": -1}, {})], "queues[0].nominal.a100", ">= 0"),
    ([QueueDemand("a", {"a100": 1}, {}, weight=0)], "queues[0].weight", "> 0"),
], ids=["guarantees-above-capacity", "flavor-no-queue-has", "flavor-this-queue-lacks", "duplicate", "negative",
        "zero-weight"])
def test_contradictory_input_names_the_field(queues: list[QueueDemand], field: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        plan_quotas(queues, EXAMPLE_LIMITS)
    assert info.value.field == field and words in str(info.value)


def test_an_infeasible_instance_is_explained() -> None:
    short_of_guarantee = [QueueDemand("a", {"a100": 4}, {}, guaranteed={"a100": 12}),
                          QueueDemand("b", {"a100": 16}, {})]
    with pytest.raises(QuotaPlanInfeasible, match=r"a a100: guaranteed 12 but nominal 4, and the step of 2 "
                                                  r"\(50% of 4\) allows \+2 per run; nothing applied"):
        plan_quotas(short_of_guarantee, EXAMPLE_LIMITS)
    donors_too_small = [QueueDemand("a", {"a100": 4}, {}, guaranteed={"a100": 6}),
                        QueueDemand("b", {"a100": 2}, {})]
    with pytest.raises(QuotaPlanInfeasible, match="a100: raising a to 6 needs 1 GPUs more than the other queues"):
        plan_quotas(donors_too_small, EXAMPLE_LIMITS)
