"""The preflight's admission check on the real kube-apiserver, as the gpuaas service account.

With the kit's ``rbac.yaml`` applied and the reclaimer role bound (a writer right allowed), the preflight run with
a token of the account reads ``gpuaas-write-fields`` through the reader role as shipped: without the policy it is
a warning saying what to apply; with the policy alone, the real server's 404 names the missing binding; with the
kit's ``admission-policy.yaml`` applied, it is ok. The real server's 404 for a resource it does not serve carries
no name, which is how a server older than 1.30 is told from a policy never applied.

The policy and a binding this module made are removed at the end, and the policy is waited out, so the other
modules see the cluster as before.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from gpuaas.cluster.real import KubeHTTP, KubeHTTPError, RealCluster, path_of
from gpuaas.operations.preflight import Check, Verdict, preflight
from gpuaas.permissions import (
    ADMISSION_POLICY,
    Access,
    AdmissionPolicy,
    Found,
    _names_the_object,
    admission_policy,
    allowed,
    whoami,
)
from gpuaas.settings import load_settings
from tests.real.conftest import wait_until
from tests.real.test_rbac import sa_kubeconfig, sa_token  # noqa: F401 - the kit's RBAC, a token of its account

pytestmark = [pytest.mark.real]

KIT = Path(__file__).resolve().parents[2] / "deployments" / "kubernetes"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
PLURALS = {"ValidatingAdmissionPolicy": "validatingadmissionpolicies",
           "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings"}
SA = "system:serviceaccount:gpuaas:gpuaas"
PROBE = (path_of("Deployment", "team-c", "dep"), {"metadata": {"labels": {"gpuaas-preflight-probe": "1"}}})
"""A change the policy refuses and the reclaimer role allows, sent as a dry run: refused while the policy is in
force."""


@pytest.fixture(scope="module")
def reclaimer(api: KubeHTTP, sa_token: str) -> Iterator[str]:  # noqa: F811 - the fixture imported above
    """The reclaimer role bound to the account (a writer right allowed); unbound at the end where this module bound
    it. Yields the account's token."""
    docs = [d for d in yaml.safe_load_all((KIT / "rbac-apply-reclaim.yaml").read_text()) if d]
    created = [d for d in docs if api.create(d) is not None]
    yield sa_token
    for doc in created:
        api.delete(doc["kind"], doc["metadata"]["name"])


def _probe(real_cluster: RealCluster, token: str) -> tuple[int, str]:
    tls = ssl.create_default_context(cafile=str(real_cluster.pki_dir / "ca.crt"))
    with httpx.Client(base_url=real_cluster.api_url, verify=tls, timeout=30,
                      headers={"Authorization": f"Bearer {token}"}) as client:
        path, body = PROBE
        answer = client.patch(path, json=body, params={"dryRun": "All"},
                              headers={"Content-Type": "application/merge-patch+json"})
    return answer.status_code, answer.text


def _admission() -> Check:
    [check] = [c for c in preflight(load_settings()) if c.name == "admission policy"]
    return check


def _kit() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((KIT / "admission-policy.yaml").read_text()) if d]


def test_the_preflight_as_the_account_is_ok_with_the_policy_and_warns_without_it(
        real_cluster: RealCluster, api: KubeHTTP, reclaimer: str, sa_kubeconfig: Path,  # noqa: F811
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUAAS_DATA_DIR", str(tmp_path / "data"))
    settings = load_settings()
    assert whoami(settings) == SA
    patch = Access("patch", "kueue.x-k8s.io", "workloads")
    wait_until("the reclaimer role is in force", lambda: allowed(settings, [patch])[patch])
    without = _admission()
    assert without.verdict is Verdict.warning, without.detail
    # the reclaimer's six patches at least (the other writer roles too where the RBAC module bound them first)
    assert without.detail.startswith("patch workloads.kueue.x-k8s.io, patch rayclusters.ray.io, patch "
                                     "inferenceservices.serving.kserve.io and "), without.detail
    assert (" more are allowed, but the cluster has no ValidatingAdmissionPolicy and no "
            "ValidatingAdmissionPolicyBinding named gpuaas-write-fields, so nothing limits the writer roles"
            ) in without.detail
    assert without.detail.endswith(": kubectl apply -f deployments/kubernetes/admission-policy.yaml")
    policy, binding = _kit()
    try:
        api.request("POST", f"{ADMISSION}/{PLURALS[policy['kind']]}", policy)
        assert admission_policy(settings) == AdmissionPolicy(Found.there, Found.absent)  # the real 404 names it
        api.request("POST", f"{ADMISSION}/{PLURALS[binding['kind']]}", binding)
        assert admission_policy(settings) == AdmissionPolicy(Found.there, Found.there, ("Deny",), ADMISSION_POLICY)
        guarded = _admission()
        assert (guarded.verdict, guarded.detail) == (
            Verdict.ok, "gpuaas-write-fields guards the writer roles: its binding denies any change by gpuaas's "
                        "service accounts outside the fields gpuaas writes")
    finally:
        for doc in (binding, policy):
            try:
                api.request("DELETE", f"{ADMISSION}/{PLURALS[doc['kind']]}/{doc['metadata']['name']}")
            except KubeHTTPError as exc:  # absent already (its POST failed): nothing to remove
                assert exc.status == 404, exc
        wait_until("the admission policy is gone", lambda: _probe(real_cluster, reclaimer)[0] == 200)


def test_a_resource_the_server_does_not_serve_answers_a_404_without_a_name(real_cluster: RealCluster) -> None:
    """As an admin (the account may not get an unknown resource): what a server older than 1.30 answers for
    ValidatingAdmissionPolicies, told apart from a policy never applied."""
    tls = ssl.create_default_context(cafile=str(real_cluster.pki_dir / "ca.crt"))
    with httpx.Client(base_url=real_cluster.api_url, verify=tls, timeout=30,
                      headers={"Authorization": f"Bearer {real_cluster.token}"}) as client:
        unserved = client.get(f"{ADMISSION}/nosuchpolicies/{ADMISSION_POLICY}")
        absent = client.get(f"{ADMISSION}/validatingadmissionpolicies/{ADMISSION_POLICY}")
    assert (unserved.status_code, absent.status_code) == (404, 404)
    assert not _names_the_object(unserved.content) and _names_the_object(absent.content)
