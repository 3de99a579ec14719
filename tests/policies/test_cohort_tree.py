"""What a ClusterQueue can reach in a Kueue cohort tree, and the deadline pools built on it, checked against
an admission simulation written here: Kueue's run-time ``available``/``addUsage`` (with usage, not the
``potentialAvailable`` shortcut the code uses), admitting one GPU at a time until Kueue says no."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuaas.models import CohortTree, Snapshot
from gpuaas.policies.deadlines import deadline_problems
from gpuaas.policies.quotas import reachable_gpus

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
GPU = "nvidia.com/gpu"


@dataclass
class Spec:
    """One node of a generated tree: a Cohort (``cohort`` True) or a ClusterQueue; quota None = not listed."""

    name: str
    cohort: bool
    parent: str | None
    nominal: int | None
    borrowing: int | None = None
    lending: int | None = None


@dataclass
class Sim:
    """Kueue's admission arithmetic with usage, node by node (one flavor/resource)."""

    nodes: dict[str, Spec]
    usage: dict[str, int] = field(default_factory=dict)

    def children(self, name: str) -> list[str]:
        return [n for n, s in self.nodes.items() if s.parent == name]

    def sub(self, name: str) -> int:
        spec = self.nodes[name]
        return (spec.nominal or 0) + sum(self.sub(c) - self.lq(c) for c in self.children(name))

    def lq(self, name: str) -> int:
        spec = self.nodes[name]
        return max(0, self.sub(name) - spec.lending) if spec.lending is not None else 0

    def available(self, name: str) -> int:
        spec, used = self.nodes[name], self.usage.get(name, 0)
        if spec.parent is None:
            return self.sub(name) - used
        above = self.available(spec.parent)
        if spec.borrowing is not None:
            stored = self.sub(name) - self.lq(name)
            above = min(stored - max(0, used - self.lq(name)) + spec.borrowing, above)
        return max(0, self.lq(name) - used) + above

    def add(self, name: str, amount: int) -> None:
        spec = self.nodes[name]
        free_here = max(0, self.lq(name) - self.usage.get(name, 0))
        self.usage[name] = self.usage.get(name, 0) + amount
        if spec.parent is not None and amount > free_here:
            self.add(spec.parent, amount - free_here)

    def admit_all(self, queue: str) -> int:
        """GPUs admitted to ``queue`` one at a time, from empty, until one no longer fits."""
        self.usage = {}
        count = 0
        while self.available(queue) >= 1:
            self.add(queue, 1)
            count += 1
        return count


def _limit(draw: st.DrawFn, allowed: bool, most: int | None = None) -> int | None:
    if not allowed or not draw(st.booleans()):
        return None
    return draw(st.integers(0, most if most is not None else 4))


@st.composite
def trees(draw: st.DrawFn, limits: bool = True, max_queues: int = 4) -> dict[str, Spec]:
    """A forest of 1-4 Cohorts (parents drawn among earlier ones: no loop) and 1-``max_queues`` queues under them."""
    nodes: dict[str, Spec] = {}
    for i in range(draw(st.integers(1, 4))):
        parent = draw(st.sampled_from([None, *(f"co{j}" for j in range(i))]))
        nominal = draw(st.none() | st.integers(0, 4))
        ok = limits and parent is not None and nominal is not None  # Kueue: limits only under a parent
        nodes[f"co{i}"] = Spec(f"co{i}", True, parent, nominal, _limit(draw, ok), _limit(draw, ok))
    cohorts = list(nodes)
    for i in range(draw(st.integers(1, max_queues))):
        nominal = draw(st.integers(0, 4))
        nodes[f"q{i}"] = Spec(f"q{i}", False, draw(st.sampled_from(cohorts)), nominal,
                              _limit(draw, limits), _limit(draw, limits, most=nominal))  # lendingLimit <= nominal
    return nodes


def frames(nodes: dict[str, Spec], flavor: str = "h100") -> tuple[pd.DataFrame, pd.DataFrame]:
    quotas = pd.DataFrame([{"cluster_queue": s.name, "cohort": s.parent, "flavor": flavor, "resource": GPU,
                            "nominal": float(s.nominal or 0), "borrowing_limit": s.borrowing, "lending_limit": s.lending}
                           for s in nodes.values() if not s.cohort])
    cohorts = pd.DataFrame([{"cohort": s.name, "parent": s.parent, "flavor": flavor if s.nominal is not None else None,
                             "resource": GPU if s.nominal is not None else None,
                             "nominal": s.nominal, "borrowing_limit": s.borrowing, "lending_limit": s.lending}
                            for s in nodes.values() if s.cohort])
    return quotas, cohorts


def root_of(nodes: dict[str, Spec], name: str) -> str:
    while nodes[name].parent is not None:
        name = str(nodes[name].parent)
    return name


@settings(max_examples=150, deadline=None)
@given(trees())
def test_reach_is_what_kueue_admits_one_gpu_at_a_time(nodes: dict[str, Spec]) -> None:
    tree = CohortTree.from_frames(*frames(nodes))
    for name, spec in nodes.items():
        if not spec.cohort:
            assert tree.reach(name, ("h100", GPU)) == Sim(nodes).admit_all(name), name


@settings(max_examples=100, deadline=None)
@given(trees(limits=False))
def test_without_limits_every_queue_reaches_all_of_its_tree(nodes: dict[str, Spec]) -> None:
    tree = CohortTree.from_frames(*frames(nodes))
    for name, spec in nodes.items():
        if not spec.cohort:
            root = root_of(nodes, name)
            everything = sum(s.nominal or 0 for s in nodes.values() if root_of(nodes, s.name) == root)
            assert tree.reach(name, ("h100", GPU)) == everything


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees(), st.lists(st.integers(0, 3), max_size=40))
def test_pools_capacity_and_exactness(nodes: dict[str, Spec], order: list[int]) -> None:
    """A pool per tree holding all of its quota; exact exactly when every queue can fill all of it, and then,
    whatever the order queues take GPUs in, each queue can take whatever the tree has left: one pool."""
    quotas, cohorts = frames(nodes)
    snap = Snapshot(collected_at=NOW, windows_minutes=(30.0,), sources={}, quotas=quotas, cohorts=cohorts)
    pools = {p.cohort: p for p in deadline_problems(snap)}
    queues = [n for n, s in nodes.items() if not s.cohort]
    assert set(pools) == {root_of(nodes, q) for q in queues}
    for root, pool in pools.items():
        mine = [q for q in queues if root_of(nodes, q) == root]
        capacity = sum(s.nominal or 0 for s in nodes.values() if root_of(nodes, s.name) == root)
        assert pool.capacity == capacity and pool.flavor == "h100"
        one_pool = all(Sim(nodes).admit_all(q) == capacity for q in mine)
        assert (pool.inexact == ()) == one_pool, pool.inexact
        if one_pool:
            sim = Sim(nodes)
            for pick in order:
                queue = mine[pick % len(mine)]
                used = sum(sim.usage.get(q, 0) for q in mine)
                assert all(sim.available(q) == capacity - used for q in mine)
                if sim.available(queue) >= 1:
                    sim.add(queue, 1)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees(max_queues=3))
def test_rebalance_reach_is_the_most_any_move_of_the_cohorts_quota_gives(nodes: dict[str, Spec]) -> None:
    """``reachable_gpus``: over every way to spread a cohort's ClusterQueue quota among its queues (what a
    rebalance may do), the most a queue is admitted in the simulation."""
    quotas, cohorts = frames(nodes)
    tree = CohortTree.from_frames(quotas, cohorts)
    for cohort, rows in quotas.groupby("cohort"):
        reach = reachable_gpus(rows, tree)
        members = [str(q) for q in rows["cluster_queue"]]
        total = int(rows["nominal"].sum())
        for queue in members:
            best = 0
            for split in itertools.product(range(total + 1), repeat=len(members)):
                if sum(split) != total:
                    continue
                moved = {**nodes, **{m: Spec(m, False, nodes[m].parent, n, nodes[m].borrowing, nodes[m].lending)
                                     for m, n in zip(members, split)}}
                best = max(best, Sim(moved).admit_all(queue))
            assert reach[(queue, "h100")] == best, (cohort, queue)
