"""What the tests expect of the reclaim fleet (``gpuaas.cluster.testbed``), and the helpers they share.

The fleet itself (its table of expected verdicts, its policy file) is shared with the benchmarks.
"""

from __future__ import annotations

from typing import Any

from gpuaas.actions import KubeWriter
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.operations import incident
from gpuaas.operations import reclaim as operation
from gpuaas.operations.collect import read_snapshot
from gpuaas.policies.reclaim import Decision
from gpuaas.policy import Mode
from gpuaas.settings import GpuaasSettings
from gpuaas.store import AuditEntry, Store

IDLE_TARGETS = {("RayCluster", "ray"), ("RayCluster", "eray"), ("InferenceService", "isvc"), ("Notebook", "nb"),
                ("Deployment", "dep"), ("StatefulSet", "sts"), ("RayCluster", "ray-b"), ("InferenceService", "isvc-b"),
                ("Notebook", "nb-b"), ("Deployment", "dep-b"), ("StatefulSet", "sts-b")}
OPTED_OUT = ("Notebook", "optout")
"""Idle, and opted out: a skipped decision (cause ``opted-out``) saying why it is never stopped."""
NEVER = {"chat", "dark", "young", "wl"}
"""No decision at all: busy, blind, inside the grace period, or no telemetry."""
WRITE_VERBS = ("PATCH", "PUT", "POST", "DELETE")


def writes(cluster: EmbeddedCluster) -> int:
    """Requests that could have changed something, as counted by the API server."""
    return sum(n for key, n in cluster.api.requests.items() if key.split(" ", 1)[0] in WRITE_VERBS)


def decide(settings: GpuaasSettings, cluster: EmbeddedCluster, store: Store, mode: Mode,
           only: set[tuple[str, str]] | None = None) -> list[Decision]:
    """The reclaim operation's decision on a fresh snapshot, as the flow makes it; ``only`` keeps those targets."""
    now = cluster.clock.now()
    snapshot = read_snapshot(settings, now)
    proposed = [d for d in operation.propose(snapshot, operation.verdicts(snapshot, settings.policy), settings.policy,
                                             mode) if only is None or d.stops in only]
    return operation.plan(proposed, operation.read_audit_view(store, proposed, now), settings.policy, mode,
                          now).decisions


def target_of(decision: dict[str, Any]) -> tuple[str, str]:
    """(kind, name) of what a flow's decision stops, from its ``subject`` (``RayCluster team-a/ray``)."""
    kind, _, ref = str(decision["subject"]).partition(" ")
    return kind, ref.partition("/")[2]


def run(settings: GpuaasSettings, cluster: EmbeddedCluster, store: Store, decisions: list[Decision],
        mode: Mode = Mode.apply) -> list[Any]:
    plan = operation.ReclaimPlan(mode, list(decisions), settings.policy.reclaim.max_actions_per_run)
    with KubeWriter(settings) as writer:
        return operation.apply(plan, store, writer, flow_run_id="test", now=cluster.clock.now())


def undo(settings: GpuaasSettings, store: Store, ids: list[int]) -> list[Any]:
    with KubeWriter(settings) as writer:
        return incident.undo(store, writer, ids, flow_run_id="test")


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
    comes from the snapshot through the reclaim operation.
    """
    snapshot = read_snapshot(settings, cluster.clock.now())
    idle = operation.verdicts(snapshot, settings.policy)
    mine = idle["name"] == name
    idle.loc[mine, "verdict"] = "idle"
    idle.loc[mine, "idle_seconds"] = 1800.0
    return next(d for d in operation.propose(snapshot, idle, settings.policy, Mode.apply) if d.name == name)


def killed_reclaim(settings: GpuaasSettings, cluster: EmbeddedCluster, store: Store, monkeypatch: Any, kind: str,
                   name: str, *, patch_landed: bool = True) -> AuditEntry:
    """The open intent row (no completion refers to it) of a reclaim of ``kind``/``name`` in apply mode whose process
    died after its patch landed (``patch_landed``) or before the patch was sent."""
    decisions = decide(settings, cluster, store, Mode.apply, only={(kind, name)})
    with monkeypatch.context() as m:
        if patch_landed:
            crash_after_each_patch(m)
        else:
            m.setattr(KubeWriter, "patch", _killed)
        try:
            run(settings, cluster, store, decisions)
        except RuntimeError:
            pass
        else:
            raise AssertionError("the reclaim run was not killed")
    rows = store.audit(flow="reclaim", limit=None)
    closed = {r.refers_to for r in rows}
    [intent] = [r for r in rows if r.action == "reclaim" and r.outcome == "planned" and r.id not in closed]
    return intent


def _killed(*_: Any, **__: Any) -> Any:
    raise RuntimeError("worker killed before the write")


def crash_after_each_patch(monkeypatch: Any) -> None:
    """Every patch lands, then the process 'dies': the write is done but nobody heard the answer."""
    real_patch = KubeWriter.patch

    def patch_then_crash(self: KubeWriter, *args: Any, **kwargs: Any) -> Any:
        real_patch(self, *args, **kwargs)
        raise RuntimeError("worker killed after the write")

    monkeypatch.setattr(KubeWriter, "patch", patch_then_crash)
