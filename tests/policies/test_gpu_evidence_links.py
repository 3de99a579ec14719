"""A reclaim's per-GPU evidence lists the GPUs of the pods its verdict judged: the snapshot's own links from
Workloads to pods (owner chain, a per-pod Workload's own pod), never pods that merely share a name prefix, and
the same once the snapshot went through its JSON. Records are built directly, as the collect reads them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from gpuaas.models import Owner, PodGpus, Snapshot, SourceStatus, Workload, WorkloadState
from gpuaas.operations.reclaim import propose, verdicts
from gpuaas.policies.reclaim import Decision, GpuEvidence, gpu_evidence
from gpuaas.policy import Mode, Policy
from gpuaas.snapshot import build_snapshot
from gpuaas.sources.kube import KubeState
from gpuaas.sources.prometheus import GPU_COLUMNS, PrometheusReading

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
NS = "team-a"


def _wl(name: str, owner_kind: str, owner: str, gpus: float, pod: str | None = None) -> Workload:
    return Workload(owner_kind, NS, name, f"uid-{name}", "lq-a", "cq-a", 0, None, WorkloadState.admitted, True, gpus,
                    "h100", NOW - timedelta(minutes=90), NOW - timedelta(minutes=90), owner_kind, owner, pod=pod)


def _pod(name: str, gpus: float, owner_kind: str, owner: str, root_kind: str, root: str) -> PodGpus:
    return PodGpus(NS, name, "n1", gpus, owner_kind, owner, root_kind, root)


def _owner(kind: str, name: str) -> Owner:
    return Owner(kind, NS, name, f"uid-{kind}-{name}", "7", 2.0, 1, False)


def _gpu(pod: str, gpu: str, activity: float) -> dict[str, object]:
    row: dict[str, object] = dict.fromkeys(GPU_COLUMNS, "")
    row.update(host="n1", gpu=gpu, uuid=f"GPU-{pod}-{gpu}", namespace=NS, pod=pod, window_minutes=30.0,
               activity_avg=activity, activity_max=activity, coverage=1.0, signal="x", longest_gap_s=15.0,
               age_s=15.0, fb_used_mib=1.0, power_w=1.0, temperature_c=1.0, xid=float("nan"))
    return row


@pytest.fixture
def snapshot() -> Snapshot:
    """A Deployment ``llm`` (one per-pod Workload a pod) next to a Deployment ``llm-large``, and a RayCluster
    ``rc`` stopped through its Workload (Kueue owns an admitted RayCluster's suspend)."""
    kube = KubeState(
        "v1beta2", (), (),
        (_wl("pod-llm-7c9-a", "Deployment", "llm", 1, pod="llm-7c9-a"),
         _wl("pod-llm-7c9-b", "Deployment", "llm", 1, pod="llm-7c9-b"),
         _wl("pod-llm-large-5f4-a", "Deployment", "llm-large", 2, pod="llm-large-5f4-a"),
         _wl("raycluster-rc-3f2a1", "RayCluster", "rc", 2)),
        (), (),
        (_owner("Deployment", "llm"), _owner("Deployment", "llm-large"), _owner("RayCluster", "rc")),
        (_pod("llm-7c9-a", 1, "ReplicaSet", "llm-7c9", "Deployment", "llm"),
         _pod("llm-7c9-b", 1, "ReplicaSet", "llm-7c9", "Deployment", "llm"),
         _pod("llm-large-5f4-a", 2, "ReplicaSet", "llm-large-5f4", "Deployment", "llm-large"),
         _pod("rc-head-x1", 1, "RayCluster", "rc", "RayCluster", "rc"),
         _pod("rc-worker-y2", 1, "RayCluster", "rc", "RayCluster", "rc")),
        (), 0,
    )
    gpus = pd.DataFrame([_gpu("llm-7c9-b", "1", 0.01), _gpu("llm-7c9-a", "0", 0.02),
                         _gpu("llm-large-5f4-a", "2", 0.03), _gpu("llm-large-5f4-a", "3", 0.04),
                         _gpu("rc-head-x1", "4", 0.0), _gpu("rc-worker-y2", "5", 0.01)])
    prom = PrometheusReading(gpus=gpus, kueue=pd.DataFrame(), serving=pd.DataFrame(
        columns=["namespace", "pod", "model_name", "window_minutes", "stat", "finished_reason", "le", "value"]))
    sources = {"kube": SourceStatus("kube", True, 0.1, 0.0), "prometheus": SourceStatus("prometheus", True, 0.2, 12.0)}
    return build_snapshot(NOW, [30], sources, kube=kube, prom=prom)


def _evidence(snapshot: Snapshot) -> dict[tuple[str, str], list[tuple[str, str]]]:
    policy = Policy()
    decisions: list[Decision] = propose(snapshot, verdicts(snapshot, policy), policy, Mode.dry_run)
    return {(d.kind, d.name): [(str(g["pod"]), str(g["gpu"])) for g in d.evidence["gpus"]] for d in decisions}


def test_a_deployment_is_shown_its_own_pods_gpus_not_those_of_a_deployment_named_like_it(snapshot: Snapshot) -> None:
    evidence = _evidence(snapshot)
    assert evidence[("Deployment", "llm")] == [("llm-7c9-a", "0"), ("llm-7c9-b", "1")]
    assert evidence[("Deployment", "llm-large")] == [("llm-large-5f4-a", "2"), ("llm-large-5f4-a", "3")]


def test_a_target_stopped_through_its_workload_is_shown_its_pods_gpus(snapshot: Snapshot) -> None:
    evidence = _evidence(snapshot)
    assert evidence[("Workload", "raycluster-rc-3f2a1")] == [("rc-head-x1", "4"), ("rc-worker-y2", "5")]


def test_a_snapshot_loaded_back_from_its_json_gives_the_same_evidence(snapshot: Snapshot) -> None:
    loaded = Snapshot.from_json(snapshot.to_json())
    assert _evidence(loaded) == _evidence(snapshot) == {
        ("Deployment", "llm"): [("llm-7c9-a", "0"), ("llm-7c9-b", "1")],
        ("Deployment", "llm-large"): [("llm-large-5f4-a", "2"), ("llm-large-5f4-a", "3")],
        ("Workload", "raycluster-rc-3f2a1"): [("rc-head-x1", "4"), ("rc-worker-y2", "5")],
    }


def test_the_gpu_rows_carry_their_figures_and_unknown_is_none(snapshot: Snapshot) -> None:
    gpus = snapshot.gpus.assign(coverage=[float("nan"), *snapshot.gpus["coverage"][1:]])
    found = GpuEvidence(gpus, snapshot.workloads).of(NS, ["pod-llm-7c9-b"], 30)
    assert found == [{"pod": "llm-7c9-b", "host": "n1", "gpu": "1", "uuid": "GPU-llm-7c9-b-1",
                      "activity_max": 0.01, "activity_avg": 0.01, "coverage": None}]
    assert GpuEvidence(gpus, snapshot.workloads).of(NS, ["pod-llm-7c9-b"], 60) == []
    assert GpuEvidence(gpus, snapshot.workloads).of("team-b", ["pod-llm-7c9-b"], 30) == []
    assert gpu_evidence(gpus, snapshot.workloads, NS, ["pod-llm-7c9-b"], 30) == found
    assert gpu_evidence(pd.DataFrame(), snapshot.workloads, NS, ["pod-llm-7c9-b"], 30) == []


def test_a_snapshot_without_the_links_lists_no_gpus_rather_than_guess_by_name(snapshot: Snapshot) -> None:
    evidence = GpuEvidence(snapshot.gpus, snapshot.workloads.drop(columns=["pod_names"]))
    assert evidence.of(NS, ["pod-llm-7c9-a", "pod-llm-7c9-b"], 30) == []
