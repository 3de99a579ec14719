"""Least privilege, proven by the real RBAC authorizer: the shipped ``deployments/kubernetes/rbac.yaml``
is applied as is, a token is issued for its ServiceAccount (TokenRequest), and gpuaas runs with it.
Alone, it allows every read and no write; with the writer roles bound by their own files, every read
of collect and the writes of reclaim and rebalance are allowed; a write outside the roles is refused
with 403. The preflight's access reviews get the authorizer's own answers. A quota plan applied with
the reader role alone is refused at its first read and closed failed, naming the role to bind."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuaas.actions import KubeWriter
from gpuaas.actions._quota_patches import gpu_nominal
from gpuaas.actions.quotas import apply_quota_plan, recover_quota_plans
from gpuaas.cluster.real import KubeHTTP, KubeHTTPError, RealCluster
from gpuaas.operations.collect import read_snapshot
from gpuaas.operations.preflight import Verdict, excess_check, permissions_check
from gpuaas.permissions import BINDINGS, CANARIES, FLOW_READS, READS, WRITES, Access, allowed, whoami
from gpuaas.policies.quotas import QueueDemand, QuotaLimits, plan_quotas
from gpuaas.policy import Mode
from gpuaas.settings import load_settings
from gpuaas.store import open_store

pytestmark = [pytest.mark.real]

RBAC = Path(__file__).resolve().parents[2] / "deployments" / "kubernetes" / "rbac.yaml"


@pytest.fixture(scope="module")
def sa_token(api: KubeHTTP) -> str:
    for doc in yaml.safe_load_all(RBAC.read_text()):
        if not doc:
            continue
        namespace = doc["metadata"].get("namespace")
        if namespace:
            api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        api.create(doc)
    review = api.request("POST", "/api/v1/namespaces/gpuaas/serviceaccounts/gpuaas/token",
                         {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                          "spec": {"expirationSeconds": 3600}})
    return str(review["status"]["token"])


def _kubeconfig(real_cluster: RealCluster, token: str, path: Path) -> Path:
    ca = base64.b64encode((real_cluster.pki_dir / "ca.crt").read_bytes()).decode()
    config: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "real", "cluster": {"server": real_cluster.api_url, "certificate-authority-data": ca}}],
        "users": [{"name": "gpuaas", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "real", "user": "gpuaas"}}],
    }
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture()
def sa_kubeconfig(real_cluster: RealCluster, sa_token: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    assert real_cluster.bins is not None
    path = _kubeconfig(real_cluster, sa_token, tmp_path / "sa-kubeconfig")
    for key, value in {**real_cluster.settings_env(), "GPUAAS_NVML": "off", "GPUAAS_KUBECONFIG": str(path)}.items():
        monkeypatch.setenv(key, value)
    return path


EVERY = [*READS, *(a for accesses in WRITES.values() for a in accesses)]


def test_rbac_yaml_alone_binds_every_read_and_no_write(sa_kubeconfig: Path) -> None:
    """The preflight's access reviews, answered by the real authorizer: applied alone, ``rbac.yaml`` is read-only,
    and the check names the file that binds each missing writer role."""
    answers = allowed(load_settings(), EVERY)
    assert {a for a, ok in answers.items() if ok} == set(READS)
    # whose answers these are, as the real server names the token's account (SelfSubjectReview)
    assert whoami(load_settings()) == "system:serviceaccount:gpuaas:gpuaas"
    check = permissions_check(answers, ["reclaim", "rebalance"], whoami(load_settings()))
    assert check.detail.startswith(f"as system:serviceaccount:gpuaas:gpuaas: allowed: the {len(FLOW_READS)} reads every "
                                   "flow makes; refused: reclaim would write, but ")
    assert check.verdict is Verdict.failed
    assert "reclaim would write, but patch workloads.kueue.x-k8s.io" in check.detail
    assert "bind gpuaas-reclaimer (kubectl apply -f deployments/kubernetes/rbac-apply-reclaim.yaml)" in check.detail
    assert "bind gpuaas-rebalancer (kubectl apply -f deployments/kubernetes/rbac-apply-rebalance.yaml)" in check.detail
    # the kit's least privilege: the real authorizer refuses every access gpuaas should not have
    assert excess_check(allowed(load_settings(), list(CANARIES)), []).verdict is Verdict.ok


@pytest.fixture(scope="module")
def writers_bound(api: KubeHTTP, sa_token: str) -> None:
    """Every writer role bound, as an operator does when switching reclaim, rebalance and deadlines to apply."""
    for file in (f for role, f in BINDINGS.items() if role != "gpuaas-reader"):
        for doc in yaml.safe_load_all((RBAC.parent / file).read_text()):
            if doc:
                api.create(doc)


def test_with_the_writer_roles_bound_every_access_is_allowed(sa_kubeconfig: Path, writers_bound: None) -> None:
    answers = allowed(load_settings(), EVERY)
    assert [str(a) for a, ok in answers.items() if not ok] == []
    assert permissions_check(answers, list(WRITES)).verdict is Verdict.ok
    canaries = allowed(load_settings(), list(CANARIES))
    assert excess_check(canaries, list(WRITES)).verdict is Verdict.ok  # every flow applies: each patch is needed
    dry = excess_check(canaries, [])  # the roles bound, the policy dry-run: each role named with its unbinding
    assert dry.verdict is Verdict.warning and "which no gpuaas role grants" not in dry.detail
    for flow, file in (("reclaim", "rbac-apply-reclaim.yaml"), ("rebalance", "rbac-apply-rebalance.yaml"),
                       ("deadlines", "rbac-apply-deadlines.yaml")):
        assert f"{flow} does not apply, yet patch" in dry.detail
        assert f"(kubectl delete -f deployments/kubernetes/{file}) until it applies" in dry.detail


def test_the_shipped_roles_allow_every_read_and_write_the_flows_need(sa_kubeconfig: Path, api: KubeHTTP,
                                                                     writers_bound: None) -> None:
    settings = load_settings()
    snapshot = read_snapshot(settings)
    assert snapshot.sources["kube"].ok, snapshot.sources["kube"]
    assert not snapshot.workloads.empty
    # The kube-system Namespace alone (resourceNames) is enough to name the cluster; any other is refused.
    assert snapshot.cluster == api.get("Namespace", "kube-system")["metadata"]["uid"]
    assert allowed(settings, [Access("get", "", "namespaces", "default")]) == {
        Access("get", "", "namespaces", "default"): False}
    cq = api.list("LocalQueue", "team-a")[0]["spec"]["clusterQueue"]
    with KubeWriter(settings) as writer:
        nb = writer.get("Notebook", "team-a", "nb")
        writer.patch("Notebook", "team-a", "nb", {"metadata": {"resourceVersion": nb["metadata"]["resourceVersion"],
                                                               "annotations": {"gpuaas.io/rbac-probe": "1"}}})
        obj = writer.get_cluster_scoped("ClusterQueue", cq)
        writer.patch_cluster_scoped("ClusterQueue", cq, {"metadata": {
            "resourceVersion": obj["metadata"]["resourceVersion"], "annotations": {"gpuaas.io/rbac-probe": "1"}}})


def test_a_write_outside_the_roles_is_refused(real_cluster: RealCluster, sa_token: str) -> None:
    sa = KubeHTTP(real_cluster.api_url, real_cluster.pki_dir / "ca.crt", sa_token)
    try:
        with pytest.raises(KubeHTTPError) as err:
            sa.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpuaas-may-not"}})
        assert err.value.status == 403
        with pytest.raises(KubeHTTPError) as err:
            sa.create({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                       "metadata": {"name": "gpuaas-may-not"}, "spec": {"namespaceSelector": {}}})
        assert err.value.status == 403
        with pytest.raises(KubeHTTPError) as err:
            sa.request("GET", "/api/v1/namespaces/kube-system/secrets")
        assert err.value.status == 403
    finally:
        sa.close()


def test_a_quota_plan_with_the_reader_role_alone_is_closed_failed_at_its_first_read(
        real_cluster: RealCluster, api: KubeHTTP, sa_token: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reader role lists ClusterQueues but may not get one: the re-read before the first patch is refused by
    the real authorizer, nothing is written, the plan's audit row is closed ``failed`` with the role to bind, and
    the next run's recovery has nothing to close. An account of its own, so the writer roles the other tests bind
    do not reach it."""
    api.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "read-only", "namespace": "gpuaas"}})
    api.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "gpuaas-read-only"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gpuaas-reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "read-only", "namespace": "gpuaas"}]})
    token = api.request("POST", "/api/v1/namespaces/gpuaas/serviceaccounts/read-only/token",
                        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                         "spec": {"expirationSeconds": 3600}})["status"]["token"]
    path = _kubeconfig(real_cluster, str(token), tmp_path / "read-only-kubeconfig")
    for key, value in {**real_cluster.settings_env(), "GPUAAS_NVML": "off", "GPUAAS_KUBECONFIG": str(path)}.items():
        monkeypatch.setenv(key, value)
    queues = {q["metadata"]["name"]: gpu_nominal(q, ["nvidia.com/gpu"]).get("h100", 0)
              for q in api.list("ClusterQueue") if (q["spec"].get("cohort") or q["spec"].get("cohortName")) == "c"}
    assert len(queues) == 2 and all(queues.values()), queues
    # the first queue (by name) needs 2 GPUs more, the other has 2 to spare
    first, second = sorted(queues)
    demand = {first: queues[first] + 2.0, second: queues[second] - 2.0}
    plan = plan_quotas([QueueDemand(q, {"h100": queues[q]}, {"h100": demand[q]}) for q in (first, second)],
                       QuotaLimits(max_step_gpus=8, max_step_percent=100, max_total_moved_gpus=8, hysteresis_gpus=1))
    assert plan.moved_gpus == 2
    settings = load_settings()
    with open_store(settings) as store, KubeWriter(settings) as writer:
        result = apply_quota_plan(store, writer, "c", plan, mode=Mode.apply, degraded=None, flow_run_id=None,
                                  evidence={}, gpu_resources=["nvidia.com/gpu"])
        assert result.outcome == "failed" and result.patched == [], result.message
        assert result.message.startswith("nothing written: reading ClusterQueue ") and "403" in result.message
        assert result.message.endswith(
            "bind gpuaas-rebalancer (kubectl apply -f deployments/kubernetes/rbac-apply-rebalance.yaml)")
        [closed] = store.audit(refers_to=[result.plan_id], limit=None)
        assert (closed.action, closed.outcome) == ("quota-plan", "failed")
        assert recover_quota_plans(store, writer, flow_run_id=None, now=closed.created_at, gpu_resources=["nvidia.com/gpu"]) == []
    after = {q["metadata"]["name"]: gpu_nominal(q, ["nvidia.com/gpu"]).get("h100", 0) for q in api.list("ClusterQueue")}
    assert {q: after[q] for q in queues} == queues
