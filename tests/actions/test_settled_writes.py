"""The writes a killed run left open, as the next run's headline and JSON name them: the way ``gpuaas reclaim`` and
``audit list`` name the same rows, a stop through a Workload by the owner it stopped (found up ``refers_to``: the
completion row the recovery appends carries no evidence of its own)."""

from __future__ import annotations

from gpuaas.actions import Settled, settled_writes
from gpuaas.models import Outcome
from gpuaas.store import AuditEntry


def _row(id: int, kind: str, name: str, outcome: str, refers_to: int | None = None,
         evidence: dict[str, object] | None = None, action: str = "reclaim") -> AuditEntry:
    return AuditEntry(id=id, flow="reclaim", action=action, kind=kind, namespace="team-a", name=name, mode="apply",
                      outcome=outcome, refers_to=refers_to, evidence=evidence or {})


def test_a_settled_stop_is_named_by_its_owner_and_an_object_without_one_by_itself() -> None:
    decision = _row(1, "Workload", "raycluster-ray-1b66a", "planned", evidence={"owner": "RayCluster ray"})
    intent = _row(2, "Workload", "raycluster-ray-1b66a", "planned", refers_to=1)
    landed = _row(5, "Workload", "raycluster-ray-1b66a", "applied", refers_to=2)
    plain = _row(6, "Deployment", "dep", "failed", refers_to=3)
    cluster_scoped = AuditEntry(id=7, flow="reclaim", action="restore", kind="Node", namespace=None, name="n1",
                                mode="apply", outcome="restored", refers_to=4, evidence={})
    stored = {r.id: r for r in (decision, intent)}
    assert settled_writes([landed, plain, cluster_scoped], stored.get) == [
        Settled("reclaim", Outcome.applied, 2, "RayCluster team-a/ray (Workload raycluster-ray-1b66a)"),
        Settled("reclaim", Outcome.failed, 3, "Deployment team-a/dep"),
        Settled("restore", Outcome.restored, 4, "Node n1"),
    ]
