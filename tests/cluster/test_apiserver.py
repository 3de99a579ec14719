"""The embedded API server, driven only through the official ``kubernetes`` client over HTTP.

Cases: discovery; create/get (server-filled metadata); label and field selectors; paging with
limit/continue (every object exactly once, even with writes between pages); typed core/apps
clients; merge and JSON patches (incl. a ``test`` op); 409 on a stale resourceVersion (patch,
PUT, delete); 404; 409 AlreadyExists; 422 naming the field; 403 from RBAC; v1beta1 conversion
on read and write; status subresource rules; finalizers; the visibility API; the request
counter; subscriber events.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpuaas.cluster.apiserver import ApiError, RBACRules

from .conftest import (
    KUEUE,
    Cluster,
    MakeCluster,
    cluster_queue,
    local_queue,
    node,
    pod,
    usage_status,
    workload,
)

V2, V1 = "v1beta2", "v1beta1"


def status_of(exc: pytest.ExceptionInfo[ApiException]) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(exc.value.body or "{}")
    assert body["kind"] == "Status" and body["status"] == "Failure" and body["code"] == exc.value.status
    return body


def create_wl(c: Cluster, obj: dict[str, Any], version: str = V2) -> dict[str, Any]:
    ns = obj["metadata"]["namespace"]
    result: dict[str, Any] = c.custom.create_namespaced_custom_object(KUEUE, version, ns, "workloads", obj)
    return result


def test_discovery_lists_our_groups_and_resources(cluster: Cluster) -> None:
    apis: Any = client.ApisApi(cluster.api)
    groups = {g.name: g for g in apis.get_api_versions().groups}
    assert groups[KUEUE].preferred_version.version == V2
    assert "visibility.kueue.x-k8s.io" in groups and "ray.io" in groups
    resources = cluster.custom.get_api_resources(KUEUE, V2).resources
    by_name = {r.name: r for r in resources}
    assert by_name["workloads"].namespaced and not by_name["clusterqueues"].namespaced
    assert "workloads/status" in by_name and "resourceflavors/status" not in by_name
    assert client.VersionApi(cluster.api).get_code().major == "1"
    assert {r.name for r in cluster.core.get_api_resources().resources} >= {"pods", "nodes"}


def test_create_fills_server_metadata_and_get_returns_it(cluster: Cluster) -> None:
    created = create_wl(cluster, workload("train-1"))
    meta = created["metadata"]
    assert meta["creationTimestamp"] == "2026-03-01T12:00:00Z"
    assert meta["generation"] == 1 and meta["uid"] and int(meta["resourceVersion"]) > 0
    got = cluster.custom.get_namespaced_custom_object(KUEUE, V2, "team-a", "workloads", "train-1")
    assert got == created
    second = create_wl(cluster, workload("train-2"))
    assert int(second["metadata"]["resourceVersion"]) > int(meta["resourceVersion"])


@pytest.mark.parametrize(("selector", "expected"), [
    ("team=a", {"w-a1", "w-a2"}),
    ("team==b", {"w-b1"}),
    ("team!=a", {"w-b1", "w-none"}),
    ("team in (a, b)", {"w-a1", "w-a2", "w-b1"}),
    ("team notin (a)", {"w-b1", "w-none"}),
    ("tier", {"w-a2"}),
    ("!team", {"w-none"}),
    ("team=a,tier=gold", {"w-a2"}),
    ("team in (a,b),!tier", {"w-a1", "w-b1"}),
], ids=["eq", "eqeq", "neq", "in", "notin", "exists", "not-exists", "and", "set-and-not"])
def test_list_with_label_selector(cluster: Cluster, selector: str, expected: set[str]) -> None:
    for name, labels in (("w-a1", {"team": "a"}), ("w-a2", {"team": "a", "tier": "gold"}),
                         ("w-b1", {"team": "b"}), ("w-none", {})):
        cluster.store.create(workload(name, labels=labels))
    listed = cluster.custom.list_cluster_custom_object(KUEUE, V2, "workloads", label_selector=selector)
    assert listed["kind"] == "WorkloadList" and listed["apiVersion"] == f"{KUEUE}/{V2}"
    assert {i["metadata"]["name"] for i in listed["items"]} == expected


def test_field_selectors_on_pods_and_unsupported_field(cluster: Cluster) -> None:
    cluster.store.create(pod("p1", "team-a", "node-1", "Running"))
    cluster.store.create(pod("p2", "team-a", "node-2", "Pending"))
    cluster.store.create(pod("p3", "team-b", "node-1", "Succeeded"))
    core = cluster.core

    def names(**kw: Any) -> list[str]:
        return [p.metadata.name for p in core.list_pod_for_all_namespaces(**kw).items]

    assert names(field_selector="spec.nodeName=node-1") == ["p1", "p3"]
    assert names(field_selector="status.phase!=Running") == ["p2", "p3"]
    assert names(field_selector="spec.nodeName=node-1,status.phase=Running") == ["p1"]
    assert names(field_selector="metadata.namespace=team-b") == ["p3"]
    assert [p.metadata.name for p in core.list_namespaced_pod("team-a", field_selector="metadata.name=p2").items] == ["p2"]
    with pytest.raises(ApiException) as exc:
        core.list_pod_for_all_namespaces(field_selector="spec.schedulerName=x")
    assert exc.value.status == 400 and "field label not supported" in status_of(exc)["message"]


def test_paging_returns_every_object_exactly_once_even_with_writes_between_pages(cluster: Cluster) -> None:
    for i in range(1037):
        cluster.store.create(workload(f"wl-{i:05d}", namespace=f"ns-{i % 7}"))
    seen: list[str] = []
    token, pages, first_remaining, versions = None, 0, None, set()
    while True:
        page = cluster.custom.list_cluster_custom_object(KUEUE, V2, "workloads", limit=100, _continue=token)
        pages += 1
        versions.add(page["metadata"]["resourceVersion"])
        seen += [f"{i['metadata']['namespace']}/{i['metadata']['name']}" for i in page["items"]]
        first_remaining = first_remaining if first_remaining is not None else page["metadata"]["remainingItemCount"]
        token = page["metadata"].get("continue")
        if pages == 3:  # writes mid-list must not make stable objects repeat or vanish
            cluster.store.create(workload("aaa-new", namespace="ns-0"))
            cluster.store.create(workload("zzz-new", namespace="ns-6"))  # after the cursor, after the snapshot
            cluster.store.delete("Workload", "ns-6", "wl-01035")
        if not token:
            break
    stable = {f"ns-{i % 7}/wl-{i:05d}" for i in range(1037)} - {"ns-6/wl-01035"}
    assert len(seen) == len(set(seen)), "a page repeated an object"
    assert stable <= set(seen)
    assert pages == 11 and first_remaining == 937
    # As on the real server, the whole list is at the first page's resourceVersion.
    assert len(versions) == 1 and "ns-6/zzz-new" not in seen
    assert cluster.server.requests[f"GET /apis/{KUEUE}/{V2}/workloads"] == pages


def test_namespaced_paging_stays_in_its_namespace(cluster: Cluster) -> None:
    for i in range(25):
        cluster.store.create(workload(f"wl-{i:02d}", namespace="ns-a" if i % 2 else "ns-b"))
    names, token = [], None
    while True:
        page = cluster.custom.list_namespaced_custom_object(KUEUE, V2, "ns-a", "workloads", limit=5, _continue=token)
        names += [i["metadata"]["name"] for i in page["items"]]
        assert all(i["metadata"]["namespace"] == "ns-a" for i in page["items"])
        if not (token := page["metadata"].get("continue")):
            break
    assert names == [f"wl-{i:02d}" for i in range(1, 25, 2)]


def test_typed_core_and_apps_clients(cluster: Cluster) -> None:
    for i in range(3):
        cluster.store.create(node(f"gpu-node-{i}"))
    nodes = cluster.core.list_node(label_selector="gpu=a100")
    assert [n.metadata.name for n in nodes.items] == ["gpu-node-0", "gpu-node-1", "gpu-node-2"]
    assert nodes.items[0].status.allocatable["nvidia.com/gpu"] == "8"
    created = cluster.core.create_namespaced_pod("team-a", pod("p1", "team-a", "gpu-node-0", "Running"))
    assert created.status is None  # the real server ignores status on create
    assert cluster.core.read_namespaced_pod("p1", "team-a").spec.node_name == "gpu-node-0"
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "llm", "namespace": "serve"},
                  "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "llm"}}, "template": {
                      "metadata": {"labels": {"app": "llm"}}, "spec": {"containers": [{"name": "c", "image": "vllm"}]}}}}
    cluster.apps.create_namespaced_deployment("serve", deployment)
    scaled = cluster.apps.patch_namespaced_deployment("llm", "serve", {"spec": {"replicas": 0}})
    assert scaled.spec.replicas == 0 and scaled.metadata.generation == 2


def test_merge_patch_updates_spec_and_bumps_generation(cluster: Cluster) -> None:
    before = create_wl(cluster, workload("train-1"))
    after = cluster.custom.patch_namespaced_custom_object(
        KUEUE, V2, "team-a", "workloads", "train-1",
        {"metadata": {"labels": {"gpuaas.io/reclaimed": "true"}}, "spec": {"active": False}})
    assert after["spec"]["active"] is False and after["metadata"]["labels"] == {"gpuaas.io/reclaimed": "true"}
    assert after["metadata"]["generation"] == 2
    assert int(after["metadata"]["resourceVersion"]) > int(before["metadata"]["resourceVersion"])
    assert cluster.store.get("Workload", "team-a", "train-1")["spec"]["active"] is False
    relabel = cluster.custom.patch_namespaced_custom_object(
        KUEUE, V2, "team-a", "workloads", "train-1", {"metadata": {"labels": {"gpuaas.io/reclaimed": None}}})
    assert relabel["metadata"]["generation"] == 2 and relabel["metadata"].get("labels", {}) == {}


def test_json_patch_with_test_op_guards_the_resource_version(cluster: Cluster) -> None:
    created = create_wl(cluster, workload("train-1"))
    rv = created["metadata"]["resourceVersion"]
    ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": rv},
           {"op": "replace", "path": "/spec/active", "value": False}]
    json_patch = "application/json-patch+json"
    patched = cluster.custom.patch_namespaced_custom_object(
        KUEUE, V2, "team-a", "workloads", "train-1", ops, _content_type=json_patch)
    assert patched["spec"]["active"] is False
    with pytest.raises(ApiException) as exc:  # same ops again: the resourceVersion moved on
        cluster.custom.patch_namespaced_custom_object(
            KUEUE, V2, "team-a", "workloads", "train-1", ops, _content_type=json_patch)
    assert exc.value.status == 422 and status_of(exc)["reason"] == "Invalid"


def test_stale_resource_version_is_a_conflict(cluster: Cluster) -> None:
    created = create_wl(cluster, workload("train-1"))
    stale = created["metadata"]["resourceVersion"]
    cluster.store.patch("Workload", "team-a", "train-1", {"spec": {"priority": 5}})
    with pytest.raises(ApiException) as exc:
        cluster.custom.patch_namespaced_custom_object(
            KUEUE, V2, "team-a", "workloads", "train-1", {"metadata": {"resourceVersion": stale}, "spec": {"active": False}})
    body = status_of(exc)
    assert exc.value.status == 409 and body["reason"] == "Conflict"
    assert body["message"] == (
        'Operation cannot be fulfilled on workloads.kueue.x-k8s.io "train-1": the object has been modified; '
        "please apply your changes to the latest version and try again")
    assert cluster.store.get("Workload", "team-a", "train-1")["spec"]["active"] is True
    created["spec"]["active"] = False
    with pytest.raises(ApiException) as put_exc:
        cluster.custom.replace_namespaced_custom_object(KUEUE, V2, "team-a", "workloads", "train-1", created)
    assert put_exc.value.status == 409
    with pytest.raises(ApiException) as del_exc:
        cluster.custom.delete_namespaced_custom_object(
            KUEUE, V2, "team-a", "workloads", "train-1", body={"preconditions": {"resourceVersion": stale}})
    assert del_exc.value.status == 409
    fresh = cluster.custom.get_namespaced_custom_object(KUEUE, V2, "team-a", "workloads", "train-1")
    fresh["spec"]["active"] = False
    assert cluster.custom.replace_namespaced_custom_object(
        KUEUE, V2, "team-a", "workloads", "train-1", fresh)["spec"]["active"] is False


def test_not_found_and_already_exists(cluster: Cluster) -> None:
    with pytest.raises(ApiException) as exc:
        cluster.custom.get_namespaced_custom_object(KUEUE, V2, "team-a", "workloads", "ghost")
    body = status_of(exc)
    assert exc.value.status == 404 and body["reason"] == "NotFound"
    assert body["message"] == 'workloads.kueue.x-k8s.io "ghost" not found'
    assert body["details"] == {"name": "ghost", "group": KUEUE, "kind": "workloads"}
    with pytest.raises(ApiException) as pod_exc:
        cluster.core.read_namespaced_pod("ghost", "team-a")
    assert status_of(pod_exc)["message"] == 'pods "ghost" not found'
    create_wl(cluster, workload("train-1"))
    with pytest.raises(ApiException) as dup:
        create_wl(cluster, workload("train-1"))
    assert dup.value.status == 409 and status_of(dup)["reason"] == "AlreadyExists"
    with pytest.raises(ApiException) as unknown:
        cluster.custom.list_cluster_custom_object(KUEUE, V2, "nosuchthings")
    assert unknown.value.status == 404


def test_schema_invalid_object_is_422_naming_the_field(cluster: Cluster) -> None:
    cq = cluster_queue("gpu-cq", gpus="lots")
    with pytest.raises(ApiException) as exc:
        cluster.custom.create_cluster_custom_object(KUEUE, V2, "clusterqueues", cq)
    body = status_of(exc)
    assert exc.value.status == 422 and body["reason"] == "Invalid"
    field = "spec.resourceGroups[0].flavors[0].resources[1].nominalQuota"
    assert [c["field"] for c in body["details"]["causes"]] == [field]
    assert body["message"].startswith(f'ClusterQueue.kueue.x-k8s.io "gpu-cq" is invalid: {field}: Invalid value: "lots"')
    created = cluster.custom.create_cluster_custom_object(KUEUE, V2, "clusterqueues", cluster_queue("gpu-cq"))
    with pytest.raises(ApiException) as patch_exc:
        cluster.custom.patch_cluster_custom_object(KUEUE, V2, "clusterqueues", "gpu-cq", {"spec": {"stopPolicy": "Pause"}})
    assert status_of(patch_exc)["details"]["causes"][0]["field"] == "spec.stopPolicy"
    assert cluster.store.get("ClusterQueue", None, "gpu-cq") == created


def test_rbac_forbids_verbs_the_rules_do_not_grant(make_cluster: MakeCluster) -> None:
    rules = RBACRules([
        {"apiGroups": [KUEUE], "resources": ["workloads", "clusterqueues"], "verbs": ["get", "list"]},
        {"apiGroups": [KUEUE], "resources": ["workloads/status"], "verbs": ["patch"]},
    ])
    c = make_cluster(rbac=rules)
    c.store.create(workload("train-1"))
    assert len(c.custom.list_cluster_custom_object(KUEUE, V2, "workloads")["items"]) == 1
    with pytest.raises(ApiException) as exc:
        c.custom.patch_namespaced_custom_object(KUEUE, V2, "team-a", "workloads", "train-1", {"spec": {"active": False}})
    body = status_of(exc)
    assert exc.value.status == 403 and body["reason"] == "Forbidden"
    assert body["message"] == (
        'workloads.kueue.x-k8s.io "train-1" is forbidden: User "system:serviceaccount:gpuaas:gpuaas" cannot patch '
        'resource "workloads" in API group "kueue.x-k8s.io" in the namespace "team-a"')
    c.custom.patch_namespaced_custom_object_status(
        KUEUE, V2, "team-a", "workloads", "train-1", {"status": {"requeueState": {"count": 1}}})
    with pytest.raises(ApiException) as create_exc:
        c.custom.create_cluster_custom_object(KUEUE, V2, "clusterqueues", cluster_queue("cq"))
    assert "at the cluster scope" in status_of(create_exc)["message"]
    with pytest.raises(ApiException) as pods_exc:
        c.core.list_pod_for_all_namespaces()
    assert 'cannot list resource "pods" in API group ""' in status_of(pods_exc)["message"]
    assert c.store.get("Workload", "team-a", "train-1")["spec"]["active"] is True


def test_v1beta1_reads_and_writes_use_the_old_field_names(cluster: Cluster) -> None:
    cluster.store.create(cluster_queue("cq-a", cohort="pool"))
    old = cluster.custom.get_cluster_custom_object(KUEUE, V1, "clusterqueues", "cq-a")
    assert old["apiVersion"] == f"{KUEUE}/{V1}"
    assert old["spec"]["cohort"] == "pool" and "cohortName" not in old["spec"]
    cluster.custom.patch_cluster_custom_object(KUEUE, V1, "clusterqueues", "cq-a", {"spec": {"cohort": "pool-2"}})
    stored = cluster.store.get("ClusterQueue", None, "cq-a")
    assert stored["spec"]["cohortName"] == "pool-2" and "cohort" not in stored["spec"]

    create_wl(cluster, {**workload("wl-old"), "apiVersion": f"{KUEUE}/{V1}", "spec": {
        **workload("wl-old")["spec"], "priorityClassName": "high",
        "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass"}}, version=V1)
    assert cluster.store.get("Workload", "team-a", "wl-old")["spec"]["priorityClassRef"] == {
        "group": KUEUE, "kind": "WorkloadPriorityClass", "name": "high"}
    read_old = cluster.custom.get_namespaced_custom_object(KUEUE, V1, "team-a", "workloads", "wl-old")
    assert read_old["spec"]["priorityClassName"] == "high" and "priorityClassRef" not in read_old["spec"]
    assert read_old["spec"]["priorityClassSource"] == "kueue.x-k8s.io/workloadpriorityclass"

    cluster.store.create(local_queue("q", "team-a", "cq-a"))
    cluster.store.patch("LocalQueue", "team-a", "q", {"status": usage_status()}, subresource="status")
    lq = cluster.custom.list_namespaced_custom_object(KUEUE, V1, "team-a", "localqueues")["items"][0]
    assert "flavorUsage" in lq["status"] and "flavorsUsage" not in lq["status"]


def test_status_subresource_rules(cluster: Cluster) -> None:
    create_wl(cluster, workload("train-1"))
    main = cluster.custom.patch_namespaced_custom_object(
        KUEUE, V2, "team-a", "workloads", "train-1", {"spec": {"active": False}, "status": {"requeueState": {"count": 3}}})
    assert "status" not in main  # a main-resource patch ignores .status
    status = cluster.custom.patch_namespaced_custom_object_status(
        KUEUE, V2, "team-a", "workloads", "train-1", {"spec": {"active": True}, "status": {"requeueState": {"count": 3}}})
    assert status["status"] == {"requeueState": {"count": 3}} and status["spec"]["active"] is False
    assert status["metadata"]["generation"] == 2  # status writes never bump the generation
    cluster.store.create({"apiVersion": f"{KUEUE}/{V2}", "kind": "ResourceFlavor", "metadata": {"name": "a100"}})
    with pytest.raises(ApiException) as exc:
        cluster.custom.patch_cluster_custom_object_status(KUEUE, V2, "resourceflavors", "a100", {"status": {}})
    assert exc.value.status == 404


def test_finalizers_defer_deletion(cluster: Cluster) -> None:
    cq = cluster_queue("cq-a")
    cq["metadata"]["finalizers"] = ["kueue.x-k8s.io/resource-in-use"]
    cluster.store.create(cq)
    deleting = cluster.custom.delete_cluster_custom_object(KUEUE, V2, "clusterqueues", "cq-a")
    assert deleting["metadata"]["deletionTimestamp"] == "2026-03-01T12:00:00Z"
    cluster.custom.patch_cluster_custom_object(KUEUE, V2, "clusterqueues", "cq-a", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiError) as exc:
        cluster.store.get("ClusterQueue", None, "cq-a")
    assert exc.value.status == 404


def test_visibility_delegates_to_the_callable(make_cluster: MakeCluster) -> None:
    calls: list[tuple[Any, ...]] = []

    def visibility(kind: str, namespace: str | None, name: str, limit: int, offset: int) -> dict[str, Any] | None:
        calls.append((kind, namespace, name, limit, offset))
        if name == "unknown":
            return None
        return {"kind": "PendingWorkloadsSummary", "metadata": {"creationTimestamp": None},
                "items": [{"metadata": {"name": "wl", "namespace": "team-a"}, "priority": 0,
                           "localQueueName": "q", "positionInClusterQueue": offset, "positionInLocalQueue": 0}]}

    c = make_cluster(visibility=visibility)

    def get(path: str, on: Cluster = c, **query: Any) -> dict[str, Any]:
        request = on.api.param_serialize("GET", path, query_params=list(query.items()), auth_settings=["BearerToken"])
        response = on.api.call_api(*request)
        response.read()  # type: ignore[no-untyped-call]
        data: Any = on.api.response_deserialize(response, {"200": "object"}).data
        assert isinstance(data, dict)
        return data

    vis = "/apis/visibility.kueue.x-k8s.io"
    summary = get(f"{vis}/v1beta2/clusterqueues/cq-a/pendingworkloads", limit=1, offset=1)
    assert summary["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta2" and summary["items"][0]["positionInClusterQueue"] == 1
    get(f"{vis}/v1beta1/namespaces/team-a/localqueues/q/pendingworkloads")
    assert calls == [("ClusterQueue", None, "cq-a", 1, 1), ("LocalQueue", "team-a", "q", 1000, 0)]
    assert c.server.requests[f"GET {vis}/v1beta2/clusterqueues/{{name}}/pendingworkloads"] == 1
    with pytest.raises(ApiException) as exc:
        get(f"{vis}/v1beta2/clusterqueues/unknown/pendingworkloads")
    assert exc.value.status == 404
    bare = make_cluster()
    with pytest.raises(ApiException) as none_exc:
        get(f"{vis}/v1beta2/clusterqueues/cq-a/pendingworkloads", on=bare)
    assert none_exc.value.status == 404


def test_request_counter_and_subscriber_events(cluster: Cluster) -> None:
    events: list[tuple[str, str, str]] = []
    cluster.store.subscribe(lambda kind, obj: events.append((kind, obj["metadata"]["name"], obj["metadata"]["resourceVersion"])))
    created = create_wl(cluster, workload("train-1"))
    cluster.custom.get_namespaced_custom_object(KUEUE, V2, "team-a", "workloads", "train-1")
    cluster.custom.get_namespaced_custom_object(KUEUE, V2, "team-a", "workloads", "train-1")
    noop = cluster.custom.patch_namespaced_custom_object(KUEUE, V2, "team-a", "workloads", "train-1", {"spec": {"active": True}})
    assert noop["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    cluster.custom.patch_namespaced_custom_object(KUEUE, V2, "team-a", "workloads", "train-1", {"spec": {"active": False}})
    cluster.custom.delete_namespaced_custom_object(KUEUE, V2, "team-a", "workloads", "train-1")
    assert [e[0] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    item = f"/apis/{KUEUE}/{V2}/namespaces/{{namespace}}/workloads/{{name}}"
    assert cluster.server.requests[f"GET {item}"] == 2
    assert cluster.server.requests[f"PATCH {item}"] == 2
    assert cluster.server.requests[f"POST /apis/{KUEUE}/{V2}/namespaces/{{namespace}}/workloads"] == 1


def test_watch_is_refused_cleanly(cluster: Cluster) -> None:
    with pytest.raises(ApiException) as exc:
        cluster.custom.list_cluster_custom_object(KUEUE, V2, "workloads", watch=True, _preload_content=False)
    assert exc.value.status == 405


def test_concurrent_writers_with_preconditions_never_lose_an_update(cluster: Cluster) -> None:
    """Eight threads read-modify-write one counter annotation; 409s are retried, none is lost."""
    create_wl(cluster, workload("shared"))

    def bump(times: int) -> int:
        conflicts = 0
        for _ in range(times):
            while True:
                cur = cluster.custom.get_namespaced_custom_object(KUEUE, V2, "team-a", "workloads", "shared")
                count = int(cur["metadata"].get("annotations", {}).get("n", "0"))
                patch = {"metadata": {"resourceVersion": cur["metadata"]["resourceVersion"],
                                      "annotations": {"n": str(count + 1)}}}
                try:
                    cluster.custom.patch_namespaced_custom_object(KUEUE, V2, "team-a", "workloads", "shared", patch)
                    break
                except ApiException as exc:
                    assert exc.status == 409
                    conflicts += 1
        return conflicts

    with ThreadPoolExecutor(max_workers=8) as pool:
        conflicts = sum(pool.map(bump, [10] * 8))
    final = cluster.store.get("Workload", "team-a", "shared")
    assert final["metadata"]["annotations"]["n"] == "80"
    patches = cluster.server.requests[f"PATCH /apis/{KUEUE}/{V2}/namespaces/{{namespace}}/workloads/{{name}}"]
    assert patches == 80 + conflicts


def test_typed_patch_uses_strategic_merge_and_webhook_rules_apply(cluster: Cluster) -> None:
    cluster.store.create(node("gpu-node-0"))
    patched = cluster.core.patch_node("gpu-node-0", {"spec": {"unschedulable": True}})
    assert patched.spec.unschedulable is True and patched.metadata.labels == {"gpu": "a100"}
    cq = cluster_queue("cq-neg", gpus="-2")  # the CRD pattern allows it; Kueue's webhook does not
    with pytest.raises(ApiException) as exc:
        cluster.custom.create_cluster_custom_object(KUEUE, V2, "clusterqueues", cq)
    assert status_of(exc)["details"]["causes"][0]["field"].endswith("resources[1].nominalQuota")
