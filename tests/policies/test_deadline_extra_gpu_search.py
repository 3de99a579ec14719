"""The search for the fewest extra GPUs on which EDF meets every deadline, when the exact solver gives no answer.

Properties: on any yes/no answer over the numbers of extra GPUs, monotone or not (a list schedule is not
monotone in its GPUs), the search returns one that works whose predecessor fails, never below the first that
works, exactly the first whenever it says so (and whenever few distinct answers lie below it), and within
``probe_bound`` tries. On random small pools the planner's answer is exactly a scan one GPU at a time; on a pool
of 200,000 GPUs, where that scan takes tens of thousands of schedules, the plan comes back valid.
"""

from __future__ import annotations

import random
from itertools import groupby

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuaas.policies.deadlines import DeadlineJob, Item, MilpLimits, lower_bound_extra, plan_deadlines, serial_schedule
from gpuaas.policies.deadlines._search import Probe, fewest_working, probe_bound
from gpuaas.policies.deadlines.profile import EPS
from tests.policies.test_planner_properties_deadlines import check_plan

NO_EXACT = MilpLimits(max_time_points=0, max_variables=0)
"""Past the exact solver's size on any problem: the plan's extra comes from the search under test."""


@st.composite
def answers(draw: st.DrawFn) -> tuple[list[bool], bool, int]:
    """Yes/no per extra from 0 (the last one yes: the caller's upper bound), in runs; ranged: a try knows its run."""
    runs = draw(st.lists(st.tuples(st.booleans(), st.integers(1, 40)), min_size=1, max_size=12))
    works = [ok for ok, length in runs for _ in range(length)] + [True]
    return works, draw(st.booleans()), draw(st.integers(0, 5))


def _run_of(works: list[bool], extra: int) -> tuple[int, int]:
    lo = hi = extra
    while lo > 0 and works[lo - 1] == works[extra]:
        lo -= 1
    while hi + 1 < len(works) and works[hi + 1] == works[extra]:
        hi += 1
    return lo, hi + 1


@settings(max_examples=300, deadline=None)
@given(answers(), st.data())
def test_the_search_ends_within_its_bound_on_a_working_extra_never_past_the_first_when_it_says_so(
        case: tuple[list[bool], bool, int], data: st.DataObject) -> None:
    works, ranged, scan = case
    upper = len(works) - 1
    start = data.draw(st.integers(0, upper))
    bound = probe_bound(start, upper, scan)
    tried: list[int] = []

    def probe(extra: int) -> Probe[int]:
        tried.append(extra)
        assert len(tried) <= bound, "past the bound: the search might not end"
        assert start <= extra <= upper
        lo, hi = _run_of(works, extra) if ranged else (extra, extra + 1)
        return Probe(works[extra], extra, lo, hi)

    answer = fewest_working(probe, start, upper, scan)
    first = works.index(True, start)
    assert answer.tries == len(tried) <= bound
    assert works[answer.extra] and works[answer.found]  # the schedule handed back is one that works ...
    assert works[answer.found] == works[answer.extra] and (not ranged or answer.found == answer.extra
                                                            or _run_of(works, answer.found)[0] <= answer.extra)
    assert answer.extra == start or not works[answer.extra - 1]  # ... and one GPU fewer does not
    assert answer.extra >= first
    if answer.exhaustive:
        assert answer.extra == first
    runs_below = len([k for k, _ in groupby(works[start:first])]) if ranged else first - start
    if runs_below < scan:  # the scan reaches the first that works: exactly a scan one GPU at a time
        assert answer.exhaustive and answer.extra == first


def test_a_wrong_upper_bound_is_an_error_not_an_endless_search() -> None:
    with pytest.raises(AssertionError, match="upper bound 9"):
        fewest_working(lambda e: Probe(False, e, e, e + 1), 0, 9, scan=3)


# --- the planner's fallback -------------------------------------------------------------------------------------

def linear_extra(capacity: int, jobs: list[DeadlineJob]) -> int:
    """The extra GPUs as a scan one GPU at a time finds them, from the lower bound (running jobs with a known end)."""
    items = [Item(j.name, j.gpus, j.duration - j.running_for, None, fixed_start=0.0)
             for j in jobs if j.running_for is not None]
    items += [Item(j.name, j.gpus, j.duration, j.deadline) for j in jobs
              if j.running_for is None and j.deadline is not None and j.duration <= j.deadline + EPS]
    edf = sorted((i for i in items if i.fixed_start is None), key=lambda i: (i.deadline, -i.gpus * i.duration))

    def works(extra: int) -> bool:
        starts = serial_schedule(items, capacity + extra, edf)
        return all(starts[i.name] + i.duration <= (i.deadline or 0.0) + EPS for i in edf)

    if works(0):
        return 0
    lower = lower_bound_extra(items, capacity)
    extra = max(lower, 1)
    while not works(extra):
        extra += 1
    return extra


@st.composite
def pools(draw: st.DrawFn) -> tuple[int, list[DeadlineJob]]:
    capacity = draw(st.integers(1, 5))
    jobs, held = [], 0
    for k in range(draw(st.integers(1, 6))):
        gpus, duration = draw(st.integers(1, capacity)), draw(st.integers(1, 6))
        if held + gpus <= capacity and draw(st.integers(0, 3)) == 0:
            held += gpus
            jobs.append(DeadlineJob(f"r{k}", gpus, duration, None, running_for=draw(st.integers(0, duration - 1))))
        else:
            deadline = draw(st.one_of(st.none(), st.integers(-2, 12)))
            jobs.append(DeadlineJob(f"j{k}", gpus, duration, None if deadline is None else float(deadline)))
    return capacity, jobs


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pools())
def test_on_small_pools_the_fallback_finds_exactly_what_a_scan_one_gpu_at_a_time_finds(
        pool: tuple[int, list[DeadlineJob]]) -> None:
    capacity, jobs = pool
    plan = plan_deadlines({"nvidia.com/gpu": capacity}, jobs, limits=NO_EXACT)
    check_plan({"nvidia.com/gpu": capacity}, jobs, plan)
    assert plan.extra_gpus["nvidia.com/gpu"] == linear_extra(capacity, jobs)
    assert not any("fewer may also do" in m for m in plan.messages)


def test_where_one_more_gpu_makes_edf_late_the_fallback_still_finds_the_first_that_works() -> None:
    # 5 GPUs, r0 (2) runs 4 more, r2 (3) 1 more; j1: 4 GPUs for 1, due 2; j3: 2 GPUs for 6, due 6 (must start at 0).
    # 3 extra (8): j1 waits for r2 and starts at 1, j3 starts at 0 beside it: both hold. 4 or 5 extra (9, 10): j1
    # fits at 0 and j3, no longer beside it, starts at 1 and is late. 6 extra: both at 0. A gallop and bisection
    # from the lower bound (2) tries 2, 4 and 6, and answers 6.
    jobs = [DeadlineJob("r0", 2, 4.0, None, running_for=0.0), DeadlineJob("r2", 3, 1.0, None, running_for=0.0),
            DeadlineJob("j1", 4, 1.0, 2.0), DeadlineJob("j3", 2, 6.0, 6.0)]
    plan = plan_deadlines({"nvidia.com/gpu": 5}, jobs, limits=NO_EXACT)
    assert linear_extra(5, jobs) == 3
    assert plan.extra_gpus == {"nvidia.com/gpu": 3}
    check_plan({"nvidia.com/gpu": 5}, jobs, plan)
    assert {s.name: s.start for s in plan.schedule if s.name.startswith("j")} == {"j1": 1.0, "j3": 0.0}


def test_a_pool_of_200000_gpus_past_the_exact_size_gets_a_valid_plan() -> None:
    """The extra GPUs lie some 50,000 above the lower bound: a scan one GPU at a time runs that many schedules of
    400 jobs (tens of minutes); the search a few dozen."""
    rnd = random.Random(0)
    capacity = 200_000
    jobs = [DeadlineJob(f"r{k}", 1900, rnd.uniform(10, 200), None, running_for=0.0) for k in range(100)]
    for k in range(300):
        duration = rnd.uniform(10, 120)
        jobs.append(DeadlineJob(f"j{k}", rnd.choice([8, 64, 256, 1024, 4096]), duration,
                                duration * rnd.uniform(1, 1.5)))
    plan = plan_deadlines({"nvidia.com/gpu": capacity}, jobs, limits=MilpLimits(max_time_points=10))
    check_plan({"nvidia.com/gpu": capacity}, jobs, plan)
    extra = plan.extra_gpus["nvidia.com/gpu"]
    assert 166_644 <= extra <= sum(j.gpus for j in jobs if j.deadline is not None)
    assert plan.inexact and any("a heuristic" in m for m in plan.messages)
    late = [s.name for s in plan.schedule if s.deadline is not None and not s.on_time]
    assert late == []
