"""The deadline planner and its nudges under adversarial input: fractional run times, deadlines in the past,
jobs running past their estimate or with no run time at all, best-effort work, pools of 0 GPUs, holds already
there (due, not due, unreadable, demotions). Properties: nothing pending is planned before now, the schedule fits
the GPUs at every instant (a job of unknown end holds its GPUs for good), a plan reported ``exact`` and
``feasible`` meets every deadline it claims (checked on its own schedule), the answer is the same for the same
input, bad input is a ``ConfigError`` and never another exception, and a cluster's Workload with a deadline or
run time years away is planned, not a failure of every pool. Nudges: never on a best-effort or running
Workload, a hold only on a proven plan and released no later than the latest start that meets the deadline, new
holds and demotions within the cap, no demotion where preemption compares priorities. Pure."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuaas.errors import ConfigError
from gpuaas.policies.deadlines import (
    DeadlineJob,
    DeadlinePlan,
    PoolProblem,
    ScheduledJob,
    deadline_problems,
    plan_deadlines,
    plan_nudges,
    plan_pools,
)
from gpuaas.policies.deadlines.kueue_order import ClusterQueues, Preemption, may_preempt
from gpuaas.policies.deadlines.profile import EPS
from gpuaas.policy import DeadlinesPolicy
from tests.policies.test_deadline_pools import snapshot, wl

TOL = 1e-6
RESOURCES = ("a100", "h100")
TIMES = st.one_of(st.integers(1, 6).map(float), st.sampled_from([0.5, 1.5, 1 / 3, 2 / 3, 2.25, 0.1]))


@st.composite
def problems(draw: st.DrawFn) -> tuple[dict[str, int], list[DeadlineJob]]:
    resources = draw(st.lists(st.sampled_from(RESOURCES), min_size=1, max_size=2, unique=True))
    capacity = {r: draw(st.integers(0, 4)) for r in resources}
    usable = [r for r in resources if capacity[r] > 0]
    jobs: list[DeadlineJob] = []
    held = dict.fromkeys(resources, 0)
    for k in range(draw(st.integers(0, 6)) if usable else 0):
        r = draw(st.sampled_from(usable))
        gpus = draw(st.integers(1, capacity[r]))
        duration = draw(TIMES)
        deadline = draw(st.one_of(st.none(), TIMES, TIMES.map(lambda t: -t), st.just(0.0)))
        running_for = None
        if held[r] + gpus <= capacity[r] and draw(st.integers(0, 2)) == 0:
            running_for = draw(st.sampled_from([0.0, duration / 2, duration, duration * 3]))
            if draw(st.integers(0, 3)) == 0:
                duration = math.inf  # running, no run time known
            held[r] += gpus
        earliest = draw(st.sampled_from([0.0, 0.0, 0.0, 0.5, 2.0, 1 / 3])) if running_for is None else 0.0
        jobs.append(DeadlineJob(f"j{k}", gpus, duration, deadline, r, running_for, earliest))
    return capacity, jobs


def peak(intervals: Sequence[tuple[float, float, int]]) -> int:
    """The most GPUs in use at once: usage only rises where an interval starts, so it is read at every start (an
    interval is [start, end), with the schedule's tolerance: one ending where another starts is not beside it)."""
    return max([sum(g for b, e, g in intervals if b <= t + 10 * EPS and e > t + 10 * EPS) for t, _, _ in intervals],
               default=0)


def check_plan(capacity: dict[str, int], jobs: list[DeadlineJob], plan: DeadlinePlan) -> None:
    by_job = {j.name: j for j in jobs}
    by_name: dict[str, ScheduledJob] = {s.name: s for s in plan.schedule}
    assert len(by_name) == len(plan.schedule)
    for s in plan.schedule:
        j = by_job[s.name]
        if j.running_for is not None:
            assert s.start == -j.running_for  # never moved
            assert s.end is None or s.end > 0  # it holds its GPUs from now on
        elif s.start is not None:
            assert s.start >= j.earliest_start - EPS, (s.name, s.start)  # never before now, nor its earliest start
            assert s.end is not None and abs(s.end - s.start - j.duration) <= TOL
    for j in jobs:  # a pending job out of the schedule is one that can never start in time
        if j.name not in by_name:
            assert j.running_for is None and j.deadline is not None and j.name in plan.missed
    for r, cap in capacity.items():
        mine = [s for s in plan.schedule if s.resource == r and s.start is not None]
        intervals = [(max(s.start, 0.0), math.inf if s.end is None else s.end, s.gpus)  # type: ignore[type-var]
                     for s in mine]
        assert peak(intervals) <= cap + plan.extra_gpus[r], (r, intervals, plan.extra_gpus)
    if plan.exact and plan.feasible:  # a proven plan meets every deadline it does not call missed
        for s in plan.schedule:
            if s.deadline is not None and s.name not in plan.missed:
                assert s.end is not None and s.end <= s.deadline + TOL, (s, plan.messages)
        assert plan.at_risk == []
    for name in plan.at_risk:
        assert by_job[name].deadline is not None and by_job[name].running_for is None
    assert set(plan.missed).isdisjoint(plan.at_risk)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_the_schedule_starts_nothing_before_now_fits_the_gpus_and_a_proven_plan_meets_its_deadlines(
        problem: tuple[dict[str, int], list[DeadlineJob]]) -> None:
    capacity, jobs = problem
    plan = plan_deadlines(capacity, jobs)
    check_plan(capacity, jobs, plan)
    again = plan_deadlines(capacity, list(jobs))
    assert again == plan  # the same input, the same plan


_ANY: Any = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True, allow_infinity=True),
                      st.text(max_size=3), st.just([1]))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b"]), _ANY, max_size=2),
       st.lists(st.tuples(st.sampled_from(["x", "y", "z"]), _ANY, _ANY, _ANY, st.sampled_from(["a", "b"]), _ANY),
                max_size=3))
def test_bad_input_is_a_config_error_and_nothing_else(capacity: dict[str, Any], raw: list[tuple[Any, ...]]) -> None:
    jobs = [DeadlineJob(*fields) for fields in raw]
    try:
        plan_deadlines(capacity, jobs)
    except ConfigError:
        pass


# --- a cluster's pools: times past the planner's horizon --------------------------------------------------------

YEARS = 2e8  # seconds: some six years, past the planner's bound of 1e8 in its unit of time


@pytest.mark.parametrize("far", [
    {"deadline_in": YEARS},  # "due 2033": no real deadline
    {"deadline_in": -YEARS},  # a stale Workload due years ago
    {"runtime": YEARS},  # expected-runtime: 55555h
    {"runtime": YEARS, "deadline_in": None},
], ids=["deadline-years-away", "deadline-years-ago", "runtime-years", "best-effort-runtime-years"])
def test_one_workload_with_a_time_years_away_does_not_fail_the_plan_of_every_pool(far: dict[str, Any]) -> None:
    """Each raised ConfigError ("jobs[1] (ns/far).deadline: must be a number of minutes from now, at most
    100,000,000 either way") out of ``plan_pools``: the deadlines flow planned no pool, and the rebalance got no
    deadline demand, for one well-formed annotation."""
    snap = snapshot([wl("due", "pending", 2), wl("far", "pending", 2, **far)])
    pools = {(p.problem.cohort, p.problem.flavor): p for p in plan_pools(deadline_problems(snap))}
    h100 = pools[("c", "h100")]
    assert "ns/due" not in h100.plan.missed and "ns/due" not in h100.plan.at_risk
    if far.get("deadline_in") == -YEARS:
        assert "ns/far" in h100.missed  # lost, as any deadline in the past
    if "runtime" in far and far.get("deadline_in", 1) is not None:
        assert "ns/far" in h100.problem.uncontrolled  # no run time the plan can use: it holds nothing


def test_a_workload_admitted_years_ago_still_holds_its_gpus() -> None:
    snap = snapshot([wl("old", "admitted", 2, flavor="h100", admitted_ago=YEARS, runtime=3600, deadline_in=None),
                     wl("due", "pending", 8, runtime=600, deadline_in=1800)])
    [h100] = [p for p in plan_pools(deadline_problems(snap)) if (p.problem.cohort, p.problem.flavor) == ("c", "h100")]
    old = {s.name: s for s in h100.plan.schedule}["ns/old"]
    assert old.end == pytest.approx(1800.0)  # past its estimate: half of it more, at least 30 min
    assert h100.plan.extra_gpus == {"h100": 2}  # the 2 GPUs it holds are not free for ns/due


# --- nudges ---------------------------------------------------------------------------------------------------

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
SECONDS = st.sampled_from([600.0, 1800.0, 3600.0, 5400.0, 7200.0, 1000.0 / 3])


@st.composite
def nudge_cases(draw: st.DrawFn) -> tuple[PoolProblem, DeadlinesPolicy, pd.DataFrame]:
    cap = draw(st.integers(1, 6))
    jobs: list[DeadlineJob] = []
    held = 0
    for k in range(draw(st.integers(1, 7))):
        gpus, duration = draw(st.integers(1, cap)), draw(SECONDS)
        deadline = draw(st.one_of(st.none(), st.builds(lambda t, f: t * f, SECONDS, st.sampled_from([1, 2, 3, 4])),
                                  st.sampled_from([-600.0, 0.0])))
        running_for = None
        if held + gpus <= cap and draw(st.integers(0, 3)) == 0:
            running_for = draw(st.sampled_from([0.0, duration / 2, duration, 3 * duration]))
            held += gpus
            if draw(st.integers(0, 3)) == 0:
                duration = math.inf
        earliest = draw(st.sampled_from([0.0, 0.0, 0.0, 600.0, 2400.0])) if running_for is None else 0.0
        jobs.append(DeadlineJob(f"ns/j{k}", gpus, duration, deadline, "h100", running_for, earliest))
    rule = draw(st.sampled_from(["Never", "Never", "LowerPriority", "LowerOrNewerEqualPriority"]))
    queues = ClusterQueues({j.name: "cq" for j in jobs}, {"cq": cap},
                           {} if rule == "Never" else {"cq": Preemption(within_cluster_queue=rule)})
    problem = PoolProblem("c", "h100", cap, tuple(jobs),
                          uncontrolled=("ns/blind",) if draw(st.integers(0, 4)) == 0 else (),
                          by_priority=("cq",) if draw(st.integers(0, 4)) == 0 else (), queues=queues)
    policy = DeadlinesPolicy(max_holds_per_run=draw(st.integers(0, 3)),
                             release_margin_minutes=draw(st.sampled_from([1, 30])),
                             runtime_estimate_error=draw(st.sampled_from([1.0, 2.0])), give_up_lost=draw(st.booleans()))
    rows = []
    for j in jobs:
        kind = draw(st.integers(0, 3))
        mark: str | None = None
        if kind == 1:
            at = NOW + timedelta(hours=draw(st.integers(-1, 2)))
            mark = json.dumps({"audit_id": 1, "release_at": at.isoformat(), "before": {"active": True}})
        elif kind == 2:
            mark = json.dumps({"audit_id": 1, "release_at": (NOW + timedelta(hours=1)).isoformat(),
                               "before": {"priority": 0}})
        elif kind == 3:
            mark = "unreadable"
        if mark is not None:
            rows.append({"namespace": "ns", "name": j.name.removeprefix("ns/"), "deadline_hold": mark})
    return problem, policy, pd.DataFrame(rows, columns=["namespace", "name", "deadline_hold"])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nudge_cases())
def test_nudges_hold_only_deadline_work_on_a_proven_plan_release_it_in_time_and_keep_the_cap(
        case: tuple[PoolProblem, DeadlinesPolicy, pd.DataFrame]) -> None:
    problem, policy, frame = case
    [pool] = plan_pools([problem])
    nudges = plan_nudges([pool], frame, NOW, policy)
    assert len({n.ref for n in nudges}) == len(nudges)  # one decision per Workload
    by_name = {j.name: j for j in problem.jobs}
    new = [n for n in nudges if n.action in ("hold", "demote")]
    assert sum(n.outcome == "planned" for n in new) <= policy.max_holds_per_run
    planned = {s.name: s for s in pool.plan.schedule}
    for n in new:
        job = by_name[n.ref]
        assert job.running_for is None and job.deadline is not None  # never best effort, never running work
        if n.action == "demote":
            assert policy.give_up_lost and not problem.by_priority
            continue
        assert pool.plan.exact and pool.plan.feasible
        assert may_preempt(problem.jobs, problem.queues, {}) == []  # nothing it runs could be evicted
        assert n.release_at is not None and n.release_at > NOW
        assert (n.release_at - NOW).total_seconds() > job.earliest_start  # else its backoff keeps it out as long
        assert (n.release_at - NOW).total_seconds() <= job.deadline - job.duration + 1e-6  # the latest start
        end = planned[job.name].end
        assert end is not None and end <= job.deadline + 1e-6
    assert plan_nudges([pool], frame, NOW, policy) == nudges  # the same input, the same nudges
