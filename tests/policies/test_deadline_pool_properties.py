"""Properties of a deadline pool's capacity on random cohort trees with quota limits.

- On a flat cohort (queues, limits, a Cohort object's own quota) the reach of every ClusterQueue is
  what the emulated Kueue's quota book lets it reserve on an empty cluster: two implementations
  written apart (``gpuaas.models._cohort_tree`` from Kueue's ``potentialAvailable``, the emulator from
  its admission arithmetic) agree.
- On any tree: no queue reaches more than the tree's quota nor less than its own nominal quota; a
  tree without limits is one pool every queue reaches whole.
- The pool's capacity is the tree's quota; the plan is exact only when every queue that lists the
  flavor reaches all of it; where it is not exact, nothing is held, and where it is (on the same
  work) the holds are placed: the test sees both sides.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuaas.cluster.kueue._quota import ClusterQueueQuota, QuotaBook
from gpuaas.models import CohortTree, Snapshot
from gpuaas.policies.deadlines import deadline_problems, plan_nudges, plan_pools
from gpuaas.policy import DeadlinesPolicy

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
GPU = "nvidia.com/gpu"
FR = ("h100", GPU)
POLICY = DeadlinesPolicy(max_holds_per_run=100, release_margin_minutes=30, runtime_estimate_error=1.0)
NO_HOLDS = pd.DataFrame(columns=["namespace", "name", "deadline_hold"])

Limits = tuple[int | None, int | None]
"""(borrowingLimit, lendingLimit)"""


def limits(nominal: int, *, allowed: bool) -> st.SearchStrategy[Limits]:
    if not allowed:
        return st.just((None, None))
    return st.tuples(st.one_of(st.none(), st.integers(0, 6)), st.one_of(st.none(), st.integers(0, nominal)))


@st.composite
def trees(draw: st.DrawFn, *, flat: bool = False, with_limits: bool = True
          ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Cohort rows (``cohort``, ``parent``, own quota) and queue rows (``cluster_queue``, ``cohort``, quota)."""
    names = ["root"] if flat else ["root", *draw(st.lists(st.sampled_from(["a", "b", "c"]), max_size=3, unique=True))]
    cohorts = []
    for k, name in enumerate(names):
        parent = None if k == 0 else draw(st.sampled_from(names[:k]))
        nominal = draw(st.one_of(st.none(), st.integers(0, 4)))
        bl, ll = draw(limits(nominal or 0, allowed=with_limits and nominal is not None and k > 0))
        cohorts.append({"cohort": name, "parent": parent, "flavor": "h100" if nominal is not None else None,
                        "resource": GPU if nominal is not None else None, "nominal": nominal,
                        "borrowing_limit": bl, "lending_limit": ll})
    queues = []
    for k in range(draw(st.integers(1, 3))):
        nominal = draw(st.integers(0, 6))
        bl, ll = draw(limits(nominal, allowed=with_limits))
        queues.append({"cluster_queue": f"cq{k}", "cohort": draw(st.sampled_from(names)), "flavor": "h100",
                       "resource": GPU, "nominal": float(nominal), "borrowing_limit": bl, "lending_limit": ll})
    return cohorts, queues


def tree_of(cohorts: list[dict[str, Any]], queues: list[dict[str, Any]]) -> CohortTree:
    return CohortTree.from_frames(pd.DataFrame(queues), pd.DataFrame(cohorts))


def _spec_quota(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": GPU, "nominalQuota": int(row["nominal"] or 0)}
    for field, key in (("borrowing_limit", "borrowingLimit"), ("lending_limit", "lendingLimit")):
        if row[field] is not None:
            out[key] = int(row[field])
    return {"coveredResources": [GPU], "flavors": [{"name": "h100", "resources": [out]}]}


def quota_book(cohorts: list[dict[str, Any]], queues: list[dict[str, Any]]) -> QuotaBook:
    """The emulated Kueue's quota book of the same objects."""
    book = QuotaBook()
    objects = [{"metadata": {"name": q["cluster_queue"]},
                "spec": {"cohortName": q["cohort"], "resourceGroups": [_spec_quota(q)]}} for q in queues]
    cohort_objects = [{"metadata": {"name": c["cohort"]},
                       "spec": {"resourceGroups": [_spec_quota(c)] if c["nominal"] is not None else []}}
                      for c in cohorts]
    book.set_queues([ClusterQueueQuota.from_object(o) for o in objects], cohort_objects)
    return book


@settings(max_examples=200, deadline=None)
@given(trees(flat=True))
def test_on_a_flat_cohort_reach_is_what_the_emulated_kueue_admits(
        tree: tuple[list[dict[str, Any]], list[dict[str, Any]]]) -> None:
    cohorts, queues = tree
    model, book = tree_of(cohorts, queues), quota_book(cohorts, queues)
    for q in queues:
        assert model.reach(q["cluster_queue"], FR) * 1000 == book.available(q["cluster_queue"], FR), q


@settings(max_examples=200, deadline=None)
@given(trees())
def test_reach_lies_between_a_queues_own_quota_and_the_trees(
        tree: tuple[list[dict[str, Any]], list[dict[str, Any]]]) -> None:
    cohorts, queues = tree
    model = tree_of(cohorts, queues)
    total = model.total("root", FR)
    assert total == sum(q["nominal"] for q in queues) + sum(c["nominal"] or 0 for c in cohorts)
    for q in queues:
        reach = model.reach(q["cluster_queue"], FR)
        assert q["nominal"] - 1e-9 <= reach <= total + 1e-9


@settings(max_examples=100, deadline=None)
@given(trees(with_limits=False))
def test_without_limits_every_queue_reaches_the_whole_tree(
        tree: tuple[list[dict[str, Any]], list[dict[str, Any]]]) -> None:
    cohorts, queues = tree
    model = tree_of(cohorts, queues)
    assert {model.reach(q["cluster_queue"], FR) for q in queues} == {model.total("root", FR)}


def snapshot(cohorts: list[dict[str, Any]], queues: list[dict[str, Any]], capacity: int) -> Snapshot:
    """Three rounds of jobs as wide as the pool, in the first queue, each due when its round ends."""
    rows = [{"namespace": "ns", "name": f"j{k}", "state": "pending", "gpus": float(capacity), "active": True,
             "flavor": None, "cluster_queue": queues[0]["cluster_queue"], "cohort": queues[0]["cohort"],
             "runtime_seconds": 3600.0, "deadline_hold": None, "admitted_at": pd.NaT,
             "deadline_at": pd.Timestamp(NOW + timedelta(hours=k + 1))} for k in range(3)]
    frame = pd.DataFrame(rows)
    frame["deadline_at"] = pd.to_datetime(frame["deadline_at"], utc=True)
    frame["admitted_at"] = pd.to_datetime(frame["admitted_at"], utc=True)
    return Snapshot(collected_at=NOW, windows_minutes=(30.0,), sources={}, workloads=frame,
                    quotas=pd.DataFrame(queues), cohorts=pd.DataFrame(cohorts))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees())
def test_a_pool_is_exact_only_where_every_queue_reaches_it_and_holds_nothing_otherwise(
        tree: tuple[list[dict[str, Any]], list[dict[str, Any]]]) -> None:
    cohorts, queues = tree
    model = tree_of(cohorts, queues)
    total = int(model.total("root", FR))
    if total == 0:
        return
    [pool] = plan_pools(deadline_problems(snapshot(cohorts, queues, total)))
    assert (pool.problem.cohort, pool.problem.capacity) == ("root", total)
    whole = all(model.reach(q["cluster_queue"], FR) >= total - 1e-9 for q in queues)
    assert pool.plan.exact == whole
    holds = [n for n in plan_nudges([pool], NO_HOLDS, NOW, POLICY) if n.action == "hold"]
    assert pool.plan.feasible and pool.at_risk_count == 0  # three rounds, each due when it ends
    assert sorted(n.name for n in holds) == (["j1", "j2"] if whole else [])
