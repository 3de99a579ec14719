"""A ``gpuaas.io/reclaimed`` annotation written by someone else does not keep a running workload out of reclaim.

Anyone who may edit an object may annotate it. gpuaas's own mark records the stop it made (``before``); a mark
that records none proves nothing, and the object is judged by what it shows: running, it is reclaimed when idle.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpuaas.actions._patches import RECLAIMED_ANNOTATION, StopMethod, stopped_reason
from gpuaas.models import Outcome
from gpuaas.policy import Mode
from gpuaas.settings import GpuaasSettings
from gpuaas.store import Store
from tests.actions.reclaim_scenario import decide, obj, run

FORGED = [{"audit_id": 1}, {"audit_id": 1, "before": {}}, {"audit_id": 1, "before": {"fields": [], "workers": []}},
          {"audit_id": 1, "before": "stopped"}]

RUNNING: dict[str, dict[str, Any]] = {
    "Deployment": {"spec": {"replicas": 2}},
    "StatefulSet": {"spec": {"replicas": 1}},
    "RayCluster": {"spec": {"workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "minReplicas": 0}]}},
    "InferenceService": {"spec": {"predictor": {"minReplicas": 1}}},
    "Workload": {"spec": {"active": True}},
}
STOPPED: dict[str, tuple[dict[str, Any], str]] = {
    "Deployment": ({"spec": {"replicas": 0}}, "already at 0 replicas"),
    "RayCluster": ({"spec": {"suspend": True}}, "already suspended"),
    "Workload": ({"spec": {"active": False}}, "already deactivated (spec.active: false)"),
}


def _marked(body: dict[str, Any], mark: dict[str, Any]) -> dict[str, Any]:
    return {**body, "metadata": {"name": "x", "annotations": {RECLAIMED_ANNOTATION: json.dumps(mark)}}}


@pytest.mark.parametrize("mark", FORGED)
@pytest.mark.parametrize("kind", sorted(RUNNING))
def test_a_mark_that_records_no_stop_does_not_make_a_running_object_stopped(kind: str, mark: dict[str, Any]) -> None:
    assert stopped_reason(kind, _marked(RUNNING[kind], mark)) is None


@pytest.mark.parametrize("kind", sorted(STOPPED))
def test_an_object_stopped_by_its_own_fields_still_reads_stopped_under_such_a_mark(kind: str) -> None:
    body, why = STOPPED[kind]
    assert stopped_reason(kind, _marked(body, FORGED[0])) == why


def test_gpuaas_own_mark_still_reads_stopped_while_the_stop_holds() -> None:
    """The mark a stop writes (its ``before``) keeps counting, until the team starts the workload again by hand."""
    mark = {"audit_id": 7, "before": {"method": StopMethod.replicas_to_zero.value, "fields": [[["spec", "replicas"], 2]]}}
    assert stopped_reason("Deployment", _marked({"spec": {"replicas": 0}}, mark)) == "already reclaimed by gpuaas (audit #7)"
    assert stopped_reason("Deployment", _marked({"spec": {"replicas": 2}}, mark)) is None


@pytest.mark.integration
def test_a_tenant_cannot_annotate_its_idle_deployment_out_of_reclaim(settings: GpuaasSettings, cluster: Any,
                                                                      store: Store) -> None:
    cluster.store.patch("Deployment", "team-a", "dep",
                        {"metadata": {"annotations": {RECLAIMED_ANNOTATION: json.dumps({"audit_id": 1})}}})
    decisions = decide(settings, cluster, store, Mode.apply, only={("Deployment", "dep")})
    assert [d.outcome for d in decisions] == [Outcome.planned]
    results = run(settings, cluster, store, decisions)
    assert [r.result for r in results] == [Outcome.applied], [r.reason for r in results]
    assert obj(cluster, "Deployment", "dep")["spec"]["replicas"] == 0
    assert json.loads(obj(cluster, "Deployment", "dep")["metadata"]["annotations"][RECLAIMED_ANNOTATION])[
        "audit_id"] == results[0].audit_id
