"""The rebalance on Kueue set-ups beyond one flat cohort, from the objects as the API serves them to the plan:

- a stopped ClusterQueue (``spec.stopPolicy``) or one Kueue reports inactive (``Active=False``) neither gives
  nor receives quota, its pending work is no demand, and the plan's notes name it and why;
- the pending Workloads of a stopped LocalQueue are no ClusterQueue's backlog;
- a cohort whose parents loop gets no plan, with the deadline planner's sentence;
- a queue never gives what its ``lendingLimit`` keeps from others (``nominalQuota - lendingLimit``), with
  ``manage_limits`` on or off.

Pure (the snapshot is built from parsed objects, no cluster).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuaas.models import Outcome, SourceStatus
from gpuaas.operations.rebalance import plan
from gpuaas.policies.deadlines import deadline_problems
from gpuaas.policy import Policy
from gpuaas.snapshot import build_snapshot
from gpuaas.sources import parse_cluster_queue
from gpuaas.sources._kube_kueue import parse_cohort, parse_local_queue, parse_workload
from gpuaas.sources.kube import KubeState, with_cluster_queues

NOW = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
GPU = "nvidia.com/gpu"
KUEUE = "kueue.x-k8s.io/v1beta2"


def policy(**rebalance: Any) -> Policy:
    return Policy.model_validate({"rebalance": {"min_history_days": 0, "max_step_percent": 10_000, "hysteresis_gpus": 0,
                                                "reclaiming_lends": True, **rebalance}})


def cq(name: str, gpus: int, cohort: str = "c", lending: int | None = None, stop: str | None = None,
       active: tuple[str, str] | None = None) -> dict[str, Any]:
    res: dict[str, Any] = {"name": GPU, "nominalQuota": gpus}
    if lending is not None:
        res["lendingLimit"] = lending
    spec: dict[str, Any] = {"cohortName": cohort, "preemption": {"reclaimWithinCohort": "Any"},
                            "namespaceSelector": {}, "resourceGroups": [{"coveredResources": [GPU],
                                                "flavors": [{"name": "h100", "resources": [res]}]}]}
    if stop:
        spec["stopPolicy"] = stop
    status = {"conditions": [{"type": "Active", "status": active[0], "reason": active[1]}]} if active else {}
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name, "resourceVersion": "7"},
            "spec": spec, "status": status}


def lq(name: str, queue: str, stop: str | None = None) -> dict[str, Any]:
    spec = {"clusterQueue": queue, **({"stopPolicy": stop} if stop else {})}
    return {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"namespace": "ns", "name": name}, "spec": spec}


def pending(name: str, queue: str, gpus: int) -> dict[str, Any]:
    """A pending Workload of LocalQueue ``queue``, waiting for two hours."""
    created = (NOW - timedelta(hours=2)).isoformat().replace("+00:00", "Z")
    return {"apiVersion": KUEUE, "kind": "Workload",
            "metadata": {"namespace": "ns", "name": name, "uid": name, "creationTimestamp": created},
            "spec": {"queueName": queue, "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "containers": [{"name": "c", "resources": {"requests": {GPU: str(gpus)}}}]}}}]}}


def snapshot_of(queues: list[dict[str, Any]], local: list[dict[str, Any]] = (),  # type: ignore[assignment]
                workloads: list[dict[str, Any]] = (), cohorts: list[dict[str, Any]] = ()) -> Any:  # type: ignore[assignment]
    lqs = tuple(parse_local_queue(o) for o in local)
    wls = with_cluster_queues((parse_workload(o, (GPU,)) for o in workloads), lqs)
    kube = KubeState("v1beta2", tuple(parse_cluster_queue(o) for o in queues), lqs, wls,
                     tuple(parse_cohort(o) for o in cohorts), (), (), (), (), 0)
    return build_snapshot(NOW, (30.0,), {"kube": SourceStatus("kube", True)}, kube=kube, prom=None)


def history(uses: dict[str, float]) -> pd.DataFrame:
    rows = [{"cluster_queue": q, "flavor": "h100", "stat": stat, "value": v}
            for q, use in uses.items() for stat, v in (("usage_p", use), ("reservation_p", use),
                                                       ("history_seconds", 7 * 86400.0))]
    return pd.DataFrame(rows, columns=["cluster_queue", "flavor", "stat", "value"])


def afters(result: Any) -> dict[str, int]:
    [outcome] = result.cohorts
    assert outcome.plan is not None, outcome.error
    return {c.queue: c.after for c in outcome.plan.changes}


# --- a stopped or inactive ClusterQueue ---------------------------------------------------------------------


def test_parse_reads_the_stop_policy_and_the_active_condition() -> None:
    assert parse_cluster_queue(cq("s", 8, stop="HoldAndDrain")).inactive == "stopped (spec.stopPolicy: HoldAndDrain)"
    assert parse_cluster_queue(cq("s", 8, stop="None")).inactive is None
    assert parse_cluster_queue(cq("f", 8, active=("False", "FlavorNotFound"))).inactive == (
        "inactive (status Active=False, reason FlavorNotFound)")
    assert parse_cluster_queue(cq("r", 8, active=("True", "Ready"))).inactive is None
    assert parse_local_queue(lq("l", "a", stop="Hold")).stop_policy == "Hold"


@pytest.mark.parametrize(("stop", "active", "why"), [
    ("HoldAndDrain", None, "stopped (spec.stopPolicy: HoldAndDrain)"),
    ("Hold", None, "stopped (spec.stopPolicy: Hold)"),
    (None, ("False", "AdmissionCheckNotFound"), "inactive (status Active=False, reason AdmissionCheckNotFound)"),
], ids=["hold-and-drain", "hold", "active-false"])
def test_a_queue_kueue_admits_nothing_into_neither_gives_nor_receives(
        stop: str | None, active: tuple[str, str] | None, why: str) -> None:
    # team-s waits for 12 GPUs: without the rule it takes quota from idle team-a; team-b waits too, and the idle
    # stopped queue's 8 GPUs are not given to it either.
    snap = snapshot_of([cq("team-a-cq", 8), cq("team-s-cq", 8, stop=stop, active=active), cq("team-b-cq", 2)],
                       [lq("s", "team-s-cq"), lq("b", "team-b-cq")],
                       [pending("s-big", "s", 12), pending("b-big", "b", 4)])
    result = plan(snap, history({"team-a-cq": 0.0, "team-s-cq": 0.0, "team-b-cq": 2.0}), policy())
    [outcome] = result.cohorts
    got = afters(result)
    assert "team-s-cq" not in got
    assert got["team-b-cq"] == 6 and got["team-a-cq"] == 4  # team-b's 4 pending come from team-a alone
    assert f"team-s-cq is {why}: not planned" in outcome.demand.notes


def test_the_pending_work_of_a_stopped_local_queue_is_no_backlog() -> None:
    queues = [cq("team-a-cq", 8), cq("team-b-cq", 2)]
    work = [pending("b-big", "b", 4)]
    running = snapshot_of(queues, [lq("b", "team-b-cq")], work)
    stopped = snapshot_of(queues, [lq("b", "team-b-cq", stop="HoldAndDrain")], work)
    by_name = {r.name: r.pending_gpus for r in running.queues.itertuples(index=False)}
    assert by_name["team-b-cq"] == 4
    assert {r.name: r.pending_gpus for r in stopped.queues.itertuples(index=False)}["team-b-cq"] == 0
    assert afters(plan(stopped, history({"team-a-cq": 0.0, "team-b-cq": 2.0}), policy())) == {
        "team-a-cq": 8, "team-b-cq": 2}


# --- a loop of Cohort parents -------------------------------------------------------------------------------


def test_a_cohort_under_a_loop_of_parents_is_refused_with_the_deadline_planners_sentence() -> None:
    cohorts = [{"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": "root"}, "spec": {"parentName": "child-a"}},
               {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": "child-a"}, "spec": {"parentName": "root"}}]
    snap = snapshot_of([cq("team-a-cq", 8, cohort="child-a"), cq("team-b-cq", 2, cohort="child-a")],
                       [lq("b", "team-b-cq")], [pending("b-big", "b", 4)], cohorts)
    result = plan(snap, history({"team-a-cq": 0.0, "team-b-cq": 2.0}), policy())
    [outcome] = result.cohorts
    loop = "cohort child-a: its parents loop (child-a -> root -> child-a) and Kueue admits nothing in its " \
           "ClusterQueues until that is fixed"
    assert outcome.plan is None and outcome.result == Outcome.no_plan
    assert outcome.error == f"{loop}: not planned"
    [pool] = deadline_problems(snap)
    assert pool.inexact == (f"{loop}; the plan is not exact and holds nothing",)


# --- lendingLimit -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("lending", "manage", "gives"), [
    (0, False, 0), (0, True, 0),      # lendingLimit 0: nothing of it is anybody else's
    (4, False, 4), (4, True, 4),      # 4 kept from others: at most the other 4 given, the limit followed or not
    (8, False, 6), (None, False, 6),  # it lends all: no floor (team-b's 6 pending take 6)
], ids=["ll0", "ll0-managed", "ll4", "ll4-managed", "ll-all", "no-ll"])
def test_a_queue_never_gives_what_its_lending_limit_keeps(lending: int | None, manage: bool, gives: int) -> None:
    snap = snapshot_of([cq("team-a-cq", 8, lending=lending), cq("team-b-cq", 2)], [lq("b", "team-b-cq")],
                       [pending("b-big", "b", 6)])
    result = plan(snap, history({"team-a-cq": 0.0, "team-b-cq": 2.0}), policy(manage_limits=manage))
    got = afters(result)
    assert got["team-a-cq"] == 8 - gives and got["team-b-cq"] == 2 + gives


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from([0, 2, 4, 8]), st.sampled_from([None, 0, 1, 2, 4, 8]),
                          st.sampled_from([0.0, 2.0, 12.0]), st.sampled_from([0, 4, 12])), min_size=2, max_size=4),
       st.booleans())
def test_no_plan_takes_a_queue_below_what_its_lending_limit_keeps(
        fleet: list[tuple[int, int | None, float, int]], manage: bool) -> None:
    """From the objects through the whole rebalance decision, on a random cohort (quota, lendingLimit, use,
    pending GPUs per queue), manage_limits on or off: the kept part (nominalQuota - lendingLimit) is never taken."""
    queues = [cq(f"q{i}", gpus, lending=None if lend is None else min(lend, gpus)) for i, (gpus, lend, _, _) in
              enumerate(fleet)]
    local = [lq(f"l{i}", f"q{i}") for i in range(len(fleet))]
    work = [pending(f"w{i}", f"l{i}", wait) for i, (_, _, _, wait) in enumerate(fleet) if wait]
    snap = snapshot_of(queues, local, work)
    got = afters(plan(snap, history({f"q{i}": use for i, (_, _, use, _) in enumerate(fleet)}),
                      policy(manage_limits=manage)))
    for i, (gpus, lend, _, _) in enumerate(fleet):
        if lend is not None and min(lend, gpus) < gpus:
            assert got[f"q{i}"] >= gpus - lend, (i, got)


# --- the deadline planner's pools ---------------------------------------------------------------------------


@pytest.mark.parametrize(("lending", "capacity"), [(None, 16), (2, 10)], ids=["lends-all", "keeps-6"])
def test_a_stopped_queues_pending_work_is_not_planned_and_only_what_it_lends_counts(
        lending: int | None, capacity: int) -> None:
    """Kueue lends a stopped queue's quota to its cohort (tests/real/test_inactive_queues_real.py), so it counts
    in the pool but for what its lendingLimit keeps; its own pending work Kueue never admits."""
    due = {"gpuaas.io/deadline": (NOW + timedelta(hours=3)).isoformat(), "gpuaas.io/expected-runtime": "1h"}
    work = [pending("d-job", "d", 4), pending("a-job", "a", 4)]
    for wl in work:
        wl["metadata"]["annotations"] = due
    snap = snapshot_of([cq("team-a-cq", 8), cq("team-d-cq", 8, lending=lending, stop="Hold")],
                       [lq("a", "team-a-cq"), lq("d", "team-d-cq")], work)
    [pool] = deadline_problems(snap)
    assert pool.capacity == capacity
    assert [j.name for j in pool.jobs] == ["ns/a-job"]
    assert ("team-d-cq is stopped (spec.stopPolicy: Hold): Kueue admits nothing into it, and the plan leaves out its "
            "1 pending Workload; its quota still counts, as Kueue lends it to the cohort (but for what a lendingLimit "
            "keeps)") in pool.notes
