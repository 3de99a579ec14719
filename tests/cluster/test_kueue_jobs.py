"""Job integrations in the embedded cluster: jobs become Workloads, admission starts them.

Cases:
* RayCluster: pod sets head + worker groups, owner reference, unsuspended on admission, pods on
  nodes of the flavor with GPU indices; ``spec.suspend`` releases and unsuspend requeues;
  a non-elastic worker change recreates the Workload; an elastic scale-down shrinks in place;
  spec.active=false suspends the cluster and deletes its pods;
* Notebook stop annotation, InferenceService stop annotation, StatefulSet replicas 0,
  Deployment one Workload per replica;
* pods stay Pending when nodes are full and bind when GPUs free up; gpu_assignments rows;
* a deleted job takes its Workloads with it.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuaas.cluster.apiserver import ObjectStore
from gpuaas.cluster.kueue import GPU_INDICES_ANNOTATION, GpuAssignment, KueueController
from gpuaas.cluster.kueue import testing as t

GPU = "nvidia.com/gpu"


@pytest.fixture
def clock() -> t.FakeClock:
    return t.FakeClock()


@pytest.fixture
def store(clock: t.FakeClock) -> ObjectStore:
    """Flavors a100 (nodes a-0, a-1: 4 GPUs each) and h100 (h-0: 8 GPUs), cpu node c-0.

    ClusterQueue ``cq`` covers only GPUs: 8 of a100 first, then 8 of h100.
    """
    s = ObjectStore(clock)
    s.create(t.resource_flavor("a100", gpu="a100"))
    s.create(t.resource_flavor("h100", gpu="h100"))
    s.create(t.cluster_queue("cq", {"a100": {GPU: 8}, "h100": {GPU: 8}}))
    s.create(t.local_queue("ml", "q", "cq"))
    for node in (t.node("a-0", 4, gpu="a100"), t.node("a-1", 4, gpu="a100"), t.node("h-0", 8, gpu="h100"),
                 t.node("c-0", 0, role="cpu")):
        s.create(node)
    return s


@pytest.fixture(params=[False, True], ids=["resync", "attached"])
def kueue(request: pytest.FixtureRequest, store: ObjectStore, clock: t.FakeClock) -> KueueController:
    controller = KueueController(store, clock)
    if request.param:
        controller.attach()
    return controller


def wl(kueue: KueueController, kind: str, name: str) -> dict[str, Any]:
    found = kueue.workload_for(kind, "ml", name)
    assert found is not None
    return found


def cond(obj: dict[str, Any], kind: str) -> tuple[str, str] | None:
    found = next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), None)
    return (found["status"], found["reason"]) if found else None


def gpus_used(store: ObjectStore, flavor: str = "a100") -> str:
    status = store.get("ClusterQueue", None, "cq")["status"]
    entry = next(f for f in status["flavorsReservation"] if f["name"] == flavor)
    return str(next(r["total"] for r in entry["resources"] if r["name"] == GPU))


def pods(store: ObjectStore) -> dict[str, tuple[str | None, str, str | None]]:
    """pod name -> (node, phase, gpu indices)."""
    return {p["metadata"]["name"]: (p["spec"].get("nodeName"), p["status"]["phase"],
                                    p["metadata"].get("annotations", {}).get(GPU_INDICES_ANNOTATION))
            for p in store.list("Pod", "ml")}


def test_raycluster_admission_places_pods_with_gpu_indices(store: ObjectStore, kueue: KueueController) -> None:
    store.create(t.raycluster("ml", "rc", "q", [("gpu_group", 2, 2)]))
    kueue.reconcile()
    workload = wl(kueue, "RayCluster", "rc")
    rc = store.get("RayCluster", "ml", "rc")
    assert workload["metadata"]["name"].startswith("raycluster-rc-")
    assert workload["metadata"]["ownerReferences"][0] == {
        "apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rc", "uid": rc["metadata"]["uid"],
        "controller": True, "blockOwnerDeletion": True}
    assert [(p["name"], p["count"]) for p in workload["spec"]["podSets"]] == [("head", 1), ("gpu-group", 2)]
    assert workload["spec"]["queueName"] == "q"
    assert cond(workload, "QuotaReserved") == ("True", "QuotaReserved")
    assert cond(workload, "Admitted") == ("True", "Admitted")
    assert workload["status"]["admission"]["podSetAssignments"][1] == {
        "name": "gpu-group", "flavors": {GPU: "a100"}, "count": 2,
        "resourceUsage": {"cpu": "8", "memory": "32Gi", GPU: "4"}}
    assert rc["spec"]["suspend"] is False
    assert gpus_used(store) == "4"
    placed = pods(store)
    head = next(n for n in placed if "-head-" in n)
    workers = sorted(n for n in placed if "-gpu-group-worker-" in n)
    assert placed[head] == ("c-0", "Running", None)  # the cpu-only head goes to the cpu node
    # First fit: both 2-GPU workers land on a-0 (GPUs 0,1 then 2,3).
    assert sorted(placed[w] for w in workers) == [("a-0", "Running", "0,1"), ("a-0", "Running", "2,3")]
    pod = store.get("Pod", "ml", workers[0])
    assert pod["metadata"]["labels"]["ray.io/cluster"] == "rc"
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "q"
    assert pod["metadata"]["labels"]["team"] == "ml"
    assert pod["spec"]["nodeSelector"] == {"gpu": "a100"}
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "RayCluster"
    rows = kueue.gpu_assignments()
    assert [(r.node, r.gpu_index, r.owner_kind, r.owner_name) for r in rows] == [
        ("a-0", 0, "RayCluster", "rc"), ("a-0", 1, "RayCluster", "rc"),
        ("a-0", 2, "RayCluster", "rc"), ("a-0", 3, "RayCluster", "rc")]
    assert isinstance(rows[0], GpuAssignment) and rows[0].workload == workload["metadata"]["name"]


def test_a_clients_suspend_of_an_admitted_raycluster_is_set_back(store: ObjectStore, kueue: KueueController) -> None:
    """As the real Kueue does (held by the real-cluster conformance test): it owns ``spec.suspend``."""
    store.create(t.raycluster("ml", "rc", "q", [("workers", 2, 4)]))
    kueue.reconcile()
    store.patch("RayCluster", "ml", "rc", {"spec": {"suspend": True}})
    result = kueue.reconcile()
    assert store.get("RayCluster", "ml", "rc")["spec"]["suspend"] is False
    assert cond(wl(kueue, "RayCluster", "rc"), "QuotaReserved") == ("True", "QuotaReserved")
    assert result.released == [] and gpus_used(store) == "8"


def test_raycluster_workload_deactivated_suspends_and_reactivated_requeues(
        store: ObjectStore, kueue: KueueController) -> None:
    store.create(t.raycluster("ml", "rc", "q", [("workers", 2, 4)]))
    kueue.reconcile()
    workload = wl(kueue, "RayCluster", "rc")
    uid, name = workload["metadata"]["uid"], workload["metadata"]["name"]
    assert gpus_used(store) == "8"

    store.patch("Workload", "ml", name, {"spec": {"active": False}})
    result = kueue.reconcile()
    workload = wl(kueue, "RayCluster", "rc")
    assert workload["metadata"]["uid"] == uid  # the Workload stays
    assert cond(workload, "Evicted") == ("True", "Deactivated")
    assert cond(workload, "QuotaReserved") == ("False", "Pending")
    assert "admission" not in workload["status"]
    assert result.released == [f"ml/{name}"]
    assert store.get("RayCluster", "ml", "rc")["spec"]["suspend"] is True
    assert gpus_used(store) == "0" and pods(store) == {} and kueue.gpu_assignments() == []

    store.patch("Workload", "ml", name, {"spec": {"active": True}})
    kueue.reconcile()
    workload = wl(kueue, "RayCluster", "rc")
    assert cond(workload, "Requeued") == ("True", "Reactivated")
    assert cond(workload, "QuotaReserved") == ("True", "QuotaReserved")
    assert store.get("RayCluster", "ml", "rc")["spec"]["suspend"] is False
    assert gpus_used(store) == "8" and len(pods(store)) == 3


def test_pending_raycluster_is_kept_suspended(store: ObjectStore, kueue: KueueController) -> None:
    store.create(t.raycluster("ml", "big", "q", [("workers", 5, 4)]))  # 20 GPUs > 8 per flavor
    kueue.reconcile()
    assert store.get("RayCluster", "ml", "big")["spec"]["suspend"] is True
    assert cond(wl(kueue, "RayCluster", "big"), "QuotaReserved") == ("False", "Pending")
    assert pods(store) == {}


def test_non_elastic_worker_change_recreates_workload(store: ObjectStore, kueue: KueueController) -> None:
    store.create(t.raycluster("ml", "rc", "q", [("workers", 2, 4)]))
    kueue.reconcile()
    old = wl(kueue, "RayCluster", "rc")
    rc = store.get("RayCluster", "ml", "rc")
    rc["spec"]["workerGroupSpecs"][0]["replicas"] = 1
    store.replace(rc)
    result = kueue.reconcile()
    new = wl(kueue, "RayCluster", "rc")
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    assert result.deleted == [f"ml/{old['metadata']['name']}"]
    assert [(p["name"], p["count"]) for p in new["spec"]["podSets"]] == [("head", 1), ("workers", 1)]
    # Deleted, recreated and, since 4 GPUs fit, admitted again in the same pass (the cluster restarted).
    assert cond(new, "QuotaReserved") == ("True", "QuotaReserved")
    assert gpus_used(store) == "4" and len(pods(store)) == 2


def test_elastic_scale_down_shrinks_in_place(store: ObjectStore, kueue: KueueController) -> None:
    store.create(t.raycluster("ml", "rc", "q", [("workers", 2, 4)], elastic=True))
    kueue.reconcile()
    old = wl(kueue, "RayCluster", "rc")
    before = set(pods(store))
    rc = store.get("RayCluster", "ml", "rc")
    rc["spec"]["workerGroupSpecs"][0]["replicas"] = 1
    store.replace(rc)
    result = kueue.reconcile()
    new = wl(kueue, "RayCluster", "rc")
    assert new["metadata"]["uid"] == old["metadata"]["uid"] and result.deleted == [] and result.released == []
    assert [(p["name"], p["count"]) for p in new["spec"]["podSets"]] == [("head", 1), ("workers", 1)]
    assert cond(new, "QuotaReserved") == ("True", "QuotaReserved")
    assert new["status"]["admission"] == old["status"]["admission"]  # admission keeps the old count
    assert gpus_used(store) == "4"
    assert set(pods(store)) < before and len(pods(store)) == 2
    assert store.get("RayCluster", "ml", "rc")["spec"]["suspend"] is False


def test_deactivating_a_raycluster_workload_suspends_it(store: ObjectStore, kueue: KueueController) -> None:
    store.create(t.raycluster("ml", "rc", "q", [("workers", 1, 4)]))
    kueue.reconcile()
    name = wl(kueue, "RayCluster", "rc")["metadata"]["name"]
    store.patch("Workload", "ml", name, {"spec": {"active": False}})
    kueue.reconcile()
    workload = wl(kueue, "RayCluster", "rc")
    assert cond(workload, "Evicted") == ("True", "Deactivated")
    assert cond(workload, "Requeued") == ("False", "Deactivated")
    assert store.get("RayCluster", "ml", "rc")["spec"]["suspend"] is True
    assert pods(store) == {} and gpus_used(store) == "0"
    store.patch("Workload", "ml", name, {"spec": {"active": True}})
    kueue.reconcile()
    assert cond(wl(kueue, "RayCluster", "rc"), "QuotaReserved") == ("True", "QuotaReserved")
    assert store.get("RayCluster", "ml", "rc")["spec"]["suspend"] is False


STOP_CASES = [
    pytest.param("Notebook", t.notebook("ml", "nb", "q", 2),
                 {"metadata": {"annotations": {"kubeflow-resource-stopped": "2026-01-05T10:00:00Z"}}},
                 {"metadata": {"annotations": {"kubeflow-resource-stopped": None}}}, ["nb-0"], id="notebook"),
    pytest.param("InferenceService", t.inference_service("ml", "llm", "q", 2),
                 {"metadata": {"annotations": {"serving.kserve.io/stop": "true"}}},
                 {"metadata": {"annotations": {"serving.kserve.io/stop": "false"}}}, ["llm-predictor-"],
                 id="inference-service"),
    pytest.param("StatefulSet", t.statefulset("ml", "sts", "q", 2), {"spec": {"replicas": 0}},
                 {"spec": {"replicas": 1}}, ["sts-0"], id="statefulset"),
]


@pytest.mark.parametrize(("kind", "job", "stop", "start", "pod_prefixes"), STOP_CASES)
def test_stop_releases_quota_and_start_requeues(
    store: ObjectStore, kueue: KueueController, kind: str, job: dict[str, Any], stop: dict[str, Any],
    start: dict[str, Any], pod_prefixes: list[str],
) -> None:
    store.create(job)
    kueue.reconcile()
    assert gpus_used(store) == "2"
    assert [p for p in pods(store) if not any(p.startswith(x) for x in pod_prefixes)] == []
    assert [v[2] for v in pods(store).values()] == ["0,1"]

    store.patch(kind, "ml", job["metadata"]["name"], stop)
    kueue.reconcile()
    workload = wl(kueue, kind, job["metadata"]["name"])
    assert cond(workload, "QuotaReserved") == ("False", "OnHold")
    assert cond(workload, "Admitted") == ("False", "NoReservation")
    assert gpus_used(store) == "0" and pods(store) == {}
    assert kueue.pending_workloads("ClusterQueue", None, "cq")["items"] == []  # held is not queued

    store.patch(kind, "ml", job["metadata"]["name"], start)
    kueue.reconcile()
    assert cond(wl(kueue, kind, job["metadata"]["name"]), "QuotaReserved") == ("True", "QuotaReserved")
    assert gpus_used(store) == "2" and len(pods(store)) == 1


def test_notebook_created_stopped_is_held(store: ObjectStore, kueue: KueueController) -> None:
    store.create(t.notebook("ml", "nb", "q", 2, stopped_at="2026-01-05T08:00:00Z"))
    kueue.reconcile()
    assert cond(wl(kueue, "Notebook", "nb"), "QuotaReserved") == ("False", "OnHold")
    assert gpus_used(store) == "0"


def test_deployment_one_workload_per_replica(store: ObjectStore, kueue: KueueController) -> None:
    store.create(t.deployment("ml", "serve", "q", 4, replicas=3))  # 12 GPUs: 2 in a100, 1 in h100
    kueue.reconcile()
    workloads = kueue.workloads_for("Deployment", "ml", "serve")
    assert len(workloads) == 3 and all(w["spec"]["podSets"][0]["count"] == 1 for w in workloads)
    flavors = sorted(w["status"]["admission"]["podSetAssignments"][0]["flavors"][GPU] for w in workloads)
    assert flavors == ["a100", "a100", "h100"]
    assert sorted(v[0] for v in pods(store).values()) == ["a-0", "a-1", "h-0"]

    store.patch("Deployment", "ml", "serve", {"spec": {"replicas": 1}})
    result = kueue.reconcile()
    assert len(result.deleted) == 2 and len(kueue.workloads_for("Deployment", "ml", "serve")) == 1
    assert len(pods(store)) == 1
    store.patch("Deployment", "ml", "serve", {"spec": {"replicas": 0}})
    kueue.reconcile()
    assert kueue.workloads_for("Deployment", "ml", "serve") == [] and pods(store) == {}
    assert (gpus_used(store, "a100"), gpus_used(store, "h100")) == ("0", "0")


def test_pods_wait_for_free_gpus(store: ObjectStore, kueue: KueueController, clock: t.FakeClock) -> None:
    """Quota admits 8 a100 GPUs, but with node a-1 gone only 4 exist: one pod waits until GPUs free up."""
    store.delete("Node", None, "a-1")
    store.create(t.notebook("ml", "nb1", "q", 4))
    clock.advance(1)
    store.create(t.notebook("ml", "nb2", "q", 4))
    result = kueue.reconcile()
    assert len(result.admitted) == 2 and result.pods_unplaced == 1
    assert pods(store)["nb2-0"] == (None, "Pending", None)
    kueue.finish("ml", wl(kueue, "Notebook", "nb1")["metadata"]["name"])
    kueue.reconcile()
    assert pods(store)["nb2-0"] == ("a-0", "Running", "0,1,2,3")


def test_deleted_job_deletes_its_workload(store: ObjectStore, kueue: KueueController) -> None:
    store.create(t.notebook("ml", "nb", "q", 2))
    kueue.reconcile()
    name = wl(kueue, "Notebook", "nb")["metadata"]["name"]
    store.delete("Notebook", "ml", "nb")
    result = kueue.reconcile()
    assert result.deleted == [f"ml/{name}"] and kueue.workload_for("Notebook", "ml", "nb") is None
    assert store.list("Workload", "ml") == [] and pods(store) == {} and gpus_used(store) == "0"


def test_jobs_without_queue_label_are_ignored(store: ObjectStore, kueue: KueueController) -> None:
    store.create(t.raycluster("ml", "free", None, [("workers", 1, 4)]))
    kueue.reconcile()
    assert store.list("Workload") == [] and kueue.workload_for("RayCluster", "ml", "free") is None


def test_priority_class_label_sets_priority(store: ObjectStore, kueue: KueueController) -> None:
    store.create(t.workload_priority_class("prod", 1000))
    job = t.notebook("ml", "nb", "q", 1)
    job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "prod"
    store.create(job)
    kueue.reconcile()
    spec = wl(kueue, "Notebook", "nb")["spec"]
    assert spec["priority"] == 1000
    assert spec["priorityClassRef"] == {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "prod"}
