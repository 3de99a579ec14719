"""The scenario's objects as a user would create them on a real cluster with Kueue.

The same builders as the embedded cluster (``gpuaas.cluster.scenario``), with one difference: on
a real cluster a user never writes a Kueue ``Workload``; they submit a job and Kueue creates the
Workload from it. A scenario workload of kind ``Workload`` therefore becomes a suspended
``batch/v1`` Job with the queue label (and the priority-class label), which Kueue's job
integration turns into a Workload and admits or not.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from gpuaas.cluster.scenario import (
    Instance,
    Scenario,
    WorkloadKind,
    fleet_objects,
    instances,
    workload_objects,
)

__all__ = ["KWOK_NODE_ANNOTATION", "QUEUE_LABEL", "job_for", "real_fleet_objects", "real_workload_objects"]

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
# kwok manages the nodes carrying this annotation (``--manage-nodes-with-annotation-selector``).
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"


def real_fleet_objects(scenario: Scenario) -> list[dict[str, Any]]:
    """Namespaces, Nodes, flavors, priority classes and queues (Node status is written separately).

    The Nodes are the emulator's (names, labels, GPU capacity), annotated for kwok, which plays their
    kubelets: it keeps their ``Ready`` condition and lease fresh and runs the pods bound to them. The
    first ``Ready`` is written with the status, so the scheduler can use a node the moment it exists."""
    objs = fleet_objects(scenario)
    for obj in objs:
        if obj["kind"] == "Node":
            obj["metadata"].setdefault("annotations", {})[KWOK_NODE_ANNOTATION] = "fake"
            obj["status"]["conditions"] = [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                            "message": "kwok manages this node"}]
    return objs


def job_for(workload: dict[str, Any]) -> dict[str, Any]:
    """The suspended Job a user submits for what the emulator stores as a ``Workload``."""
    meta = dict(workload["metadata"])
    spec = workload["spec"]
    labels = dict(meta.get("labels") or {})
    labels[QUEUE_LABEL] = spec["queueName"]
    ref = spec.get("priorityClassRef")
    if ref:
        labels[PRIORITY_LABEL] = ref["name"]
    meta["labels"] = labels
    podset = spec["podSets"][0]
    template = {"metadata": podset["template"].get("metadata", {}),
                "spec": {**podset["template"]["spec"], "restartPolicy": "Never"}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {"suspend": True, "parallelism": podset["count"], "completions": podset["count"],
                 "template": template},
    }


def _objects(inst: Instance, epoch: datetime) -> list[dict[str, Any]]:
    objs = workload_objects(inst.spec, inst.name, inst.tenant, epoch)
    if inst.spec.kind is WorkloadKind.WORKLOAD:
        return [job_for(obj) for obj in objs]
    return objs


def real_workload_objects(scenario: Scenario, epoch: datetime) -> list[dict[str, Any]]:
    """Every instance's objects, in submission order."""
    return [obj for inst in instances(scenario) for obj in _objects(inst, epoch)]
