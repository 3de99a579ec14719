"""How each kind is stopped and restored: merge patches built from the live object.

A stop changes a few fields; the plan records each field's prior value (``None``: absent),
so the restore patch puts exactly those values back (a merge-patch ``null`` removes a field
that was absent) and touches nothing else. Both patches carry ``metadata.resourceVersion``
(the API server answers 409 when the object changed) and set or remove the
``gpuaas.io/reclaimed`` annotation in the same write, so an object stopped by gpuaas always
says which audit row holds its prior state.

What each stop frees (the report says which happened):

=====================  ==============================================  =======
RayCluster             its Workload's ``spec.active: false`` (Kueue    quota
                       owns ``spec.suspend``; it suspends the cluster)
RayCluster, elastic    workers ``replicas``/``minReplicas`` 0 when the  compute
(annotation)           goal is ``compute``: the Workload shrinks in
                       place and keeps its reservation
Workload               ``spec.active: false``                          quota
InferenceService       ``serving.kserve.io/stop: "true"`` (default);   quota
                       ``minReplicas: 0`` when the goal is ``compute``  compute
                       and the autoscaler reaches zero (Knative, KEDA)
Notebook               ``kubeflow-resource-stopped: <RFC3339>``        quota
Deployment/StatefulSet ``replicas: 0``                                 quota
=====================  ==============================================  =======
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from gpuaas.instant import utc_stamp
from gpuaas.models import is_elastic
from gpuaas.policy import FreeGoal

__all__ = [
    "KIND_RESOURCES",
    "RECLAIMED_ANNOTATION",
    "StopMethod",
    "StopPlan",
    "differences",
    "left_by_stop",
    "live_values",
    "reclaimed_by",
    "still_stopped",
    "restore_patch",
    "stop_patch",
    "stop_plan",
    "stopped_reason",
]

RECLAIMED_ANNOTATION = "gpuaas.io/reclaimed"
KSERVE_STOP = "serving.kserve.io/stop"
NOTEBOOK_STOP = "kubeflow-resource-stopped"

KIND_RESOURCES: dict[str, tuple[str, str, str]] = {
    "RayCluster": ("ray.io", "v1", "rayclusters"),
    "InferenceService": ("serving.kserve.io", "v1beta1", "inferenceservices"),
    "Notebook": ("kubeflow.org", "v1", "notebooks"),
    "Deployment": ("apps", "v1", "deployments"),
    "StatefulSet": ("apps", "v1", "statefulsets"),
    "Workload": ("kueue.x-k8s.io", "v1beta2", "workloads"),
    "ClusterQueue": ("kueue.x-k8s.io", "v1beta2", "clusterqueues"),
}
"""(group, version, plural) of every kind gpuaas may patch."""

Path = tuple[str, ...]


class StopMethod(StrEnum):
    """How a workload is stopped (recorded in its audit row and annotation as ``method``)."""

    workers_to_zero = "workers-to-zero"
    """An elastic RayCluster's worker groups to 0 replicas: its head and its Kueue reservation stay."""
    suspend = "suspend"
    deactivate = "deactivate"
    min_replicas_zero = "min-replicas-zero"
    """An InferenceService an autoscaler takes to zero (Knative or KEDA)."""
    stop_annotation = "stop-annotation"
    replicas_to_zero = "replicas-to-zero"


@dataclass(frozen=True)
class StopPlan:
    method: StopMethod
    frees: FreeGoal
    """``compute`` (the reservation stays) or ``quota`` (returned to the queue and its cohort)."""
    fields: tuple[tuple[Path, Any, Any], ...]
    """(path, before, after) of each scalar field the stop changes."""
    workers: tuple[tuple[str, int | None, int | None], ...] = ()
    """Elastic RayCluster: (groupName, replicas before, minReplicas before); after is 0/0."""

    def before(self) -> dict[str, Any]:
        """The prior state, as recorded in the audit row and the annotation."""
        out: dict[str, Any] = {"method": self.method,
                               "fields": [[list(path), before] for path, before, _ in self.fields]}
        if self.workers:
            out["workers"] = [{"groupName": g, "replicas": r, "minReplicas": m} for g, r, m in self.workers]
        return out

    def after(self) -> dict[str, Any]:
        """What the stop leaves, in ``before()``'s shape: undo compares the live object with it."""
        out: dict[str, Any] = {"method": self.method,
                               "fields": [[list(path), after] for path, _, after in self.fields]}
        if self.workers:
            out["workers"] = [{"groupName": g, "replicas": 0, "minReplicas": 0} for g, _, _ in self.workers]
        return out


def _get(obj: dict[str, Any], path: Path) -> Any:
    node: Any = obj
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _set(patch: dict[str, Any], path: Path, value: Any) -> None:
    node = patch
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value


def _annotations(obj: dict[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def reclaimed_by(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The parsed ``gpuaas.io/reclaimed`` annotation, or None when absent or unreadable."""
    raw = _annotations(obj).get(RECLAIMED_ANNOTATION)
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: an annotation nested past the decoder's depth
        return None
    return value if isinstance(value, dict) else None


def still_stopped(kind: str, mark: dict[str, Any], obj: dict[str, Any]) -> bool:
    """Whether the live object still shows the stop its ``gpuaas.io/reclaimed`` mark records.

    A team that starts its workload again by hand (removes a notebook's stop annotation, reactivates a
    Workload, scales a Deployment back up) leaves the mark behind; such a mark is stale, and the workload
    runs like any other: judged again, and reclaimed again when idle. A mark that records no stop to compare
    (no ``before``, or one with no field and no worker group) proves nothing: anyone who may edit the object
    can write one, and counting it as a stop would keep a running workload out of reclaim for good. Such an
    object is judged by what it shows (``stopped_reason``'s checks of the kind's own stop fields).
    """
    if kind == "Notebook":
        return NOTEBOOK_STOP in _annotations(obj)
    before = mark.get("before")
    expected = left_by_stop(None, before if isinstance(before, dict) else {})
    if not expected["fields"] and not expected["workers"]:
        return False
    return not differences(expected, obj)


def stopped_reason(kind: str, obj: dict[str, Any]) -> str | None:
    """Why the live object counts as already stopped, or None when it runs (a stale mark is no stop)."""
    mark = reclaimed_by(obj)
    if mark is not None and still_stopped(kind, mark, obj):
        return f"already reclaimed by gpuaas (audit #{mark.get('audit_id')})"
    spec, annotations = obj.get("spec") or {}, _annotations(obj)
    if kind == "RayCluster" and spec.get("suspend"):
        return "already suspended"
    if kind == "Workload" and spec.get("active") is False:
        return "already deactivated (spec.active: false)"
    if kind == "InferenceService" and str(annotations.get(KSERVE_STOP, "")).lower() == "true":
        return f"already stopped ({KSERVE_STOP})"
    if kind == "Notebook" and NOTEBOOK_STOP in annotations:
        return f"already stopped ({NOTEBOOK_STOP})"
    if kind in ("Deployment", "StatefulSet") and spec.get("replicas") == 0:
        return "already at 0 replicas"
    return None


def _isvc_reaches_zero(annotations: dict[str, str]) -> bool:
    mode = annotations.get("serving.kserve.io/deploymentMode", "Standard")
    autoscaler = annotations.get("serving.kserve.io/autoscalerClass", "hpa")
    return mode in ("Knative", "Serverless") or autoscaler == "keda"


def stop_plan(kind: str, obj: dict[str, Any], free: FreeGoal, now: datetime) -> StopPlan:
    """The stop for this kind and goal, read from the live object."""
    annotations = _annotations(obj)

    def field(path: Path, after: Any) -> tuple[Path, Any, Any]:
        return (path, _get(obj, path), after)

    if kind == "RayCluster":
        elastic = is_elastic(annotations)
        if elastic and free == FreeGoal.compute:
            groups = (obj.get("spec") or {}).get("workerGroupSpecs") or []
            workers = tuple((str(g.get("groupName")), g.get("replicas"), g.get("minReplicas")) for g in groups)
            return StopPlan(StopMethod.workers_to_zero, FreeGoal.compute, (), workers)
        return StopPlan(StopMethod.suspend, FreeGoal.quota, (field(("spec", "suspend"), True),))
    if kind == "Workload":
        return StopPlan(StopMethod.deactivate, FreeGoal.quota, (field(("spec", "active"), False),))
    if kind == "InferenceService":
        if free == FreeGoal.compute and _isvc_reaches_zero(annotations):
            return StopPlan(StopMethod.min_replicas_zero, FreeGoal.compute, (field(("spec", "predictor", "minReplicas"), 0),))
        return StopPlan(StopMethod.stop_annotation, FreeGoal.quota, (field(("metadata", "annotations", KSERVE_STOP), "true"),))
    if kind == "Notebook":
        return StopPlan(StopMethod.stop_annotation, FreeGoal.quota, (field(("metadata", "annotations", NOTEBOOK_STOP), utc_stamp(now)),))
    if kind in ("Deployment", "StatefulSet"):
        return StopPlan(StopMethod.replicas_to_zero, FreeGoal.quota, (field(("spec", "replicas"), 0),))
    raise ValueError(f"gpuaas does not know how to stop a {kind}")


def _workers_patch(obj: dict[str, Any], values: dict[str, tuple[Any, Any]]) -> list[dict[str, Any]]:
    """The live worker list with only replicas/minReplicas changed (a merge patch replaces lists)."""
    groups = copy.deepcopy((obj.get("spec") or {}).get("workerGroupSpecs") or [])
    for group in groups:
        name = str(group.get("groupName"))
        if name in values:
            for key, value in zip(("replicas", "minReplicas"), values[name]):
                if value is None:
                    group.pop(key, None)
                else:
                    group[key] = value
    return groups


def stop_patch(plan: StopPlan, obj: dict[str, Any], audit_id: int) -> dict[str, Any]:
    """The stop as one merge patch: fields, the reclaimed annotation, the resourceVersion read."""
    patch: dict[str, Any] = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"], "annotations": {
        RECLAIMED_ANNOTATION: json.dumps({"audit_id": audit_id, "before": plan.before()}, sort_keys=True)}}}
    for path, _, after in plan.fields:
        _set(patch, path, after)
    if plan.workers:
        _set(patch, ("spec", "workerGroupSpecs"), _workers_patch(obj, {g: (0, 0) for g, _, _ in plan.workers}))
    return patch


def _shown(value: Any) -> str:
    return "absent" if value is None else json.dumps(value)


def differences(expected: dict[str, Any], obj: dict[str, Any], source: str = "expected") -> list[str]:
    """Where the live object differs from ``expected`` (a ``before()``/``after()`` record):
    ``"spec.replicas is 5 (<source> 0)"``, one entry per field or worker-group value."""
    out = []
    for path, value in expected.get("fields") or []:
        current = _get(obj, tuple(path))
        if current != value:
            out.append(f"{'.'.join(path)} is {_shown(current)} ({source} {_shown(value)})")
    groups = {str(g.get("groupName")): g for g in (obj.get("spec") or {}).get("workerGroupSpecs") or []}
    for worker in expected.get("workers") or []:
        name = str(worker["groupName"])
        group = groups.get(name)
        if group is None:
            out.append(f"spec.workerGroupSpecs[{name}] is absent")
            continue
        for key in ("replicas", "minReplicas"):
            if group.get(key) != worker.get(key):
                out.append(f"spec.workerGroupSpecs[{name}].{key} is {_shown(group.get(key))} "
                           f"({source} {_shown(worker.get(key))})")
    return out


_STOP_VALUES: dict[str, Any] = {StopMethod.suspend: True, StopMethod.deactivate: False, StopMethod.replicas_to_zero: 0,
                                StopMethod.min_replicas_zero: 0}


def left_by_stop(intent_after: dict[str, Any] | None, before: dict[str, Any]) -> dict[str, Any]:
    """What a stop left on the object, in ``StopPlan.after()``'s shape.

    Recorded in the intent row's ``after``; for a row written before gpuaas recorded it, it
    is derived from the method (a notebook's stop stamp is not known then: that one field
    is not compared).
    """
    if intent_after and ("fields" in intent_after or "workers" in intent_after):
        return intent_after
    method = before.get("method")
    fields = []
    for path, _ in before.get("fields") or []:
        if method in _STOP_VALUES:
            fields.append([path, _STOP_VALUES[method]])
        elif method == StopMethod.stop_annotation and path[-1] == KSERVE_STOP:
            fields.append([path, "true"])
    workers = [{"groupName": w["groupName"], "replicas": 0, "minReplicas": 0} for w in before.get("workers") or []]
    return {"method": method, "fields": fields, "workers": workers}


def live_values(record: dict[str, Any], obj: dict[str, Any]) -> dict[str, Any]:
    """The live object's values at the fields and worker groups of ``record``, in its shape:
    the state a restore is about to overwrite, for its audit row."""
    out: dict[str, Any] = {"method": record.get("method"),
                           "fields": [[list(path), _get(obj, tuple(path))] for path, _ in record.get("fields") or []]}
    if record.get("workers"):
        groups = {str(g.get("groupName")): g for g in (obj.get("spec") or {}).get("workerGroupSpecs") or []}
        out["workers"] = [{"groupName": w["groupName"], "replicas": groups.get(str(w["groupName"]), {}).get("replicas"),
                           "minReplicas": groups.get(str(w["groupName"]), {}).get("minReplicas")}
                          for w in record["workers"]]
    return out


def restore_patch(before: dict[str, Any], obj: dict[str, Any]) -> dict[str, Any]:
    """Put the recorded prior values back on the current object and remove the annotation."""
    patch: dict[str, Any] = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"],
                                          "annotations": {RECLAIMED_ANNOTATION: None}}}
    for path, value in before.get("fields") or []:
        _set(patch, tuple(path), value)
    workers = {str(w["groupName"]): (w.get("replicas"), w.get("minReplicas")) for w in before.get("workers") or []}
    if workers:
        _set(patch, ("spec", "workerGroupSpecs"), _workers_patch(obj, workers))
    return patch
