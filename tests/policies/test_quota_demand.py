"""``cohort_demands`` and ``deadline_gpus_per_queue``: the demand formula by hand, and the ways it
could be gamed (never-admissible Workloads, demand above what a queue can reach, a deadline need
taken from one schedule's peak, a tenant's guarantee counted once per cohort). Pure."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pandas as pd
import pytest

from gpuaas.models import Snapshot, SourceStatus
from gpuaas.policies.deadlines import DeadlineJob, PoolProblem, plan_pools
from gpuaas.policies.quotas import cohort_demands, deadline_gpus_per_queue
from gpuaas.policy import Policy

NOW = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
DAY = 86400.0


def snapshot(cells: list[tuple[str, str, str, int, float]], backlog: dict[str, tuple[float, float]],
             workloads: list[dict[str, Any]] | None = None) -> Snapshot:
    """cells: (queue, cohort, flavor, nominal, reserved); backlog: queue -> (pending GPUs, oldest wait s)."""
    quotas = pd.DataFrame([{"cluster_queue": q, "cohort": c, "flavor": f, "resource": "nvidia.com/gpu",
                            "nominal": float(n), "borrowing_limit": None, "lending_limit": None,
                            "reserved": r, "usage": r, "borrowed": 0.0} for q, c, f, n, r in cells])
    queues = pd.DataFrame([{"name": q, "pending_gpus": p, "oldest_pending_seconds": w}
                           for q, (p, w) in backlog.items()])
    return Snapshot(collected_at=NOW, windows_minutes=(30.0,), sources={"kube": SourceStatus("kube", ok=True)},
                    quotas=quotas, queues=queues, workloads=pd.DataFrame(workloads or []))


def history(rows: list[tuple[str, str, str, float]]) -> pd.DataFrame:
    return pd.DataFrame([{"cluster_queue": q, "flavor": f, "stat": s, "value": v} for q, f, s, v in rows])


def full(queue: str, flavor: str, use: float, reserved: float | None = None, seconds: float = 7 * DAY
         ) -> list[tuple[str, str, str, float]]:
    return [(queue, flavor, "usage_p", use), (queue, flavor, "reservation_p", reserved if reserved is not None else use),
            (queue, flavor, "history_seconds", seconds)]


def test_demand_is_held_plus_waiting_pending_or_the_deadline_need() -> None:
    snap = snapshot([("a", "c", "h100", 16, 3.0), ("b", "c", "h100", 8, 8.0), ("b", "c", "a100", 4, 0.0),
                     ("d", "c", "h100", 4, 4.0)],
                    {"a": (0.0, float("nan")), "b": (12.0, 3 * 3600.0), "d": (6.0, 600.0)})
    hist = history(full("a", "h100", 3) + full("b", "h100", 8, reserved=10) + full("b", "a100", 0)
                   + full("d", "h100", 4) + [("b", "", "pending_median", 4.0), ("d", "", "pending_median", 1.0)])
    [cohort] = cohort_demands(snap, hist, Policy(), deadline_gpus={("a", "h100"): 9})
    got = {(q.name, f): d for q in cohort.queues for f, d in q.demand.items()}
    # a: max(3 held, 9 for deadlines); b: 10 reserved + 12 pending (waited 3 h >= 30 min) on its first flavor only;
    # d: 4 held + the median 1 (its 6 pending waited 10 min: not yet demand).
    assert got == {("a", "h100"): 9.0, ("b", "h100"): 22.0, ("b", "a100"): 0.0, ("d", "h100"): 5.0}
    b = next(q for q in cohort.queues if q.name == "b")
    assert b.evidence["h100"] == "p90 use 8 of 8, p90 reserved 10, 12 GPUs pending, oldest waited 3.0 h"
    assert not cohort.little_history and cohort.notes == []
    assert cohort.limits.max_total_moved_gpus == Policy().rebalance.max_total_moved_gpus


def test_little_history_plans_from_what_there_is_and_moves_one_step_at_most() -> None:
    snap = snapshot([("a", "c", "h100", 16, 3.0), ("b", "c", "h100", 8, 8.0)], {})
    hist = history(full("a", "h100", 3, seconds=2 * 3600) + full("b", "h100", 8, seconds=2 * 3600))
    [cohort] = cohort_demands(snap, hist, Policy())
    assert cohort.little_history and cohort.history_seconds == 7200
    assert cohort.limits.max_total_moved_gpus == 8  # max_step_gpus, not 32
    assert cohort.notes == ["only 2.0 h of history (less than min_history_days=2): planned from what there is, "
                            "at most 8 GPUs moved in all"]


def test_a_plan_held_by_the_short_historys_cap_names_that_cap_not_the_policys() -> None:
    """The policy's max_total_moved_gpus is 32; with 2 hours of history the plan moves 8 at most, and a queue that
    wanted more is told which limit held it: one whose number it can find."""
    from gpuaas.policies.quotas import plan_quotas

    snap = snapshot([("a", "c", "h100", 40, 2.0), ("b", "c", "h100", 8, 8.0)], {"b": (20.0, 3600.0)})
    hist = history(full("a", "h100", 2, seconds=2 * 3600) + full("b", "h100", 28, seconds=2 * 3600))
    [cohort] = cohort_demands(snap, hist, Policy())
    plan = plan_quotas(cohort.queues, cohort.limits)
    assert plan.moved_gpus == 8
    [b] = [c for c in plan.changes if c.queue == "b"]
    assert "max_total_moved_gpus=8" not in b.reason and "max_total_moved_gpus=32" not in b.reason
    assert ("limited by the short history's cap of 8 GPUs (max_step_gpus, with less than min_history_days=2 of "
            "history) for the whole plan") in b.reason


@pytest.mark.parametrize(("a_seconds", "a_after"),
                         [(5 * 3600, 16), (2 * DAY - 2 * 3600, 16), (2 * DAY - 1800, 8), (2 * DAY, 8)])
def test_a_queue_younger_than_min_history_days_lends_nothing_below_its_share(a_seconds: float, a_after: int) -> None:
    # The cohort has a week of history, but queue a was created 5 hours ago and has used nothing yet; b wants 8
    # more (both reclaimWithinCohort: Never, so a quiet queue lends). Two days less half an hour of samples count
    # as two days (a scrape gap of up to an hour); less two hours do not. Its own samples, not the cohort's, say how long it has been quiet: it lends once they cover 2 days.
    from gpuaas.policies.quotas import plan_quotas

    snap = snapshot([("a", "c", "h100", 16, 0.0), ("b", "c", "h100", 16, 16.0)], {"b": (8.0, 3600.0)})
    snap.quotas["reclaim_within_cohort"] = "Never"  # the queues that lend: they cannot preempt borrowers
    hist = history(full("a", "h100", 0, seconds=a_seconds) + full("b", "h100", 16))
    [cohort] = cohort_demands(snap, hist, Policy())
    assert not cohort.little_history
    a = next(q for q in cohort.queues if q.name == "a")
    assert a.history_seconds == {"h100": a_seconds}
    plan = plan_quotas(cohort.queues, cohort.limits)
    assert {c.queue: c.after for c in plan.changes} == {"a": a_after, "b": 32 - a_after}
    young = "a has less than min_history_days of its own history: it lends nothing below its share until it has that much"
    assert (young in plan.notes) == (a_after == 16)


@pytest.mark.parametrize("window_days", [1.0, 0.5])
def test_a_window_shorter_than_min_history_days_is_enough_history_once_it_is_full(window_days: float) -> None:
    # usage_lookback_days (or --history-days) of a day: no history can be longer, so a full one is enough to lend
    # on, and the cohort is not capped as a short history, whatever min_history_days says.
    from gpuaas.policies.quotas import plan_quotas

    snap = snapshot([("a", "c", "h100", 16, 0.0), ("b", "c", "h100", 16, 16.0)], {"b": (8.0, 3600.0)})
    snap.quotas["reclaim_within_cohort"] = "Never"
    seconds = window_days * DAY - 300  # one 5-minute sample short of the window
    hist = history(full("a", "h100", 0, seconds=seconds) + full("b", "h100", 16, seconds=seconds))
    [cohort] = cohort_demands(snap, hist, Policy(), window_days=window_days)
    assert not cohort.little_history and cohort.notes == []
    assert {c.queue: c.after for c in plan_quotas(cohort.queues, cohort.limits).changes} == {"a": 8, "b": 24}
    [policy_window] = cohort_demands(snap, hist, Policy.model_validate({"rebalance": {
        "usage_lookback_days": window_days}}))
    assert policy_window.limits == cohort.limits


def test_no_quota_history_at_all_lends_nothing_and_says_which_metric_is_missing() -> None:
    # Prometheus answered, but no queue of the cohort has a kueue_cluster_queue_nominal_quota sample (Kueue's
    # metrics.enableClusterQueueResources off): demand is what the queues hold now, and nobody lends on that.
    from gpuaas.policies.quotas import plan_quotas

    snap = snapshot([("a", "c", "h100", 16, 0.0), ("b", "c", "h100", 16, 16.0)], {"b": (8.0, 3600.0)})
    snap.quotas["reclaim_within_cohort"] = "Never"
    [cohort] = cohort_demands(snap, history([]), Policy())
    assert cohort.little_history
    assert cohort.notes[0] == (
        "no quota history for any queue of cohort c (Kueue's kueue_cluster_queue_nominal_quota has no samples in "
        "the window: Kueue exports it with metrics.enableClusterQueueResources: true): planned from what the "
        "queues hold now, and nothing is lent below a share")
    assert {c.queue: c.after for c in plan_quotas(cohort.queues, cohort.limits).changes} == {"a": 16, "b": 16}


def test_a_cell_without_history_falls_back_to_what_it_holds_now() -> None:
    [cohort] = cohort_demands(snapshot([("a", "c", "h100", 16, 5.0)], {}), history([]), Policy())
    assert cohort.queues[0].demand == {"h100": 5.0} and "no history" in cohort.queues[0].evidence["h100"]
    assert cohort.little_history


def test_guarantees_weights_and_the_cohort_filter_come_from_the_policy() -> None:
    policy = Policy.model_validate({"tenants": [
        {"name": "t1", "cluster_queues": ["a", "b"], "guaranteed_gpus": 6, "weight": 2.0},
        {"name": "t2", "cluster_queues": ["x"], "guaranteed_gpus": 5, "guaranteed_gpus_per_flavor": {"a100": 1}},
    ]})
    snap = snapshot([("a", "c", "h100", 8, 0.0), ("b", "c", "h100", 4, 0.0), ("x", "c", "h100", 4, 0.0),
                     ("x", "c", "a100", 2, 0.0), ("z", "other", "h100", 4, 0.0)], {})
    [cohort] = cohort_demands(snap, history([]), policy, cohorts=["c"])
    by = {q.name: q for q in cohort.queues}
    assert by["a"].guaranteed == {"h100": 4} and by["b"].guaranteed == {"h100": 2}  # 6 in proportion 8:4
    assert by["x"].guaranteed == {"h100": 5, "a100": 1}
    assert by["a"].weight == 2.0 and by["x"].weight == 1.0
    assert {c.cohort for c in cohort_demands(snap, history([]), policy)} == {"c", "other"}


def test_recent_changes_reach_the_planner_input() -> None:
    [cohort] = cohort_demands(snapshot([("a", "c", "h100", 8, 0.0)], {}), history([]), Policy(),
                              recent_change={("a", "h100"): -2})
    assert cohort.queues[0].recent_change == {"h100": -2}


@pytest.mark.parametrize(("jobs", "peak"), [
    # 4 GPUs, 4 jobs of 2 GPUs due in twice their run time: two, then two -> the queue needs 4 at once.
    ([("team-a/j1", 2, 1.0, 2.0), ("team-a/j2", 2, 1.0, 2.0), ("team-a/j3", 2, 1.0, 2.0), ("team-a/j4", 2, 1.0, 2.0)],
     4),
    ([("team-a/j1", 3, 1.0, 5.0)], 3),
], ids=["two-then-two", "one-job"])
def test_deadline_gpus_per_queue_is_the_planners_minimum_for_its_jobs(
        jobs: list[tuple[str, int, float, float]], peak: int) -> None:
    problem = PoolProblem("c", "h100", 4, tuple(DeadlineJob(n, g, d, dl, "h100") for n, g, d, dl in jobs))
    pools = plan_pools([problem])
    workloads = [{"namespace": n.split("/")[0], "name": n.split("/")[1], "cluster_queue": "team-a-cq"}
                 for n, *_ in jobs]
    snap = snapshot([("team-a-cq", "c", "h100", 4, 0.0)], {}, workloads)
    assert deadline_gpus_per_queue(pools, snap) == {("team-a-cq", "h100"): peak}


def test_a_guarantee_in_an_unknown_flavor_is_said_not_silently_dropped() -> None:
    """A flavor the policy names that no ClusterQueue has (a typo) is a note of the plan."""
    snap = snapshot([("a", "c", "h100", 8, 0.0), ("b", "c", "h100", 8, 0.0)], {})
    policy = Policy.model_validate({"tenants": [
        {"name": "ta", "cluster_queues": ["a"], "guaranteed_gpus": 2, "guaranteed_gpus_per_flavor": {"h10O": 4}},
        {"name": "tb", "cluster_queues": ["b"], "guaranteed_gpus_per_flavor": {"h100": 3}}]})
    [cohort] = cohort_demands(snap, history(full("a", "h100", 0) + full("b", "h100", 0)), policy)
    assert cohort.notes == ["tenant 'ta': guaranteed_gpus_per_flavor names flavor 'h10O', which no ClusterQueue "
                            "has a GPU quota in (known: h100); ignored"]
    assert {q.name: q.guaranteed for q in cohort.queues} == {"a": {"h100": 2}, "b": {"h100": 3}}


def test_the_deadline_need_is_the_minimum_not_the_peak_of_a_schedule_on_a_big_pool() -> None:
    # Four 4-GPU jobs of 1 h, due in 4 h: on a 16-GPU pool EDF runs them at once (a peak of 16),
    # yet one after the other on 4 GPUs they all hold.
    jobs = [(f"team-a/j{i}", 4, 1.0, 4.0) for i in range(4)]
    problem = PoolProblem("c", "h100", 16, tuple(DeadlineJob(n, g, d, dl, "h100") for n, g, d, dl in jobs))
    workloads = [{"namespace": "team-a", "name": f"j{i}", "cluster_queue": "team-a-cq"} for i in range(4)]
    snap = snapshot([("team-a-cq", "c", "h100", 16, 0.0)], {}, workloads)
    assert deadline_gpus_per_queue(plan_pools([problem]), snap) == {("team-a-cq", "h100"): 4}


def pending(queue: str, name: str, gpus: float) -> dict[str, Any]:
    return {"namespace": "ns", "name": name, "cluster_queue": queue, "state": "pending", "active": True, "gpus": gpus}


def test_a_never_admissible_workload_is_named_and_not_counted() -> None:
    # a uses 4 of 16; a 10,000-GPU Workload waits in it (the cohort has 32 GPUs), plus a real 2-GPU one.
    snap = snapshot([("a", "c", "h100", 16, 4.0), ("b", "c", "h100", 16, 16.0)], {"a": (10_002.0, 3 * 3600.0)},
                    [pending("a", "huge", 10_000.0), pending("a", "small", 2.0)])
    hist = history(full("a", "h100", 4) + full("b", "h100", 16) + [("a", "", "pending_median", 10_002.0)])
    [cohort] = cohort_demands(snap, hist, Policy())
    got = {q.name: q.demand["h100"] for q in cohort.queues}
    assert got == {"a": 6.0, "b": 16.0}
    assert cohort.notes == ["a: pending Workloads larger than anything the queue can ever be admitted (32 GPUs): "
                            "ns/huge (10000 GPUs); not counted as demand"]


def test_demand_is_capped_at_the_cohorts_capacity() -> None:
    # a holds 16 and 30 GPUs wait (each Workload fits the cohort's 32): demand 46, capped at 32.
    quotas = [("a", "c", "h100", 16, 16.0), ("b", "c", "h100", 16, 0.0)]
    snap = snapshot(quotas, {"a": (30.0, 3 * 3600.0)}, [pending("a", f"w{i}", 5.0) for i in range(6)])
    [cohort] = cohort_demands(snap, history(full("a", "h100", 16) + full("b", "h100", 0)), Policy())
    a = cohort.queues[0]
    assert a.demand == {"h100": 32.0} and "capped at the 32 GPUs it can reach" in a.evidence["h100"]
    assert cohort.notes == []


def test_a_tenant_in_two_cohorts_is_owed_its_guarantee_once() -> None:
    policy = Policy.model_validate({"tenants": [{"name": "t", "cluster_queues": ["a", "x"], "guaranteed_gpus": 6}]})
    snap = snapshot([("a", "c1", "h100", 8, 0.0), ("b", "c1", "h100", 8, 0.0), ("x", "c2", "h100", 4, 0.0),
                     ("y", "c2", "h100", 8, 0.0)], {})
    cohorts = {c.cohort: c for c in cohort_demands(snap, history([]), policy)}
    owed = {q.name: q.guaranteed for c in cohorts.values() for q in c.queues if q.guaranteed}
    assert owed == {"a": {"h100": 4}, "x": {"h100": 2}}  # 6 in proportion 8:4, not 6 in each cohort


def test_the_reach_counts_the_cohort_tree_and_a_cohorts_own_quota() -> None:
    """c (a 8, b 8) sits under org, whose Cohort object holds 16 GPUs of its own and which also has the
    cohort d (x 8): a reaches 40. A 36-GPU Workload can run there; a 41-GPU one never can."""
    snap = snapshot([("a", "c", "h100", 8, 0.0), ("b", "c", "h100", 8, 0.0), ("x", "d", "h100", 8, 0.0)],
                    {"a": (79.0, 3 * 3600.0)}, [pending("a", "big", 36.0), pending("a", "huge", 41.0),
                                                pending("a", "small", 2.0)])
    cohorts = pd.DataFrame([
        {"cohort": "org", "parent": None, "flavor": "h100", "resource": "nvidia.com/gpu", "nominal": 16.0},
        {"cohort": "c", "parent": "org", "flavor": None, "resource": None, "nominal": None},
        {"cohort": "d", "parent": "org", "flavor": None, "resource": None, "nominal": None}])
    snap = Snapshot(collected_at=NOW, windows_minutes=(30.0,), sources=snap.sources, quotas=snap.quotas,
                    queues=snap.queues, workloads=snap.workloads, cohorts=cohorts)
    by = {c.cohort: c for c in cohort_demands(snap, history(full("a", "h100", 0) + full("b", "h100", 0)), Policy())}
    a = next(q for q in by["c"].queues if q.name == "a")
    assert a.demand == {"h100": 38.0}  # big and small: within the tree's 40, beyond the cohort's 16
    assert by["c"].notes == ["a: pending Workloads larger than anything the queue can ever be admitted (40 GPUs): "
                             "ns/huge (41 GPUs); not counted as demand"]


def test_a_borrowing_limit_on_a_child_cohort_caps_the_reach() -> None:
    """c may borrow at most 4 from org (16 of its own): a reaches its cohort's 16 plus 4."""
    snap = snapshot([("a", "c", "h100", 8, 0.0), ("b", "c", "h100", 8, 0.0)], {"a": (30.0, 3 * 3600.0)},
                    [pending("a", f"w{i}", 5.0) for i in range(6)])
    cohorts = pd.DataFrame([
        {"cohort": "org", "parent": None, "flavor": "h100", "resource": "nvidia.com/gpu", "nominal": 16.0},
        {"cohort": "c", "parent": "org", "flavor": "h100", "resource": "nvidia.com/gpu", "nominal": 0.0,
         "borrowing_limit": 4.0}])
    snap = Snapshot(collected_at=NOW, windows_minutes=(30.0,), sources=snap.sources, quotas=snap.quotas,
                    queues=snap.queues, workloads=snap.workloads, cohorts=cohorts)
    [cohort] = cohort_demands(snap, history(full("a", "h100", 0) + full("b", "h100", 0)), Policy())
    a = cohort.queues[0]
    assert a.demand == {"h100": 20.0} and "capped at the 20 GPUs it can reach" in a.evidence["h100"]


@pytest.mark.parametrize("limit", [None, "borrowing_limit", "lending_limit"],
                         ids=["no-limit", "borrowing-limit", "lending-limit"])
def test_reclaiming_queues_keep_a_margin_only_where_no_limit_caps_borrowing(limit: str | None) -> None:
    """Where a limit caps borrowing, a reclaiming queue lends all its demand leaves, whatever the policy: nominal quota
    is then what a capped borrower can reach. Elsewhere it lends only if the policy says so, keeping its margins."""
    snap = snapshot([("a", "c", "h100", 8, 0.0), ("b", "c", "h100", 8, 8.0)], {"b": (8.0, 3 * 3600.0)})
    if limit is not None:
        snap.quotas.loc[snap.quotas["cluster_queue"] == "b", limit] = 2.0
    demand = history(full("a", "h100", 0) + full("b", "h100", 8))
    assert cohort_demands(snap, demand, Policy())[0].limits.reclaiming_lends is (limit is not None)
    lending = Policy.model_validate({"rebalance": {"reclaiming_lends": True}})
    limits = cohort_demands(snap, demand, lending)[0].limits
    keeps = (limits.reclaiming_lends, limits.reclaiming_keep_factor, limits.reclaiming_keep_gpus)
    assert keeps == ((True, 4.0, 2) if limit is None else (True, 0.0, 0))
