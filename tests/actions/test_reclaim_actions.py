"""Reclaim and undo against the embedded cluster, through the official client (real HTTP).

Covers: every kind stopped and restored exactly, with Kueue releasing the quota (suspend,
active=false, stop annotations, replicas 0) or keeping the reservation (elastic RayCluster
workers to 0); dry-run sends no write; the same window twice acts once; an object changed
since the snapshot is skipped; a 409 between GET and PATCH re-reads and re-decides, never
overwrites; a crash between the audit intent and the patch (before or after the patch
reached the API) is completed or reported by the next run, never acted on twice; undo twice
is a no-op. One cluster for the module; each test acts on its own objects or undoes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpuaas.actions import (
    RECLAIMED_ANNOTATION,
    KubeWriter,
    already_decided,
    recover_interrupted,
)
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.policies.reclaim import finalize_decisions
from gpuaas.policy import Mode
from gpuaas.settings import GpuaasSettings
from gpuaas.store import Store
from tests.actions.reclaim_scenario import (
    IDLE_TARGETS,
    NEVER,
    OPTED_OUT,
    decide,
    killed_reclaim,
    obj,
    reserved,
    run,
    undo,
    workload_decision,
    workloads_of,
    writes,
)

pytestmark = [pytest.mark.integration]


# --- dry-run ------------------------------------------------------------------------------------
def test_dry_run_audits_every_idle_target_and_writes_nothing(settings: GpuaasSettings, cluster: EmbeddedCluster,
                                                              store: Store) -> None:
    before = writes(cluster)
    results = run(settings, cluster, store, decide(settings, cluster, store, Mode.dry_run), Mode.dry_run)
    assert writes(cluster) == before
    assert {r.decision.stops for r in results} == IDLE_TARGETS | {OPTED_OUT}
    assert not NEVER & {r.decision.stops[1] for r in results}
    assert {r.decision.stops: (r.result, r.cause) for r in results if r.result != "planned"} == {
        OPTED_OUT: ("skipped", "opted-out")}  # idle, kept out by its opt-out: said, never planned
    rows = [r for r in store.audit(flow="reclaim") if r.outcome == "planned"]
    assert len(rows) == len(IDLE_TARGETS) and all(r.mode == "dry-run" and r.before for r in rows)
    ray = next(r for r in results if r.decision.stops == ("RayCluster", "ray"))
    assert (ray.decision.kind, ray.method, ray.frees) == ("Workload", "deactivate", "quota")
    assert ray.decision.evidence["window_minutes"] == 30 and ray.decision.evidence["activity_max"] == 0.0
    # Undo of a dry-run decision changes nothing.
    assert undo(settings, store, [int(ray.audit_id)])[0].result == "no-op"
    assert writes(cluster) == before


# --- every kind, stopped and restored -----------------------------------------------------------
KINDS = [
    # kind, name, stop check, quota kept after the stop
    ("RayCluster", "ray", lambda o: o["spec"]["suspend"] is True, False),  # its Workload deactivated, Kueue suspends
    ("RayCluster", "eray", lambda o: o["spec"]["workerGroupSpecs"][0]["replicas"] == 0, True),
    ("InferenceService", "isvc", lambda o: o["metadata"]["annotations"]["serving.kserve.io/stop"] == "true", False),
    ("Notebook", "nb", lambda o: "kubeflow-resource-stopped" in o["metadata"]["annotations"], False),
    ("Deployment", "dep", lambda o: o["spec"]["replicas"] == 0, False),
    ("StatefulSet", "sts", lambda o: o["spec"]["replicas"] == 0, False),
    ("Workload", "wl", lambda o: o["spec"]["active"] is False, False),
]


@pytest.mark.parametrize(("kind", "name", "stopped", "keeps_quota"), KINDS, ids=[k[1] for k in KINDS])
def test_each_kind_is_reclaimed_and_undone_exactly(settings: GpuaasSettings, cluster: EmbeddedCluster, store: Store,
                                                   kind: str, name: str, stopped: Any, keeps_quota: bool) -> None:
    original = obj(cluster, kind, name)
    assert all(reserved(cluster, kind, name))
    if kind == "Workload":  # no pods, so never found idle: taken as idle, planned by the real planner
        decisions = [workload_decision(settings, cluster, name)]
    else:
        decisions = decide(settings, cluster, store, Mode.apply, only={(kind, name)})
    [result] = run(settings, cluster, store, decisions)
    assert result.result == "applied", result.reason
    cluster.kueue.reconcile()  # Kueue's reaction: a deactivated Workload's RayCluster is suspended
    after = obj(cluster, kind, name)
    assert stopped(after)
    written = obj(cluster, result.decision.kind, result.decision.name)
    mark = json.loads(written["metadata"]["annotations"][RECLAIMED_ANNOTATION])
    assert mark["audit_id"] == result.audit_id
    assert result.frees == ("compute" if keeps_quota else "quota")
    held = reserved(cluster, kind, name)
    if keeps_quota:  # elastic: the Workload shrank in place and keeps its reservation
        assert held == [True]
        assert [p["count"] for p in workloads_of(cluster, kind, name)[0]["spec"]["podSets"]] == [1, 0]
    else:
        assert not any(held), f"{kind} {name} still holds quota"

    [restored] = undo(settings, store, [int(result.audit_id)])
    assert restored.result == "restored", restored.message
    cluster.kueue.reconcile()  # a reactivated Workload is admitted again and its RayCluster resumed
    back = obj(cluster, kind, name)
    unmarked = obj(cluster, result.decision.kind, result.decision.name)
    assert RECLAIMED_ANNOTATION not in (unmarked["metadata"].get("annotations") or {})
    assert back["spec"] == original["spec"]
    assert (back["metadata"].get("annotations") or {}) == (original["metadata"].get("annotations") or {})
    assert reserved(cluster, kind, name) and all(reserved(cluster, kind, name))
    rows = store.audit(refers_to=[int(result.audit_id)])
    assert [(r.action, r.outcome) for r in rows] == [("reclaim", "applied"), ("restore", "planned")]
    [done] = store.audit(refers_to=[int(rows[1].id or 0)])
    assert (done.action, done.outcome, done.id) == ("restore", "restored", restored.restore_audit_id)
    # Undo again: a no-op with a message, no write.
    count = writes(cluster)
    again = undo(settings, store, [int(result.audit_id)])[0]
    assert again.result == "no-op" and "already restored" in again.message and writes(cluster) == count


# --- idempotency, concurrency, crashes ------------------------------------------------------------
def test_the_same_window_twice_acts_once(settings: GpuaasSettings, cluster: EmbeddedCluster, store: Store) -> None:
    decisions = decide(settings, cluster, store, Mode.apply, only={("Notebook", "nb-b")})
    [first] = run(settings, cluster, store, decisions)
    assert first.result == "applied"
    count = writes(cluster)
    # The same snapshot's decisions again (the object looks idle and running in it): the audit key stops it.
    decided = already_decided(store, [d.idempotency_key for d in decisions])
    [second] = run(settings, cluster, store, finalize_decisions(decisions, decided, 10))
    assert second.result == "skipped" and f"audit #{first.audit_id}" in second.reason
    assert writes(cluster) == count
    undo(settings, store, [int(first.audit_id)])


def test_an_object_changed_since_the_snapshot_is_skipped(settings: GpuaasSettings, cluster: EmbeddedCluster,
                                                         store: Store) -> None:
    decisions = decide(settings, cluster, store, Mode.apply, only={("StatefulSet", "sts-b")})
    cluster.store.patch("StatefulSet", "team-a", "sts-b", {"metadata": {"labels": {"edited": "by-someone"}}})
    [result] = run(settings, cluster, store, decisions)
    assert result.result == "skipped" and "changed since the snapshot" in result.reason
    assert obj(cluster, "StatefulSet", "sts-b")["spec"]["replicas"] == 1


def test_a_409_rereads_and_redecides_never_overwrites(settings: GpuaasSettings, cluster: EmbeddedCluster,
                                                      store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    decisions = decide(settings, cluster, store, Mode.apply, only={("InferenceService", "isvc-b")})
    real_patch = KubeWriter.patch
    reads: list[str] = []
    real_get = KubeWriter.get

    def racing_patch(self: KubeWriter, kind: str, namespace: str, name: str, body: dict[str, Any],
                     **kwargs: Any) -> Any:
        # Someone else writes between our GET and our PATCH.
        cluster.store.patch(kind, namespace, name, {"metadata": {"labels": {"raced": "yes"}}})
        return real_patch(self, kind, namespace, name, body, **kwargs)

    def counting_get(self: KubeWriter, kind: str, namespace: str, name: str, **kwargs: Any) -> Any:
        reads.append(name)
        return real_get(self, kind, namespace, name, **kwargs)

    monkeypatch.setattr(KubeWriter, "patch", racing_patch)
    monkeypatch.setattr(KubeWriter, "get", counting_get)
    [result] = run(settings, cluster, store, decisions)
    assert result.result == "skipped" and "409 Conflict" in result.reason and "not overwritten" in result.reason
    assert reads == ["isvc-b", "isvc-b"]  # read, then re-read after the conflict
    live = obj(cluster, "InferenceService", "isvc-b")
    assert live["metadata"]["labels"]["raced"] == "yes"
    assert "serving.kserve.io/stop" not in live["metadata"].get("annotations", {})
    assert RECLAIMED_ANNOTATION not in live["metadata"].get("annotations", {})
    assert [r.outcome for r in store.audit(flow="reclaim")] == ["planned", "skipped"]


def test_a_crash_before_the_patch_is_reported_and_the_next_run_acts_once(
        settings: GpuaasSettings, cluster: EmbeddedCluster, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    decisions = decide(settings, cluster, store, Mode.apply, only={("Deployment", "dep-b")})

    def crash(*_: Any, **__: Any) -> Any:
        raise RuntimeError("worker killed")

    with monkeypatch.context() as m:
        m.setattr(KubeWriter, "patch", crash)
        with pytest.raises(RuntimeError):
            run(settings, cluster, store, decisions)
    [intent] = store.audit(flow="reclaim")
    assert intent.outcome == "planned" and intent.mode == "apply"
    assert obj(cluster, "Deployment", "dep-b")["spec"]["replicas"] == 1
    with KubeWriter(settings) as writer:
        [closed] = recover_interrupted(store, writer, flow_run_id="next", now=cluster.clock.now())
    assert (closed.outcome, closed.refers_to) == ("failed", intent.id) and "not changed" in closed.reason
    [result] = run(settings, cluster, store, decide(settings, cluster, store, Mode.apply, only={("Deployment", "dep-b")}))
    assert result.result == "applied"
    applied = [r for r in store.audit(flow="reclaim") if r.outcome == "applied"]
    assert len(applied) == 1
    undo(settings, store, [int(result.audit_id)])


def test_a_crash_after_the_patch_is_completed_by_the_next_run_never_doubled(
        settings: GpuaasSettings, cluster: EmbeddedCluster, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    intent = killed_reclaim(settings, cluster, store, monkeypatch, "RayCluster", "ray-b")
    assert [r.id for r in store.audit(flow="reclaim")] == [intent.id]
    with KubeWriter(settings) as writer:
        [closed] = recover_interrupted(store, writer, flow_run_id="next", now=cluster.clock.now())
    assert (closed.outcome, closed.refers_to) == ("applied", intent.id)
    count = writes(cluster)
    again = run(settings, cluster, store, decide(settings, cluster, store, Mode.apply, only={("RayCluster", "ray-b")}))
    assert [r.result for r in again] == ["skipped"] and writes(cluster) == count
    [restored] = undo(settings, store, [int(intent.id or 0)])
    assert restored.result == "restored"
    assert obj(cluster, "RayCluster", "ray-b")["spec"].get("suspend") in (None, False)
