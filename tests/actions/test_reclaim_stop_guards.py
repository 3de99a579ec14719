"""A stop is only recorded as one when the object shows it, and objects gpuaas should not stop are left alone.

Against the embedded cluster through the official client (a cluster of this module's own: these tests leave
objects marked, deleting, or GitOps-owned):

* a patch answered 200 whose answer does not show the stop (a mutating webhook, stood in for by the store's
  ``mutating_admission`` fault hook, sets ``replicas`` back) is ``failed`` with the cause ``stop-not-held``, naming
  the field and its value; no "Reclaimed" Event is sent; the next run does not patch it again while its spec is
  unchanged, and says why, once per ``record_skips_every``;
* an object whose stop field a GitOps controller applies (``managedFields``, operation ``Apply``) or that carries a
  GitOps tracking mark is skipped ``gitops-managed``, naming the manager, and not written;
* a stale gpuaas mark whose stop field another manager wrote less than one window ago is skipped ``reverted``;
* an object with a ``deletionTimestamp`` (a finalizer holds it) is skipped ``being-deleted``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from gpuaas.actions import KubeWriter
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.instant import utc_stamp
from gpuaas.operations import reclaim as operation
from gpuaas.policies.reclaim import SkipCause
from gpuaas.policy import Mode
from gpuaas.settings import GpuaasSettings
from gpuaas.store import Store
from tests.actions.reclaim_scenario import decide, obj, run

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    from gpuaas.cluster.testbed import reclaim_cluster

    with reclaim_cluster(tmp_path_factory.mktemp("stop-guards")) as running:
        yield running


def _patches(cluster: EmbeddedCluster) -> int:
    return sum(n for key, n in cluster.api.requests.items() if key.startswith("PATCH "))


def _reasons(cluster: EmbeddedCluster, name: str) -> set[str]:
    return {e["reason"] for e in cluster.store.list("Event") if e["regarding"]["name"] == name}


def _keep_replicas(name: str, replicas: int) -> Any:
    """A "minimum replicas" mutating webhook on one Deployment: every write of it keeps ``replicas``."""
    def hook(kind: str, new: dict[str, Any]) -> dict[str, Any]:
        if kind == "Deployment" and new["metadata"]["name"] == name:
            new["spec"]["replicas"] = replicas
        return new
    return hook


def _apply(settings: GpuaasSettings, cluster: EmbeddedCluster, store: Store, kind: str, name: str,
           every: timedelta = timedelta(0)) -> Any:
    decisions = decide(settings, cluster, store, Mode.apply, only={(kind, name)})
    plan = operation.ReclaimPlan(Mode.apply, decisions, 20, every)
    with KubeWriter(settings) as writer:
        [result] = operation.apply(plan, store, writer, flow_run_id="test", now=cluster.clock.now())
    return result


def test_a_stop_a_webhook_sets_back_is_failed_and_not_made_again(settings: GpuaasSettings, cluster: EmbeddedCluster,
                                                                  store: Store) -> None:
    replicas = obj(cluster, "Deployment", "dep")["spec"]["replicas"]
    cluster.store.mutating_admission = _keep_replicas("dep", replicas)
    try:
        first = _apply(settings, cluster, store, "Deployment", "dep")
        assert (first.result, first.cause) == ("failed", SkipCause.stop_not_held), first.reason
        assert f"spec.replicas is {replicas} (the stop sets 0)" in first.reason
        assert obj(cluster, "Deployment", "dep")["spec"]["replicas"] == replicas
        assert "Reclaimed" not in _reasons(cluster, "dep")
        [row] = [r for r in store.audit(flow="reclaim") if r.refers_to == first.audit_id]
        assert (row.outcome, row.evidence["cause"]) == ("failed", "stop-not-held")

        patches = _patches(cluster)
        every = timedelta(minutes=60)
        second = _apply(settings, cluster, store, "Deployment", "dep", every)
        assert (second.result, second.cause) == ("skipped", SkipCause.stop_not_held), second.reason
        assert f"audit #{first.audit_id}" in second.reason and "spec.replicas is" in second.reason
        third = _apply(settings, cluster, store, "Deployment", "dep", every)
        assert (third.result, third.cause, third.audit_id) == ("skipped", SkipCause.stop_not_held, second.audit_id)
        assert third.unchanged_since is not None
        assert _patches(cluster) == patches  # never written again
    finally:
        cluster.store.mutating_admission = None


def test_an_object_a_gitops_controller_applies_is_left_alone(settings: GpuaasSettings, cluster: EmbeddedCluster,
                                                             store: Store) -> None:
    applied = {"manager": "argocd-controller", "operation": "Apply", "apiVersion": "apps/v1",
               "time": utc_stamp(cluster.clock.now()), "fieldsType": "FieldsV1",
               "fieldsV1": {"f:spec": {"f:replicas": {}, "f:template": {}}}}
    cluster.store.patch("StatefulSet", "team-a", "sts", {"metadata": {"managedFields": [applied]}})
    patches = _patches(cluster)
    result = _apply(settings, cluster, store, "StatefulSet", "sts")
    assert (result.result, result.cause) == ("skipped", SkipCause.gitops_managed), result.reason
    assert "argocd-controller" in result.reason and "spec.replicas" in result.reason
    assert 'gpuaas.io/reclaim: "never"' in result.reason
    assert _patches(cluster) == patches
    assert obj(cluster, "StatefulSet", "sts")["spec"]["replicas"] == 1


def test_an_object_argo_cd_tracks_is_left_alone(settings: GpuaasSettings, cluster: EmbeddedCluster,
                                                store: Store) -> None:
    tracking = "team-a-apps:apps/Deployment:team-a/dep-b"
    cluster.store.patch("Deployment", "team-a", "dep-b",
                        {"metadata": {"annotations": {"argocd.argoproj.io/tracking-id": tracking}}})
    result = _apply(settings, cluster, store, "Deployment", "dep-b")
    assert (result.result, result.cause) == ("skipped", SkipCause.gitops_managed), result.reason
    assert "Argo CD" in result.reason and tracking in result.reason


def test_a_stop_reverted_by_another_manager_is_not_made_again_within_the_window(
        settings: GpuaasSettings, cluster: EmbeddedCluster, store: Store) -> None:
    [decision] = decide(settings, cluster, store, Mode.apply, only={("StatefulSet", "sts-b")})
    [stopped] = run(settings, cluster, store, [decision])
    assert stopped.result == "applied", stopped.reason
    scaled = {"manager": "kubectl", "operation": "Update", "subresource": "scale", "apiVersion": "apps/v1",
              "time": utc_stamp(cluster.clock.now()), "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}}
    cluster.store.patch("StatefulSet", "team-a", "sts-b", {"spec": {"replicas": 1}, "metadata": {"managedFields": [scaled]}})
    # The next run's decision: another window, the object as it is now (the team scaled it back up by hand).
    live = obj(cluster, "StatefulSet", "sts-b")["metadata"]["resourceVersion"]
    again = replace(decision, idempotency_key=decision.idempotency_key + "/next", resource_version=live)
    [result] = run(settings, cluster, store, [again])
    assert (result.result, result.cause) == ("skipped", SkipCause.reverted), result.reason
    assert "reverted by kubectl" in result.reason and f"audit #{stopped.audit_id}" in result.reason
    assert obj(cluster, "StatefulSet", "sts-b")["spec"]["replicas"] == 1


def test_an_object_being_deleted_is_left_alone(settings: GpuaasSettings, cluster: EmbeddedCluster,
                                               store: Store) -> None:
    cluster.store.patch("Notebook", "team-a", "nb", {"metadata": {"finalizers": ["example.com/backup"]}})
    cluster.store.delete("Notebook", "team-a", "nb")
    assert obj(cluster, "Notebook", "nb")["metadata"].get("deletionTimestamp")
    patches = _patches(cluster)
    result = _apply(settings, cluster, store, "Notebook", "nb")
    assert (result.result, result.cause) == ("skipped", SkipCause.being_deleted), result.reason
    assert "example.com/backup" in result.reason
    assert _patches(cluster) == patches
