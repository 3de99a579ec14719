"""Every Kubernetes API call of a full cycle, with the shipped roles enforced.

Each writing flow runs apply then undo against the embedded API with ``deployments/kubernetes/rbac.yaml``'s
reader role and that flow's writer role alone enforced; every call's (verb, group, resource) is recorded
at the API's authorizer. A test fails on a 403 and on a rule of the writer role that no call needed:
collect, reclaim (every idle kind stopped) and the preflight (the admission policy's reads) use every reader rule
as well. Each on its own cluster:
the other modules' runs would have stopped the objects or moved the quota already.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gpuaas.cli.app import app
from gpuaas.cluster.apiserver import RBACRules
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.testbed import write_policy
from gpuaas.operations.preflight import preflight
from gpuaas.settings import load_settings
from tests.actions.rebalance_scenario import NOMINAL, rebalance_cluster
from tests.flows.deadline_scenario import deadline_cluster
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

    def allows(self, verb: str, group: str, resource: str) -> bool:
        """The preflight's access reviews, answered by the same rules (a review is not a call on the resource)."""
        return self.rules.allows(verb, group, resource)


def _granted(roles: list[str]) -> set[tuple[str, str, str]]:
    documents = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d and d.get("kind") == "ClusterRole"]
    return {(verb, group, resource) for d in documents if d["metadata"]["name"] in roles
            for rule in d["rules"] for group in rule["apiGroups"] for resource in rule["resources"]
            for verb in rule["verbs"]}


def test_a_full_cycle_needs_every_shipped_rule_and_no_other(pointed_at: EmbeddedCluster,
                                                            prefect_harness: None) -> None:
    """collect, reclaim --apply, undo and the preflight with the shipped roles enforced: no 403, and no rule that no
    call used."""
    from flows.reclaim import reclaim

    roles = ["gpuaas-reader", "gpuaas-reclaimer"]
    recording = _Recording(RBACRules.from_manifest(MANIFEST, roles))
    pointed_at.api.rbac = recording  # type: ignore[assignment]
    try:
        applied = [d for d in reclaim(apply=True, at=datetime.now(UTC))["decisions"] if d["result"] == "applied"]
        assert applied
        undone = reclaim(undo=[applied[0]["audit_id"]])["undo"]
        assert undone[0]["result"] == "restored", undone
        # the reclaimer bound: the preflight reads the admission policy (absent here: a warning, not a 403)
        [guard] = [c for c in preflight(load_settings()) if c.name == "admission policy"]
        assert guard.verdict.value == "warning" and "no ValidatingAdmissionPolicy" in guard.detail, guard.detail
    finally:
        pointed_at.api.rbac = None
    assert recording.refused == []
    # Every rule is used: a RayCluster is stopped through its Workload (get, then patch spec.active), the batch
    # jobs the fleet holds (train-*: a Job, RayJob, JobSet and Kubeflow jobs) are listed for their deadlines, and
    # the preflight gets the admission policy and its binding.
    assert _granted(roles) - recording.calls == set(), "rules no call needs"


@pytest.fixture()
def rebalance_fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EmbeddedCluster]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({"rebalance": {"max_step_percent": 100},
                                      "tenants": [{"name": "team-b", "cluster_queues": ["team-b-cq"], "weight": 1}]}))
    with rebalance_cluster(tmp_path / "cluster") as running:
        yield point_at(running, monkeypatch, data_dir=tmp_path / "data", policy_file=policy)


def test_a_quota_plan_and_its_undo_need_the_rebalancer_role_and_no_other(rebalance_fleet: EmbeddedCluster,
                                                                         prefect_harness: None) -> None:
    """``gpuaas rebalance --apply`` then ``gpuaas undo`` of the plan with gpuaas-reader and gpuaas-rebalancer alone."""
    roles = ["gpuaas-reader", "gpuaas-rebalancer"]
    recording = _Recording(RBACRules.from_manifest(MANIFEST, roles))
    rebalance_fleet.api.rbac = recording  # type: ignore[assignment]
    try:
        done = CliRunner().invoke(app, ["rebalance", "--apply", "--cohort", "c", "--format", "json"])
        assert done.exit_code == 0, done.output
        [cohort] = json.loads(done.stdout)["cohorts"]
        assert cohort["result"] == "applied", cohort["message"]
        undone = CliRunner().invoke(app, ["undo", str(cohort["plan_id"]), "--format", "json"])
        assert undone.exit_code == 0, undone.output
        assert json.loads(undone.stdout)["undo"][0]["result"] == "restored"
    finally:
        rebalance_fleet.api.rbac = None
    assert recording.refused == []
    assert {q["metadata"]["name"]: q["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]
            for q in rebalance_fleet.store.list("ClusterQueue")} == NOMINAL
    assert _granted(["gpuaas-rebalancer"]) - recording.calls == set(), "rules no call needs"


@pytest.fixture()
def deadline_fleet_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EmbeddedCluster]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({"deadlines": {"max_holds_per_run": 1, "release_margin_minutes": 30,
                                                 "runtime_estimate_error": 1}}))
    with deadline_cluster(tmp_path / "cluster") as running:
        yield point_at(running, monkeypatch, data_dir=tmp_path / "data", policy_file=policy)


def test_a_deadline_hold_and_its_undo_need_the_deadlines_role_and_no_other(
        deadline_fleet_of_its_own: EmbeddedCluster, prefect_harness: None) -> None:
    """The deadlines flow holds a Workload (apply), then ``gpuaas undo`` releases it, with gpuaas-reader and
    gpuaas-deadlines alone."""
    from flows.deadlines import deadlines

    cluster = deadline_fleet_of_its_own
    roles = ["gpuaas-reader", "gpuaas-deadlines"]
    recording = _Recording(RBACRules.from_manifest(MANIFEST, roles))
    cluster.api.rbac = recording  # type: ignore[assignment]
    try:
        result = deadlines(apply=True, at=cluster.clock.now())
        [held] = [n for n in result["nudges"] if n["result"] == "applied"]
        undone = CliRunner().invoke(app, ["undo", str(held["audit_id"]), "--format", "json"])
        assert undone.exit_code == 0, undone.output
        assert json.loads(undone.stdout)["undo"][0]["result"] == "restored"
    finally:
        cluster.api.rbac = None
    assert recording.refused == []
    assert _granted(["gpuaas-deadlines"]) - recording.calls == set(), "rules no call needs"
