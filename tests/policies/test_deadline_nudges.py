"""The nudge rules (pure): holds only where the plan is proven, released by the planned start minus
the margin (never after the latest start that meets the deadline), capped; releases never capped;
a deadline lost beyond the estimate's error given up (demoted), never where preemption compares priorities;
a release time without a zone read as UTC, an unreadable one due; each hold and demotion names the Workload by
the uid and resourceVersion the snapshot read."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuaas.policies.deadlines import DeadlineJob, PoolProblem, plan_nudges, plan_pools, release_is_due
from gpuaas.policies.deadlines.kueue_order import ClusterQueues, Preemption
from gpuaas.policy import DeadlinesPolicy

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
# Estimates trusted (no slack for their error), nothing given up: the hold rules alone. GIVE_UP is the defaults.
POLICY = DeadlinesPolicy(max_holds_per_run=2, release_margin_minutes=30, runtime_estimate_error=1.0,
                         give_up_lost=False)
GIVE_UP = DeadlinesPolicy(max_holds_per_run=2, release_margin_minutes=30)
NO_HOLDS = pd.DataFrame(columns=["namespace", "name", "deadline_hold"])


def pool(cap: int, jobs: list[DeadlineJob]) -> PoolProblem:
    return PoolProblem("c", "h100", cap, tuple(jobs))


def held(*names: str, release_at: datetime, before: dict[str, object] | None = None) -> pd.DataFrame:
    mark = json.dumps({"audit_id": 1, "release_at": release_at.isoformat(), "before": before or {"active": True}})
    return pd.DataFrame([{"namespace": "ns", "name": n, "deadline_hold": mark} for n in names])


def demoted(*names: str) -> pd.DataFrame:
    return held(*names, release_at=NOW + timedelta(hours=1), before={"priority": 0})


def test_field_example_holds_the_second_round_until_its_start_minus_the_margin() -> None:
    jobs = [DeadlineJob(f"ns/j{i}", 2, 3600, 7200, "h100") for i in range(4)]
    nudges = plan_nudges(plan_pools([pool(4, jobs)]), NO_HOLDS, NOW, POLICY)
    holds = [n for n in nudges if n.action == "hold"]
    assert len(holds) == 2 and all(n.outcome == "planned" for n in holds)
    assert all(n.release_at == NOW + timedelta(minutes=30) for n in holds)  # start at +60 min, margin 30


def test_no_holds_where_the_plan_does_not_hold_and_held_ones_are_released() -> None:
    jobs = [DeadlineJob(f"ns/j{i}", 2, 3600, 6000, "h100") for i in range(4)]  # needs 4 more GPUs
    nudges = plan_nudges(plan_pools([pool(4, jobs)]), held("j3", release_at=NOW + timedelta(hours=1)), NOW, POLICY)
    assert [(n.action, n.name) for n in nudges] == [("release", "j3")]
    assert "no longer proves" in nudges[0].reason


def test_a_due_hold_is_released_and_a_vanished_one_too() -> None:
    jobs = [DeadlineJob(f"ns/j{i}", 2, 3600, 7200, "h100") for i in range(4)]
    frame = pd.concat([held("j3", release_at=NOW), held("gone", release_at=NOW + timedelta(hours=1))])
    nudges = plan_nudges(plan_pools([pool(4, jobs)]), frame, NOW, POLICY)
    releases = {n.name: n.reason for n in nudges if n.action == "release"}
    assert set(releases) == {"j3", "gone"} and "has come" in releases["j3"]
    assert all(n.outcome == "planned" for n in nudges if n.action == "release")


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 6), st.lists(st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(1, 12)),
                                   min_size=1, max_size=6))
def test_holds_never_outlast_the_latest_start(cap: int, raw: list[tuple[int, int, int]]) -> None:
    jobs = [DeadlineJob(f"ns/j{i}", min(g, cap), d * 1800.0, dl * 1800.0, "h100")
            for i, (g, d, dl) in enumerate(raw)]
    [planned] = plan_pools([pool(cap, jobs)])
    nudges = plan_nudges([planned], NO_HOLDS, NOW, GIVE_UP)
    holds = [n for n in nudges if n.action in ("hold", "demote")]
    assert sum(n.outcome == "planned" for n in holds) <= POLICY.max_holds_per_run
    if any(n.action == "demote" for n in holds):  # a demoted Workload may take any gap: no plan holds
        assert all(n.action == "demote" for n in holds)
    assert not [n for n in plan_nudges([planned], NO_HOLDS, NOW, POLICY) if n.evidence.get("given_up")]
    by_name = {j.name: j for j in jobs}
    error = GIVE_UP.runtime_estimate_error
    lost = {j.name for j in jobs if j.deadline is not None and j.duration / error > j.deadline}
    assert {n.ref for n in holds if n.action == "demote"} == lost  # every one, and only those, given up
    for n in holds:
        job = by_name[n.ref]
        assert job.deadline is not None
        if n.action == "demote":  # lost even at the shortest run time the estimate allows
            assert n.evidence.get("given_up") and n.release_at == NOW + timedelta(minutes=GIVE_UP.give_up_lease_minutes)
            continue
        assert planned.plan.feasible and planned.plan.exact
        assert n.release_at is not None and n.release_at > NOW
        released_s = (n.release_at - NOW).total_seconds()
        assert job.deadline is not None and released_s + 1800 <= job.deadline - job.duration + 1e-6
        assert job.deadline - job.duration >= (released_s + 1800) * error - 1e-6  # slack for estimate error


def test_a_best_effort_workload_is_never_held_and_one_held_is_released() -> None:
    # 4 GPUs: two deadline jobs now, two best-effort (no deadline) planned after them.
    jobs = [DeadlineJob(f"ns/d{i}", 2, 3600, 7200, "h100") for i in range(2)]
    jobs += [DeadlineJob(f"ns/b{i}", 2, 3600, None, "h100") for i in range(2)]
    plans = plan_pools([pool(2, jobs)])
    nudges = plan_nudges(plans, held("b1", release_at=NOW + timedelta(hours=3)), NOW, POLICY)
    assert not [n for n in nudges if n.action == "hold" and n.name.startswith("b")]
    assert [(n.action, n.name) for n in nudges if n.action == "release"] == [("release", "b1")]
    assert "never held" in nudges[0].reason


def test_work_the_plan_cannot_hold_makes_it_hold_nothing() -> None:
    """A best-effort job planned later (never held) or a pending one without run time could be admitted into
    the gap the plan counts on: the plan is not enforceable, so Kueue's own order stands."""
    deadline_jobs = [DeadlineJob(f"ns/j{i}", 2, 3600, 7200, "h100") for i in range(4)]  # the field example
    best_effort = DeadlineJob("ns/be", 2, 3600, None, "h100")
    nudges = plan_nudges(plan_pools([pool(4, [*deadline_jobs, best_effort])]), NO_HOLDS, NOW, POLICY)
    assert [n for n in nudges if n.action == "hold"] == []
    blind = PoolProblem("c", "h100", 4, tuple(deadline_jobs), uncontrolled=("ns/no-runtime",))
    nudges = plan_nudges(plan_pools([blind]), held("j3", release_at=NOW + timedelta(hours=1)), NOW, POLICY)
    assert [(n.action, n.name) for n in nudges] == [("release", "j3")]
    assert "could take the gaps it counts on" in nudges[0].reason



def test_a_workload_in_its_requeue_backoff_is_planned_after_it_and_held_only_past_it() -> None:
    """The field example (4 GPUs, four jobs of 2 GPUs for an hour, due in two), j0 kept out of Kueue's queue for a
    while after an eviction. The four fill the GPUs to their deadlines, so j0 must start at 60 min beside one of
    the others: EDF alone starts j0 when its backoff ends and misses, the exact search meets every deadline. Backing
    off for 40 min, j0 is not held: its backoff keeps it out past the 30 min at which a hold would release it (and a
    hold would clear the backoff). Backing off for 20 min, it is held like the other, with its earliest start in
    the evidence."""
    for backoff, held_names in ((2400.0, 1), (1200.0, 2)):
        jobs = [DeadlineJob("ns/j0", 2, 3600, 7200, "h100", earliest_start=backoff),
                *(DeadlineJob(f"ns/j{i}", 2, 3600, 7200, "h100") for i in range(1, 4))]
        [planned] = plan_pools([pool(4, jobs)])
        assert planned.plan.feasible and planned.plan.exact
        starts = {s.name: s.start for s in planned.plan.schedule}
        assert starts["ns/j0"] == 3600 and sorted(starts.values()) == [0, 0, 3600, 3600]
        holds = [n for n in plan_nudges([planned], NO_HOLDS, NOW, POLICY) if n.action == "hold"]
        assert len(holds) == held_names and all(n.release_at == NOW + timedelta(minutes=30) for n in holds)
        assert ("j0" in {n.name for n in holds}) == (backoff < 1800)
        assert all(n.evidence.get("earliest_start_s") == (backoff if n.name == "j0" else None) for n in holds)

def test_a_best_effort_workload_in_its_backoff_planned_at_its_end_takes_no_gap_the_plan_counts_on() -> None:
    """The field example beside a best-effort Workload kept out of the queue for 2 h: Kueue cannot admit it before
    then, and the plan starts it then, so the second round is still held; planned later than its backoff's end, it
    could take a gap, and nothing is held."""
    jobs = [DeadlineJob(f"ns/j{i}", 2, 3600, 7200, "h100") for i in range(4)]
    best_effort = DeadlineJob("ns/be", 2, 3600, None, "h100", earliest_start=7200)
    [planned] = plan_pools([pool(4, [*jobs, best_effort])])
    assert {s.name: s.start for s in planned.plan.schedule}["ns/be"] == 7200
    holds = [n.name for n in plan_nudges([planned], NO_HOLDS, NOW, POLICY) if n.action == "hold"]
    assert len(holds) == 2
    sooner = DeadlineJob("ns/be", 4, 3600, None, "h100", earliest_start=1800)  # planned after the second round
    [planned] = plan_pools([pool(4, [*jobs, sooner])])
    assert {s.name: s.start for s in planned.plan.schedule}["ns/be"] == 7200
    assert [n for n in plan_nudges([planned], NO_HOLDS, NOW, POLICY) if n.action == "hold"] == []


def test_no_hold_where_a_pending_workload_may_preempt_what_the_plan_runs_before_it() -> None:
    """4 GPUs in queue a. r (priority 0) runs another hour on 2; u (priority 0, 1 h) is due in 95 min, l (priority 5,
    1 h) in 3 h. Kueue's order gives l the 2 free GPUs first and u misses; the plan starts u now and l when r ends, so
    l is held. Where a's ``withinClusterQueue`` is LowerPriority, l would preempt r or u the moment it is released,
    and the plan, which has them run to their end, proves nothing: no hold, and one placed before is released,
    naming the pairs."""
    r = DeadlineJob("ns/r", 2, 3600, None, "h100", running_for=0.0)
    u, late = DeadlineJob("ns/u", 2, 3600, 5700, "h100"), DeadlineJob("ns/l", 2, 3600, 10800, "h100")
    created = [pd.Timestamp(NOW - timedelta(minutes=m)) for m in (30, 20, 10)]
    frame = pd.DataFrame({"namespace": "ns", "name": ["r", "u", "l"], "priority": [0, 0, 5], "created_at": created,
                          "deadline_hold": [None] * 3})
    queues = ClusterQueues({"ns/r": "a", "ns/u": "a", "ns/l": "a"}, {"a": 4})
    plain = PoolProblem("c", "h100", 4, (r, u, late), queues=queues)
    holds = [n for n in plan_nudges(plan_pools([plain]), frame, NOW, POLICY) if n.action == "hold"]
    assert [(n.name, n.evidence["plan_on_time"], n.evidence["kueue_order_on_time"]) for n in holds] == [("l", 2, 1)]
    rules = replace(queues, preemption={"a": Preemption(within_cluster_queue="LowerPriority")})
    preempting = plan_pools([replace(plain, queues=rules)])
    assert [n for n in plan_nudges(preempting, frame, NOW, POLICY) if n.action == "hold"] == []
    mark = json.dumps({"audit_id": 1, "release_at": (NOW + timedelta(minutes=30)).isoformat(), "before": {"active": True}})
    [release] = plan_nudges(preempting, frame.assign(deadline_hold=[None, None, mark]), NOW, POLICY)
    assert (release.action, release.name) == ("release", "l")
    assert "a pending Workload evict one the plan runs (ns/l may preempt ns/r)" in release.reason
    assert release.evidence["may_preempt"] == ["ns/l may preempt ns/r", "ns/l may preempt ns/u"]
    # All of one priority (l queued before u, so Kueue's order still misses u): nothing to preempt, l is held.
    alike = frame.assign(priority=[0, 0, 0], created_at=[created[0], created[2], created[1]])
    holds = [n for n in plan_nudges(preempting, alike, NOW, POLICY) if n.action == "hold"]
    assert [(n.name, n.evidence["plan_on_time"], n.evidence["kueue_order_on_time"]) for n in holds] == [("l", 2, 1)]


def test_a_running_job_with_no_run_time_keeps_its_gpus_and_its_unknown_end_in_the_audit() -> None:
    """6 GPUs, 2 held by a job running 10 min with no run time: the field example on the 4 left holds its second
    round (the plan never counts the 2 as free), and the audited schedule says its end is unknown (null). A
    best-effort job too wide to fit beside it waits for it, start unknown: the plan holds nothing then."""
    blind = DeadlineJob("ns/blind", 2, math.inf, None, "h100", running_for=600)
    jobs = [blind, *(DeadlineJob(f"ns/j{i}", 2, 3600, 7200, "h100") for i in range(4))]
    nudges = plan_nudges(plan_pools([pool(6, jobs)]), NO_HOLDS, NOW, POLICY)
    holds = [n for n in nudges if n.action == "hold"]
    assert len(holds) == 2 and all(n.release_at == NOW + timedelta(minutes=30) for n in holds)
    audited = json.loads(json.dumps(holds[0].evidence["schedule"]))
    assert ["ns/blind", -600, None] in audited
    wide = DeadlineJob("ns/wide", 6, 3600, None, "h100")
    assert [n for n in plan_nudges(plan_pools([pool(6, [*jobs, wide])]), NO_HOLDS, NOW, POLICY)
            if n.action == "hold"] == []


def test_a_lost_deadline_is_demoted_until_admitted_and_never_where_preemption_compares_priorities() -> None:
    # 2 GPUs. "late" runs 3 h and is due in 1 h: lost even at half its estimate (1.5 h). "urgent" runs
    # 1 h and is due in 1.5 h. In Kueue's order "late" (older) would take the GPUs and "urgent" would miss.
    late = DeadlineJob("ns/late", 2, 3 * 3600, 3600, "h100")
    urgent = DeadlineJob("ns/urgent", 2, 3600, 5400, "h100")
    nudges = plan_nudges(plan_pools([pool(2, [late, urgent])]), NO_HOLDS, NOW, GIVE_UP)
    assert [(n.action, n.name) for n in nudges] == [("demote", "late")]
    assert nudges[0].release_at == NOW + timedelta(minutes=60)
    assert "given up: demoted one priority below its own" in nudges[0].reason
    # Still pending and demoted: left as it is (the lease runs); a hold of it is released, to be demoted instead.
    assert plan_nudges(plan_pools([pool(2, [late, urgent])]), demoted("late"), NOW, GIVE_UP) == []
    nudges = plan_nudges(plan_pools([pool(2, [late, urgent])]), held("late", release_at=NOW + timedelta(hours=1)),
                         NOW, GIVE_UP)
    assert [(n.action, n.name, n.reason) for n in nudges] == [("release", "late", "deadline lost: released, to be "
                                                                "demoted instead")]
    # Admitted: its own priority back at once (a lower one could make it easier to preempt).
    running = DeadlineJob("ns/late", 2, 3 * 3600, 3600, "h100", running_for=60)
    nudges = plan_nudges(plan_pools([pool(2, [running, urgent])]), demoted("late"), NOW, GIVE_UP)
    assert [(n.action, n.name, n.reason) for n in nudges] == [("release", "late", "admitted: its own priority restored")]
    # A pool where a ClusterQueue preempts by priority: nothing is demoted.
    preempting = PoolProblem("c", "h100", 2, (late, urgent), by_priority=("cq-a",))
    assert plan_nudges(plan_pools([preempting]), NO_HOLDS, NOW, GIVE_UP) == []


def test_a_deadline_lost_only_by_its_estimate_is_not_given_up() -> None:
    # Expected 3 h, due in 2 h: lost by the estimate, but it would hold if the estimate is 2x too long.
    maybe = DeadlineJob("ns/maybe", 2, 3 * 3600, 2 * 3600, "h100")
    urgent = DeadlineJob("ns/urgent", 2, 3600, 5400, "h100")
    assert plan_nudges(plan_pools([pool(2, [maybe, urgent])]), NO_HOLDS, NOW, GIVE_UP) == []
    trusting = GIVE_UP.model_copy(update={"runtime_estimate_error": 1.0})
    nudges = plan_nudges(plan_pools([pool(2, [maybe, urgent])]), NO_HOLDS, NOW, trusting)
    assert [(n.action, n.name) for n in nudges] == [("demote", "maybe")]
    # In a requeue backoff: lost if, even 2x shorter, it cannot end in time from the backoff's end.
    for backoff, action in ((1800.0, []), (3600.0, [("demote", "maybe")])):
        backing_off = DeadlineJob("ns/maybe", 2, 3 * 3600, 2 * 3600, "h100", earliest_start=backoff)
        nudges = plan_nudges(plan_pools([pool(2, [backing_off, urgent])]), NO_HOLDS, NOW, GIVE_UP)
        assert [(n.action, n.name) for n in nudges] == action
    assert "expected to run 180 min once its requeue backoff ends in 60 min, lost even if 2x shorter" in nudges[0].reason
    late = DeadlineJob("ns/late", 2, 3 * 3600, 3600, "h100")  # give_up_lost off
    assert [n for n in plan_nudges(plan_pools([pool(2, [late, urgent])]), NO_HOLDS, NOW, POLICY) if n.action == "hold"] == []


def test_a_demoted_workload_makes_the_plan_hold_nothing_and_demotions_go_first_under_the_cap() -> None:
    """The field example with a lost job in the pool: demoted, it could still take a gap the plan counts on
    (nothing of its priority may fit there), so the plan holds nothing and releases what it held."""
    jobs = [DeadlineJob(f"ns/j{i}", 2, 3600, 7200, "h100") for i in range(4)]
    late = DeadlineJob("ns/late", 2, 5 * 3600, 3600, "h100")
    trusted = GIVE_UP.model_copy(update={"runtime_estimate_error": 1.0})
    nudges = plan_nudges(plan_pools([pool(4, [*jobs, late])]), held("j3", release_at=NOW + timedelta(hours=1)),
                         NOW, trusted)
    assert [(n.action, n.name) for n in nudges] == [("release", "j3"), ("demote", "late")]
    assert "could take the gaps it counts on" in nudges[0].reason
    others = [DeadlineJob(f"ns/late{i}", 2, 5 * 3600, 3600, "h100") for i in range(3)]
    capped = plan_nudges(plan_pools([pool(4, [*jobs, *others])]), NO_HOLDS, NOW, trusted)
    assert [(n.action, n.outcome) for n in capped] == [("demote", "planned")] * 2 + [("demote", "deferred")]


def test_a_hold_leaves_slack_for_the_error_of_the_estimates_ahead() -> None:
    """The field example's second round starts at +1 h and must start by +1 h: trusted estimates hold it,
    the default (estimates may be 2x off) does not, since the first round running long would make it miss.
    Due at +4 h (latest start +3 h, at least twice the planned start), the default holds it too."""
    tight = [DeadlineJob(f"ns/j{i}", 2, 3600, 7200, "h100") for i in range(4)]
    defaults = DeadlinesPolicy(max_holds_per_run=2)
    assert len([n for n in plan_nudges(plan_pools([pool(4, tight)]), NO_HOLDS, NOW, POLICY) if n.action == "hold"]) == 2
    assert [n for n in plan_nudges(plan_pools([pool(4, tight)]), NO_HOLDS, NOW, defaults) if n.action == "hold"] == []
    loose = [DeadlineJob(f"ns/j{i}", 2, 3600, 4 * 3600, "h100") for i in range(4)]
    holds = [n for n in plan_nudges(plan_pools([pool(4, loose)]), NO_HOLDS, NOW, defaults) if n.action == "hold"]
    assert len(holds) == 2 and all(n.release_at == NOW + timedelta(minutes=30) for n in holds)


def test_a_release_time_without_a_zone_is_read_as_utc_and_an_unreadable_one_is_due() -> None:
    naive = NOW.replace(tzinfo=None)
    assert release_is_due({"release_at": (naive - timedelta(minutes=1)).isoformat()}, NOW)
    assert not release_is_due({"release_at": (naive + timedelta(minutes=1)).isoformat()}, NOW)
    assert release_is_due({"release_at": NOW.isoformat()}, naive)  # a clock without a zone is UTC too
    for unreadable in ({}, {"release_at": None}, {"release_at": "soon"}, {"release_at": 1234}):
        assert release_is_due(unreadable, NOW), unreadable


def test_a_hold_whose_release_time_lacks_a_zone_is_planned_like_any_other() -> None:
    jobs = [DeadlineJob(f"ns/j{i}", 2, 3600, 7200, "h100") for i in range(4)]
    due = held("j3", release_at=NOW.replace(tzinfo=None))
    nudges = plan_nudges(plan_pools([pool(4, jobs)]), due, NOW, POLICY)
    assert [(n.action, n.name) for n in nudges if n.action == "release"] == [("release", "j3")]
    assert "has come" in nudges[0].reason
    later = held("j3", release_at=(NOW + timedelta(minutes=30)).replace(tzinfo=None))  # its start minus the margin
    assert not [n for n in plan_nudges(plan_pools([pool(4, jobs)]), later, NOW, POLICY) if n.action == "release"]


def test_holds_and_demotions_name_the_workload_as_the_snapshot_read_it() -> None:
    jobs = [DeadlineJob(f"ns/j{i}", 2, 3600, 7200, "h100") for i in range(4)]
    jobs += [DeadlineJob(f"ns/late{i}", 2, 5 * 3600, 3600, "h100") for i in range(3)]
    frame = pd.DataFrame([{"namespace": "ns", "name": j.name[3:], "uid": f"uid-{j.name[3:]}", "resource_version": "41",
                           "deadline_hold": None} for j in jobs])
    nudges = plan_nudges(plan_pools([pool(4, jobs)]), frame, NOW, GIVE_UP)
    assert [(n.action, n.outcome) for n in nudges] == [("demote", "planned")] * 2 + [("demote", "deferred")]
    assert all((n.uid, n.resource_version) == (f"uid-{n.name}", "41") for n in nudges)
    plain = plan_nudges(plan_pools([pool(4, jobs[:4])]), frame, NOW, POLICY)
    assert [n.action for n in plain] == ["hold", "hold"]
    assert all((n.uid, n.resource_version) == (f"uid-{n.name}", "41") for n in plain)
    unnamed = plan_nudges(plan_pools([pool(4, jobs[:4])]), NO_HOLDS, NOW, POLICY)  # a frame without them
    assert [(n.uid, n.resource_version) for n in unnamed] == [(None, None)] * 2  # refused by the action, never guessed


def _queued(order: list[tuple[str, int]], **marks: str) -> pd.DataFrame:
    """The snapshot's Workloads in creation order (a minute apart), each with its priority and any mark."""
    return pd.DataFrame([{"namespace": "ns", "name": name, "priority": priority,
                          "created_at": pd.Timestamp(NOW) - pd.Timedelta(minutes=len(order) - i),
                          "deadline_hold": marks.get(name)} for i, (name, priority) in enumerate(order)])


def test_a_proven_plan_holds_only_where_kueues_own_order_would_miss_a_deadline_it_meets() -> None:
    """4 GPUs, two jobs running 50 min more. Pending: a wide job (4 GPUs, due in 5 h) and two late ones (2 GPUs,
    due in 1 h 55 min). The plan runs the late ones first (+50 min) and the wide one at +110 min. In Kueue's own
    order the wide one, created or ranked first, takes the four GPUs at +50 min and both late ones miss: there the
    plan holds. Created after them at the same priority, Kueue's order meets every deadline: nothing is held, and a
    hold placed before is released with the reason."""
    running = [DeadlineJob(f"ns/r{i}", 2, 3600, 6900, "h100", running_for=600) for i in range(2)]
    wide = DeadlineJob("ns/wide", 4, 3600, 5 * 3600, "h100")
    late = [DeadlineJob(f"ns/late{i}", 2, 3600, 6900, "h100") for i in range(2)]
    plans = plan_pools([pool(4, [*running, wide, *late])])
    jobs = [("r0", 0), ("r1", 0)]

    first = plan_nudges(plans, _queued([*jobs, ("wide", 0), ("late0", 0), ("late1", 0)]), NOW, POLICY)
    holds = [n for n in first if n.action == "hold"]
    assert holds and holds[0].name == "wide" and holds[0].release_at == NOW + timedelta(minutes=80)
    assert (holds[0].evidence["plan_on_time"], holds[0].evidence["kueue_order_on_time"]) == (5, 3)
    ranked = plan_nudges(plans, _queued([*jobs, ("late0", 0), ("late1", 0), ("wide", 5)]), NOW, POLICY)
    assert [n.name for n in ranked if n.action == "hold"] == [n.name for n in holds]  # priority before creation

    mark = held("wide", release_at=NOW + timedelta(minutes=80))["deadline_hold"][0]
    after = plan_nudges(plans, _queued([*jobs, ("late0", 0), ("late1", 0), ("wide", 0)], wide=mark), NOW, POLICY)
    assert [(n.action, n.name) for n in after] == [("release", "wide")]
    assert "Kueue's own order meets as many deadlines on the same estimates (5 of the plan's 5)" in after[0].reason


def test_a_demoted_workload_takes_its_recorded_priority_in_kueues_order() -> None:
    """Kueue's order is the baseline without gpuaas: a Workload demoted from 5 to 4 ranks at 5 there."""
    running = [DeadlineJob(f"ns/r{i}", 2, 3600, 6900, "h100", running_for=600) for i in range(2)]
    wide = DeadlineJob("ns/wide", 4, 3600, 5 * 3600, "h100")
    late = [DeadlineJob(f"ns/late{i}", 2, 3600, 6900, "h100") for i in range(2)]
    plans = plan_pools([pool(4, [*running, wide, *late])])
    order = [("r0", 0), ("r1", 0), ("late0", 4), ("late1", 4), ("wide", 4)]
    assert not [n for n in plan_nudges(plans, _queued(order), NOW, POLICY) if n.action == "hold"]
    mark = json.dumps({"audit_id": 1, "release_at": (NOW + timedelta(hours=1)).isoformat(), "before": {"priority": 5}})
    nudges = plan_nudges(plans, _queued(order, wide=mark), NOW, POLICY)
    # Ranked at 5, it goes first in Kueue's order and the late ones would miss: they are held (its own demotion,
    # no longer called for, is released).
    assert sorted((n.action, n.name) for n in nudges) == [("hold", "late0"), ("hold", "late1"), ("release", "wide")]


def test_a_lost_deadline_is_not_demoted_where_kueues_order_would_then_meet_fewer_deadlines() -> None:
    """3 GPUs. "late" (1 GPU) is lost even at half its estimate. In creation order it runs beside "short" (1 GPU,
    2 h, due in 4 h) and "wide" (3 GPUs, 3 h, due in 6 h) starts when both are done: both meet their deadlines.
    Demoted, "late" lets "wide" go first, and "short" waits 3 h and misses: so it is not demoted, and one
    demoted before gets its own priority back. Where the demotion costs nothing on the estimates it is made:
    what it is for is the work that arrives later, which then goes ahead of the lost one."""
    late = DeadlineJob("ns/late", 1, 3 * 3600, 3600, "h100")
    wide = DeadlineJob("ns/wide", 3, 3 * 3600, 6 * 3600, "h100")
    short = DeadlineJob("ns/short", 1, 2 * 3600, 4 * 3600, "h100")
    plans = plan_pools([pool(3, [late, wide, short])])
    assert plan_nudges(plans, _queued([("late", 0), ("wide", 0), ("short", 0)]), NOW, GIVE_UP) == []
    mark = demoted("late")["deadline_hold"][0]
    restored = plan_nudges(plans, _queued([("late", -1), ("wide", 0), ("short", 0)], late=mark), NOW, GIVE_UP)
    assert [(n.action, n.name) for n in restored] == [("release", "late")]
    assert "meets fewer deadlines" in restored[0].reason and "own priority restored" in restored[0].reason
    harmless = plan_pools([pool(3, [late, short])])
    assert [(n.action, n.name) for n in plan_nudges(harmless, _queued([("late", 0), ("short", 0)]), NOW, GIVE_UP)] == [
        ("demote", "late")]
