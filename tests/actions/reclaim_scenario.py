"""The reclaim test fleet: one idle workload of every kind, plus the ones that must never be reclaimed.

24 GPUs at $3/GPU-hour, 90 minutes of history, ManualClock; default policy (window 30 m,
threshold 0.05, grace 30 m) except tenant ``team-g``, whose grace is 2 h.

=============  ================  ====  =====================================================
name           kind              GPUs  expected verdict
=============  ================  ====  =====================================================
ray            RayCluster        2     idle -> suspend, quota released
eray           RayCluster        1     idle, elastic -> workers to 0, reservation kept
isvc           InferenceService  1     idle (0 req/s) -> serving.kserve.io/stop
nb             Notebook          1     idle -> kubeflow-resource-stopped
dep            Deployment        2     idle (2 pods, 2 Workloads) -> replicas 0
sts            StatefulSet       1     idle -> replicas 0
wl             Workload          1     no pods, no telemetry: unknown (stopped only by hand)
chat           InferenceService  1     GPU at 0 but serving 5 req/s: busy
dark           StatefulSet       1     telemetry dropped: unknown
optout         Notebook          1     gpuaas.io/reclaim: "never": excluded
young          Notebook (team-g) 1     inside the 2 h grace period: excluded
*-b            copies of ray, isvc, nb, dep (1 pod), sts, for the race and crash tests
=============  ================  ====  =====================================================
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml

from gpuaas.actions import KubeWriter, already_decided, execute_decisions, undo_entries
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.policies.idle import find_idle
from gpuaas.policies.reclaim import Decision, finalize_decisions, plan_reclaim
from gpuaas.policy import Mode
from gpuaas.settings import GpuaasSettings
from gpuaas.snapshot import collect_snapshot
from gpuaas.store import Store
from tests.scenarios import embedded

HISTORY = timedelta(minutes=90)
IDLE = {"profile": "constant", "value": 0.0}
NO_TRAFFIC = {"model_name": "m", "requests_per_second": {"profile": "constant", "value": 0}}
SCENARIO = {
    "name": "reclaim",
    "flavors": [{"name": "h100"}],
    "pools": [{"name": "h100", "count": 3, "gpus_per_node": 8, "flavor": "h100", "gpu_hourly_price": 3.0}],
    "tenants": [
        {"name": "team-a", "cohort": "c", "quotas": [{"flavor": "h100", "gpus": 20}]},
        {"name": "team-g", "cohort": "c", "quotas": [{"flavor": "h100", "gpus": 2}]},
    ],
    "workloads": [
        {"name": "ray", "kind": "RayCluster", "tenant": "team-a", "gpus_per_pod": 2, "utilisation": IDLE},
        {"name": "eray", "kind": "RayCluster", "tenant": "team-a", "utilisation": IDLE,
         "annotations": {"kueue.x-k8s.io/elastic-job": "true"}},
        {"name": "isvc", "kind": "InferenceService", "tenant": "team-a", "utilisation": IDLE, "serving": NO_TRAFFIC},
        {"name": "nb", "kind": "Notebook", "tenant": "team-a", "utilisation": IDLE},
        {"name": "dep", "kind": "Deployment", "tenant": "team-a", "pods": 2, "utilisation": IDLE},
        {"name": "sts", "kind": "StatefulSet", "tenant": "team-a", "utilisation": IDLE},
        {"name": "wl", "kind": "Workload", "tenant": "team-a"},
        {"name": "chat", "kind": "InferenceService", "tenant": "team-a", "utilisation": IDLE,
         "serving": {"model_name": "m", "requests_per_second": {"profile": "constant", "value": 5}}},
        {"name": "dark", "kind": "StatefulSet", "tenant": "team-a", "utilisation": IDLE, "drop_telemetry": True},
        {"name": "optout", "kind": "Notebook", "tenant": "team-a", "utilisation": IDLE,
         "annotations": {"gpuaas.io/reclaim": "never"}},
        {"name": "young", "kind": "Notebook", "tenant": "team-g", "utilisation": IDLE},
        # Second copies for the tests of races and crashes (a restored workload restarts inside its grace period).
        {"name": "ray-b", "kind": "RayCluster", "tenant": "team-a", "utilisation": IDLE},
        {"name": "isvc-b", "kind": "InferenceService", "tenant": "team-a", "utilisation": IDLE, "serving": NO_TRAFFIC},
        {"name": "nb-b", "kind": "Notebook", "tenant": "team-a", "utilisation": IDLE},
        {"name": "dep-b", "kind": "Deployment", "tenant": "team-a", "utilisation": IDLE},
        {"name": "sts-b", "kind": "StatefulSet", "tenant": "team-a", "utilisation": IDLE},
    ],
}
IDLE_TARGETS = {("RayCluster", "ray"), ("RayCluster", "eray"), ("InferenceService", "isvc"), ("Notebook", "nb"),
                ("Deployment", "dep"), ("StatefulSet", "sts"), ("RayCluster", "ray-b"), ("InferenceService", "isvc-b"),
                ("Notebook", "nb-b"), ("Deployment", "dep-b"), ("StatefulSet", "sts-b")}
NEVER = {"chat", "dark", "optout", "young", "wl"}


def write_policy(path: Path, **reclaim: object) -> Path:
    policy = {"reclaim": reclaim, "tenants": [
        {"name": "team-a", "namespaces": ["team-a"]},
        {"name": "team-g", "namespaces": ["team-g"], "reclaim": {"grace_minutes": 120}},
    ]}
    path.write_text(yaml.safe_dump(policy))
    return path


def reclaim_cluster(data_dir: Path) -> EmbeddedCluster:
    return embedded(data_dir, SCENARIO, seed=5, history=HISTORY)


WRITE_VERBS = ("PATCH", "PUT", "POST", "DELETE")


def writes(cluster: EmbeddedCluster) -> int:
    """Requests that could have changed something, as counted by the API server."""
    return sum(n for key, n in cluster.api.requests.items() if key.split(" ", 1)[0] in WRITE_VERBS)


def decide(settings: GpuaasSettings, cluster: EmbeddedCluster, store: Store, mode: Mode,
           only: set[tuple[str, str]] | None = None) -> list[Decision]:
    snapshot = collect_snapshot(settings, cluster.clock.now())
    idle = find_idle(snapshot.workloads, settings.policy, snapshot.collected_at)
    decisions = [d for d in plan_reclaim(snapshot, idle, settings.policy, mode)
                 if only is None or d.stops in only]
    decided = already_decided(store, [d.idempotency_key for d in decisions])
    return finalize_decisions(decisions, decided, settings.policy.reclaim.max_actions_per_run)


def target_of(decision: dict[str, Any]) -> tuple[str, str]:
    """(kind, name) of what a flow's decision stops, from its ``subject`` (``RayCluster team-a/ray``)."""
    kind, _, ref = str(decision["subject"]).partition(" ")
    return kind, ref.partition("/")[2]


def run(settings: GpuaasSettings, cluster: EmbeddedCluster, store: Store, decisions: list[Decision],
        mode: Mode = Mode.apply) -> list[Any]:
    with KubeWriter(settings) as writer:
        return execute_decisions(decisions, store, writer, mode=mode, flow_run_id="test", now=cluster.clock.now())


def undo(settings: GpuaasSettings, store: Store, ids: list[int]) -> list[Any]:
    with KubeWriter(settings) as writer:
        return undo_entries(store, writer, ids, flow_run_id="test")


def obj(cluster: EmbeddedCluster, kind: str, name: str, namespace: str = "team-a") -> dict[str, Any]:
    return cluster.store.get(kind, namespace, name)


def conditions(wl: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (wl.get("status") or {}).get("conditions", [])}


def workloads_of(cluster: EmbeddedCluster, kind: str, name: str) -> list[dict[str, Any]]:
    cluster.kueue.reconcile()
    if kind == "Workload":
        return [obj(cluster, "Workload", name)]
    return cluster.kueue.workloads_for(kind, "team-a", name)


def reserved(cluster: EmbeddedCluster, kind: str, name: str) -> list[bool]:
    return [conditions(w).get("QuotaReserved") == "True" for w in workloads_of(cluster, kind, name)]


def workload_decision(settings: GpuaasSettings, cluster: EmbeddedCluster, name: str) -> Decision:
    """The real planner's decision for the bare Workload ``name``, taken as idle.

    A bare Workload runs no pods, so it never has telemetry and is never found idle; its
    verdict is set by hand and everything else (target, uid, resourceVersion, API version)
    comes from the snapshot through ``plan_reclaim``.
    """
    snapshot = collect_snapshot(settings, cluster.clock.now())
    idle = find_idle(snapshot.workloads, settings.policy, snapshot.collected_at)
    mine = idle["name"] == name
    idle.loc[mine, "verdict"] = "idle"
    idle.loc[mine, "idle_seconds"] = 1800.0
    return next(d for d in plan_reclaim(snapshot, idle, settings.policy, Mode.apply) if d.name == name)


def crash_after_each_patch(monkeypatch: Any) -> None:
    """Every patch lands, then the process 'dies': the write is done but nobody heard the answer."""
    real_patch = KubeWriter.patch

    def patch_then_crash(self: KubeWriter, *args: Any, **kwargs: Any) -> Any:
        real_patch(self, *args, **kwargs)
        raise RuntimeError("worker killed after the write")

    monkeypatch.setattr(KubeWriter, "patch", patch_then_crash)
