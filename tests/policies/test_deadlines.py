"""The deadline planner: hand-computed cases, then properties checked by brute force.

Cases: the field example (4 GPUs, 4 jobs x 2 GPUs due at twice their run time) and its variant
where two rounds no longer fit; running jobs that block; EDF, not file order; a hopeless job;
an instance where EDF list scheduling misses and the exact search meets every deadline; the
bound past which the answer is called a heuristic; bad input naming job and field.
Properties: every schedule is valid (running jobs past their estimate still hold their GPUs), the reported extra
GPUs are the brute-force minimum, the at-risk list is the brute-force fewest, and under a bound on the
exact method the answer stays valid and says when it is a heuristic.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gpuaas.errors import ConfigError
from gpuaas.policies.deadlines import (
    DeadlineJob,
    DeadlinePlan,
    Inexact,
    Item,
    MilpLimits,
    lower_bound_extra,
    plan_deadlines,
    serial_schedule,
)

GPU = "nvidia.com/gpu"


def job(name: str, gpus: int, duration: float, deadline: float | None, **kw: object) -> DeadlineJob:
    return DeadlineJob(name, gpus, duration, deadline, **kw)  # type: ignore[arg-type]


def starts(plan: DeadlinePlan) -> dict[str, float]:
    return {s.name: s.start for s in plan.schedule}


def test_field_example_two_then_two_on_four_gpus() -> None:
    plan = plan_deadlines({GPU: 4}, [job(n, 2, 60, 120) for n in "abcd"])
    assert plan.feasible and plan.exact and plan.extra_gpus == {GPU: 0}
    assert sorted(starts(plan).values()) == [0, 0, 60, 60]
    assert plan.missed == [] and plan.at_risk == []


def test_field_variant_where_two_rounds_no_longer_fit_needs_four_more() -> None:
    plan = plan_deadlines({GPU: 4}, [job(n, 2, 60, 100) for n in "abcd"])
    assert not plan.feasible and plan.exact
    assert plan.extra_gpus == {GPU: 4}
    assert sorted(starts(plan).values()) == [0, 0, 0, 0]
    assert len(plan.at_risk) == 2  # on 4 GPUs the best plan meets two of the four


def test_running_job_blocks_until_it_ends() -> None:
    running = job("r", 2, 30, None, running_for=10)  # holds 2 GPUs for 20 more minutes
    holds = plan_deadlines({GPU: 4}, [running, job("a", 4, 10, 30)])
    assert holds.feasible and starts(holds) == {"r": -10, "a": 20}
    tight = plan_deadlines({GPU: 4}, [running, job("a", 4, 10, 25)])
    assert tight.extra_gpus == {GPU: 2} and tight.exact  # a must start at 0, next to r
    assert starts(tight)["r"] == -10 and tight.at_risk == ["a"]


def test_running_job_past_its_estimate_holds_half_its_estimate_more_at_least_30_minutes() -> None:
    """Not assumed to end now: it still holds its GPUs. Expected 100 min, run 120: 50 more; expected 20, run 25: 30."""
    long, short = job("long", 2, 100, None, running_for=120), job("short", 2, 20, None, running_for=25)
    plan = plan_deadlines({GPU: 4}, [long, short, job("a", 2, 10, 40), job("b", 2, 10, 20)])
    by_name = {s.name: s for s in plan.schedule}
    assert (by_name["long"].start, by_name["long"].end) == (-120, 50)
    assert (by_name["short"].start, by_name["short"].end) == (-25, 30)
    assert by_name["long"].past_estimate and by_name["short"].past_estimate and not by_name["a"].past_estimate
    assert plan.at_risk == ["b"] and plan.extra_gpus == {GPU: 2}  # nothing is free before 30
    assert any("long has run 120 of its expected 100, past its estimate" in m for m in plan.messages)


def test_past_its_estimate_the_same_rule_in_seconds_as_the_cluster_plan() -> None:
    """In seconds (``minute=60``) the floor is 1,800 s: an hour's job run for two holds its GPUs 30 min more."""
    plan = plan_deadlines({GPU: 2}, [job("late", 2, 3600, 1000, running_for=7200)], minute=60)
    [late] = plan.schedule
    assert late.end == 1800 and late.past_estimate
    assert plan.missed == ["late"] and plan.missed_by == {"late": 800}


def test_a_running_job_with_no_run_time_has_no_end_whether_or_not_anything_has_a_deadline() -> None:
    """Running for 10 min, run time unknown (``duration=inf``): its end is unknown, never "now", and the same with
    or without deadlines next to it. Its 2 GPUs stay held: on 4 GPUs, 2-GPU work fits beside it; 4-GPU work
    waits for it, so its start is unknown too."""
    unknown = job("u", 2, math.inf, None, running_for=10)
    alone = plan_deadlines({GPU: 4}, [unknown])
    [u] = alone.schedule
    assert (u.start, u.end, u.running) == (-10, None, True)
    beside = plan_deadlines({GPU: 4}, [unknown, job("r", 2, 30, None, running_for=10), job("a", 2, 10, 40),
                                       job("fits", 2, 5, None), job("wide", 4, 5, None)])
    by_name = {s.name: s for s in beside.schedule}
    assert (by_name["u"].start, by_name["u"].end) == (-10, None)
    assert beside.feasible and beside.exact and by_name["a"].start == 20  # after r: u never gives its GPUs back
    assert (by_name["fits"].start, by_name["fits"].end) == (30, 35)
    assert (by_name["wide"].start, by_name["wide"].end) == (None, None)
    assert [s.name for s in beside.schedule][-1] == "wide"
    assert any(m.startswith("wide waits for GPUs that a running job with no run time holds") for m in beside.messages)


def test_a_running_job_with_no_run_time_and_a_deadline_is_missed_by_an_unknown_amount() -> None:
    plan = plan_deadlines({GPU: 4}, [job("u", 2, math.inf, 60, running_for=10), job("a", 4, 10, 30)])
    assert plan.missed == ["u"] and plan.missed_by == {}  # how late it ends is not known
    assert plan.at_risk == ["a"] and plan.extra_gpus == {GPU: 2}  # u's GPUs are never free for a
    assert {s.name: s.end for s in plan.schedule}["u"] is None


def test_missed_by_how_much() -> None:
    """Runs 60, due in 50: late by 10 at the earliest; running with 30 left, due in 20: late by 10 too."""
    plan = plan_deadlines({GPU: 3}, [job("h", 2, 60, 50), job("r", 1, 40, 20, running_for=10)])
    assert plan.missed_by == {"h": 10, "r": 10}


def test_earliest_deadline_first_not_file_order() -> None:
    plan = plan_deadlines({GPU: 2}, [job("late", 2, 60, 200), job("urgent", 2, 30, 30)])
    assert plan.feasible and plan.exact
    assert starts(plan) == {"urgent": 0, "late": 30}


def test_hopeless_job_is_missed_named_and_not_bought_for() -> None:
    plan = plan_deadlines({GPU: 2}, [job("h", 2, 60, 50), job("ok", 2, 30, 60)])
    assert plan.missed == ["h"] and plan.feasible and plan.extra_gpus == {GPU: 0}
    assert "h" not in starts(plan)
    assert any("h cannot meet its deadline" in m for m in plan.messages)


# cap 3: EDF puts the 3-GPU job x next (more work at the same deadline), which waits for w, and y
# then ends at 4 > 3; the exact plan runs w and y together first, then x.
EDF_MISSES = [job("w", 1, 30, 60), job("y", 1, 60, 90), job("x", 3, 30, 90)]


def test_edf_list_scheduling_misses_where_the_exact_search_meets_every_deadline() -> None:
    items = [Item(j.name, j.gpus, j.duration, j.deadline) for j in EDF_MISSES]
    edf = serial_schedule(items, 3, sorted(items, key=lambda i: (i.deadline, -i.gpus * i.duration)))
    assert edf["y"] + 60 > 90  # the premise: EDF alone misses y
    plan = plan_deadlines({GPU: 3}, EDF_MISSES)
    assert plan.feasible and plan.exact and plan.extra_gpus == {GPU: 0}
    assert starts(plan) == {"w": 0, "y": 0, "x": 60}
    assert plan.messages == [f"{GPU}: every deadline holds on 3 GPUs in this plan's order; earliest deadline first "
                             "would miss 1 deadline (y)"]  # not "0 at risk (); 0 more GPUs"


def test_when_the_fewest_gpus_search_stops_short_a_plan_meeting_every_deadline_still_needs_none(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The min-extra MILP out of time (EDF's heuristic then asks for a GPU) while the max-on-time MILP meets every
    deadline on today's GPUs: that plan stands, 0 extra, exact (nothing is below 0), and the note says the order."""
    import gpuaas.policies.deadlines.problem as problem

    monkeypatch.setattr(problem, "solve_min_extra", lambda *args, **kwargs: Inexact.time_limit)
    plan = plan_deadlines({GPU: 3}, EDF_MISSES)
    assert plan.feasible and plan.exact and plan.extra_gpus == {GPU: 0} and plan.at_risk == []
    assert_valid(plan, {GPU: 3}, EDF_MISSES)
    assert plan.messages == [f"{GPU}: every deadline holds on 3 GPUs in this plan's order; earliest deadline first "
                             "would miss 1 deadline (y)"]


def test_past_the_exact_bound_the_answer_is_called_a_heuristic() -> None:
    plan = plan_deadlines({GPU: 3}, EDF_MISSES, limits=MilpLimits(max_time_points=2))
    assert not plan.exact and any("heuristic" in m for m in plan.messages)
    assert plan.inexact == (Inexact.too_large,)
    assert plan.extra_gpus == {GPU: 1}  # an upper bound: the exact answer above is 0
    assert_valid(plan, {GPU: 3}, EDF_MISSES)


def test_resources_are_planned_apart() -> None:
    plan = plan_deadlines({"a100": 2, "h100": 4}, [job("x", 2, 10, 10, resource="a100"),
                                                   job("y", 2, 10, 10, resource="a100"),
                                                   job("z", 4, 10, 10, resource="h100")])
    assert plan.extra_gpus == {"a100": 2, "h100": 0}


def test_a_job_in_its_requeue_backoff_starts_no_sooner_and_one_it_makes_late_is_missed() -> None:
    """The field example (4 GPUs, 4 jobs of 2 GPUs for 60 min due in 120) with j0 kept out of the queue for 30 min:
    two others start now, j0 and the last at 60, and every deadline still holds. Kept out for 70 min, j0 ends at 130
    at the earliest: missed by 10 whatever the capacity, and no GPU is bought for it."""
    jobs = [job(f"j{i}", 2, 60, 120, earliest_start=30 if i == 0 else 0) for i in range(4)]
    plan = plan_deadlines({GPU: 4}, jobs)
    assert plan.feasible and plan.exact and starts(plan)["j0"] >= 30
    assert all(s.end <= 120 for s in plan.schedule)
    late = [job("j0", 2, 60, 120, earliest_start=70), *jobs[1:]]
    plan = plan_deadlines({GPU: 4}, late)
    assert plan.missed == ["j0"] and plan.missed_by == {"j0": pytest.approx(10)}
    assert plan.extra_gpus == {GPU: 0} and "j0" not in starts(plan)
    assert "from 70, its earliest start," in plan.messages[0]


def test_the_exact_search_may_start_a_job_at_its_earliest_start_and_nowhere_else() -> None:
    """One GPU, a job of 2 min due at 3, kept out until 1: the only start that meets the deadline is 1, which no
    sum of run times reaches. The exact model's time points include the earliest starts."""
    from gpuaas.policies.deadlines._milp import candidate_times, solve_max_on_time

    item = Item("a", 1, 2.0, 3.0, earliest_start=1.0)
    assert candidate_times([item], 100) == [0.0, 1.0]
    answer = solve_max_on_time([item], 1, MilpLimits())
    assert not isinstance(answer, Inexact) and answer.starts == {"a": 1.0}


@pytest.mark.parametrize(("jobs", "field", "words"), [
    ([job("a", -1, 1, 2)], "jobs[0] (a).gpus", "whole number"),
    ([job("a", 1.5, 1, 2)], "jobs[0] (a).gpus", "whole number"),  # type: ignore[arg-type]
    ([job("a", 1, 0, 2)], "jobs[0] (a).duration", "from 1e-06 to"),
    ([job("a", 10**26, 1, 2)], "jobs[0] (a).gpus", "from 1 to 10,000,000"),
    ([job("a", 1, 1, 1e26)], "jobs[0] (a).deadline", "at most 100,000,000"),
    ([job("a", 1, 1, 2, resource="amd.com/gpu")], "jobs[0] (a).resource", "not in capacity"),
    ([job("a", 5, 1, 2)], "jobs[0] (a).gpus", "more than the 4"),
    ([job("a", 1, 1, 2), job("a", 1, 1, 2)], "jobs[1] (a).name", "duplicate"),
    ([job("a", 3, 9, None, running_for=1), job("b", 3, 9, None, running_for=1)], "jobs[1] (b).gpus", "running"),
    ([job("a", 1, math.inf, 2)], "jobs[0] (a).duration", "from 1e-06 to"),  # only a running job may have no end
    ([job("a", 1, 1, 2, earliest_start=-1)], "jobs[0] (a).earliest_start", "0 to 100,000,000"),
    ([job("a", 1, 1, 2, earliest_start=math.nan)], "jobs[0] (a).earliest_start", "0 to 100,000,000"),
    ([job("a", 1, 9, None, running_for=1, earliest_start=2)], "jobs[0] (a).earliest_start", "only a pending one"),
], ids=["negative", "fractional", "zero-duration", "absurd-gpus", "absurd-deadline", "unknown-resource", "too-big",
        "duplicate", "over-held", "pending-without-end", "earliest-negative", "earliest-nan", "earliest-running"])
def test_bad_input_names_job_and_field(jobs: list[DeadlineJob], field: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words) as err:
        plan_deadlines({GPU: 4}, jobs)
    assert err.value.field == field


# ---- properties -----------------------------------------------------------------------------


def usage_ok(intervals: Sequence[tuple[float, float, int]], cap: int) -> bool:
    points = {s for s, _, _ in intervals} | {0.0}
    return all(sum(g for s, e, g in intervals if s <= t < e) <= cap for t in points)


def left(j: DeadlineJob) -> float:
    """How long a running job still holds its GPUs: past its estimate, half of it more, at least 30 (minutes)."""
    assert j.running_for is not None
    return j.duration - j.running_for if j.running_for < j.duration else max(j.duration / 2, 30)


def assert_valid(plan: DeadlinePlan, capacity: dict[str, int], jobs: Sequence[DeadlineJob]) -> None:
    by_name = {s.name: s for s in plan.schedule}
    for j in jobs:
        hopeless = j.running_for is None and j.deadline is not None and j.earliest_start + j.duration > j.deadline
        assert (j.name in by_name) != hopeless
        assert (j.name in plan.missed) == (j.name in plan.missed_by)
        if hopeless:
            assert plan.missed_by[j.name] == pytest.approx(j.earliest_start + j.duration - j.deadline)  # type: ignore[operator]
            continue
        s = by_name[j.name]
        if j.running_for is not None and j.deadline is not None:
            assert (j.name in plan.missed) == (left(j) > j.deadline)
        if j.running_for is not None:
            assert s.start == -j.running_for  # never moved
            assert s.end == pytest.approx(left(j)) and s.past_estimate == (j.running_for >= j.duration)
        else:
            assert s.start >= j.earliest_start and s.end - s.start == pytest.approx(j.duration) and not s.past_estimate
        if j.deadline is not None and j.name not in plan.missed:
            assert s.end <= j.deadline + 1e-9
    for r, cap in capacity.items():
        intervals = [(max(s.start, 0.0), s.end, s.gpus) for s in plan.schedule if s.resource == r]
        assert usage_ok(intervals, cap + plan.extra_gpus[r])


def brute_feasible(jobs: Sequence[DeadlineJob], cap: int) -> bool:
    """Every integer start time for every deadline job (integer data: integer starts suffice)."""
    fixed = [(0, left(j), j.gpus) for j in jobs if j.running_for is not None]
    due = [j for j in jobs if j.running_for is None and j.deadline is not None
           and j.earliest_start + j.duration <= j.deadline]
    ranges = [range(int(j.earliest_start), int(j.deadline - j.duration) + 1) for j in due]  # type: ignore[operator]
    for combo in itertools.product(*ranges):
        intervals = fixed + [(s, s + j.duration, j.gpus) for s, j in zip(combo, due, strict=True)]
        if usage_ok(intervals, cap):
            return True
    return False


@st.composite
def problems(draw: st.DrawFn) -> tuple[dict[str, int], list[DeadlineJob]]:
    resources = draw(st.lists(st.sampled_from(["a100", "h100"]), min_size=1, max_size=2, unique=True))
    capacity = {r: draw(st.integers(1, 4)) for r in resources}
    jobs: list[DeadlineJob] = []
    held = dict.fromkeys(resources, 0)
    for k in range(draw(st.integers(1, 5))):
        r = draw(st.sampled_from(resources))
        gpus = draw(st.integers(1, capacity[r]))
        duration = draw(st.integers(1, 3))
        deadline = draw(st.one_of(st.none(), st.integers(1, 6)))
        running_for, earliest = None, 0
        if held[r] + gpus <= capacity[r] and draw(st.booleans()) and draw(st.booleans()):
            running_for = draw(st.integers(0, duration + 1))  # from duration on: running past its estimate
            held[r] += gpus
        elif draw(st.booleans()):
            earliest = draw(st.integers(1, 3))  # in a requeue backoff
        jobs.append(DeadlineJob(f"j{k}", gpus, duration, deadline, r, running_for, earliest))
    return capacity, jobs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_schedule_valid_and_extra_gpus_minimal_by_brute_force(problem: tuple[dict[str, int], list[DeadlineJob]]) -> None:
    capacity, jobs = problem
    plan = plan_deadlines(capacity, jobs)
    assert plan.exact
    assert_valid(plan, capacity, jobs)
    for r, cap in capacity.items():
        mine = [j for j in jobs if j.resource == r]
        extra = plan.extra_gpus[r]
        assert brute_feasible(mine, cap + extra)
        if extra > 0:
            assert not brute_feasible(mine, cap + extra - 1)  # one GPU fewer: some deadline misses
    assert plan.feasible == (not any(plan.extra_gpus.values()))


def holdable(jobs: Sequence[DeadlineJob]) -> list[DeadlineJob]:
    return [j for j in jobs if j.running_for is None and j.deadline is not None
            and j.earliest_start + j.duration <= j.deadline]


def fewest_at_risk(jobs: Sequence[DeadlineJob], cap: int) -> int:
    """Brute force: the fewest holdable deadlines left out so that the rest all hold on ``cap`` (running jobs stay)."""
    due = holdable(jobs)
    running = [j for j in jobs if j.running_for is not None]
    for size in range(len(due), -1, -1):
        if any(brute_feasible(running + list(kept), cap) for kept in itertools.combinations(due, size)):
            return len(due) - size
    raise AssertionError("running jobs alone do not fit")  # the generator keeps them within capacity


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(), st.one_of(st.none(), st.integers(1, 6)))
def test_at_risk_is_the_fewest_by_brute_force_and_any_bound_stays_valid(
        problem: tuple[dict[str, int], list[DeadlineJob]], time_points: int | None) -> None:
    """The at-risk list: what is left holds on today's GPUs, and it is the fewest such when ``exact``. Under a
    bound on the exact method (``time_points``) the answer may be a heuristic, but it says so and stays valid:
    its schedule fits, its extra GPUs are enough, its at-risk list is never shorter than the fewest."""
    capacity, jobs = problem
    limits = MilpLimits(max_time_points=time_points) if time_points is not None else MilpLimits()
    plan = plan_deadlines(capacity, jobs, limits=limits)
    assert_valid(plan, capacity, jobs)
    if time_points is None:
        assert plan.exact
    for r, cap in capacity.items():
        mine = [j for j in jobs if j.resource == r]
        risky = [n for n in plan.at_risk if n in {j.name for j in mine}]
        kept = [j for j in mine if j.name not in risky]
        assert set(risky) <= {j.name for j in holdable(mine)}
        assert brute_feasible(kept, cap)
        assert brute_feasible(mine, cap + plan.extra_gpus[r])
        fewest = fewest_at_risk(mine, cap)
        assert len(risky) >= fewest
        if plan.exact:
            assert len(risky) == fewest
    assert plan.feasible == (not any(plan.extra_gpus.values()))


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
@example(({"a100": 1}, [job("b", 1, 1, 1, resource="a100"), job("c", 1, 2, 3, resource="a100")]))
@example(({"a100": 1}, [job("b", 1, 2, 3, resource="a100", earliest_start=1), job("c", 1, 1, 1, resource="a100")]))
def test_the_lower_bound_never_passes_the_brute_force_minimum(problem: tuple[dict[str, int], list[DeadlineJob]]) -> None:
    """The bound that proves an EDF answer optimal (energy, and the parts each job must run between its latest start
    and its earliest end from its earliest start) is never above the fewest extra GPUs that meet every deadline."""
    capacity, jobs = problem
    for r, cap in capacity.items():
        mine = [j for j in jobs if j.resource == r]
        items = [Item(j.name, j.gpus, left(j), None, fixed_start=0.0) if j.running_for is not None else
                 Item(j.name, j.gpus, j.duration, j.deadline, earliest_start=j.earliest_start) for j in holdable(mine)
                 + [j for j in mine if j.running_for is not None]]
        fewest = next(k for k in itertools.count() if brute_feasible(mine, cap + k))
        assert lower_bound_extra(items, cap) <= fewest


def test_a_job_shorter_than_the_schedules_tolerance_is_refused() -> None:
    """Two one-GPU jobs of 1e-9 minutes on one GPU were scheduled side by side, over capacity: a run time at or
    below the schedule's tolerance reads as no time at all, so it is refused, naming the job's field."""
    import pytest

    from gpuaas.errors import ConfigError
    from gpuaas.policies.deadlines.problem import DeadlineJob, plan_deadlines

    with pytest.raises(ConfigError, match=r"jobs\[0\] \(x\)\.duration.*from 1e-06 to"):
        plan_deadlines({"a": 1}, [DeadlineJob("x", 1, 1e-9, 1e-9, "a"), DeadlineJob("y", 1, 1e-9, 1e-9, "a")])
    plan = plan_deadlines({"a": 1}, [DeadlineJob("x", 1, 1e-6, 1.0, "a"), DeadlineJob("y", 1, 1e-6, 1.0, "a")])
    starts = sorted(s.start for s in plan.schedule)
    assert starts[1] >= starts[0] + 1e-6 - 1e-9  # one after the other on the one GPU
