"""The RBAC manifest we ship is the one the flows need: enforced by the embedded API server.

``deployments/kubernetes/rbac.yaml`` grants a read-only role and a separate reclaimer role.
With only ``gpuaas-reader``, collect reads everything and a reclaim ``--apply`` is refused by
the API (403) for every object and recorded as failed — nothing is written. With the
reclaimer role added, the same decisions apply. A role that grants too little, or a flow that
starts needing a new verb, fails here instead of in a customer's cluster. Every test runs
authenticated: the API server requires a bearer token, which only the kubeconfig gpuaas is
given carries (without it: 401, and collect reports the Kubernetes source as failed).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpuaas.cluster.apiserver import RBACRules
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.testbed import write_policy
from gpuaas.errors import ConfigError
from gpuaas.operations.collect import read_snapshot
from gpuaas.settings import load_settings
from tests.actions.reclaim_scenario import IDLE_TARGETS, target_of, writes
from tests.scenarios import point_at

pytestmark = [pytest.mark.integration, pytest.mark.flow]

MANIFEST = Path(__file__).resolve().parents[2] / "deployments" / "kubernetes" / "rbac.yaml"


@pytest.fixture(scope="module")
def cluster(reclaim_fleet: EmbeddedCluster) -> EmbeddedCluster:
    return reclaim_fleet


TOKEN = "rbac-test-token-91c2"


@pytest.fixture()
def pointed_at(cluster: EmbeddedCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EmbeddedCluster]:
    cluster.api.token = TOKEN
    kubeconfig = cluster.api.write_kubeconfig(tmp_path / "kubeconfig")  # carries TOKEN
    try:
        yield point_at(cluster, monkeypatch, kubeconfig=kubeconfig,
                       policy_file=write_policy(tmp_path / "policy.yaml", max_actions_per_run=3))
    finally:
        cluster.api.token = None
        cluster.api.rbac = None


def test_without_the_token_collect_gets_401(pointed_at: EmbeddedCluster, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    anonymous = tmp_path / "anonymous-kubeconfig"
    anonymous.write_text((tmp_path / "kubeconfig").read_text().replace(TOKEN, "not-the-token"))
    monkeypatch.setenv("GPUAAS_KUBECONFIG", str(anonymous))
    snapshot = read_snapshot(load_settings(), pointed_at.clock.now())
    kube = snapshot.sources["kube"]
    assert not kube.ok and "401" in (kube.error or "") and "not-the-token" not in (kube.error or "")


def test_reader_role_is_enough_to_collect(pointed_at: EmbeddedCluster) -> None:
    pointed_at.api.rbac = RBACRules.from_manifest(MANIFEST, ["gpuaas-reader"])
    snapshot = read_snapshot(load_settings(), pointed_at.clock.now())
    assert snapshot.sources["kube"].ok, snapshot.sources["kube"].error
    assert {("RayCluster", "ray"), ("Notebook", "nb")} <= {(k, n) for k, n in zip(snapshot.owners["kind"],
                                                                                 snapshot.owners["name"])}


def test_apply_needs_the_reclaimer_role(pointed_at: EmbeddedCluster, prefect_harness: None) -> None:
    from flows.reclaim import reclaim

    pointed_at.api.rbac = RBACRules.from_manifest(MANIFEST, ["gpuaas-reader"])
    before = writes(pointed_at)
    state = reclaim(apply=True, at=datetime.now(UTC), return_state=True)
    assert state.is_failed()  # a write the cluster refused: a red run, its result kept
    refused = state.result(raise_on_failure=False).result["decisions"]
    attempted = [d for d in refused if d["result"] not in ("deferred",) and d["cause"] != "opted-out"]
    assert attempted and all(d["result"] == "failed" and "forbidden" in d["reason"].lower() for d in attempted)
    assert writes(pointed_at) == before + len(attempted)  # one PATCH each, refused by the API
    for d in attempted:
        obj = pointed_at.store.get(d["kind"], d["namespace"], d["name"])
        assert "gpuaas.io/reclaimed" not in (obj["metadata"].get("annotations") or {}), d

    pointed_at.api.rbac = RBACRules.from_manifest(MANIFEST, ["gpuaas-reader", "gpuaas-reclaimer"])
    applied = [d for d in reclaim(apply=True, at=datetime.now(UTC))["decisions"] if d["result"] == "applied"]
    assert len(applied) == 3 and {target_of(d) for d in applied} <= IDLE_TARGETS


def test_unknown_role_is_a_config_error_naming_the_file() -> None:
    with pytest.raises(ConfigError, match=r"rbac\.yaml: no ClusterRole or Role named gpuaas-admin"):
        RBACRules.from_manifest(MANIFEST, ["gpuaas-admin"])
