"""Kubernetes, Kueue, KubeRay, KServe and Kubeflow objects built from a scenario.

Field names follow the upstream APIs exactly (Kueue ``v1beta2``, ``ray.io/v1``,
``serving.kserve.io/v1beta1``, ``kubeflow.org/v1``, ``apps/v1``), so that the production
readers in gpuaas see the same shapes as on a real cluster. Everything here is a pure function
of the scenario: same scenario, same objects.
"""

from __future__ import annotations

import copy
import hashlib
from datetime import datetime, timedelta
from typing import Any

from gpuaas.cluster._scenario_models import NodePool, Scenario, Tenant, WorkloadKind, WorkloadSpec
from gpuaas.instant import utc_stamp

__all__ = [
    "DEADLINE_ANNOTATION",
    "EXPECTED_RUNTIME_ANNOTATION",
    "GPU",
    "QUEUE_LABEL",
    "SLO_ANNOTATION",
    "fleet_objects",
    "gpu_uuid",
    "node_names",
    "pci_bus_id",
    "rfc3339",
    "workload_objects",
]

GPU = "nvidia.com/gpu"
KUEUE_API = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
DEADLINE_ANNOTATION = "gpuaas.io/deadline"
EXPECTED_RUNTIME_ANNOTATION = "gpuaas.io/expected-runtime"
SLO_ANNOTATION = "gpuaas.io/latency-slo-seconds"


def rfc3339(value: datetime) -> str:
    return utc_stamp(value)


def node_names(pool: NodePool) -> list[str]:
    return [f"{pool.name}-node-{i:03d}" for i in range(pool.count)]


def gpu_uuid(cluster: str, node: str, index: int) -> str:
    """A stable ``GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`` per physical GPU."""
    h = hashlib.sha1(f"{cluster}/{node}/{index}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def pci_bus_id(index: int) -> str:
    return f"00000000:{0x53 + 0x11 * index:02X}:00.0"


def _product_label(model: str) -> str:
    return model.replace(" ", "-")


def flavor_node_labels(scenario: Scenario, flavor: str) -> dict[str, str]:
    """The labels that select a flavor's nodes: explicit, or the pools' GPU product."""
    spec = next(f for f in scenario.flavors if f.name == flavor)
    if spec.node_labels is not None:
        return dict(spec.node_labels)
    models = sorted(scenario.pool_models(flavor))
    if len(models) != 1:
        raise ValueError(f"flavor {flavor!r} covers GPU models {models}: give it explicit node_labels")
    return {"nvidia.com/gpu.product": _product_label(models[0])}


def _node(scenario: Scenario, pool: NodePool, name: str) -> dict[str, Any]:
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": pool.instance_type,
        "topology.kubernetes.io/region": pool.region,
        "nvidia.com/gpu.product": _product_label(pool.gpu_model),
        "nvidia.com/gpu.count": str(pool.gpus_per_node),
        "nvidia.com/gpu.present": "true",
    }
    labels.update(flavor_node_labels(scenario, pool.flavor))
    resources = {
        "cpu": str(pool.cpu_cores),
        "memory": f"{pool.memory_gib}Gi",
        GPU: str(pool.gpus_per_node),
        "pods": "110",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"providerID": f"aws:///{pool.region}a/i-{hashlib.sha1(name.encode()).hexdigest()[:17]}"},
        "status": {"capacity": dict(resources), "allocatable": dict(resources)},
    }


def _cluster_queue(tenant: Tenant) -> dict[str, Any]:
    flavors = []
    for quota in tenant.quotas:
        resource: dict[str, Any] = {"name": GPU, "nominalQuota": quota.gpus}
        if quota.borrowing_limit is not None:
            resource["borrowingLimit"] = quota.borrowing_limit
        if quota.lending_limit is not None:
            resource["lendingLimit"] = quota.lending_limit
        flavors.append({"name": quota.flavor, "resources": [resource]})
    spec: dict[str, Any] = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": tenant.ns}},
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [{"coveredResources": [GPU], "flavors": flavors}],
        "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
    }
    if tenant.cohort:
        spec["cohortName"] = tenant.cohort
    return {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": tenant.cq}, "spec": spec}


def fleet_objects(scenario: Scenario) -> list[dict[str, Any]]:
    """Namespaces (``kube-system`` too, as every cluster has it: its uid names the cluster), Nodes, ResourceFlavors,
    priority classes, ClusterQueues and LocalQueues, then the scenario's other ``objects`` as written."""
    objects: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "kube-system", "labels": {"kubernetes.io/metadata.name": "kube-system"}}}]
    for tenant in scenario.tenants:
        objects.append({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": tenant.ns, "labels": {"kubernetes.io/metadata.name": tenant.ns}},
        })
    for pool in scenario.pools:
        objects.extend(_node(scenario, pool, name) for name in node_names(pool))
    for flavor in scenario.flavors:
        objects.append({
            "apiVersion": KUEUE_API,
            "kind": "ResourceFlavor",
            "metadata": {"name": flavor.name},
            "spec": {"nodeLabels": flavor_node_labels(scenario, flavor.name)},
        })
    for value in sorted({w.priority for w in scenario.workloads if w.priority}):
        objects.append({
            "apiVersion": KUEUE_API,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": _priority_class(value)},
            "value": value,
            "description": f"scenario priority {value}",
        })
    for tenant in scenario.tenants:
        objects.append(_cluster_queue(tenant))
        objects.append({
            "apiVersion": KUEUE_API,
            "kind": "LocalQueue",
            "metadata": {"name": tenant.lq, "namespace": tenant.ns},
            "spec": {"clusterQueue": tenant.cq},
        })
    objects.extend(copy.deepcopy(obj) for obj in scenario.objects)
    return objects


def _priority_class(value: int) -> str:
    return f"priority-{value}" if value >= 0 else f"priority-minus-{-value}"


def _resources(spec: WorkloadSpec, gpus: int) -> dict[str, Any]:
    requests = {"cpu": f"{spec.cpu_per_pod:g}", "memory": f"{spec.memory_gib_per_pod:g}Gi"}
    if gpus:
        requests[GPU] = str(gpus)
    return {"requests": dict(requests), "limits": dict(requests)}


def _container(spec: WorkloadSpec, name: str, image: str, gpus: int) -> dict[str, Any]:
    return {"name": name, "image": image, "resources": _resources(spec, gpus)}


def _pod_template(spec: WorkloadSpec, name: str, image: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"labels": dict(labels)},
        "spec": {"containers": [_container(spec, name, image, spec.gpus_per_pod)]},
    }


def _metadata(spec: WorkloadSpec, name: str, tenant: Tenant, epoch: datetime) -> dict[str, Any]:
    labels = {"app": name, "app.kubernetes.io/part-of": spec.name}
    if spec.kind is not WorkloadKind.WORKLOAD:
        labels[QUEUE_LABEL] = tenant.lq
        if spec.priority:
            labels[PRIORITY_LABEL] = _priority_class(spec.priority)
    labels.update(spec.labels)
    annotations = dict(spec.annotations)
    if spec.deadline is not None:
        annotations[DEADLINE_ANNOTATION] = rfc3339(epoch + spec.deadline)
    if spec.expected_runtime is not None:
        seconds = f"{spec.expected_runtime / timedelta(seconds=1):.3f}".rstrip("0").rstrip(".")
        annotations[EXPECTED_RUNTIME_ANNOTATION] = f"{seconds}s"  # a unit: a bare number is ambiguous
    if spec.serving is not None and spec.serving.slo_seconds is not None:
        annotations[SLO_ANNOTATION] = f"{spec.serving.slo_seconds:g}"
    meta: dict[str, Any] = {"name": name, "namespace": tenant.ns, "labels": labels}
    if annotations:
        meta["annotations"] = annotations
    return meta


def workload_objects(spec: WorkloadSpec, name: str, tenant: Tenant, epoch: datetime) -> list[dict[str, Any]]:
    """The object(s) a user would ``kubectl apply`` for one workload instance."""
    meta = _metadata(spec, name, tenant, epoch)
    app = {"app": name}
    kind = spec.kind
    if kind is WorkloadKind.WORKLOAD:
        wl_spec: dict[str, Any] = {
            "active": True,
            "queueName": tenant.lq,
            "podSets": [{"name": "main", "count": spec.pods,
                         "template": _pod_template(spec, "main", "nvcr.io/nvidia/pytorch:25.01-py3", app)}],
        }
        if spec.priority:
            wl_spec["priority"] = spec.priority
            wl_spec["priorityClassRef"] = {
                "group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": _priority_class(spec.priority)
            }
        return [{"apiVersion": KUEUE_API, "kind": "Workload", "metadata": meta, "spec": wl_spec}]
    if kind is WorkloadKind.RAY_CLUSTER:
        head = {"metadata": {"labels": dict(app)},
                "spec": {"containers": [_container(spec, "ray-head", "rayproject/ray:2.41.0-gpu", 0)]}}
        worker = _pod_template(spec, "ray-worker", "rayproject/ray:2.41.0-gpu", app)
        return [{
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "metadata": meta,
            "spec": {
                "rayVersion": "2.41.0",
                "headGroupSpec": {"rayStartParams": {"dashboard-host": "0.0.0.0"}, "template": head},
                "workerGroupSpecs": [{
                    "groupName": "gpu-workers", "replicas": spec.pods, "minReplicas": 0,
                    "maxReplicas": spec.pods, "rayStartParams": {}, "template": worker,
                }],
            },
        }]
    if kind is WorkloadKind.INFERENCE_SERVICE:
        model = spec.serving.model_name if spec.serving else name
        meta.setdefault("annotations", {})["serving.kserve.io/deploymentMode"] = "Standard"
        return [{
            "apiVersion": "serving.kserve.io/v1beta1",
            "kind": "InferenceService",
            "metadata": meta,
            "spec": {"predictor": {
                "minReplicas": spec.pods,
                "maxReplicas": spec.pods,
                "model": {
                    "modelFormat": {"name": "huggingface"},
                    "args": [f"--model_name={model}", "--backend=vllm"],
                    "storageUri": f"hf://{model}",
                    "resources": _resources(spec, spec.gpus_per_pod),
                },
            }},
        }]
    if kind is WorkloadKind.NOTEBOOK:
        return [{
            "apiVersion": "kubeflow.org/v1",
            "kind": "Notebook",
            "metadata": meta,
            "spec": {"template": {"spec": {"containers": [
                _container(spec, name, "quay.io/modh/odh-pytorch-notebook:v3-2025a", spec.gpus_per_pod)
            ]}}},
        }]
    # Deployment / StatefulSet: pod-based integrations, the queue label is also on the pods.
    template = _pod_template(spec, "main", "vllm/vllm-openai:v0.12.0", {**app, QUEUE_LABEL: tenant.lq})
    body: dict[str, Any] = {"replicas": spec.pods, "selector": {"matchLabels": dict(app)}, "template": template}
    if kind is WorkloadKind.STATEFUL_SET:
        body["serviceName"] = name
    return [{"apiVersion": "apps/v1", "kind": kind.value, "metadata": meta, "spec": body}]
