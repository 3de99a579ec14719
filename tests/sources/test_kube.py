"""The Kubernetes source against the embedded API server (real HTTP, official client).

Covers: Kueue records and the workload state order, v1beta1 field names read through the
v1beta1 endpoint, quantities, owners and the pod owner chain, pagination (requests =
constant + extra pages for 1,200 workloads at page size 500), a CRD that is not installed
(404: reported, not an error), v1beta2 not served (fallback to v1beta1), and 403 mapped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuaas.cluster.apiserver import ApiServer, ObjectStore, RBACRules
from gpuaas.cluster.apiserver import _http as emulator_http
from gpuaas.errors import Forbidden
from gpuaas.models import WorkloadState
from gpuaas.settings import GpuaasSettings
from gpuaas.sources.kube import read_kube

K = "kueue.x-k8s.io"


def _pod_spec(gpus: str) -> dict[str, Any]:
    return {"containers": [{"name": "main", "image": "x",
                            "resources": {"requests": {"cpu": "500m", "nvidia.com/gpu": gpus}}}]}


def cluster_queue(name: str, cohort: str | None, nominal: str, version: str = "v1beta2") -> dict[str, Any]:
    spec: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": [{
        "coveredResources": ["nvidia.com/gpu"],
        "flavors": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": nominal}]}]}]}
    if cohort:
        spec["cohortName" if version == "v1beta2" else "cohort"] = cohort
    return {"apiVersion": f"{K}/{version}", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec,
            "status": {"flavorsUsage": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "4",
                                                                        "borrowed": "0"}]}]}}


def workload(name: str, ns: str, conditions: dict[str, str], *, count: int = 2, gpus: str = "2",
             version: str = "v1beta2", owner: tuple[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "annotations": {"gpuaas.io/reclaim": "never", "x": "y"}}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "ray.io/v1", "kind": owner[0], "name": owner[1], "uid": "u1",
                                    "controller": True}]
    spec: dict[str, Any] = {"queueName": "lq-a", "priority": 5,
                            "podSets": [{"name": "main", "count": count, "template": {"spec": _pod_spec(gpus)}}]}
    if version == "v1beta2":
        spec["priorityClassRef"] = {"group": K, "kind": "WorkloadPriorityClass", "name": "high"}
    else:
        spec["priorityClassName"], spec["priorityClassSource"] = "high", "kueue.x-k8s.io/workloadpriorityclass"
    status: dict[str, Any] = {"conditions": [
        {"type": t, "status": s, "reason": "Test", "message": "", "lastTransitionTime": "2026-03-10T10:00:00Z"}
        for t, s in conditions.items()]}
    if conditions.get("QuotaReserved") == "True":
        status["admission"] = {"clusterQueue": "cq-a", "podSetAssignments": [
            {"name": "main", "flavors": {"nvidia.com/gpu": "h100"}, "count": count,
             "resourceUsage": {"nvidia.com/gpu": str(count * int(gpus))}}]}
    return {"apiVersion": f"{K}/{version}", "kind": "Workload", "metadata": meta, "spec": spec, "status": status}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[ObjectStore, ApiServer, GpuaasSettings]]:
    store = ObjectStore()
    server = ApiServer(store)
    server.start()
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    try:
        yield store, server, GpuaasSettings(kubeconfig=kubeconfig)
    finally:
        server.stop()


def _seed(store: ObjectStore) -> None:
    store.create(cluster_queue("cq-a", "all", "8"))
    store.create(cluster_queue("cq-b", "all", "16Gi", version="v1beta1"))
    store.create({"apiVersion": f"{K}/v1beta2", "kind": "LocalQueue", "metadata": {"name": "lq-a", "namespace": "team-a"},
                  "spec": {"clusterQueue": "cq-a"}})
    store.create({"apiVersion": f"{K}/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "h100"},
                  "spec": {"nodeLabels": {"gpu": "h100"}}})
    store.create(workload("wl-finished", "team-a", {"Finished": "True", "Admitted": "True", "QuotaReserved": "True"}))
    store.create(workload("wl-admitted", "team-a", {"Admitted": "True", "QuotaReserved": "True"},
                          owner=("RayCluster", "rc-1")))
    store.create(workload("wl-reserved", "team-a", {"QuotaReserved": "True", "Admitted": "False"}, version="v1beta1"))
    store.create(workload("wl-pending", "team-a", {"QuotaReserved": "False"}, count=3, gpus="1", version="v1beta1"))
    store.create({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc-1", "namespace": "team-a"},
                  "spec": {"suspend": False, "headGroupSpec": {"template": {"spec": _pod_spec("0")}},
                           "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2,
                                                 "template": {"spec": _pod_spec("2")}}]}})
    store.create({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "rc-1-gpu-worker-a", "namespace": "team-a",
        "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rc-1", "uid": "u1",
                             "controller": True}]},
        "spec": {"nodeName": "node-1", **_pod_spec("2")}, "status": {"phase": "Running"}})


def test_records_states_and_renames(cluster: tuple[ObjectStore, ApiServer, GpuaasSettings]) -> None:
    store, _server, settings = cluster
    _seed(store)
    state = read_kube(settings)
    assert state.kueue_version == "v1beta2"
    cqs = {cq.name: cq for cq in state.cluster_queues}
    assert cqs["cq-a"].cohort == "all" and cqs["cq-b"].cohort == "all"  # v1beta1 spec.cohort normalised
    assert cqs["cq-a"].quotas[0].nominal == 8 and cqs["cq-a"].quotas[0].usage == 4
    assert cqs["cq-b"].quotas[0].nominal == 16 * 2**30
    wls = {w.name: w for w in state.workloads}
    assert {n: w.state for n, w in wls.items()} == {
        "wl-finished": WorkloadState.finished, "wl-admitted": WorkloadState.admitted,
        "wl-reserved": WorkloadState.quota_reserved, "wl-pending": WorkloadState.pending}
    assert wls["wl-pending"].gpus == 3 and wls["wl-admitted"].gpus == 4
    assert wls["wl-pending"].cluster_queue == "cq-a"  # resolved through the LocalQueue
    assert wls["wl-reserved"].priority_class == "high" and wls["wl-admitted"].priority_class == "high"
    assert wls["wl-admitted"].flavor == "h100" and wls["wl-admitted"].kind == "RayCluster"
    assert wls["wl-admitted"].annotations == (("gpuaas.io/reclaim", "never"),)
    rc = next(o for o in state.owners if o.kind == "RayCluster")
    assert (rc.gpus, rc.replicas, rc.stopped) == (4.0, 2, False) and rc.resource_version
    assert [(p.pod, p.root_kind, p.root_name, p.gpus) for p in state.pods] == [
        ("rc-1-gpu-worker-a", "RayCluster", "rc-1", 2.0)]
    assert state.not_installed == ()


def test_pagination_is_constant_plus_pages(cluster: tuple[ObjectStore, ApiServer, GpuaasSettings]) -> None:
    store, server, settings = cluster
    _seed(store)
    baseline = read_kube(settings).requests
    for i in range(1200):
        store.create(workload(f"bulk-{i:04d}", "team-b", {}))
    server.requests.clear()
    state = read_kube(settings)
    assert len(state.workloads) == 1204
    assert state.requests == baseline + 2  # 1,204 workloads at page size 500: 3 pages instead of 1
    lists = sum(n for key, n in server.requests.items() if key.startswith("GET"))
    assert lists == state.requests


def test_missing_crd_and_v1beta1_fallback(cluster: tuple[ObjectStore, ApiServer, GpuaasSettings],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Unserve KServe and Kueue v1beta2 in the emulator, as on a cluster without KServe and an old Kueue."""
    store, _server, settings = cluster
    _seed(store)
    real = emulator_http.resource_for_plural

    def served(group: str, version: str, plural: str):  # noqa: ANN202
        if group == "serving.kserve.io" or (group == K and version == "v1beta2"):
            return None
        return real(group, version, plural)

    monkeypatch.setattr(emulator_http, "resource_for_plural", served)
    state = read_kube(settings)
    assert state.kueue_version == "v1beta1"
    assert state.not_installed == ("inferenceservices.serving.kserve.io/v1beta1",)
    assert {w.name for w in state.workloads} == {"wl-finished", "wl-admitted", "wl-reserved", "wl-pending"}
    assert {cq.cohort for cq in state.cluster_queues} == {"all"}


def test_forbidden_is_mapped(tmp_path: Path) -> None:
    server = ApiServer(ObjectStore(), rbac=RBACRules([]))
    server.start()
    try:
        with pytest.raises(Forbidden):
            read_kube(GpuaasSettings(kubeconfig=server.write_kubeconfig(tmp_path / "kc")))
    finally:
        server.stop()


@pytest.mark.parametrize("served", ["v1beta2", "v1beta1"])
def test_admitted_workloads_hold_what_kueue_admitted(cluster: tuple[ObjectStore, ApiServer, GpuaasSettings],
                                                     monkeypatch: pytest.MonkeyPatch, served: str) -> None:
    """Through either served version: a partial admission holds its podSetAssignments count, Dynamic
    Reclaim frees ``reclaimablePods`` (the admission is left as it was), a pending Workload asks for its spec."""
    store, _server, settings = cluster
    admitted = {"Admitted": "True", "QuotaReserved": "True"}
    partial = workload("wl-partial", "team-a", admitted, count=3, gpus="2")
    partial["spec"]["podSets"][0]["minCount"] = 1
    partial["status"]["admission"]["podSetAssignments"][0].update(count=1, resourceUsage={"nvidia.com/gpu": "2"})
    reclaimed = workload("wl-reclaimed", "team-a", admitted, count=3, gpus="2")
    reclaimed["status"]["reclaimablePods"] = [{"name": "main", "count": 2}]
    for obj in (partial, reclaimed, workload("wl-pending", "team-a", {"QuotaReserved": "False"}, count=3, gpus="2")):
        store.create(obj)
    real = emulator_http.resource_for_plural
    monkeypatch.setattr(emulator_http, "resource_for_plural", lambda group, version, plural: None if (
        group == K and version != served) else real(group, version, plural))
    state = read_kube(settings)
    assert state.kueue_version == served
    assert {w.name: w.gpus for w in state.workloads} == {"wl-partial": 2.0, "wl-reclaimed": 2.0, "wl-pending": 6.0}
