"""The deadline guards' play of Kueue's order, reviewed: as fast on thousands of pending Workloads as the
flow needs, with the same answers as the plain walk it replaced, and nothing played that the pool does not hold.

The reference (``_walk_every_pending``) is the walk Kueue's BestEffortFIFO describes, kept here as the
oracle: at every end, walk all pending jobs in queue order and admit each one that fits.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from datetime import UTC, datetime

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuaas.policies.deadlines import DeadlineJob, PoolProblem, plan_nudges, plan_pools
from gpuaas.policies.deadlines.kueue_order import (
    demotion_harmless,
    kueue_order_ends,
    kueue_order_on_time,
)
from gpuaas.policies.deadlines.profile import EPS
from gpuaas.policy import DeadlinesPolicy

MIN = 60.0
NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


def _walk_every_pending(jobs: Sequence[DeadlineJob], capacity: int, order: Sequence[str]) -> dict[str, float]:
    """The play as first written: quadratic, and plainly BestEffortFIFO."""
    rank = {name: i for i, name in enumerate(order)}
    pending = sorted((j for j in jobs if j.running_for is None and j.gpus <= capacity),
                     key=lambda j: (rank.get(j.name, len(rank)), j.name))
    ends: dict[str, float] = {}
    running: list[tuple[float, int]] = []
    free = capacity
    for job in jobs:
        if job.running_for is not None:
            end = max(0.0, job.duration - job.running_for)
            ends[job.name] = end
            heapq.heappush(running, (end, job.gpus))
            free -= job.gpus
    now = 0.0
    while pending:
        waiting = []
        for job in pending:
            if job.gpus <= free:
                free -= job.gpus
                ends[job.name] = now + job.duration
                heapq.heappush(running, (now + job.duration, job.gpus))
            else:
                waiting.append(job)
        pending = waiting
        if not pending or not running or math.isinf(running[0][0]):
            break
        now, gpus = heapq.heappop(running)
        free += gpus
        while running and running[0][0] <= now + EPS:
            free += heapq.heappop(running)[1]
    return ends


@st.composite
def pools(draw: st.DrawFn) -> tuple[list[DeadlineJob], int, list[str]]:
    """A pool: running jobs (some past their estimate, some of unknown end), pending ones (some wider than the
    pool), and a queue order that names some of them, in any order, and Workloads of other pools."""
    capacity = draw(st.integers(1, 8))
    jobs: list[DeadlineJob] = []
    held = 0
    for i in range(draw(st.integers(0, 4))):
        gpus = draw(st.integers(1, capacity))
        if held + gpus > capacity:
            break
        held += gpus
        duration = draw(st.sampled_from([math.inf, 10 * MIN, 30 * MIN, 90 * MIN]))
        jobs.append(DeadlineJob(f"ns/r{i}", gpus, duration, None, running_for=draw(st.sampled_from([0.0, 20 * MIN]))))
    for i in range(draw(st.integers(0, 14))):
        gpus = draw(st.integers(1, capacity + 1))
        minutes = draw(st.integers(1, 12)) * 10 * MIN  # ties of ends included
        jobs.append(DeadlineJob(f"ns/p{i}", gpus, minutes, draw(st.none() | st.integers(0, 300).map(float))))
    names = [j.name for j in jobs if j.running_for is None]
    order = draw(st.permutations([*names, "other/w0", "other/w1"]))
    return jobs, capacity, list(order[: draw(st.integers(0, len(order)))])


@settings(max_examples=400, deadline=None)
@given(pools())
def test_the_fast_play_ends_every_job_where_the_walk_over_every_pending_job_does(
        pool: tuple[list[DeadlineJob], int, list[str]]) -> None:
    jobs, capacity, order = pool
    assert kueue_order_ends(jobs, capacity, order) == _walk_every_pending(jobs, capacity, order)


def test_five_thousand_pending_workloads_on_a_small_pool_play_as_the_walk_does() -> None:
    # Eight GPUs, a job ending at almost every instant: the walk over every pending job at every end is the
    # quadratic case (seconds at this size), the play must answer the same.
    jobs = [DeadlineJob(f"ns/p{i:04d}", 1 + (i * 7) % 8, (5 + (i * 13) % 50) * MIN, (i % 97) * 30 * MIN)
            for i in range(5000)]
    order = [j.name for j in reversed(jobs)]
    assert kueue_order_ends(jobs, 8, order) == _walk_every_pending(jobs, 8, order)


def test_a_pool_is_played_in_the_order_of_its_own_pending_jobs_only() -> None:
    # Keys hold every Workload of the snapshot: those of other pools, and those running here, change nothing.
    jobs = [DeadlineJob("ns/a", 2, 60 * MIN, 60 * MIN), DeadlineJob("ns/b", 2, 60 * MIN, 60 * MIN),
            DeadlineJob("ns/r", 2, 60 * MIN, None, running_for=0.0)]
    keys = {"ns/a": (0.0, 2.0), "ns/b": (0.0, 1.0), "ns/r": (-9.0, 0.0), "elsewhere/x": (-5.0, 0.0)}
    assert kueue_order_on_time(jobs, 4, keys) == 1  # b (older) runs now, a after r
    assert kueue_order_on_time(jobs, 4, keys, frozenset({"ns/b"})) == 1  # a first, b after: one either way
    assert kueue_order_on_time(jobs, 4, {k: v for k, v in keys.items() if k != "ns/a"}) is None


def test_demoting_nothing_is_harmless_and_a_demotion_that_costs_a_deadline_is_not() -> None:
    lost = DeadlineJob("ns/lost", 2, 60 * MIN, 10 * MIN)  # the oldest: first in Kueue's order
    wide = DeadlineJob("ns/wide", 4, 60 * MIN, None)
    small = DeadlineJob("ns/small", 2, 20 * MIN, 30 * MIN)
    keys = {"ns/lost": (0.0, 1.0), "ns/wide": (0.0, 2.0), "ns/small": (0.0, 3.0)}
    jobs = [lost, wide, small]
    assert demotion_harmless(jobs, 4, keys, set(), 2.0)
    # Before: lost and small share the GPUs, small on time; after: wide takes all four, small waits an hour.
    assert kueue_order_on_time(jobs, 4, keys) == 1
    assert kueue_order_on_time(jobs, 4, keys, frozenset({"ns/lost"})) == 0
    assert not demotion_harmless(jobs, 4, keys, {"ns/lost"}, 2.0)


def test_a_job_past_its_estimate_holds_its_gpus_longer_by_what_is_left_not_by_its_whole_run() -> None:
    """4 GPUs; "r" (1 GPU) has run 5 h of a 1 h estimate, planned to hold its GPU 30 min more. "late" (1 GPU, the
    oldest) is lost even at half its estimate. With every run twice as long, "r" holds its GPU an hour more: in
    creation order "late" and "short" run now, "wide" after "short" (both on time); demoted, "late" lets "wide"
    take the three free GPUs and "short" waits for "r" and misses. So "late" is not demoted. Stretching the whole
    5.5 h of "r" (its GPU held 6 h more) made both orders miss one, and the demotion look harmless."""
    r = DeadlineJob("ns/r", 1, 5.5 * 3600, None, "h100", running_for=5 * 3600)  # as the pools extend it
    late = DeadlineJob("ns/late", 1, 3 * 3600, 3600, "h100")
    wide = DeadlineJob("ns/wide", 3, 3 * 3600, 11 * 3600, "h100")
    short = DeadlineJob("ns/short", 1, 2 * 3600, 4 * 3600, "h100")
    problem = PoolProblem("c", "h100", 4, (r, late, wide, short), past_estimate=("ns/r",))
    frame = pd.DataFrame([{"namespace": "ns", "name": name, "priority": 0, "deadline_hold": None,
                           "created_at": pd.Timestamp(NOW) - pd.Timedelta(minutes=10 - i)}
                          for i, name in enumerate(["r", "late", "wide", "short"])])
    nudges = plan_nudges(plan_pools([problem]), frame, NOW, DeadlinesPolicy(max_holds_per_run=2))
    assert [(n.action, n.name) for n in nudges if n.action == "demote"] == []
    keys = {f"ns/{name}": (0.0, float(i)) for i, name in enumerate(["r", "late", "wide", "short"])}
    jobs = list(problem.jobs)
    assert kueue_order_on_time(jobs, 4, keys, longer=2.0, past_estimate=frozenset({"ns/r"})) == 2
    assert kueue_order_on_time(jobs, 4, keys, frozenset({"ns/late"}), 2.0, frozenset({"ns/r"})) == 1
