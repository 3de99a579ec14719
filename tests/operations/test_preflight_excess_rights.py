"""The preflight warns of credentials broader than gpuaas needs (``excess_check``), and asks a fixed 17 more reviews.

Pure cases: nothing beyond need is ok; each canary allowed (``get secrets``, ``create pods``, ``*`` on ``*``, a
``delete`` of a kind gpuaas writes) is named with the role to take it out of; a writer role bound while its flow
does not apply is named with the command that unbinds it, but not the deadlines role while a Workload carries a
hold (its release patches in dry-run too); no answers: skipped. On the embedded cluster, its authorizer enforcing
the kit's roles (``deployments/kubernetes/rbac*.yaml``): the least-privilege binding of a dry-run policy, and of a
policy that applies every flow, passes; a grant of Secrets beside the reader role, or a writer role bound while its
flow is dry-run, is a warning naming it. The preflight sends ``len(READS) + len(CANARIES)`` access reviews.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from gpuaas.cluster.apiserver import RBACRules
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.operations.preflight import Verdict, excess_check, preflight
from gpuaas.permissions import CANARIES, READS, ROLES, WRITES, Access
from gpuaas.settings import load_settings
from gpuaas.sources.kube import KubeState
from tests.scenarios import point_at

MANIFESTS = Path(__file__).resolve().parents[2] / "deployments" / "kubernetes"
LEAST = {a: True for a in READS}
SECRETS, PODS, ALL = Access("get", "", "secrets"), Access("create", "", "pods"), Access("*", "*", "*")


def _state(*annotations: dict[str, str]) -> KubeState:
    workloads = tuple(SimpleNamespace(annotations=tuple(a.items())) for a in annotations)  # what the check reads
    return KubeState(kueue_version="v1beta2", cluster_queues=(), local_queues=(), workloads=workloads,  # type: ignore[arg-type]
                     cohorts=(), resource_flavors=(), owners=(), pods=(), not_installed=(), requests=1)


def _allowed(*flows: str, also: tuple[Access, ...] = ()) -> dict[Access, bool]:
    granted = {*READS, *(a for f in flows for a in WRITES[f]), *also}
    return {a: a in granted for a in (*READS, *(a for accesses in WRITES.values() for a in accesses), *CANARIES)}


def test_the_least_privilege_of_each_policy_is_ok() -> None:
    assert excess_check(_allowed(), []).verdict is Verdict.ok
    assert excess_check(_allowed(*WRITES), list(WRITES)).verdict is Verdict.ok
    check = excess_check(_allowed("reclaim"), ["reclaim"], "system:serviceaccount:gpuaas:gpuaas")
    assert check.verdict is Verdict.ok and check.detail.startswith("as system:serviceaccount:gpuaas:gpuaas: refused")
    assert excess_check(LEAST, []).verdict is Verdict.ok  # answers that never asked a canary (older callers)


@pytest.mark.parametrize(("also", "said"), [
    ((SECRETS,), "get secrets is allowed, which no gpuaas role grants: take it out of the role bound to sa that "
                 "grants it"),
    ((PODS, Access("delete", "kueue.x-k8s.io", "workloads")),
     "create pods and delete workloads.kueue.x-k8s.io are allowed, which no gpuaas role grants: take them out of "
     "the role bound to sa that grants them"),
    ((ALL,), "* on * (every verb on every resource) is allowed"),
], ids=["secrets", "pods-and-delete", "everything"])
def test_a_right_no_role_grants_is_a_warning_naming_it(also: tuple[Access, ...], said: str) -> None:
    check = excess_check(_allowed(also=also), [], "sa")
    assert check.verdict is Verdict.warning and check.detail.startswith(f"as sa: {said}")


def test_a_writer_role_bound_while_its_flow_is_dry_run_is_named_with_the_command_that_unbinds_it() -> None:
    check = excess_check(_allowed("rebalance", "deadlines"), ["deadlines"])
    assert check.verdict is Verdict.warning
    assert check.detail == ("rebalance does not apply, yet patch clusterqueues.kueue.x-k8s.io is allowed: unbind "
                            "gpuaas-rebalancer (kubectl delete -f deployments/kubernetes/rbac-apply-rebalance.yaml) "
                            "until it applies")


def test_the_deadlines_role_is_needed_while_a_workload_carries_a_hold() -> None:
    held = _state({"gpuaas.io/deadline-hold": '{"audit_id": 7}'})
    assert excess_check(_allowed("deadlines"), [], state=held).verdict is Verdict.ok
    unheld = excess_check(_allowed("deadlines"), [], state=_state({}))
    assert unheld.verdict is Verdict.warning and "deadlines does not apply, yet patch workloads" in unheld.detail


def test_without_answers_it_is_skipped() -> None:
    assert excess_check(None, []).verdict is Verdict.skipped


# -- the embedded cluster's authorizer, the kit's roles ---------------------------------------------------------


def _roles(*flows: str) -> list[str]:
    return [ROLES["reads"], *(ROLES[f] for f in flows)]


@pytest.fixture()
def enforced(reclaim_fleet: EmbeddedCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
             ) -> Iterator[EmbeddedCluster]:
    point_at(reclaim_fleet, monkeypatch, data_dir=tmp_path / "data")
    yield reclaim_fleet
    reclaim_fleet.api.rbac = None


def _bind(cluster: EmbeddedCluster, roles: list[str], extra: tuple[dict[str, list[str]], ...] = ()) -> None:
    """The authorizer of a service account bound to ``roles`` as the kit ships them, and to the ``extra`` rules."""
    bound = RBACRules(extra)
    for role in roles:
        bound.rules += RBACRules.from_manifest(MANIFESTS / "rbac.yaml", [role]).rules
    cluster.api.rbac = bound


def _policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *applying: str) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({flow: {"mode": "apply"} for flow in applying}))
    monkeypatch.setenv("GPUAAS_POLICY_FILE", str(policy))


def _excess(cluster: EmbeddedCluster) -> tuple[str, str, int]:
    key = "POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    before = cluster.api.requests.get(key, 0)
    [check] = [c for c in preflight(load_settings()) if c.name == "permissions beyond need"]
    return check.verdict.value, check.detail, cluster.api.requests.get(key, 0) - before


@pytest.mark.parametrize("applying", [(), tuple(WRITES)], ids=["dry-run", "every-flow-applies"])
def test_the_kits_least_privilege_binding_passes(enforced: EmbeddedCluster, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch, applying: tuple[str, ...]) -> None:
    _policy(tmp_path, monkeypatch, *applying)
    _bind(enforced, _roles(*applying))
    verdict, detail, reviews = _excess(enforced)
    assert verdict == "ok", detail
    assert reviews == len({*READS, *(a for f in applying for a in WRITES[f]), *CANARIES})  # one review an access
    if not applying:  # the 25 reads every flow makes, the 2 of the admission policy, and a fixed 17 beyond them
        assert (len(READS), len(CANARIES), reviews) == (27, 17, 44)


def test_a_grant_beyond_need_on_the_cluster_is_a_warning_naming_it(enforced: EmbeddedCluster, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _policy(tmp_path, monkeypatch)  # every flow dry-run
    secrets = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}
    _bind(enforced, _roles("rebalance"), (secrets,))
    verdict, detail, _ = _excess(enforced)
    assert verdict == "warning"
    assert detail == ("as system:serviceaccount:gpuaas:gpuaas: get secrets is allowed, which no gpuaas role grants: "
                      "take it out of the role bound to system:serviceaccount:gpuaas:gpuaas that grants it; "
                      "rebalance does not apply, yet patch clusterqueues.kueue.x-k8s.io is allowed: unbind "
                      "gpuaas-rebalancer (kubectl delete -f deployments/kubernetes/rbac-apply-rebalance.yaml) "
                      "until it applies")
