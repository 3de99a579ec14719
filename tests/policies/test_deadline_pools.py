"""The live cluster's deadline problem per cohort and flavor, built from a snapshot (pure): capacity
from nominal quota, running and pending work, what is left out and what is said about it."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd

from gpuaas.models import Snapshot
from gpuaas.policies.deadlines import deadline_problems, plan_nudges, plan_pools
from gpuaas.policies.deadlines.kueue_order import ClusterQueues, Preemption
from gpuaas.policy import DeadlinesPolicy
from reports.deadlines import deadlines_headline, pool_dicts, pool_rows

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


def wl(name: str, state: str, gpus: float, *, runtime: float | None = 3600, deadline_in: float | None = 7200,
       active: bool = True, flavor: str | None = None, cq: str = "cq-a", hold: str | None = None,
       admitted_ago: float | None = None, requeue_in: float | None = None) -> dict[str, Any]:
    return {"namespace": "ns", "name": name, "state": state, "gpus": gpus, "active": active, "flavor": flavor,
            "requeue_at": None if requeue_in is None else pd.Timestamp(NOW + timedelta(seconds=requeue_in)),
            "cluster_queue": cq, "cohort": {"cq-a": "c", "cq-b": "c", "cq-solo": None}[cq],
            "runtime_seconds": runtime, "deadline_hold": hold,
            "deadline_at": None if deadline_in is None else pd.Timestamp(NOW + timedelta(seconds=deadline_in)),
            "admitted_at": None if admitted_ago is None else pd.Timestamp(NOW - timedelta(seconds=admitted_ago))}


def snapshot(rows: list[dict[str, Any]]) -> Snapshot:
    quotas = pd.DataFrame([
        {"cluster_queue": "cq-a", "cohort": "c", "flavor": "h100", "resource": "nvidia.com/gpu", "nominal": 4.0},
        {"cluster_queue": "cq-b", "cohort": "c", "flavor": "h100", "resource": "nvidia.com/gpu", "nominal": 4.0},
        {"cluster_queue": "cq-a", "cohort": "c", "flavor": "a100", "resource": "nvidia.com/gpu", "nominal": 2.0},
        {"cluster_queue": "cq-solo", "cohort": None, "flavor": "h100", "resource": "nvidia.com/gpu", "nominal": 8.0},
        {"cluster_queue": "cq-a", "cohort": "c", "flavor": "h100", "resource": "cpu", "nominal": 64.0},
    ])
    frame = pd.DataFrame(rows)
    frame["deadline_at"] = pd.to_datetime(frame["deadline_at"], utc=True)
    frame["admitted_at"] = pd.to_datetime(frame["admitted_at"], utc=True)
    frame["requeue_at"] = pd.to_datetime(frame["requeue_at"], utc=True)
    return Snapshot(collected_at=NOW, windows_minutes=(30.0,), sources={}, workloads=frame, quotas=quotas)


def test_pools_capacity_and_who_is_planned_where() -> None:
    snap = snapshot([
        wl("run", "admitted", 2, flavor="h100", admitted_ago=600, deadline_in=None),
        wl("run-unknown", "admitted", 2, flavor="h100", runtime=None, admitted_ago=60, deadline_in=None),
        wl("due", "pending", 2),
        wl("big", "pending", 10),
        wl("off", "pending", 2, active=False),  # deactivated by someone: not queued
        wl("held", "pending", 2, active=False, hold='{"audit_id": 1}'),  # held by gpuaas: still pending work
        wl("best", "pending", 1, deadline_in=None),
        wl("solo", "pending", 1, cq="cq-solo"),
    ])
    pools = {(p.cohort, p.flavor): p for p in deadline_problems(snap)}
    assert set(pools) == {("c", "a100"), ("c", "h100"), ("-cq-solo", "h100")}  # cpu quota is not a GPU pool
    h100 = pools[("c", "h100")]
    assert h100.capacity == 8 and pools[("c", "a100")].capacity == 2 and pools[("c", "a100")].jobs == ()
    jobs = {j.name: j for j in h100.jobs}
    assert set(jobs) == {"ns/run", "ns/run-unknown", "ns/due", "ns/held", "ns/best"}
    assert jobs["ns/run"].running_for == 600 and jobs["ns/due"].deadline == 7200 and jobs["ns/best"].deadline is None
    assert jobs["ns/run-unknown"].duration > 7200 + 60  # holds its GPUs past every deadline of the pool
    assert [j.name for j in h100.too_big] == ["ns/big"] and h100.too_big[0].gpus == 10
    assert any("run-unknown: running with no run time, so assumed to hold its GPUs" in n for n in h100.notes)
    [plan] = [p for p in plan_pools([h100])]
    assert "ns/big" in plan.missed and plan.plan.feasible


def test_a_pool_without_deadlines_still_reports_zero() -> None:
    [pool, *_] = plan_pools(deadline_problems(snapshot([wl("best", "pending", 1, deadline_in=None)])))
    assert pool.plan.extra_gpus == {pool.problem.flavor: 0} and pool.at_risk_count == 0


def test_a_job_running_past_its_estimate_keeps_its_gpus_in_the_plan() -> None:
    """Expected 1 h, running for 2 h: planned to hold its GPUs half its estimate (30 min) more, not dropped."""
    snap = snapshot([wl("late", "admitted", 2, flavor="h100", admitted_ago=7200, deadline_in=None),
                     wl("no-runtime", "pending", 2, runtime=None)])
    h100 = {(p.cohort, p.flavor): p for p in deadline_problems(snap)}[("c", "h100")]
    [late] = h100.jobs
    assert late.running_for == 7200 and late.duration == 7200 + 1800
    assert any("past its expected 60 min" in n for n in h100.notes)
    assert h100.uncontrolled == ("ns/no-runtime",)
    [pool] = pool_dicts(plan_pools([h100]))
    # the pending Workload the plan leaves out is said, not a table that reads as every job of the pool
    assert "1 pending Workload without a run time (the gpuaas.io/expected-runtime annotation) is not planned; Kueue " \
           "may admit it into any gap: ns/no-runtime" in pool["notes"]
    [entry] = pool["schedule"]
    assert entry["past_estimate"] is True and entry["end"] == 1800
    assert pool_rows(pool, {})[0][6] == "running, past its estimate"


def test_a_job_started_less_than_a_minute_ago_starts_at_plus_zero_not_minus_zero() -> None:
    snap = snapshot([wl("fresh", "admitted", 2, flavor="h100", admitted_ago=20, deadline_in=3600),
                     wl("older", "admitted", 2, flavor="h100", admitted_ago=90, deadline_in=3600)])
    [pool] = pool_dicts(plan_pools([p for p in deadline_problems(snap) if (p.cohort, p.flavor) == ("c", "h100")]))
    starts = {r[1]: r[3] for r in pool_rows(pool, {})}
    assert starts == {"ns/fresh": "+0m", "ns/older": "-1m"}, starts


def test_a_running_job_with_no_run_time_shows_no_end_in_every_pool() -> None:
    """Two pools, each running a job with no run time for 10 min: c/h100 next to a job due in 2 h, the solo
    queue's pool with no deadline at all. In both its end is unknown (table and JSON), never ``+0m``, and
    best-effort work too wide to fit beside it waits for it: its start is unknown, not now."""
    snap = snapshot([
        wl("blind-c", "admitted", 2, flavor="h100", runtime=None, admitted_ago=600, deadline_in=None),
        wl("due-c", "pending", 2),
        wl("blind-solo", "admitted", 4, flavor="h100", runtime=None, admitted_ago=600, deadline_in=None, cq="cq-solo"),
        wl("wide-solo", "pending", 6, deadline_in=None, cq="cq-solo"),
    ])
    pools = {(p["cohort"], p["flavor"]): p for p in pool_dicts(plan_pools(deadline_problems(snap)))}
    with_deadline, without = pools[("c", "h100")], pools[("-cq-solo", "h100")]
    for pool, blind in ((with_deadline, "ns/blind-c"), (without, "ns/blind-solo")):
        [entry] = [s for s in pool["schedule"] if s["name"] == blind]
        assert (entry["start"], entry["end"], entry["running"]) == (-600, None, True)
        [row] = [r for r in pool_rows(pool, {}) if r[1] == blind]
        assert row[3:] == ["-10m", "unknown", "-", "running, end unknown"]
    rows = {r[1]: r for r in pool_rows(with_deadline, {})}
    assert rows["ns/due-c"][3:] == ["+0m", "+1h00m", "+2h00m", "holds"]  # beside it: known times stay known
    [wide] = [r for r in pool_rows(without, {}) if r[1] == "ns/wide-solo"]
    assert wide[3:] == ["unknown", "unknown", "-", "best effort, start unknown"]
    [waits] = [s for s in json.loads(json.dumps(without))["schedule"] if s["name"] == "ns/wide-solo"]
    assert (waits["start"], waits["end"]) == (None, None)  # JSON null, not a number


def test_every_missed_job_of_a_pool_has_its_row_saying_by_how_much_or_why() -> None:
    """Pool c/h100, 8 GPUs: ``big`` asks for 10 (never admitted there), ``slow`` runs 2 h and is due in 90 min
    (ends 30 min late at the earliest); neither has a place in the schedule, and both are in the table."""
    snap = snapshot([wl("due", "pending", 2), wl("big", "pending", 10),
                     wl("slow", "pending", 2, runtime=7200, deadline_in=5400)])
    [pool] = [p for p in pool_dicts(plan_pools(deadline_problems(snap))) if p["flavor"] == "h100" and p["cohort"] == "c"]
    assert sorted(pool["missed"]) == ["ns/big", "ns/slow"]
    rows = {row[1]: row for row in pool_rows(pool, {"ns/big": "RayCluster ns/big"})}
    assert set(rows) == {"ns/due", "ns/big", "ns/slow"}
    assert rows["ns/big"][0] == "RayCluster ns/big" and rows["ns/big"][2] == 10
    assert rows["ns/big"][3:] == ["-", "-", "+2h00m", "missed: larger than the pool"]
    assert rows["ns/slow"][3:5] == ["-", "-"] and rows["ns/slow"][6] == "missed by 30m"
    assert pool["missed_by"] == {"ns/slow": 1800}
    assert rows["ns/due"][6] == "holds"


def test_a_pool_split_by_borrowing_or_lending_limits_is_planned_but_not_exact() -> None:
    snap = snapshot([wl("due", "pending", 2)])
    quotas = snap.quotas.copy()
    quotas["borrowing_limit"] = None
    quotas["lending_limit"] = None
    quotas.loc[1, "lending_limit"] = 1.0  # cq-b lends at most 1 of its 4 h100
    snap = Snapshot(collected_at=NOW, windows_minutes=(30.0,), sources={}, workloads=snap.workloads, quotas=quotas)
    pools = {(p.problem.cohort, p.problem.flavor): p for p in plan_pools(deadline_problems(snap))}
    h100, a100 = pools[("c", "h100")], pools[("c", "a100")]
    assert not h100.plan.exact and "cq-b has lendingLimit 1" in h100.plan.messages[-1]
    assert a100.plan.exact  # no limit on a100
    # the verdict names that reason, not the size of the exact search: planned exactly, the pool is not one set
    headline = deadlines_headline(pool_dicts([h100, a100]))
    assert "(heuristic plan: not every queue of the pool can reach all of its GPUs)" in headline
    assert "past the size" not in headline


def tree_snapshot(cohorts: list[dict[str, Any]], queues: list[tuple[str, str, float, dict[str, float]]],
                  rows: list[dict[str, Any]] | None = None) -> Snapshot:
    """queues: (name, cohort, h100 nominal, limits); cohorts: rows of the snapshot's Cohort frame."""
    quotas = pd.DataFrame([{"cluster_queue": q, "cohort": c, "flavor": "h100", "resource": "nvidia.com/gpu",
                            "nominal": n, "borrowing_limit": lim.get("borrowing"), "lending_limit": lim.get("lending")}
                           for q, c, n, lim in queues])
    frame = pd.DataFrame(rows or [])
    if rows:
        frame["deadline_at"] = pd.to_datetime(frame["deadline_at"], utc=True)
        frame["admitted_at"] = pd.to_datetime(frame["admitted_at"], utc=True)
        frame["requeue_at"] = pd.to_datetime(frame["requeue_at"], utc=True)
    return Snapshot(collected_at=NOW, windows_minutes=(30.0,), sources={}, workloads=frame, quotas=quotas,
                    cohorts=pd.DataFrame(cohorts))


def cohort(name: str, parent: str | None, gpus: float | None = None, **limits: float) -> dict[str, Any]:
    return {"cohort": name, "parent": parent, "flavor": "h100" if gpus is not None else None,
            "resource": "nvidia.com/gpu" if gpus is not None else None, "nominal": gpus,
            "borrowing_limit": limits.get("borrowing"), "lending_limit": limits.get("lending")}


def test_a_two_level_tree_with_a_cohorts_own_quota_is_one_exact_pool() -> None:
    """org (4 GPUs of its own) > research (2 of its own, cq-a 4) and eng (cq-b 2): one pool of 12, named org.
    A 10-GPU job due in 2 h fits only because of the Cohort quota and the other branch."""
    snap = tree_snapshot(
        [cohort("org", None, 4.0), cohort("research", "org", 2.0), cohort("eng", "org")],
        [("cq-a", "research", 4.0, {}), ("cq-b", "eng", 2.0, {})],
        [{**wl("wide", "pending", 10, cq="cq-a"), "cohort": "research"},
         {**wl("run", "admitted", 2, flavor="h100", cq="cq-b", admitted_ago=600, deadline_in=None), "cohort": "eng"}])
    [pool] = plan_pools(deadline_problems(snap))
    assert (pool.problem.cohort, pool.problem.flavor, pool.problem.capacity) == ("org", "h100", 12)
    assert {j.name for j in pool.problem.jobs} == {"ns/wide", "ns/run"} and pool.problem.too_big == ()
    assert pool.plan.exact and pool.plan.feasible and pool.at_risk_count == 0
    assert pool.plan.extra_gpus == {"h100": 0}
    assert any("cohort tree org (cohorts eng, org, research)" in n and "6 GPUs of the Cohort objects' own quota" in n
               for n in pool.problem.notes)


def test_limits_that_do_not_bind_keep_the_pool_exact() -> None:
    """cq-a may borrow 100 and eng lends all it has: every queue still reaches all 8."""
    snap = tree_snapshot([cohort("org", None), cohort("eng", "org", 0.0, lending=50.0)],
                         [("cq-a", "org", 4.0, {"borrowing": 100.0}), ("cq-b", "eng", 4.0, {})])
    [pool] = plan_pools(deadline_problems(snap))
    assert pool.problem.capacity == 8 and pool.plan.exact


def test_a_lending_limit_in_the_tree_makes_the_pool_inexact_and_says_who_reaches_what() -> None:
    """eng lends org only 1 of cq-b's 4: cq-a reaches 5 of the pool's 8."""
    snap = tree_snapshot([cohort("org", None), cohort("eng", "org", 0.0, lending=1.0)],
                         [("cq-a", "org", 4.0, {}), ("cq-b", "eng", 4.0, {})])
    [pool] = plan_pools(deadline_problems(snap))
    assert pool.problem.capacity == 8 and not pool.plan.exact
    assert "cohort eng has lendingLimit 1" in pool.plan.messages[-1]
    assert "cq-a reaches 5" in pool.plan.messages[-1] and "cq-b" not in pool.plan.messages[-1].split("(")[1]


def test_a_borrowing_limit_on_a_cohort_makes_the_pool_inexact() -> None:
    snap = tree_snapshot([cohort("org", None, 6.0), cohort("eng", "org", 0.0, borrowing=2.0)],
                         [("cq-a", "org", 2.0, {}), ("cq-b", "eng", 4.0, {})])
    [pool] = plan_pools(deadline_problems(snap))
    assert pool.problem.capacity == 12 and not pool.plan.exact
    assert "cohort eng has borrowingLimit 2" in pool.plan.messages[-1] and "cq-b reaches 6" in pool.plan.messages[-1]


def test_a_loop_of_parents_is_planned_but_not_exact() -> None:
    """Kueue admits nothing in a tree whose parents loop; the pool is named after the loop's first cohort."""
    snap = tree_snapshot([cohort("b", "a"), cohort("a", "b"), cohort("leaf", "b")],
                         [("cq-a", "leaf", 4.0, {}), ("cq-b", "a", 4.0, {})])
    [pool] = plan_pools(deadline_problems(snap))
    assert (pool.problem.cohort, pool.problem.capacity) == ("a", 8) and not pool.plan.exact
    assert "its parents loop (a -> b -> a)" in pool.plan.messages[-1]


def test_a_parent_without_a_cohort_object_is_an_empty_cohort_as_in_kueue() -> None:
    """research names org, which has no object: Kueue makes org an implicit empty cohort; cq-b names org too."""
    snap = tree_snapshot([cohort("research", "org", 2.0)],
                         [("cq-a", "research", 4.0, {}), ("cq-b", "org", 2.0, {})])
    [pool] = plan_pools(deadline_problems(snap))
    assert (pool.problem.cohort, pool.problem.capacity) == ("org", 8) and pool.plan.exact
    assert any("names parent org, which has no Cohort object" in n for n in pool.problem.notes)


def test_a_pool_knows_its_queues_whose_preemption_compares_priorities() -> None:
    """cq-b preempts by priority: its whole cohort tree (with cq-a) is such a pool; cq-solo is not."""
    snap = snapshot([wl("due", "pending", 2), wl("solo", "pending", 1, cq="cq-solo")])
    assert all(p.by_priority == () for p in deadline_problems(snap))  # a frame without the column: none
    snap.quotas["priority_preemption"] = snap.quotas["cluster_queue"] == "cq-b"
    pools = {(p.cohort, p.flavor): p for p in deadline_problems(snap)}
    assert pools[("c", "h100")].by_priority == ("cq-b",) and pools[("c", "a100")].by_priority == ("cq-b",)
    assert pools[("-cq-solo", "h100")].by_priority == ()


def test_a_pool_knows_each_queues_preemption_rules() -> None:
    """Each ClusterQueue's rules as the snapshot read them, for who may preempt whom; a queue whose rules are all
    Kueue's default (Never), or unread, is left out."""
    snap = snapshot([wl("due", "pending", 2), wl("solo", "pending", 1, cq="cq-solo")])
    assert all(p.queues.preemption == {} for p in deadline_problems(snap))  # a frame without the columns: none
    snap.quotas["within_cluster_queue"] = snap.quotas["cluster_queue"].map({"cq-b": "LowerPriority", "cq-a": "Never"})
    snap.quotas["reclaim_within_cohort"] = snap.quotas["cluster_queue"].map({"cq-solo": "Any"})
    pools = {(p.cohort, p.flavor): p for p in deadline_problems(snap)}
    assert pools[("c", "h100")].queues.preemption == {"cq-b": Preemption(within_cluster_queue="LowerPriority")}
    assert pools[("-cq-solo", "h100")].queues.preemption == {"cq-solo": Preemption(reclaim_within_cohort="Any")}


def test_a_pool_knows_the_pending_workloads_of_its_tree_it_does_not_place() -> None:
    """cq-a lists h100 first, then a100: its pending GPU Workload is planned in the h100 pool, yet Kueue may try it on
    a100 too (preempting there), and a CPU-only one may preempt in either; cq-b has no a100 quota, and its pending
    Workload may still reclaim there. Each waits in the pools that do not place it; a deactivated one nowhere."""
    snap = snapshot([wl("gpu", "pending", 2), wl("cpu-only", "pending", 0), wl("off", "pending", 0, active=False),
                     wl("b", "pending", 2, cq="cq-b"), wl("solo", "pending", 1, cq="cq-solo")])
    pools = {(p.cohort, p.flavor): p for p in deadline_problems(snap)}
    assert sorted(j.name for j in pools[("c", "h100")].jobs) == ["ns/b", "ns/gpu"]
    assert pools[("c", "h100")].queues.waiting == (("ns/cpu-only", "cq-a"),)
    assert pools[("c", "a100")].queues.waiting == (("ns/gpu", "cq-a"), ("ns/cpu-only", "cq-a"), ("ns/b", "cq-b"))
    assert pools[("-cq-solo", "h100")].queues.waiting == ()

def test_a_pool_knows_each_jobs_cluster_queue_and_kueues_order_admits_within_quota_before_borrowing() -> None:
    """cq-a and cq-b lend each other their 4 GPUs. Running: 4 GPUs in each, 50 min more. Pending: a wide job of
    cq-b (8 GPUs, due in 5 h), created before two late ones of cq-a (4 GPUs each, due in 1 h 55 min). Played as one
    queue, Kueue would give the wide (older) job all 8 GPUs at +50 min and both late ones would miss: a hold. Kueue
    admits cq-a's head first, within cq-a's own quota, while the wide one would borrow; the late ones take the GPUs
    at +50 min, the wide one at +110 min: every deadline met without gpuaas, so nothing is held."""
    rows = [wl("r-a", "admitted", 4, flavor="h100", admitted_ago=600, deadline_in=None),
            wl("r-b", "admitted", 4, flavor="h100", admitted_ago=600, deadline_in=None, cq="cq-b"),
            wl("wide", "pending", 8, deadline_in=5 * 3600, cq="cq-b"),
            wl("late0", "pending", 4, deadline_in=6900), wl("late1", "pending", 4, deadline_in=6900)]
    snap = snapshot(rows)
    snap.workloads["priority"] = 0
    snap.workloads["created_at"] = [pd.Timestamp(NOW - timedelta(minutes=60 - i)) for i in range(len(rows))]
    snap.workloads["uid"] = [f"uid-{r['name']}" for r in rows]
    h100 = {(p.cohort, p.flavor): p for p in deadline_problems(snap)}[("c", "h100")]
    assert dict(h100.queues.nominal) == {"cq-a": 4, "cq-b": 4}
    assert dict(h100.queues.queue_of) == {"ns/r-a": "cq-a", "ns/r-b": "cq-b", "ns/wide": "cq-b",
                                          "ns/late0": "cq-a", "ns/late1": "cq-a"}
    policy = DeadlinesPolicy(runtime_estimate_error=1.0, give_up_lost=False)
    [plan] = plan_pools([h100])
    assert {s.name: s.start for s in plan.plan.schedule}["ns/wide"] == 6600  # the plan: the late ones first
    assert [n for n in plan_nudges([plan], snap.workloads, NOW, policy) if n.action == "hold"] == []
    one_queue = plan_pools([replace(h100, queues=ClusterQueues())])
    holds = [n for n in plan_nudges(one_queue, snap.workloads, NOW, policy) if n.action == "hold"]
    assert {(n.name, n.evidence["plan_on_time"], n.evidence["kueue_order_on_time"]) for n in holds} == {
        ("wide", 3, 1), ("late0", 3, 1), ("late1", 3, 1)}  # each until its planned start less the margin


def test_a_pool_plans_a_workload_in_its_requeue_backoff_to_start_after_it() -> None:
    """Kueue keeps a Workload evicted with a backoff out of its queue until ``requeueAt``: the pool plans it to start
    no sooner. One whose backoff has passed (or that has none) is queued like any other."""
    snap = snapshot([wl("backing-off", "pending", 2, requeue_in=600), wl("passed", "pending", 2, requeue_in=-60),
                     wl("plain", "pending", 2)])
    [h100] = [p for p in deadline_problems(snap) if (p.cohort, p.flavor) == ("c", "h100")]
    assert {j.name: j.earliest_start for j in h100.jobs} == {"ns/backing-off": 600.0, "ns/passed": 0.0,
                                                             "ns/plain": 0.0}
    assert [n for n in h100.notes if "backoff" in n] == [
        "ns/backing-off is in Kueue's requeue backoff for 10 min more (status.requeueState.requeueAt): planned to "
        "start no sooner"]
    [plan] = plan_pools([h100])
    assert {s.name: s.start for s in plan.plan.schedule} == {"ns/backing-off": 600.0, "ns/passed": 0.0,
                                                             "ns/plain": 0.0}
