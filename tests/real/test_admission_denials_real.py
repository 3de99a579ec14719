"""Admission denials on the real kube-apiserver, as gpuaas reports them, acting as its service account.

With the kit's RBAC (reader and every writer role bound) and its admission policy applied as shipped:

* a change the kit's policy refuses, sent through gpuaas's own writer, is an ``AdmissionDenied`` naming
  ``gpuaas-write-fields`` and carrying the API server's whole message and what a denial by the kit's policy means;
  the rebalance's refusal adds no role to bind, though the status is 403;
* a quota plan whose patch another ``ValidatingAdmissionPolicy`` refuses (403, as the policy's reason says) closes
  ``failed`` naming that policy and its message, with no role to bind, and what had landed is rolled back.

Its own namespace, queues and policy, removed at the end.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuaas.actions import KubeWriter
from gpuaas.actions._quota_moves import refused
from gpuaas.actions.quotas import apply_quota_plan
from gpuaas.cluster.real import KubeHTTP, RealCluster, path_of
from gpuaas.errors import Admission, AdmissionDenied
from gpuaas.policies.quotas import QueueDemand, QuotaLimits, plan_quotas
from gpuaas.policy import Mode
from gpuaas.settings import load_settings
from gpuaas.store import open_store
from tests.real.conftest import wait_until
from tests.real.test_admission_policy_real import (  # noqa: F401 - writers is a fixture
    ADMISSION,
    KIT,
    PLURALS,
    SA,
    Account,
    _apps,
    writers,
)
from tests.real.test_rbac import sa_kubeconfig, sa_token  # noqa: F401 - the kit's RBAC, a token of its account

pytestmark = [pytest.mark.real]

NS = "gpuaas-denials"
FREEZE = "den-quota-freeze"
FROZEN = "quota changes to den-b are frozen until the capacity audit ends (ask #platform)"
BIND = "bind gpuaas-rebalancer"


def _queue(name: str) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"cohortName": "den", "namespaceSelector": {"matchLabels": {"gpuaas.io/test": "den"}},
                     "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                         {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 4}]}]}]}}


OBJECTS = [_apps("Deployment", "den-dep", NS), _queue("den-a"), _queue("den-b")]
FREEZE_DOCS = [
    {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": FREEZE},
     "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": [
         {"apiGroups": ["kueue.x-k8s.io"], "apiVersions": ["*"], "resources": ["clusterqueues"],
          "operations": ["UPDATE"]}]},
              "validations": [{"expression": "object.metadata.name != 'den-b' || object.spec == oldObject.spec",
                               "reason": "Forbidden", "message": FROZEN}]}},
    {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
     "metadata": {"name": FREEZE}, "spec": {"policyName": FREEZE, "validationActions": ["Deny"]}},
]
PROBE = (path_of("Deployment", NS, "den-dep"), {"metadata": {"labels": {"gpuaas-den-probe": "1"}}})


@pytest.fixture(scope="module")
def policies(real_cluster: RealCluster, api: KubeHTTP, sa_token: str, writers: None) -> Iterator[Account]:  # noqa: F811
    """The objects, the kit's policy and the freeze, in force for the service account."""
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    for obj in OBJECTS:
        api.create(obj)
    account = Account(real_cluster, sa_token)
    docs = [d for d in yaml.safe_load_all((KIT / "admission-policy.yaml").read_text()) if d] + FREEZE_DOCS
    for doc in docs:
        api.request("POST", f"{ADMISSION}/{PLURALS[doc['kind']]}", doc)
    try:
        wait_until("the kit's policy is in force",
                   lambda: "gpuaas-write-fields" in account.send("PATCH", *PROBE, dry_run=True)[1])
        more = _queue("den-b")["spec"]["resourceGroups"]
        more[0]["flavors"][0]["resources"][0]["nominalQuota"] = 5  # a change the kit's policy lets through
        wait_until("the freeze is in force", lambda: FREEZE in account.send(
            "PATCH", path_of("ClusterQueue", None, "den-b"), {"spec": {"resourceGroups": more}}, dry_run=True)[1])
        yield account
    finally:
        for doc in reversed(docs):
            api.request("DELETE", f"{ADMISSION}/{PLURALS[doc['kind']]}/{doc['metadata']['name']}")
        wait_until("the policies are gone", lambda: account.send("PATCH", *PROBE, dry_run=True)[0] == 200)
        account.close()
        for obj in OBJECTS:
            api.delete(obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace"))


def test_the_kits_policy_is_reported_as_itself_never_as_rbac(api: KubeHTTP, policies: Account,
                                                            sa_kubeconfig: Path) -> None:  # noqa: F811
    live = api.get("Deployment", "den-dep", NS)
    with KubeWriter(load_settings()) as writer, pytest.raises(AdmissionDenied) as caught:
        writer.patch("Deployment", NS, "den-dep", {"metadata": {"resourceVersion": live["metadata"]["resourceVersion"],
                                                                "labels": {"team": "other"}}})
    error = caught.value
    assert (error.by, error.controller, error.binding, error.status) == (
        Admission.policy, "gpuaas-write-fields", "gpuaas-write-fields", 403)
    said = (f"refused: {SA} may not change the labels, finalizers, owners or other metadata of deployments "
            f"{NS}/den-dep (RBAC cannot limit a patch to fields: policy gpuaas-write-fields)")
    assert str(error) == (
        f"patching Deployment {NS}/den-dep: denied by ValidatingAdmissionPolicy gpuaas-write-fields: {said}; that is "
        "the kit's own admission policy: gpuaas tried to change a field the policy does not allow, a gpuaas bug to "
        "report, or a policy out of date with this gpuaas version (kubectl apply -f "
        "deployments/kubernetes/admission-policy.yaml of this version)")
    assert refused(error) == str(error) and BIND not in refused(error)
    assert "team" not in (api.get("Deployment", "den-dep", NS)["metadata"].get("labels") or {})


def test_a_quota_plan_another_policy_refuses_names_it_and_no_role(api: KubeHTTP, policies: Account,
                                                                  sa_kubeconfig: Path) -> None:  # noqa: F811
    """den-a gives 2 GPUs (lands first, a decrease), den-b's increase is refused: den-a goes back to 4."""
    settings = load_settings()
    before = {q: api.get("ClusterQueue", q)["spec"] for q in ("den-a", "den-b")}
    plan = plan_quotas([QueueDemand("den-a", {"h100": 4}, {"h100": 2}), QueueDemand("den-b", {"h100": 4}, {"h100": 6})],
                       QuotaLimits(max_step_gpus=8, max_step_percent=100, max_total_moved_gpus=8, hysteresis_gpus=1))
    assert plan.moved_gpus == 2
    with open_store(settings) as store, KubeWriter(settings) as writer:
        result = apply_quota_plan(store, writer, "den", plan, mode=Mode.apply, degraded=None, flow_run_id=None,
                                  evidence={}, gpu_resources=["nvidia.com/gpu"])
    assert result.outcome == "failed" and result.patched == ["den-a"], result.message
    assert (f"stopped after 1 patch: den-b: patching ClusterQueue den-b: denied by ValidatingAdmissionPolicy {FREEZE}: "
            f"{FROZEN}") in result.message
    assert BIND not in result.message and "kit's own" not in result.message
    assert {q: api.get("ClusterQueue", q)["spec"] for q in ("den-a", "den-b")} == before
