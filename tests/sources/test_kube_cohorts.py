"""Cohort objects through the real reader (the official client over HTTP against the embedded API server),
into the snapshot and the deadline pools: a two-level tree whose root holds quota of its own, in the
v1beta2 shapes of Kueue's cohort docs (``shared/fixtures/kueue/docs-extracted/cohort-*.yaml``); and a flat
cohort with quota of its own, admitted by the embedded Kueue (which does not emulate parent cohorts)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpuaas.cluster.apiserver import ApiServer, ObjectStore
from gpuaas.models import SourceStatus
from gpuaas.policies.deadlines import deadline_problems, plan_pools
from gpuaas.settings import GpuaasSettings
from gpuaas.snapshot import build_snapshot
from gpuaas.sources.kube import read_kube

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
KUEUE = "kueue.x-k8s.io/v1beta2"


def _groups(gpus: int, **limits: int) -> list[dict[str, Any]]:
    resource: dict[str, Any] = {"name": "nvidia.com/gpu", "nominalQuota": gpus}
    resource.update({f"{k}Limit": v for k, v in limits.items()})
    return [{"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "h100", "resources": [resource]}]}]


def _cohort(name: str, parent: str | None = None, gpus: int | None = None, **limits: int) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if parent:
        spec["parentName"] = parent
    if gpus is not None:
        spec["resourceGroups"] = _groups(gpus, **limits)
    return {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def _queue(name: str, cohort: str, gpus: int) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"cohortName": cohort, "namespaceSelector": {}, "resourceGroups": _groups(gpus)}}


def _pools(objects: list[dict[str, Any]], tmp_path: Path) -> list[Any]:
    store = ObjectStore(lambda: NOW)
    for obj in objects:
        store.create(obj)
    with ApiServer(store) as api:
        kube = read_kube(GpuaasSettings(kubeconfig=api.write_kubeconfig(tmp_path / "kubeconfig")))
    snap = build_snapshot(NOW, [30], {"kube": SourceStatus("kube", True)}, kube=kube, prom=None)
    return plan_pools(deadline_problems(snap))


def test_a_tree_with_a_roots_own_quota_is_one_exact_pool(tmp_path: Path) -> None:
    [pool] = _pools([_cohort("org", gpus=8), _cohort("research", "org"), _cohort("eng", "org"),
                     _queue("cq-r", "research", 4), _queue("cq-e", "eng", 2)], tmp_path)
    assert (pool.problem.cohort, pool.problem.capacity, pool.plan.exact) == ("org", 14, True)


def test_a_child_cohorts_lending_limit_makes_the_pool_inexact(tmp_path: Path) -> None:
    [pool] = _pools([_cohort("org"), _cohort("research", "org", 2, lending=0),
                     _queue("cq-r", "research", 4), _queue("cq-o", "org", 2)], tmp_path)
    assert (pool.problem.cohort, pool.problem.capacity, pool.plan.exact) == ("org", 8, False)
    message = pool.plan.messages[-1]  # research keeps its 2 and cq-r's 4 to itself
    assert "cohort research has lendingLimit 0" in message and "(cq-o reaches 2)" in message


def test_the_emulated_kueue_admits_exactly_the_pool_a_cohorts_own_quota_adds_to(tmp_path: Path) -> None:
    """The embedded Kueue shares a (flat) Cohort's own quota as Kueue does; the pool read back from it holds
    just that: cq-a (2) and cq-b (2) under cohort shared (4 of its own) run 6 + 2 GPUs, and the pool is 8."""
    from gpuaas.cluster.kueue import KueueController
    from gpuaas.cluster.kueue import testing as t

    clock = t.FakeClock(NOW)
    store = ObjectStore(clock)
    for obj in (t.resource_flavor("h100"), _cohort("shared", gpus=4),
                t.cluster_queue("cq-a", {"h100": {"nvidia.com/gpu": 2}}, cohort="shared"),
                t.cluster_queue("cq-b", {"h100": {"nvidia.com/gpu": 2}}, cohort="shared"),
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}},
                t.local_queue("ns", "qa", "cq-a"), t.local_queue("ns", "qb", "cq-b"),
                t.workload("ns", "wide", "qa", 6), t.workload("ns", "two", "qb", 2)):
        store.create(obj)
    clock.advance(1)
    store.create(t.workload("ns", "one", "qb", 1))  # after them: nothing is left for it
    assert sorted(KueueController(store, clock).reconcile().admitted) == ["ns/two", "ns/wide"]
    with ApiServer(store) as api:
        kube = read_kube(GpuaasSettings(kubeconfig=api.write_kubeconfig(tmp_path / "kubeconfig")))
    snap = build_snapshot(NOW, [30], {"kube": SourceStatus("kube", True)}, kube=kube, prom=None)
    [pool] = plan_pools(deadline_problems(snap))
    assert (pool.problem.cohort, pool.problem.capacity, pool.plan.exact) == ("shared", 8, True)
    assert sum(j.gpus for j in pool.problem.jobs if j.running_for is not None) == 8  # all of it, none over
