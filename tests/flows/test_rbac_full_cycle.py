"""Every Kubernetes API call of a full cycle, with the shipped roles enforced.

collect, reclaim --apply (every idle kind stopped) and undo run against the embedded API with
``deployments/kubernetes/rbac.yaml``'s gpuaas-reader and gpuaas-reclaimer enforced; every call's
(verb, group, resource) is recorded at the API's authorizer. The test fails on a 403 and on a
granted rule that no call needed. Its own cluster: the other modules' runs would have stopped the
objects already.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpuaas.cluster.apiserver import RBACRules
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.testbed import write_policy
from tests.scenarios import point_at

pytestmark = [pytest.mark.integration, pytest.mark.flow]

MANIFEST = Path(__file__).resolve().parents[2] / "deployments" / "kubernetes" / "rbac.yaml"


@pytest.fixture(scope="module")
def cluster(reclaim_fleet: EmbeddedCluster) -> EmbeddedCluster:
    return reclaim_fleet


@pytest.fixture()
def pointed_at(cluster: EmbeddedCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> EmbeddedCluster:
    # No cap that matters: every kind of idle workload is stopped, so every patch rule is exercised.
    return point_at(cluster, monkeypatch, policy_file=write_policy(tmp_path / "policy.yaml", max_actions_per_run=50))


class _Recording:
    """The shipped rules, enforced, plus a record of every (verb, group, resource) the API was asked for."""

    def __init__(self, rules: RBACRules) -> None:
        self.rules, self.calls, self.refused = rules, set(), []  # type: ignore[var-annotated]
        self.user = rules.user

    def check(self, verb: str, group: str, plural: str, subresource: str | None, namespace: str | None,
              name: str | None) -> None:
        resource = f"{plural}/{subresource}" if subresource else plural
        self.calls.add((verb, group, resource))
        try:
            self.rules.check(verb, group, plural, subresource, namespace, name)
        except Exception:
            self.refused.append((verb, group, resource, namespace, name))
            raise


def test_a_full_cycle_needs_every_shipped_rule_and_no_other(pointed_at: EmbeddedCluster,
                                                            prefect_harness: None) -> None:
    """collect, reclaim --apply and undo with the shipped roles enforced: no 403, and no rule that no call used.

    The rebalancer role is not in this cycle: the reclaim fleet gives rebalance no quota to move (no ClusterQueue patch).
    """
    import yaml

    from flows.reclaim import reclaim

    roles = ["gpuaas-reader", "gpuaas-reclaimer"]
    recording = _Recording(RBACRules.from_manifest(MANIFEST, roles))
    pointed_at.api.rbac = recording  # type: ignore[assignment]
    try:
        applied = [d for d in reclaim(apply=True, at=datetime.now(UTC))["decisions"] if d["result"] == "applied"]
        assert applied
        undone = reclaim(undo=[applied[0]["audit_id"]])["undo"]
        assert undone[0]["result"] == "restored", undone
    finally:
        pointed_at.api.rbac = None
    assert recording.refused == []
    documents = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d and d.get("kind") == "ClusterRole"]
    granted = {(verb, group, resource) for d in documents if d["metadata"]["name"] in roles
               for rule in d["rules"] for group in rule["apiGroups"] for resource in rule["resources"]
               for verb in rule["verbs"]}
    # Every rule is used: a RayCluster is stopped through its Workload (get, then patch spec.active).
    assert granted - recording.calls == set(), "rules no call needs"
