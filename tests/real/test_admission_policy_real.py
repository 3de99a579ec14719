"""The kit's admission policy (``deployments/kubernetes/admission-policy.yaml``) on the real kube-apiserver.

RBAC cannot limit a patch to fields: the writer roles let gpuaas's service account rewrite any pod template.
With the kit's RBAC (reader and every writer role bound) and the policy applied as shipped, acting as that
account through a ServiceAccount token:

* every write gpuaas makes still lands: reclaim and undo of a Deployment, a StatefulSet, a RayCluster (suspend
  and, elastic, its workers to 0), an InferenceService (stop annotation and ``minReplicas``), a Notebook and a
  Workload; a deadline hold, a demotion and their releases; a quota plan moving GPUs (and a lendingLimit) between
  two ClusterQueues, and its undo; the Events of each;
* a pod template change (image of a Deployment in ``kube-system``; a worker group's image), a label, an owner
  reference, a finalizer, an annotation outside ``gpuaas.io/``, a ClusterQueue's ``namespaceSelector``, ``preemption`` or flavor, a
  Workload's queue and an InferenceService's other predictor fields are refused with the policy's message, and
  the object is left as it was;
* creating and deleting those kinds is refused even where a role allows it, and the status subresource is not
  matched;
* a cluster admin is not matched: the same changes pass.

The policy, the bindings and the objects are removed at the end, so the other modules see the cluster as before.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from gpuaas.actions import KubeWriter
from gpuaas.actions._patches import stopped_reason
from gpuaas.actions.deadline_holds import apply_nudges
from gpuaas.actions.quotas import apply_quota_plan
from gpuaas.cluster.real import KubeHTTP, RealCluster, path_of
from gpuaas.models import Outcome
from gpuaas.operations import incident
from gpuaas.operations import reclaim as reclaim_operation
from gpuaas.permissions import BINDINGS
from gpuaas.policies.deadlines import Nudge, NudgeAction
from gpuaas.policies.quotas import QueueDemand, QuotaLimits, plan_quotas
from gpuaas.policies.reclaim import Decision
from gpuaas.policy import FreeGoal, Mode
from gpuaas.settings import load_settings
from gpuaas.store import open_store
from tests.real.conftest import wait_until
from tests.real.test_rbac import sa_kubeconfig, sa_token  # noqa: F401 - the kit's RBAC, a token of its account

pytestmark = [pytest.mark.real]

KIT = Path(__file__).resolve().parents[2] / "deployments" / "kubernetes"
NS = "gpuaas-vap"
SA = "system:serviceaccount:gpuaas:gpuaas"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
PLURALS = {"ValidatingAdmissionPolicy": "validatingadmissionpolicies",
           "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings"}
MERGE = "application/merge-patch+json"
NOWHERE = {"gpuaas.io/test": "no-such-node"}  # pods of the test objects stay pending: they hold nothing


class Account:
    """Requests as one bearer token that keep the API server's whole answer (a refusal's full message)."""

    def __init__(self, cluster: RealCluster, token: str) -> None:
        tls = ssl.create_default_context(cafile=str(cluster.pki_dir / "ca.crt"))
        self._client = httpx.Client(base_url=cluster.api_url, verify=tls, timeout=30,
                                    headers={"Authorization": f"Bearer {token}"})

    def send(self, method: str, path: str, body: Any = None, *, dry_run: bool = False,
             content_type: str = MERGE) -> tuple[int, str]:
        """(status, the Status message or ``""``)."""
        response = self._client.request(method, path, json=body, params={"dryRun": "All"} if dry_run else None,
                                        headers={"Content-Type": content_type} if body is not None else {})
        message = response.json().get("message", "") if response.status_code >= 400 else ""
        return response.status_code, str(message)

    def close(self) -> None:
        self._client.close()


def _container(image: str = "registry.example/app:1") -> dict[str, Any]:
    return {"name": "main", "image": image, "resources": {"requests": {"cpu": "10m"}}}


def _template(labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"labels": labels or {}}, "spec": {"nodeSelector": NOWHERE, "containers": [_container()]}}


def _workload(name: str) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": name, "namespace": NS},
            "spec": {"queueName": "vap-no-such-queue", "podSets": [{"name": "main", "count": 1, "template": {
                "spec": {"restartPolicy": "Never", "containers": [_container()]}}}]}}


def _raycluster(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": name, "namespace": NS, "annotations": annotations},
            "spec": {"rayVersion": "2.41.0", "headGroupSpec": {"rayStartParams": {}, "template": _template()},
                     "workerGroupSpecs": [{"groupName": "workers", "replicas": 2, "minReplicas": 1, "maxReplicas": 2,
                                           "rayStartParams": {}, "template": _template()}]}}


def _isvc(name: str, mode: str) -> dict[str, Any]:
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": name, "namespace": NS, "annotations": {"serving.kserve.io/deploymentMode": mode}},
            "spec": {"predictor": {"minReplicas": 1, "maxReplicas": 1,
                                   "model": {"modelFormat": {"name": "huggingface"}, "storageUri": "hf://m"}}}}


def _queue(name: str, gpu: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"cohortName": "vap", "namespaceSelector": {"matchLabels": {"gpuaas.io/test": "vap"}},
                     "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                         {"name": "h100", "resources": [{"name": "nvidia.com/gpu", **gpu}]}]}]}}


def _apps(kind: str, name: str, namespace: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                            "template": _template({"app": name})}
    if kind == "StatefulSet":
        spec["serviceName"] = name
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": namespace}, "spec": spec}


OBJECTS: list[dict[str, Any]] = [
    _apps("Deployment", "vap-dep", NS), _apps("StatefulSet", "vap-sts", NS), _apps("Deployment", "vap-target", "kube-system"),
    _raycluster("vap-ray", {}), _raycluster("vap-eray", {"kueue.x-k8s.io/elastic-job": "true"}),
    _isvc("vap-isvc", "Standard"), _isvc("vap-isvc-zero", "Serverless"),
    {"apiVersion": "kubeflow.org/v1", "kind": "Notebook", "metadata": {"name": "vap-nb", "namespace": NS},
     "spec": {"template": {"spec": {"containers": [_container()]}}}},
    _workload("vap-wl"), _workload("vap-wl-hold"),
    _queue("vap-a", {"nominalQuota": 4, "lendingLimit": 4}), _queue("vap-b", {"nominalQuota": 4, "borrowingLimit": 0}),
]


@pytest.fixture(scope="module")
def objects(api: KubeHTTP) -> Iterator[None]:
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    for obj in OBJECTS:
        api.create(obj)
    yield
    for obj in OBJECTS:  # no namespace controller runs here: each object goes by itself
        api.delete(obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace"))


@pytest.fixture(scope="module")
def writers(api: KubeHTTP, sa_token: str) -> Iterator[None]:  # noqa: F811 - the fixture imported above
    """The kit's writer roles bound, as an operator switching every flow to apply does; unbound at the end (the RBAC
    module checks that ``rbac.yaml`` alone binds no writer)."""
    bindings = [doc for file in BINDINGS.values() if file != "rbac.yaml"
                for doc in yaml.safe_load_all((KIT / file).read_text()) if doc]
    for doc in bindings:
        api.create(doc)
    yield
    for doc in bindings:
        api.delete(doc["kind"], doc["metadata"]["name"])


PROBE = (path_of("Deployment", NS, "vap-dep"), {"metadata": {"labels": {"gpuaas-vap-probe": "1"}}})
"""A change the policy refuses and RBAC allows: sent as a dry run until the policy is in force, or gone."""


@pytest.fixture(scope="module")
def sa(real_cluster: RealCluster, api: KubeHTTP, sa_token: str, writers: None,  # noqa: F811
       objects: None) -> Iterator[Account]:
    """The gpuaas service account, with the policy applied as shipped (the API server takes a moment to use it)."""
    account = Account(real_cluster, sa_token)
    docs = [doc for doc in yaml.safe_load_all((KIT / "admission-policy.yaml").read_text()) if doc]
    for doc in docs:
        api.request("POST", f"{ADMISSION}/{PLURALS[doc['kind']]}", doc)
    try:
        wait_until("the admission policy is in force",
                   lambda: "gpuaas-write-fields" in account.send("PATCH", *PROBE, dry_run=True)[1])
        yield account
    finally:
        for doc in reversed(docs):
            api.request("DELETE", f"{ADMISSION}/{PLURALS[doc['kind']]}/{doc['metadata']['name']}")
        wait_until("the admission policy is gone", lambda: account.send("PATCH", *PROBE, dry_run=True)[0] == 200)
        account.close()


def _decision(api: KubeHTTP, kind: str, name: str, free: FreeGoal) -> Decision:
    """The planner's decision for an idle ``kind/name`` as it is now (these objects run no pod: no telemetry)."""
    live = api.get(kind, name, NS)["metadata"]
    return Decision(kind=kind, namespace=NS, name=name, uid=live["uid"], tenant=None, gpus=1.0, idle_seconds=1800.0,
                    free=free, outcome=Outcome.planned, reason="idle (admission policy)",
                    resource_version=live["resourceVersion"], idempotency_key=f"vap-{kind}-{name}-{free}",
                    mode=Mode.apply)


@pytest.mark.parametrize(("kind", "name", "free"), [
    ("Deployment", "vap-dep", FreeGoal.quota),
    ("StatefulSet", "vap-sts", FreeGoal.quota),
    ("RayCluster", "vap-ray", FreeGoal.quota),
    ("RayCluster", "vap-eray", FreeGoal.compute),
    ("InferenceService", "vap-isvc", FreeGoal.quota),
    ("InferenceService", "vap-isvc-zero", FreeGoal.compute),
    ("Notebook", "vap-nb", FreeGoal.quota),
    ("Workload", "vap-wl", FreeGoal.quota),
], ids=["deployment", "statefulset", "raycluster-suspend", "raycluster-workers", "isvc-stop", "isvc-min-replicas",
        "notebook", "workload"])
def test_reclaim_and_its_undo_pass_as_the_service_account(api: KubeHTTP, sa: Account, sa_kubeconfig: Path,  # noqa: F811
                                                          kind: str, name: str, free: FreeGoal) -> None:
    settings = load_settings()
    before = api.get(kind, name, NS)
    d = _decision(api, kind, name, free)
    plan = reclaim_operation.ReclaimPlan(Mode.apply, [d], settings.policy.reclaim.max_actions_per_run)
    with open_store(settings) as store, KubeWriter(settings) as writer:
        [done] = reclaim_operation.apply(plan, store, writer, flow_run_id="vap", now=datetime.now(UTC))
        assert done.result == Outcome.applied, done.reason
        assert not writer.unrecorded_events, writer.unrecorded_events
        assert stopped_reason(kind, api.get(kind, name, NS)) is not None
        assert done.audit_id is not None
        [restored] = incident.undo(store, writer, [done.audit_id], flow_run_id="vap")
        assert restored.result == Outcome.restored, restored.message
    after = api.get(kind, name, NS)
    assert stopped_reason(kind, after) is None
    assert after["spec"] == before["spec"]


def _settled(api: KubeHTTP, name: str) -> dict[str, Any]:
    """The Workload once Kueue has said why it waits and stopped writing its status for 2 s: a nudge planned on a
    version Kueue is about to replace is refused as ``changed``."""
    found: list[dict[str, Any]] = []

    def quiet() -> bool:
        first = api.get("Workload", name, NS)
        time.sleep(2)
        found[:] = [api.get("Workload", name, NS)]
        conditions = (found[0].get("status") or {}).get("conditions") or []
        return (first["metadata"]["resourceVersion"] == found[0]["metadata"]["resourceVersion"]
                and any(c.get("type") == "QuotaReserved" for c in conditions))

    wait_until(f"Kueue settles {name} as pending", quiet)
    return found[0]


@pytest.mark.parametrize("action", [NudgeAction.hold, NudgeAction.demote])
def test_a_deadline_nudge_and_its_release_pass_as_the_service_account(api: KubeHTTP, sa: Account,
                                                                      sa_kubeconfig: Path, action: NudgeAction) -> None:  # noqa: F811
    meta = _settled(api, "vap-wl-hold")["metadata"]
    settings = load_settings()
    with open_store(settings) as store, KubeWriter(settings) as writer:
        nudge = Nudge(action, NS, "vap-wl-hold", "deadline (admission policy)", uid=meta["uid"],
                      resource_version=meta["resourceVersion"])
        [done] = apply_nudges([nudge], store, writer, mode=Mode.apply, flow_run_id=None)
        assert done.result == Outcome.applied, done.reason
        [released] = apply_nudges([Nudge(NudgeAction.release, NS, "vap-wl-hold", "deadline (admission policy)")], store,
                                  writer, mode=Mode.apply, flow_run_id=None)
        assert released.result == Outcome.released, released.reason
        assert not writer.unrecorded_events, writer.unrecorded_events
    spec = api.get("Workload", "vap-wl-hold", NS)["spec"]
    assert spec.get("active", True) is True and int(spec.get("priority") or 0) == 0


def test_a_quota_plan_and_its_undo_pass_as_the_service_account(api: KubeHTTP, sa: Account,
                                                               sa_kubeconfig: Path) -> None:  # noqa: F811
    """vap-a lends all its 4 GPUs (``lendingLimit: 4``): moving 2 to vap-b lowers that limit in the same patch."""
    settings = load_settings()
    before = {q: api.get("ClusterQueue", q)["spec"] for q in ("vap-a", "vap-b")}
    plan = plan_quotas([QueueDemand("vap-a", {"h100": 4}, {"h100": 2}), QueueDemand("vap-b", {"h100": 4}, {"h100": 6})],
                       QuotaLimits(max_step_gpus=8, max_step_percent=100, max_total_moved_gpus=8, hysteresis_gpus=1))
    assert plan.moved_gpus == 2
    with open_store(settings) as store, KubeWriter(settings) as writer:
        result = apply_quota_plan(store, writer, "vap", plan, mode=Mode.apply, degraded=None, flow_run_id=None,
                                  evidence={}, gpu_resources=["nvidia.com/gpu"])
        assert result.outcome == "applied", result.message
        moved = api.get("ClusterQueue", "vap-a")["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
        assert (str(moved["nominalQuota"]), str(moved["lendingLimit"])) == ("2", "2")
        [undone] = incident.undo(store, writer, [result.plan_id], flow_run_id=None)
        assert undone.result == Outcome.restored, undone.message
        assert not writer.unrecorded_events, writer.unrecorded_events
    assert {q: api.get("ClusterQueue", q)["spec"] for q in ("vap-a", "vap-b")} == before


def _as_written(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without what its controllers and the API server write (status, resourceVersion, managedFields)."""
    meta = {k: v for k, v in obj["metadata"].items() if k not in ("resourceVersion", "managedFields")}
    return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": meta}


def test_a_pod_template_change_is_refused_with_the_policys_message(api: KubeHTTP, sa: Account) -> None:
    path = path_of("Deployment", "kube-system", "vap-target")
    before = api.get("Deployment", "vap-target", "kube-system")
    status, message = sa.send("PATCH", path, {"spec": {"template": {"spec": {"containers": [
        {"name": "main", "image": "registry.example/evil:1"}]}}}})
    assert status == 403
    assert message == ('deployments.apps "vap-target" is forbidden: ValidatingAdmissionPolicy '
                       "'gpuaas-write-fields' with binding 'gpuaas-write-fields' denied request: "
                       f"refused: {SA} may change only spec.replicas of deployments kube-system/vap-target, "
                       "no other spec field (RBAC cannot limit a patch to fields: policy gpuaas-write-fields)")
    assert _as_written(api.get("Deployment", "vap-target", "kube-system")) == _as_written(before)


WORKERS_WITH_NEW_IMAGE = [{"groupName": "workers", "replicas": 0, "minReplicas": 0, "maxReplicas": 2,
                           "rayStartParams": {}, "template": {"spec": {"containers": [_container("evil:1")]}}}]
GPU = {"name": "nvidia.com/gpu", "nominalQuota": 4, "lendingLimit": 4}
QUOTAS_ONLY = ("change only its quotas (nominalQuota, borrowingLimit, lendingLimit) of clusterqueues vap-a, "
               "no other spec field")
# (kind, namespace, name, the change, what the refusal says after "refused: <account> may ")
REFUSED = [
    ("Deployment", NS, "vap-dep", {"spec": {"replicas": 0, "template": {"spec": {"serviceAccountName": "admin"}}}},
     f"change only spec.replicas of deployments {NS}/vap-dep, no other spec field"),
    ("Deployment", NS, "vap-dep", {"metadata": {"labels": {"team": "other"}}},
     f"not change the labels, finalizers, owners or other metadata of deployments {NS}/vap-dep"),
    ("StatefulSet", NS, "vap-sts", {"metadata": {"ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": "5f0c8f4e-0000-4000-8000-000000000000"}]}},
     f"not change the labels, finalizers, owners or other metadata of statefulsets {NS}/vap-sts"),
    ("Workload", NS, "vap-wl", {"metadata": {"finalizers": ["example.com/keep"]}},
     f"not change the labels, finalizers, owners or other metadata of workloads {NS}/vap-wl"),
    ("Notebook", NS, "vap-nb", {"metadata": {"annotations": {"example.com/owner": "me"}}},
     f"change only the gpuaas.io/ and kubeflow-resource-stopped annotations of notebooks {NS}/vap-nb"),
    ("Notebook", NS, "vap-nb", {"spec": {"template": {"spec": {"containers": [_container("evil:1")]}}}},
     f"not change the spec of notebooks {NS}/vap-nb"),
    ("RayCluster", NS, "vap-eray", {"spec": {"workerGroupSpecs": WORKERS_WITH_NEW_IMAGE}},
     f"change only spec.suspend and the worker groups' replicas and minReplicas of rayclusters {NS}/vap-eray, "
     "no other spec field"),
    ("InferenceService", NS, "vap-isvc", {"spec": {"predictor": {"minReplicas": 0, "serviceAccountName": "admin"}}},
     f"change only spec.predictor.minReplicas of inferenceservices {NS}/vap-isvc, no other spec field"),
    ("Workload", NS, "vap-wl", {"spec": {"active": False, "queueName": "other"}},
     f"change only spec.active and spec.priority of workloads {NS}/vap-wl, no other spec field"),
    ("ClusterQueue", None, "vap-a", {"spec": {"namespaceSelector": {"matchLabels": {"gpuaas.io/test": "other"}}}},
     QUOTAS_ONLY),
    ("ClusterQueue", None, "vap-a", {"spec": {"preemption": {"withinClusterQueue": "LowerPriority"}}},
     QUOTAS_ONLY),
    ("ClusterQueue", None, "vap-a", {"spec": {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
        {"name": "other", "resources": [GPU]}]}]}},
     QUOTAS_ONLY),
]
REFUSED_IDS = ["template-with-replicas", "label", "owner", "finalizer", "annotation", "notebook-spec", "worker-image",
               "predictor", "workload-queue", "namespace-selector", "preemption", "flavor"]


@pytest.mark.parametrize(("kind", "namespace", "name", "patch", "says"), REFUSED, ids=REFUSED_IDS)
def test_a_change_outside_gpuaas_fields_is_refused(api: KubeHTTP, sa: Account, kind: str, namespace: str | None,
                                                   name: str, patch: dict[str, Any], says: str) -> None:
    before = _as_written(api.get(kind, name, namespace))
    status, message = sa.send("PATCH", path_of(kind, namespace, name), patch)
    assert (status, message.partition("denied request: ")[2]) == (403, f"refused: {SA} may {says}"
                                                                  " (RBAC cannot limit a patch to fields: policy "
                                                                  "gpuaas-write-fields)")
    assert _as_written(api.get(kind, name, namespace)) == before


@pytest.mark.parametrize(("kind", "namespace", "name", "patch", "says"), REFUSED, ids=REFUSED_IDS)
def test_a_cluster_admin_is_not_matched(real_cluster: RealCluster, sa: Account, kind: str, namespace: str | None,
                                        name: str, patch: dict[str, Any], says: str) -> None:
    """The same changes as the admin, as a dry run (the API server runs admission all the same)."""
    admin = Account(real_cluster, real_cluster.token)
    try:
        assert admin.send("PATCH", path_of(kind, namespace, name), patch, dry_run=True) == (200, "")
    finally:
        admin.close()


def test_a_cluster_admin_changes_the_image_the_account_may_not(real_cluster: RealCluster, api: KubeHTTP,
                                                               sa: Account) -> None:
    patched = api.merge_patch("Deployment", "vap-target", {"spec": {"template": {"spec": {"containers": [
        {"name": "main", "image": "registry.example/app:2"}]}}}}, "kube-system")
    assert patched["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.example/app:2"


def test_create_and_delete_are_refused_even_where_a_role_allows_them(api: KubeHTTP, sa: Account) -> None:
    """A role too broad (create, delete) bound beside the kit's: the policy still refuses both; the status subresource,
    which no gpuaas write uses, is not matched."""
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "vap-too-broad"},
            "rules": [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["create", "delete"]},
                      {"apiGroups": ["apps"], "resources": ["deployments/status"], "verbs": ["patch"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "vap-too-broad"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                                  "kind": "ClusterRole", "name": "vap-too-broad"},
               "subjects": [{"kind": "ServiceAccount", "name": "gpuaas", "namespace": "gpuaas"}]}
    api.create(role)
    api.create(binding)
    prefix = f"refused: {SA} may not "
    try:
        new = _apps("Deployment", "vap-new", NS)
        wait_until("the broad role is in force", lambda: "denied request: " in sa.send(
            "POST", path_of("Deployment", NS), new, dry_run=True, content_type="application/json")[1])
        status, message = sa.send("POST", path_of("Deployment", NS), new, content_type="application/json")
        assert status == 403 and f"{prefix}create deployments {NS}/vap-new: " in message, message
        status, message = sa.send("DELETE", path_of("Deployment", NS, "vap-dep"))
        assert status == 403 and f"{prefix}delete deployments {NS}/vap-dep: " in message, message
        assert sa.send("PATCH", path_of("Deployment", NS, "vap-dep") + "/status",
                       {"status": {"observedGeneration": 1}}, dry_run=True) == (200, "")
    finally:
        api.delete("ClusterRoleBinding", "vap-too-broad")
        api.delete("ClusterRole", "vap-too-broad")
