"""The reclaim writer and undo under a flaky network, a busy colleague and crashes.

Against the embedded cluster through the official client, over real TCP:

* a stop PATCH that reached the server but whose response was lost (the connection reset by
  a relay, ``tests/lossy_proxy.py``) is settled by reading the object back: applied, never
  "failed" while the object is stopped, and undo restores it; when the read-back fails too,
  the intent stays open and the next run settles it;
* undo compares the fields it would restore with what the reclaim left, and a change made
  after the reclaim (a scale-up to 5, an unsuspend) is skipped, naming the field and its value;
* undo audits its intent before writing; a crash before its PATCH is reported by the next
  undo (which then restores), a crash after it is completed by the next run;
* a Workload target carries the uid and resourceVersion of the snapshot: one deleted and
  recreated under the same name, or edited since, is never touched.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuaas.actions import RECLAIMED_ANNOTATION, KubeWriter, recover_interrupted
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.errors import TransientError
from gpuaas.policy import Mode
from gpuaas.settings import GpuaasSettings, load_settings
from gpuaas.store import AuditEntry, Store
from tests.actions.reclaim_scenario import (
    crash_after_each_patch,
    decide,
    killed_reclaim,
    obj,
    run,
    undo,
    workload_decision,
    writes,
)
from tests.lossy_proxy import LossyProxy, lossy_proxy

pytestmark = [pytest.mark.integration]


def _through(proxy: LossyProxy, cluster: EmbeddedCluster, tmp_path: Path,
             monkeypatch: pytest.MonkeyPatch) -> GpuaasSettings:
    """The test's settings, with the Kubernetes API reached through ``proxy``."""
    monkeypatch.setenv("GPUAAS_KUBECONFIG", str(proxy.kubeconfig(cluster.kubeconfig, tmp_path / "proxied")))
    return load_settings()


def _patches(cluster: EmbeddedCluster) -> int:
    return sum(n for key, n in cluster.api.requests.items() if key.startswith("PATCH "))


def _annotations(o: dict[str, Any]) -> dict[str, str]:
    return dict(o["metadata"].get("annotations") or {})


def _restores(store: Store) -> list[AuditEntry]:
    return [r for r in store.audit(flow="reclaim") if r.action == "restore"]


def _reclaim(settings: GpuaasSettings, cluster: EmbeddedCluster, store: Store, kind: str, name: str) -> int:
    [result] = run(settings, cluster, store, decide(settings, cluster, store, Mode.apply, only={(kind, name)}))
    assert result.result == "applied", result.reason
    return int(result.audit_id)


def _events(cluster: EmbeddedCluster, name: str) -> dict[str, str]:
    """gpuaas's Events on the objects named ``name``: reason -> note."""
    return {e["reason"]: e["note"] for e in cluster.store.list("Event") if e["regarding"]["name"] == name}


def _crash(*_: Any, **__: Any) -> Any:
    raise RuntimeError("worker killed")


# --- 1a: a lost response -------------------------------------------------------------------------
def test_a_lost_patch_response_is_settled_by_reading_the_object_back(
        settings: GpuaasSettings, cluster: EmbeddedCluster, store: Store, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    original = obj(cluster, "Notebook", "nb")
    with lossy_proxy(cluster.api_url) as proxy:
        via_proxy = _through(proxy, cluster, tmp_path, monkeypatch)
        decisions = decide(via_proxy, cluster, store, Mode.apply, only={("Notebook", "nb")})
        patches = _patches(cluster)
        proxy.drop_response("PATCH")
        [result] = run(via_proxy, cluster, store, decisions)
        assert proxy.dropped and _patches(cluster) == patches + 1  # the PATCH reached the server
        live = obj(cluster, "Notebook", "nb")
        assert json.loads(_annotations(live)[RECLAIMED_ANNOTATION])["audit_id"] == result.audit_id
        assert result.result == "applied", result.reason
        assert "response was lost" in result.reason
        assert [r.outcome for r in store.audit(flow="reclaim")] == ["planned", "applied"]
        # its team reads the stop in kubectl describe as if the answer had come
        assert _events(cluster, "nb")["Reclaimed"].endswith(f"to restore it: gpuaas undo {result.audit_id}")

        proxy.drop_response("PATCH")  # the restore's answer is lost too
        [restored] = undo(via_proxy, store, [int(result.audit_id)])
        assert len(proxy.dropped) == 2
    assert restored.result == "restored" and "response was lost" in restored.message, restored.message
    assert _events(cluster, "nb")["Restored"].startswith(f"Restored by gpuaas: the undo of audit #{result.audit_id}")
    back = obj(cluster, "Notebook", "nb")
    assert _annotations(back) == _annotations(original) and back["spec"] == original["spec"]


def test_a_lost_response_and_a_failed_read_back_leave_the_intent_to_the_next_run(
        settings: GpuaasSettings, cluster: EmbeddedCluster, store: Store, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    with lossy_proxy(cluster.api_url) as proxy:
        via_proxy = _through(proxy, cluster, tmp_path, monkeypatch)
        decisions = decide(via_proxy, cluster, store, Mode.apply, only={("StatefulSet", "sts")})
        proxy.drop_response("PATCH", then_refuse=1)  # the read-back GET is reset too
        [result] = run(via_proxy, cluster, store, decisions)
        assert obj(cluster, "StatefulSet", "sts")["spec"]["replicas"] == 0
        assert result.result == "unknown" and "next run" in result.reason, result.reason
        # Never "failed" while the object is stopped: the intent stays open.
        assert [r.outcome for r in store.audit(flow="reclaim")] == ["planned"]
        with KubeWriter(via_proxy) as writer:
            [closed] = recover_interrupted(store, writer, flow_run_id="next", now=cluster.clock.now())
        assert (closed.outcome, closed.refers_to) == ("applied", result.audit_id)
        [restored] = undo(via_proxy, store, [int(result.audit_id)])
    assert restored.result == "restored", restored.message
    assert obj(cluster, "StatefulSet", "sts")["spec"]["replicas"] == 1


# --- 1b: undo never overwrites a later change ----------------------------------------------------
LATER_CHANGES = [
    # kind, name, the user's change after the reclaim, the field and value the skip names
    ("Deployment", "dep", {"spec": {"replicas": 5}}, "spec.replicas", "5"),
]


@pytest.mark.parametrize(("kind", "name", "change", "field", "value"), LATER_CHANGES,
                         ids=[c[1] for c in LATER_CHANGES])
def test_undo_skips_a_change_made_after_the_reclaim(settings: GpuaasSettings, cluster: EmbeddedCluster, store: Store,
                                                    kind: str, name: str, change: dict[str, Any], field: str,
                                                    value: str) -> None:
    audit_id = _reclaim(settings, cluster, store, kind, name)
    entry = store.get_audit(audit_id)
    assert entry is not None
    kind, name = entry.kind, entry.name  # the object written: a RayCluster's Workload
    cluster.store.patch(kind, "team-a", name, change)  # the team starts it again by hand; the annotation stays
    changed = obj(cluster, kind, name)
    assert RECLAIMED_ANNOTATION in _annotations(changed)
    count = writes(cluster)
    [result] = undo(settings, store, [audit_id])
    assert result.result == "skipped", result.message
    assert f"{field} is {value}" in result.message, result.message
    assert writes(cluster) == count
    assert obj(cluster, kind, name)["spec"] == changed["spec"]
    assert [(r.outcome, r.refers_to) for r in _restores(store)] == [("skipped", audit_id)]


# A team that starts its workload again by hand puts it back in its prior state and leaves the mark.
RESTARTS = [
    # kind, name, the team's own start (on the object reclaim wrote)
    ("RayCluster", "ray", {"spec": {"active": True}}),  # its Workload, reactivated
    ("Notebook", "nb", {"metadata": {"annotations": {"kubeflow-resource-stopped": None}}}),
]


@pytest.mark.parametrize(("kind", "name", "change"), RESTARTS, ids=[c[1] for c in RESTARTS])
def test_a_workload_its_team_started_again_is_judged_again_and_its_undo_removes_the_mark(
        settings: GpuaasSettings, cluster: EmbeddedCluster, store: Store, kind: str, name: str,
        change: dict[str, Any]) -> None:
    audit_id = _reclaim(settings, cluster, store, kind, name)
    entry = store.get_audit(audit_id)
    assert entry is not None
    written = (entry.kind, entry.name)
    cluster.store.patch(*written[:1], "team-a", written[1], change)
    assert RECLAIMED_ANNOTATION in _annotations(obj(cluster, *written))  # the stale mark stays behind

    # Running again, it is not "already reclaimed": the next window's decision may stop it again.
    from gpuaas.actions._patches import stopped_reason

    assert stopped_reason(written[0], obj(cluster, *written)) is None
    # The undo finds it back in its prior state: it restores nothing but the mark, and says so as restored.
    [result] = undo(settings, store, [audit_id])
    assert result.result == "restored", result.message
    assert RECLAIMED_ANNOTATION not in _annotations(obj(cluster, *written))
    assert [(r.outcome, r.refers_to) for r in _restores(store)][-1][0] == "restored"


# --- 1c: undo audits its intent; a crash either side of its PATCH --------------------------------
def test_an_undo_that_crashed_before_its_patch_is_reported_and_the_next_undo_restores(
        settings: GpuaasSettings, cluster: EmbeddedCluster, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    audit_id = _reclaim(settings, cluster, store, "InferenceService", "isvc")
    reclaim_intent = store.get_audit(audit_id)
    assert reclaim_intent is not None
    with monkeypatch.context() as m:
        m.setattr(KubeWriter, "patch", _crash)
        with pytest.raises(RuntimeError):
            undo(settings, store, [audit_id])
    [intent] = _restores(store)
    assert (intent.outcome, intent.refers_to, intent.after) == ("planned", audit_id, reclaim_intent.before)
    assert "serving.kserve.io/stop" in _annotations(obj(cluster, "InferenceService", "isvc"))

    [result] = undo(settings, store, [audit_id])
    assert result.result == "restored", result.message
    rows = _restores(store)
    assert [(r.outcome, r.refers_to) for r in rows] == [
        ("planned", audit_id), ("failed", intent.id), ("planned", audit_id), ("restored", rows[2].id)]
    assert "before the restore reached the object" in rows[1].reason
    assert not {"serving.kserve.io/stop", RECLAIMED_ANNOTATION} & set(_annotations(obj(cluster, "InferenceService",
                                                                                       "isvc")))


def test_an_undo_that_crashed_after_its_patch_is_completed_by_the_next_run(
        settings: GpuaasSettings, cluster: EmbeddedCluster, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    original = obj(cluster, "RayCluster", "eray")
    audit_id = _reclaim(settings, cluster, store, "RayCluster", "eray")
    with monkeypatch.context() as m:
        crash_after_each_patch(m)
        with pytest.raises(RuntimeError):
            undo(settings, store, [audit_id])
    [intent] = _restores(store)
    assert intent.outcome == "planned"
    assert obj(cluster, "RayCluster", "eray")["spec"] == original["spec"]

    with KubeWriter(settings) as writer:
        closed = recover_interrupted(store, writer, flow_run_id="next", now=cluster.clock.now())
    assert [(r.action, r.outcome, r.refers_to) for r in closed] == [("restore", "restored", intent.id)]
    count = writes(cluster)
    [again] = undo(settings, store, [audit_id])
    assert again.result == "no-op" and "already restored" in again.message and writes(cluster) == count


# --- 1d: uid and resourceVersion of a Workload target --------------------------------------------
def test_a_workload_deleted_and_recreated_with_the_same_name_is_never_touched(
        settings: GpuaasSettings, cluster: EmbeddedCluster, store: Store) -> None:
    decision = workload_decision(settings, cluster, "wl")
    seen = obj(cluster, "Workload", "wl")
    cluster.store.delete("Workload", "team-a", "wl")
    meta = {k: seen["metadata"][k] for k in ("name", "namespace", "labels", "annotations") if k in seen["metadata"]}
    cluster.store.create({"apiVersion": seen["apiVersion"], "kind": "Workload", "metadata": meta,
                          "spec": seen["spec"]})
    count = writes(cluster)
    [result] = run(settings, cluster, store, [decision])
    assert result.result == "skipped" and "uid" in result.reason, result.reason
    assert writes(cluster) == count
    again = obj(cluster, "Workload", "wl")
    assert again["spec"]["active"] is True and RECLAIMED_ANNOTATION not in _annotations(again)
    assert (decision.uid, decision.resource_version) == (seen["metadata"]["uid"], seen["metadata"]["resourceVersion"])

    # The same object, edited since the snapshot: a new resourceVersion, decided again next run.
    cluster.kueue.reconcile()  # Kueue admits the new Workload
    decision = workload_decision(settings, cluster, "wl")
    cluster.store.patch("Workload", "team-a", "wl", {"metadata": {"labels": {"edited": "by-someone"}}})
    [result] = run(settings, cluster, store, [decision])
    assert result.result == "skipped" and "changed since the snapshot" in result.reason, result.reason
    assert writes(cluster) == count


# --- 1e: an object that cannot be read during an undo --------------------------------------------
def test_an_undo_whose_read_fails_is_audited_failed_and_the_other_ids_are_still_undone(
        settings: GpuaasSettings, cluster: EmbeddedCluster, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    first = _reclaim(settings, cluster, store, "Deployment", "dep-b")
    second = _reclaim(settings, cluster, store, "StatefulSet", "sts-b")
    real_get = KubeWriter.get

    def flaky_get(self: KubeWriter, kind: str, namespace: str, name: str, **kw: Any) -> dict[str, Any]:
        if name == "dep-b":
            raise TransientError(f"reading {kind} {namespace}/{name}: 503 Service Unavailable")
        return real_get(self, kind, namespace, name, **kw)

    monkeypatch.setattr(KubeWriter, "get", flaky_get)
    # The read of the first fails: that undo fails (audited, the command exits 1), and the second is undone all the
    # same, and reported; not one exception for the whole batch after the second was restored.
    failed, restored = undo(settings, store, [first, second])
    assert (failed.audit_id, failed.result) == (first, "failed") and "503" in failed.message, failed.message
    row = store.get_audit(int(failed.restore_audit_id or 0))
    assert row is not None and (row.action, row.outcome, row.refers_to) == ("restore", "failed", first)
    assert (restored.audit_id, restored.result) == (second, "restored"), restored.message
    assert obj(cluster, "Deployment", "dep-b")["spec"]["replicas"] == 0
    assert obj(cluster, "StatefulSet", "sts-b")["spec"]["replicas"] == 1
    monkeypatch.setattr(KubeWriter, "get", real_get)
    [again] = undo(settings, store, [first])  # the failure blocks no later undo
    assert again.result == "restored", again.message


# --- 1f: an undo of a reclaim whose run was killed before its completion row ---------------------
def test_an_undo_of_a_reclaim_killed_after_its_patch_settles_the_reclaim_first(
        settings: GpuaasSettings, cluster: EmbeddedCluster, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    intent = killed_reclaim(settings, cluster, store, monkeypatch, "Notebook", "nb-b")
    # Undone before the next reclaim run's recovery: the stop is on the record as applied, then undone.
    [restored] = undo(settings, store, [int(intent.id or 0)])
    assert restored.result == "restored", restored.message
    with KubeWriter(settings) as writer:
        assert recover_interrupted(store, writer, flow_run_id="next", now=cluster.clock.now()) == []
    rows = store.audit(refers_to=[int(intent.id or 0)], limit=None)
    assert [(r.action, r.outcome) for r in rows] == [("reclaim", "applied"), ("restore", "planned")]


def test_an_undo_of_a_reclaim_killed_before_its_patch_is_a_no_op_and_the_reclaim_is_closed(
        settings: GpuaasSettings, cluster: EmbeddedCluster, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    intent = killed_reclaim(settings, cluster, store, monkeypatch, "InferenceService", "isvc-b", patch_landed=False)
    count = writes(cluster)
    [result] = undo(settings, store, [int(intent.id or 0)])
    # Not "changed by someone else": the reclaim never reached the object, and the audit log says so.
    assert result.result == "no-op" and "never reached" in result.message, result.message
    assert writes(cluster) == count
    rows = store.audit(refers_to=[int(intent.id or 0)], limit=None)
    assert [(r.action, r.outcome) for r in rows] == [("reclaim", "failed")]
