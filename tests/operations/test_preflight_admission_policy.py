"""The preflight says whether the kit's admission policy (``gpuaas-write-fields``) guards the writer roles.

Pure cases (``admission_check``): the policy and its binding there, denying: ok; either missing, a binding that only
warns or audits, or one that binds another policy: a warning saying what to apply; a server that does not serve
the kind (Kubernetes older than 1.30): a warning saying it is too old and what that leaves open; a refused read:
a warning naming the reader role and its file; no flow applies and no writer role's patch is allowed: skipped; no
answers: skipped.

On the embedded cluster, which stores and returns the two kinds as a real API server does (404 naming the object
when it is absent; 404 without a name when the group version is not served): the preflight reads them with two
GETs only where a flow applies or a writer right is allowed, and reports ok with the kit's policy applied and a
warning without it. With the shipped roles enforced, a reader role without the new rule is named, and the
permissions check does not fail for it (no flow needs that read).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuaas.cluster.apiserver import RBACRules
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.operations.preflight import Check, Verdict, admission_check, headline, preflight
from gpuaas.permissions import (
    ADMISSION_POLICY,
    ADMISSION_READS,
    FLOW_READS,
    READS,
    ROLES,
    WRITES,
    Access,
    AdmissionPolicy,
    Found,
    admission_policy,
)
from gpuaas.settings import load_settings
from tests.scenarios import point_at

KIT = Path(__file__).resolve().parents[2] / "deployments" / "kubernetes"
PATCH_WORKLOADS = Access("patch", "kueue.x-k8s.io", "workloads")
READER = {a: True for a in READS}
GUARDED = AdmissionPolicy(Found.there, Found.there, ("Deny",), ADMISSION_POLICY)
APPLY = "kubectl apply -f deployments/kubernetes/admission-policy.yaml"
OPEN = ("nothing limits the writer roles to the fields gpuaas writes: the gpuaas service account may change any "
        "field of the objects it may patch (a pod template's image, command or service account)")


def _check(guard: AdmissionPolicy | None, *applying: str, writer: bool = True, error: str | None = None) -> Check:
    return admission_check(guard, {**READER, PATCH_WORKLOADS: writer}, list(applying), error)


# -- the verdicts, pure ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("guard", "applying", "verdict", "detail"), [
    (GUARDED, ("reclaim",), Verdict.ok,
     "gpuaas-write-fields guards the writer roles: its binding denies any change by gpuaas's service accounts "
     "outside the fields gpuaas writes"),
    (AdmissionPolicy(Found.there, Found.there, ("Warn", "Deny", "Audit"), ADMISSION_POLICY), (), Verdict.ok,
     "gpuaas-write-fields guards the writer roles: its binding denies any change by gpuaas's service accounts "
     "outside the fields gpuaas writes"),
    (AdmissionPolicy(Found.absent, Found.absent), ("reclaim",), Verdict.warning,
     "reclaim applies, but the cluster has no ValidatingAdmissionPolicy and no ValidatingAdmissionPolicyBinding named "
     f"gpuaas-write-fields, so {OPEN}: {APPLY}"),
    (AdmissionPolicy(Found.there, Found.absent), ("reclaim", "deadlines"), Verdict.warning,
     "reclaim and deadlines apply, but the cluster has no ValidatingAdmissionPolicyBinding named gpuaas-write-fields, "
     f"so {OPEN}: {APPLY}"),
    (AdmissionPolicy(Found.absent, Found.there, ("Deny",), ADMISSION_POLICY), (), Verdict.warning,
     "patch workloads.kueue.x-k8s.io is allowed, but the cluster has no ValidatingAdmissionPolicy named "
     f"gpuaas-write-fields, so {OPEN}: {APPLY}"),
    (AdmissionPolicy(Found.there, Found.there, ("Warn", "Audit"), ADMISSION_POLICY), ("reclaim",), Verdict.warning,
     "the binding gpuaas-write-fields has validationActions Warn, Audit, without Deny: a change outside gpuaas's "
     f"fields is let through, so {OPEN}: {APPLY}"),
    (AdmissionPolicy(Found.there, Found.there, ("Deny",), "other"), ("reclaim",), Verdict.warning,
     f"the binding gpuaas-write-fields binds the policy other, not gpuaas-write-fields, so {OPEN}: {APPLY}"),
    (AdmissionPolicy(Found.unserved, Found.unserved), ("rebalance",), Verdict.warning,
     "the API server is too old for the admission policy: it does not serve ValidatingAdmissionPolicies "
     f"(admissionregistration.k8s.io/v1, Kubernetes 1.30 or newer), so with rebalance applies, {OPEN}; bind each "
     f"writer role only while its flow applies, and {APPLY} once the cluster runs 1.30"),
    (AdmissionPolicy(Found.refused, Found.refused), ("reclaim",), Verdict.warning,
     "reading the ValidatingAdmissionPolicy gpuaas-write-fields and its binding is refused (403), so whether they "
     "guard the writer roles is unknown: the reader role bound lacks get on them: bind gpuaas-reader "
     "(kubectl apply -f deployments/kubernetes/rbac.yaml)"),
], ids=["guarded", "deny-among-others", "both-missing", "binding-missing", "policy-missing", "warn-and-audit-only",
        "binds-another-policy", "server-too-old", "read-refused"])
def test_each_verdict(guard: AdmissionPolicy, applying: tuple[str, ...], verdict: Verdict, detail: str) -> None:
    check = _check(guard, *applying)
    assert (check.name, check.verdict, check.detail) == ("admission policy", verdict, detail)


def test_nothing_to_guard_or_no_answers_is_skipped() -> None:
    check = _check(None, writer=False)
    assert (check.verdict, check.detail) == (Verdict.skipped, "no flow applies and no writer role's patch is allowed: "
                                                              "there is no write for gpuaas-write-fields to guard")
    assert admission_check(None, None, ["reclaim"]).verdict is Verdict.skipped


def test_a_read_that_failed_is_a_warning_saying_why() -> None:
    check = _check(None, "reclaim", error="Kubernetes API at https://k8s:6443: no answer in time (timed out)")
    assert (check.verdict, check.detail) == (
        Verdict.warning, "could not read the ValidatingAdmissionPolicy gpuaas-write-fields: Kubernetes API at "
                         "https://k8s:6443: no answer in time (timed out)")


# -- the embedded cluster -----------------------------------------------------------------------------------------

GET = "GET /apis/admissionregistration.k8s.io/v1/"
GETS = (f"{GET}validatingadmissionpolicies/{{name}}", f"{GET}validatingadmissionpolicybindings/{{name}}")


def _kit() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((KIT / "admission-policy.yaml").read_text()) if d]


@pytest.fixture()
def fleet(reclaim_fleet: EmbeddedCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
          ) -> Iterator[EmbeddedCluster]:
    """The reclaim scenario, pointed at; what a test applies or switches off is undone after it."""
    point_at(reclaim_fleet, monkeypatch, data_dir=tmp_path / "data")
    yield reclaim_fleet
    reclaim_fleet.api.rbac = None
    reclaim_fleet.api.disabled_versions = frozenset()
    for doc in _kit():
        if reclaim_fleet.store.list(doc["kind"]):
            reclaim_fleet.store.delete(doc["kind"], None, doc["metadata"]["name"])


def _apply_kit(cluster: EmbeddedCluster, **binding: Any) -> None:
    """``kubectl apply -f admission-policy.yaml`` through the official client, the binding's spec overridden."""
    from kubernetes import client, config

    api = config.new_client_from_config(str(cluster.kubeconfig))
    try:
        admission = client.AdmissionregistrationV1Api(api)
        policy, bound = _kit()
        admission.create_validating_admission_policy(policy)
        admission.create_validating_admission_policy_binding({**bound, "spec": {**bound["spec"], **binding}})
    finally:
        api.close()


def _admission(cluster: EmbeddedCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
               applying: tuple[str, ...] = ("reclaim",)) -> tuple[Check, list[Check], int]:
    """The preflight's admission check, all its checks, and how many GETs of the two objects it sent."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({flow: {"mode": "apply"} for flow in applying}))
    monkeypatch.setenv("GPUAAS_POLICY_FILE", str(policy))
    before = sum(cluster.api.requests.get(key, 0) for key in GETS)
    checks = preflight(load_settings())
    [check] = [c for c in checks if c.name == "admission policy"]
    return check, checks, sum(cluster.api.requests.get(key, 0) for key in GETS) - before


def test_the_embedded_api_stores_and_returns_the_policy_and_answers_404_naming_it(fleet: EmbeddedCluster) -> None:
    assert admission_policy(load_settings()) == AdmissionPolicy(Found.absent, Found.absent)
    _apply_kit(fleet)
    assert admission_policy(load_settings()) == GUARDED
    stored = fleet.store.get("ValidatingAdmissionPolicyBinding", None, ADMISSION_POLICY)
    assert (stored["apiVersion"], stored["spec"]["validationActions"]) == ("admissionregistration.k8s.io/v1", ["Deny"])
    fleet.api.disabled_versions = frozenset({"admissionregistration.k8s.io/v1"})  # a server older than 1.30
    assert admission_policy(load_settings()) == AdmissionPolicy(Found.unserved, Found.unserved)


def test_with_the_kits_policy_applied_it_is_ok_and_without_it_a_warning(fleet: EmbeddedCluster, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    check, checks, gets = _admission(fleet, tmp_path, monkeypatch)
    assert check.verdict is Verdict.warning and check.detail.endswith(f"so {OPEN}: {APPLY}"), check.detail
    assert gets == 2  # one GET of each, a fixed count
    assert [c.name for c in checks][:4] == ["Kubernetes API and Kueue", "permissions", "permissions beyond need",
                                            "admission policy"]
    assert headline(checks).startswith("Preflight: 12 checks: ")
    _apply_kit(fleet)
    check, _, gets = _admission(fleet, tmp_path, monkeypatch)
    assert (check.verdict, gets) == (Verdict.ok, 2), check.detail
    assert check.detail.startswith("gpuaas-write-fields guards the writer roles")


def test_a_binding_that_only_warns_is_a_warning(fleet: EmbeddedCluster, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    _apply_kit(fleet, validationActions=["Warn", "Audit"])
    check, _, _ = _admission(fleet, tmp_path, monkeypatch)
    assert check.verdict is Verdict.warning
    assert check.detail.startswith("the binding gpuaas-write-fields has validationActions Warn, Audit, without Deny")


def test_a_server_older_than_1_30_is_a_warning_saying_so(fleet: EmbeddedCluster, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    fleet.api.disabled_versions = frozenset({"admissionregistration.k8s.io/v1"})
    check, _, gets = _admission(fleet, tmp_path, monkeypatch)
    assert (check.verdict, gets) == (Verdict.warning, 0), check.detail  # a 404 on the resource is counted under it
    assert check.detail.startswith("the API server is too old for the admission policy: it does not serve "
                                   "ValidatingAdmissionPolicies (admissionregistration.k8s.io/v1, Kubernetes 1.30")


def _bind(cluster: EmbeddedCluster, roles: list[str], reader_without_the_policy: bool = False) -> None:
    """The authorizer of the service account bound to ``roles`` as the kit ships them; the reader role's rule for
    the admission policy left out, as in a kit applied before it had one."""
    rules = RBACRules([])
    for role in roles:
        rules.rules += RBACRules.from_manifest(KIT / "rbac.yaml", [role]).rules
    if reader_without_the_policy:
        rules.rules = [r for r in rules.rules if "admissionregistration.k8s.io" not in r[0]]
    cluster.api.rbac = rules


def test_the_reader_roles_dry_run_binding_reads_nothing_and_is_skipped(fleet: EmbeddedCluster, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    _bind(fleet, [ROLES["reads"]])
    check, _, gets = _admission(fleet, tmp_path, monkeypatch, applying=())
    assert (check.verdict, gets) == (Verdict.skipped, 0), check.detail


def test_a_reader_role_without_the_rule_is_named_and_fails_no_flow(fleet: EmbeddedCluster, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _bind(fleet, [ROLES["reads"], ROLES["reclaim"]], reader_without_the_policy=True)
    check, checks, gets = _admission(fleet, tmp_path, monkeypatch)
    assert (check.verdict, gets) == (Verdict.warning, 2)
    assert check.detail.endswith("the reader role bound lacks get on them: bind gpuaas-reader "
                                 "(kubectl apply -f deployments/kubernetes/rbac.yaml)")
    [permissions] = [c for c in checks if c.name == "permissions"]
    assert permissions.verdict is Verdict.ok, permissions.detail  # the flows' reads and reclaim's writes are allowed
    assert f"the {len(FLOW_READS)} reads every flow makes and the writes of reclaim" in permissions.detail


def test_the_kits_roles_read_the_policy_as_shipped(fleet: EmbeddedCluster, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Reader and reclaimer bound, the policy applied: the shipped reader rule lets the preflight read both."""
    _apply_kit(fleet)
    _bind(fleet, [ROLES["reads"], ROLES["reclaim"]])
    check, _, gets = _admission(fleet, tmp_path, monkeypatch)
    assert (check.verdict, gets) == (Verdict.ok, 2), check.detail
    assert set(ADMISSION_READS) <= set(READS) and not set(ADMISSION_READS) & {a for w in WRITES.values() for a in w}
