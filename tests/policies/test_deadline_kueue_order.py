"""Kueue's own order played on the plan's estimates (``kueue_order_ends``): BestEffortFIFO on one pool.

A head that does not fit lets smaller Workloads pass; a job waiting behind one of unknown end never ends; and at
no instant do the admitted jobs hold more than the pool's GPUs, each starting now or when another ends.
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuaas.policies.deadlines import DeadlineJob
from gpuaas.policies.deadlines.kueue_order import kueue_order_ends, on_time_count

MIN = 60.0


def test_a_head_that_does_not_fit_lets_a_smaller_one_pass_and_takes_the_gpus_when_they_free_up() -> None:
    running = DeadlineJob("r", 2, 60 * MIN, None, running_for=10 * MIN)  # 50 min left
    wide = DeadlineJob("wide", 4, 60 * MIN, 200 * MIN)
    small = DeadlineJob("small", 2, 30 * MIN, 20 * MIN)
    ends = kueue_order_ends([running, wide, small], 4, ["wide", "small"])
    assert ends == {"r": 50 * MIN, "small": 30 * MIN, "wide": 110 * MIN}
    assert on_time_count([running, wide, small], ends) == 1  # wide on time; small (due at 20 min) late
    assert kueue_order_ends([running, small, wide], 4, ["small", "wide"]) == ends  # the same here, in either order


def test_what_waits_behind_a_job_of_unknown_end_never_ends() -> None:
    blind = DeadlineJob("blind", 3, math.inf, None, running_for=MIN)
    ends = kueue_order_ends([blind, DeadlineJob("a", 1, MIN, 5 * MIN), DeadlineJob("b", 2, MIN, 5 * MIN)], 4, ["a", "b"])
    assert ends == {"blind": math.inf, "a": MIN}


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6), st.lists(st.tuples(st.integers(1, 6), st.integers(1, 12), st.booleans()), min_size=1,
                                   max_size=8))
def test_the_admitted_never_exceed_the_pool_and_each_starts_now_or_at_an_end(
        capacity: int, raw: list[tuple[int, int, bool]]) -> None:
    jobs, held = [], 0
    for i, (gpus, minutes, running) in enumerate(raw):
        gpus = min(gpus, capacity)
        if running and held + gpus <= capacity:
            held += gpus
            jobs.append(DeadlineJob(f"j{i}", gpus, minutes * 10 * MIN, None, running_for=MIN))
        else:
            jobs.append(DeadlineJob(f"j{i}", gpus, minutes * 10 * MIN, None))
    ends = kueue_order_ends(jobs, capacity, [j.name for j in jobs])
    pending = [j for j in jobs if j.running_for is None]
    assert set(ends) == {j.name for j in jobs}  # nothing of unknown end here: everything runs
    starts = {j.name: ends[j.name] - j.duration for j in pending}
    instants = {0.0, *ends.values()}
    assert all(start in instants for start in starts.values())
    for t in instants:
        busy = sum(j.gpus for j in jobs if j.running_for is not None and ends[j.name] > t)
        busy += sum(j.gpus for j in pending if starts[j.name] <= t < ends[j.name])
        assert busy <= capacity
