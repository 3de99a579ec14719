"""Stop and restore patches, and the comparison undo makes before it restores. Pure, property-based.

For any object of any kind gpuaas stops (random replicas, suspend, worker groups, annotations,
goal), applied with the emulator's RFC 7386 merge: the stop leaves exactly what
``StopPlan.after()`` records, the restore puts back exactly ``before()``, the derivation for
audit rows older than ``after()`` agrees with it, and any later change to a field the restore
would write is reported with the field and its value.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuaas.actions._patches import (
    NOTEBOOK_STOP,
    RECLAIMED_ANNOTATION,
    StopMethod,
    differences,
    left_by_stop,
    live_values,
    reclaimed_by,
    restore_patch,
    stop_patch,
    stop_plan,
)
from gpuaas.cluster.apiserver._patch import apply_patch
from gpuaas.policy import FreeGoal

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
KINDS = ("RayCluster", "Workload", "InferenceService", "Notebook", "Deployment", "StatefulSet")
maybe = st.none() | st.just(False)


@st.composite
def objects(draw: st.DrawFn) -> tuple[str, dict[str, Any], str]:
    kind = draw(st.sampled_from(KINDS))
    annotations: dict[str, str] = draw(st.dictionaries(st.sampled_from(["team", "note"]), st.text(max_size=5)))
    spec: dict[str, Any] = {}
    if kind == "RayCluster":
        if draw(st.booleans()):
            annotations["kueue.x-k8s.io/elastic-job"] = "true"
        if (suspend := draw(maybe)) is not None:
            spec["suspend"] = suspend
        groups = []
        for i in range(draw(st.integers(1, 2))):
            group: dict[str, Any] = {"groupName": f"g{i}", "replicas": draw(st.integers(1, 4)), "rayStartParams": {}}
            if (low := draw(st.none() | st.integers(0, 2))) is not None:
                group["minReplicas"] = low
            groups.append(group)
        spec["workerGroupSpecs"] = groups
    elif kind == "Workload":
        if draw(st.booleans()):
            spec["active"] = True
        spec["queueName"] = "q"
    elif kind == "InferenceService":
        annotations["serving.kserve.io/deploymentMode"] = draw(st.sampled_from(["Standard", "Knative"]))
        spec["predictor"] = {"minReplicas": draw(st.integers(1, 3))}
    elif kind in ("Deployment", "StatefulSet"):
        if (replicas := draw(st.none() | st.integers(1, 8))) is not None:
            spec["replicas"] = replicas
    meta: dict[str, Any] = {"name": "x", "namespace": "team-a", "uid": "u-1", "resourceVersion": "5"}
    if annotations:
        meta["annotations"] = annotations
    return kind, {"kind": kind, "metadata": meta, "spec": spec}, draw(st.sampled_from(["compute", "quota"]))


def _merge(obj: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    return apply_patch(obj, patch, "merge")


@given(objects())
def test_stop_then_restore_round_trips_and_leaves_what_is_recorded(case: tuple[str, dict[str, Any], str]) -> None:
    kind, obj, free = case
    plan = stop_plan(kind, obj, free, NOW)
    stopped = _merge(obj, stop_patch(plan, obj, 7))
    assert differences(plan.after(), stopped) == []
    assert reclaimed_by(stopped) == {"audit_id": 7, "before": plan.before()}
    assert live_values(plan.before(), stopped) == {**plan.after(), "method": plan.method}
    # An audit row written before after() was recorded: the derivation never sees a change that is not there.
    assert differences(left_by_stop({"method": plan.method}, plan.before()), stopped) == []

    restored = _merge(stopped, restore_patch(plan.before(), stopped))
    assert differences(plan.before(), restored) == []
    assert restored["spec"] == obj["spec"]
    assert (restored["metadata"].get("annotations") or {}) == (obj["metadata"].get("annotations") or {})
    assert RECLAIMED_ANNOTATION not in (restored["metadata"].get("annotations") or {})


@given(objects(), st.integers(0, 50), st.data())
def test_a_later_change_to_a_restored_field_is_named_with_its_value(
        case: tuple[str, dict[str, Any], str], pick: int, data: st.DataObject) -> None:
    kind, obj, free = case
    plan = stop_plan(kind, obj, free, NOW)
    stopped = _merge(obj, stop_patch(plan, obj, 7))
    changed = copy.deepcopy(stopped)
    left = plan.after()
    if left["fields"]:
        path, value = left["fields"][pick % len(left["fields"])]
        new = data.draw(st.sampled_from([None, True, False, 3, "later"]).filter(lambda v: v != value))
        node = changed
        for part in path[:-1]:
            node = node.setdefault(part, {})
        if new is None:
            node.pop(path[-1], None)
        else:
            node[path[-1]] = new
        expected = f"{'.'.join(path)} is {'absent' if new is None else json.dumps(new)} (the reclaim left"
    else:  # an elastic RayCluster: a worker group scaled back up by hand
        group = changed["spec"]["workerGroupSpecs"][pick % len(changed["spec"]["workerGroupSpecs"])]
        group["replicas"] = 5
        expected = f"spec.workerGroupSpecs[{group['groupName']}].replicas is 5 (the reclaim left 0)"
    found = differences(left, changed, "the reclaim left")
    assert len(found) == 1 and found[0].startswith(expected), found


def test_a_notebooks_stop_stamp_is_the_instant_in_utc_whatever_its_offset() -> None:
    """Kubeflow reads the annotation as UTC (``Z``): 12:00+02:00 is stamped 10:00Z, as 10:00Z itself is."""
    obj = {"kind": "Notebook", "metadata": {"name": "nb", "namespace": "team-a", "uid": "u-1", "resourceVersion": "5"},
           "spec": {}}
    east = datetime(2026, 3, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    for when in (east, NOW - timedelta(hours=2)):
        [(path, _, stamp)] = stop_plan("Notebook", obj, "quota", when).fields
        assert path == ("metadata", "annotations", NOTEBOOK_STOP) and stamp == "2026-03-01T10:00:00Z"


@pytest.mark.parametrize(("value", "method"), [("true", StopMethod.workers_to_zero), ("True", StopMethod.suspend),
                                               ("TRUE", StopMethod.suspend), ("yes", StopMethod.suspend)])
def test_a_raycluster_is_elastic_only_as_kueue_reads_it(value: str, method: StopMethod) -> None:
    """Kueue's ``workloadslicing.Enabled`` compares the annotation with ``"true"`` exactly: ``"True"`` is not an
    elastic job there, so scaling its workers to zero would be a suspend and a new Workload, not a shrink in place."""
    obj = {"kind": "RayCluster", "metadata": {"name": "r", "namespace": "a", "annotations": {
        "kueue.x-k8s.io/elastic-job": value}}, "spec": {"workerGroupSpecs": [{"groupName": "g", "replicas": 2}]}}
    assert stop_plan("RayCluster", obj, FreeGoal.compute, NOW).method is method
