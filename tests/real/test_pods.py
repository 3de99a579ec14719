"""Pods on the real backend for what Kueue starts: a Job's made by the real Job controller, a RayCluster's by
the KubeRay stand-in (``gpuaas.cluster.real._standin``), all bound by kube-scheduler and run by kwok.

Scenario (``conftest.CONFORMANCE``): Job ``wl`` and RayClusters ``ray``/``eray`` of team-a and Job ``b-run``
of team-b are admitted; ``b-big`` or ``b-late`` waits. Covers: an admitted job's pods exist, owned by it,
bound to a node of the flavor Kueue admitted it to, Running and Ready; a suspended job has none; a
deactivated Job loses its pods once Kueue suspends it and gets them back on reactivation; collect on the
real backend counts the pods and reads their GPUs' dcgm-exporter series from the real Prometheus.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from gpuaas.cluster.real import KubeHTTP, RealCluster
from gpuaas.cluster.real._standin import desired_pods, free_indices
from gpuaas.operations.collect import read_snapshot
from gpuaas.settings import GpuaasSettings
from tests.real.conftest import is_true, wait_until, workload_of

pytestmark = [pytest.mark.real]

A, B = "team-a", "team-b"
GPU = "nvidia.com/gpu"


def pods_of(api: KubeHTTP, kind: str, name: str, ns: str) -> list[dict[str, Any]]:
    return [p for p in api.list("Pod", ns)
            if any(r.get("kind") == kind and r.get("name") == name and r.get("controller")
                   for r in p["metadata"].get("ownerReferences") or [])]


@pytest.fixture(autouse=True)
def _pods_on_failure(real_cluster: RealCluster) -> Iterator[None]:
    """A failed wait here needs the pods' state: the stand-in's last error and every pod go with the output."""
    yield
    assert real_cluster.pods is not None and real_cluster.api is not None
    print(f"the stand-in's last pass: {real_cluster.pods.last_error or 'no error'}")
    for pod in real_cluster.api.list("Pod"):
        meta, status = pod["metadata"], pod.get("status") or {}
        print(f"pod {meta['namespace']}/{meta['name']} on {pod['spec'].get('nodeName')}: {status.get('phase')}, "
              f"gpus {(meta.get('annotations') or {}).get('gpuaas.io/gpu-indices')}, "
              f"{[(c['type'], c['status'], c.get('reason')) for c in status.get('conditions') or []]}")


def running(pod: dict[str, Any]) -> bool:
    """Running and Ready, and, asking for GPUs, told which (the device stand-in's annotation)."""
    indexed = not gpus(pod) or "gpuaas.io/gpu-indices" in (pod["metadata"].get("annotations") or {})
    return (pod.get("status") or {}).get("phase") == "Running" and is_true(pod, "Ready") and indexed


def expected_count(api: KubeHTTP, kind: str, name: str, ns: str) -> int:
    job = api.get(kind, name, ns)
    if kind == "Job":
        return int(job["spec"]["parallelism"])
    return 1 + sum(int(g.get("replicas") or 0) for g in job["spec"]["workerGroupSpecs"])


def all_running(api: KubeHTTP, kind: str, name: str, ns: str) -> bool:
    pods = pods_of(api, kind, name, ns)
    return len(pods) == expected_count(api, kind, name, ns) and all(running(p) for p in pods)


def gpus(pod: dict[str, Any]) -> int:
    return sum(int((c.get("resources") or {}).get("limits", {}).get(GPU, 0)) for c in pod["spec"]["containers"])


@pytest.mark.parametrize(("kind", "name", "ns"), [("Job", "wl", A), ("RayCluster", "ray", A), ("Job", "b-run", B)])
def test_an_admitted_jobs_pods_run_on_nodes_of_its_flavor(api: KubeHTTP, real_cluster: RealCluster, kind: str,
                                                          name: str, ns: str) -> None:
    assert real_cluster.pods is not None
    wait_until(f"{kind} {name}'s pods Running", lambda: is_true(workload_of(api, kind, name, ns), "QuotaReserved")
               and all_running(api, kind, name, ns), timeout=90)
    job = api.get(kind, name, ns)
    admission = workload_of(api, kind, name, ns)["status"]["admission"]["podSetAssignments"]
    flavors = {f for ps in admission for r, f in (ps.get("flavors") or {}).items() if r == GPU}
    assert flavors, admission
    selectors = [api.get("ResourceFlavor", f)["spec"]["nodeLabels"] for f in flavors]
    for pod in pods_of(api, kind, name, ns):
        [ref] = pod["metadata"]["ownerReferences"]
        assert ref["uid"] == job["metadata"]["uid"]
        assert pod["status"]["podIP"] and pod["status"]["startTime"]
        node = api.get("Node", pod["spec"]["nodeName"])
        if gpus(pod):
            labels = node["metadata"]["labels"]
            assert any(all(labels.get(k) == v for k, v in sel.items()) for sel in selectors), (pod["spec"], selectors)
            indices = pod["metadata"]["annotations"]["gpuaas.io/gpu-indices"].split(",")
            assert len(indices) == gpus(pod)


def test_no_node_holds_more_gpus_than_it_has_and_no_gpu_is_held_twice(api: KubeHTTP) -> None:
    wait_until("wl's pods Running", lambda: all_running(api, "Job", "wl", A), timeout=90)
    held: Counter[tuple[str, str]] = Counter()
    for pod in api.list("Pod"):
        for index in (pod["metadata"].get("annotations") or {}).get("gpuaas.io/gpu-indices", "").split(","):
            if index:
                held[(pod["spec"]["nodeName"], index)] += 1
    assert held and max(held.values()) == 1, held
    for node in api.list("Node"):
        mine = [i for n, i in held if n == node["metadata"]["name"]]
        assert all(0 <= int(i) < int(node["status"]["allocatable"][GPU]) for i in mine)
        assert is_true(node, "Ready")


def test_a_suspended_job_has_no_pods(api: KubeHTTP) -> None:
    wait_until("a team-b job waits", lambda: any(j["spec"]["suspend"] for j in api.list("Job", B)))
    waiting = [j["metadata"]["name"] for j in api.list("Job", B) if j["spec"]["suspend"]]
    wait_until("b-run's pods Running", lambda: all_running(api, "Job", "b-run", B), timeout=90)
    for name in waiting:
        assert not pods_of(api, "Job", name, B), name
        assert not is_true(workload_of(api, "Job", name, B), "QuotaReserved")


def test_a_deactivated_jobs_pods_go_when_kueue_suspends_it_and_come_back_on_reactivation(api: KubeHTTP) -> None:
    wait_until("wl's pods Running", lambda: all_running(api, "Job", "wl", A), timeout=90)
    before = {p["metadata"]["name"] for p in pods_of(api, "Job", "wl", A)}
    workload = workload_of(api, "Job", "wl", A)["metadata"]["name"]
    api.merge_patch("Workload", workload, {"spec": {"active": False}}, A)
    try:
        wait_until("Kueue suspends wl and its pods are deleted",
                   lambda: api.get("Job", "wl", A)["spec"]["suspend"] is True and not pods_of(api, "Job", "wl", A),
                   timeout=60)
    finally:
        api.merge_patch("Workload", workload, {"spec": {"active": True}}, A)
    wait_until("wl re-admitted and its pods Running again", lambda: all_running(api, "Job", "wl", A), timeout=90)
    assert len(pods_of(api, "Job", "wl", A)) == len(before)


def test_collect_counts_the_pods_and_reads_their_gpu_series(settings: GpuaasSettings, api: KubeHTTP,
                                                           real_cluster: RealCluster) -> None:
    wait_until("wl's pods Running", lambda: all_running(api, "Job", "wl", A), timeout=90)
    [pod] = [p["metadata"]["name"] for p in pods_of(api, "Job", "wl", A)]
    assert real_cluster.pods is not None
    wait_until("the stand-in reports wl's pod",
               lambda: any(b.name == pod for b in real_cluster.pods.bound()))  # type: ignore[union-attr]
    found: list[Any] = []

    def seen() -> bool:
        snapshot = read_snapshot(settings)
        found[:] = [snapshot]
        return not snapshot.gpus.empty and pod in set(snapshot.gpus["pod"])

    wait_until("collect reads wl's pod's GPU series from Prometheus", seen, timeout=60)
    snapshot = found[0]
    assert snapshot.sources["kube"].ok and snapshot.sources["prometheus"].ok, snapshot.sources
    row = snapshot.workloads.set_index("name").loc[workload_of(api, "Job", "wl", A)["metadata"]["name"]]
    assert int(row["pods"]) == 1
    mine = snapshot.gpus[snapshot.gpus["pod"] == pod]
    assert set(mine["namespace"]) == {A}
    assert mine["gpu"].nunique() == 2  # wl's pod holds 2 GPUs
    # The scenario's default load is a constant 0.6 with a little noise.
    assert mine["activity_avg"].between(0.4, 0.8).all(), mine[["gpu", "activity_avg"]]


def test_desired_pods_of_a_raycluster_follow_suspend_and_worker_replicas() -> None:
    ray: dict[str, Any] = {"kind": "RayCluster", "metadata": {"name": "r", "uid": "u2"}, "spec": {
        "headGroupSpec": {"template": {}}, "workerGroupSpecs": [{"groupName": "g", "replicas": 2, "template": {}}]}}
    wanted = desired_pods(ray)
    assert Counter(w.podset for w in wanted) == {"head": 1, "g": 2}
    assert len({w.name for w in wanted}) == 3 and all(w.name.startswith("r-") for w in wanted)
    assert desired_pods({**ray, "spec": {**ray["spec"], "suspend": True}}) == []
    ray["spec"]["workerGroupSpecs"][0]["replicas"] = 0
    assert [w.podset for w in desired_pods(ray)] == ["head"]


def test_free_indices_are_the_lowest_not_held_and_none_when_too_few() -> None:
    assert free_indices(8, {0, 1, 3}, 2) == (2, 4)
    assert free_indices(4, {0, 1, 3}, 2) is None
    assert free_indices(4, set(), 0) == ()
