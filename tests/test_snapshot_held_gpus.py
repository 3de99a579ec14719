"""GPUs held against GPUs seen, end to end: upstream Kueue objects and dcgm-exporter series through a
real Prometheus into the snapshot, the idle verdicts and the tenant figures.

A Workload holds what Kueue admitted less the pods it freed (partial admission, ``reclaimablePods``),
and a MIG instance is one GPU seen: otherwise a workload asks for more GPUs than can ever be
observed, its telemetry is never complete and it is never judged, and its tenant looks bigger.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml

from gpuaas.cluster.prometheus import PrometheusServer
from gpuaas.fleet_history import tenant_aggregates
from gpuaas.models import SourceStatus
from gpuaas.policies.reclaim.idle import find_idle
from gpuaas.policy import Policy, Tenant
from gpuaas.settings import GpuaasSettings
from gpuaas.snapshot import build_snapshot
from gpuaas.sources._kube_kueue import parse_workload
from gpuaas.sources._kube_owners import parse_pods
from gpuaas.sources.kube import KubeState
from gpuaas.sources.prometheus import read_prometheus
from tests.sources.helpers import NOW, Sample, fixture_path, parse_exposition, series

Factory = Callable[[list[Sample]], PrometheusServer]
GPU = ("nvidia.com/gpu",)
H100 = ("telemetry", "dcgm", "metrics-h100x8-k8s-podmapped.aicr.prom")
ADMITTED = [{"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": "2026-03-10T10:00:00Z"}
            for t in ("QuotaReserved", "Admitted")]


def _workload(name: str, namespace: str, owner: tuple[str, str], gpus_per_pod: int, count: int,
              status: dict[str, Any] | None) -> dict[str, Any]:
    """Kueue's docs Workload (v1beta2, podSet ``main``) owned by ``owner``, asking ``gpus_per_pod`` each."""
    wl = yaml.safe_load(fixture_path("kueue", "docs-extracted", "workload-v1beta2-spec-sample.yaml").read_text())
    podset = wl["spec"]["podSets"][0]
    podset["count"] = count
    podset["template"]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = str(gpus_per_pod)
    wl["metadata"].update(name=name, namespace=namespace, uid=f"uid-{name}", creationTimestamp="2026-03-10T09:59:00Z",
                          ownerReferences=[{"kind": owner[0], "name": owner[1], "controller": True}])
    if status is not None:
        wl["status"] = {"conditions": ADMITTED, **status}
    return wl


def _assignment(count: int, gpus: int) -> dict[str, Any]:
    return {"name": "main", "count": count, "flavors": {"nvidia.com/gpu": "h100"},
            "resourceUsage": {"cpu": str(count), "nvidia.com/gpu": str(gpus)}}


def _pod(name: str, namespace: str, owner: tuple[str, str], gpus: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace,
                         "ownerReferences": [{"kind": owner[0], "name": owner[1], "controller": True}]},
            "spec": {"nodeName": "gpu-node-1",
                     "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]}}


def test_partly_admitted_reclaimed_and_mig_workloads_are_judged_on_what_they_hold(
        prometheus_factory: Factory) -> None:
    capture = parse_exposition(fixture_path(*H100))
    util = {labels["gpu"]: labels for n, labels, _v in capture if n == "DCGM_FI_DEV_GPU_UTIL"}
    mig_pod = util["0"]["pod"]  # the capture's vLLM pod on GPU 0, given two MIG instances of it
    done_job, partial_job = ("Job", "sample-job"), ("Job", "partial-job")
    objects = [
        # A batch Job with 2 of its 3 pods done: Kueue writes reclaimablePods main=2.
        _workload("sample-job", "team-a", done_job, 1, 3, {
            "admission": {"clusterQueue": "team-a-cq", "podSetAssignments": [_assignment(3, 3)]},
            "reclaimablePods": [{"name": "main", "count": 2}]}),
        # minCount 1: Kueue admitted 1 of 3 pods.
        _workload("partial-job", "team-a", partial_job, 1, 3, {
            "admission": {"clusterQueue": "team-a-cq", "podSetAssignments": [_assignment(1, 1)]}}),
        _workload("mig", util["0"]["namespace"], ("Pod", mig_pod), 2, 1, {
            "admission": {"clusterQueue": "team-a-cq", "podSetAssignments": [_assignment(1, 2)]}}),
        _workload("waiting", "team-a", ("Job", "waiting"), 1, 3, None),
    ]
    objects[1]["spec"]["podSets"][0]["minCount"] = 1
    workloads = tuple(parse_workload(o, GPU) for o in objects)
    pods = parse_pods([_pod("sample-job-abcde", "team-a", done_job, 1),
                       _pod("partial-job-fghij", "team-a", partial_job, 1),
                       _pod(mig_pod, util["0"]["namespace"], ("ReplicaSet", "vllm"), 2)], [], GPU)
    kube = KubeState("v1beta2", (), (), workloads, (), (), (), tuple(pods), (), 0)

    idle = [("DCGM_FI_DEV_GPU_UTIL", {**util[gpu], "pod": pod, "namespace": "team-a", "container": "c"}, 0.0)
            for gpu, pod in (("1", "sample-job-abcde"), ("2", "partial-job-fghij"))]
    mig = [("DCGM_FI_PROF_GR_ENGINE_ACTIVE", {**util["0"], "GPU_I_PROFILE": "3g.40gb", "GPU_I_ID": i}, 0.0)
           for i in ("1", "2")]
    server = prometheus_factory(series(idle + mig, minutes=40))
    reading = read_prometheus(GpuaasSettings(prometheus_url=server.url), NOW, [30])
    policy = Policy(tenants=[Tenant(name="research", namespaces=["team-a", util["0"]["namespace"]])])
    sources = {"kube": SourceStatus("kube", True), "prometheus": SourceStatus("prometheus", True)}
    snap = build_snapshot(NOW, [30], sources, kube=kube, prom=reading, policy=policy)

    wl = snap.workloads.set_index("name")
    assert wl["gpus"].to_dict() == {"sample-job": 1.0, "partial-job": 1.0, "mig": 2.0, "waiting": 3.0}
    assert wl.loc[["sample-job", "partial-job", "mig"], "gpus_observed"].tolist() == [1.0, 1.0, 2.0]
    assert set(wl.loc[["sample-job", "partial-job", "mig"], "telemetry"]) == {"complete"}
    verdicts = find_idle(snap.workloads, policy, NOW).set_index("name")["verdict"].to_dict()
    assert verdicts == {"sample-job": "idle", "partial-job": "idle", "mig": "idle"}
    (tenant,) = tenant_aggregates(snap, policy).to_dict("records")
    assert (tenant["allocated_gpus"], tenant["pending_gpus"], tenant["idle_gpus"]) == (4.0, 3.0, 4.0)
