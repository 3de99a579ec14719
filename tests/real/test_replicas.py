"""Reclaim by ``replicas: 0`` (Deployment, StatefulSet) against the real kube-apiserver with Kueue's webhooks on.

Scenario (``conftest.CONFORMANCE``): team-c (2 GPUs, no cohort) runs Deployment ``dep`` and StatefulSet ``sts``,
one 1-GPU replica each, with the queue label. Covers: Kueue's webhooks mark the pod templates and gate the pods
the Deployment and StatefulSet controllers make; Kueue admits the Deployment's pod through the pod's own Workload and the StatefulSet's
through the Workload it made for the set, and the pods run; the planner's decision for the idle object names
the Deployment or StatefulSet (not a Workload); reclaim writes ``replicas: 0`` at the resourceVersion read;
the pods and their Workloads go; a second apply does not act; the undo puts the replica count back and the
pods run again; Kueue's statefulset webhook refuses any other change of ``replicas``; a Workload Kueue leaves
without an owner after a scale to zero (a race of Kueue's, see ``left_behind``) holds quota, is named by the
reclaim verdicts, and makes the undo fail with Kueue's reason, which succeeds once that Workload is deleted.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuaas.cluster.real import KubeHTTP
from gpuaas.cluster.real._kubeapi import KubeHTTPError
from gpuaas.operations import reclaim as reclaim_operation
from gpuaas.operations.collect import read_snapshot
from gpuaas.settings import GpuaasSettings
from gpuaas.store import Store
from tests.actions.reclaim_scenario import run, undo
from tests.real.conftest import is_true, wait_until
from tests.real.test_conformance import _Now, decision

pytestmark = [pytest.mark.real]

C = "team-c"
SUSPENDING_PARENT = "kueue.x-k8s.io/pod-suspending-parent"
RECLAIMED = "gpuaas.io/reclaimed"
KINDS = [("Deployment", "dep"), ("StatefulSet", "sts")]


def _made_for(pod: dict[str, Any], kind: str, name: str) -> bool:
    """A Deployment's pods are owned by its ReplicaSet ``<name>-<pod-template-hash>``, a StatefulSet's by the set."""
    want = (("ReplicaSet", f"{name}-{pod['metadata'].get('labels', {}).get('pod-template-hash')}")
            if kind == "Deployment" else (kind, name))
    return any((r.get("kind"), r.get("name")) == want for r in pod["metadata"].get("ownerReferences") or [])


def pods_of(api: KubeHTTP, kind: str, name: str) -> list[dict[str, Any]]:
    return [p for p in api.list("Pod", C) if _made_for(p, kind, name)]


def workloads_of(api: KubeHTTP, kind: str, name: str, pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Workloads owned by the object or by one of its pods."""
    uids = {p["metadata"]["uid"] for p in pods}
    return [w for w in api.list("Workload", C) if any(r.get("uid") in uids or (r.get("kind"), r.get("name")) == (kind, name)
                                                       for r in w["metadata"].get("ownerReferences") or [])]


def runs(api: KubeHTTP, kind: str, name: str) -> bool:
    """One Running pod, no longer gated, and the Workload(s) admitting it hold quota."""
    pods = pods_of(api, kind, name)
    held = {w["metadata"]["uid"]: is_true(w, "QuotaReserved") for w in workloads_of(api, kind, name, pods)}
    return (len(pods) == 1 and (pods[0].get("status") or {}).get("phase") == "Running"
            and not pods[0]["spec"].get("schedulingGates") and len(held) == 1 and all(held.values()))


def left_behind(api: KubeHTTP, uids: set[str]) -> list[dict[str, Any]]:
    """Once the pods are gone: the Workloads of ``uids`` still there, which must be ownerless, waiting up to 60 s.

    A Workload goes by the garbage collector once its last owner is gone. On a scale to zero Kueue drops
    the StatefulSet as its owner and releases the pod (its other owner) in one reconcile, concurrently:
    when the pod is gone first, the collector keeps the Workload (its set is still an owner) and strips
    the dangling pod, then Kueue strips the set, and the Workload is left with no owner, still holding
    its quota, and blocking the set's scale back up. Anything else still owned after 60 s is a failure."""

    def still() -> list[dict[str, Any]]:
        return [w for w in api.list("Workload", C) if w["metadata"]["uid"] in uids]

    wait_until("the pods' Workloads go (or are left without an owner)",
               lambda: all(not w["metadata"].get("ownerReferences") for w in still()), timeout=60)
    return still()


@pytest.mark.parametrize(("kind", "name"), KINDS)
def test_kueue_gates_the_pods_and_admits_them(api: KubeHTTP, kind: str, name: str) -> None:
    template = api.get(kind, name, C)["spec"]["template"]["metadata"]
    assert template["annotations"][SUSPENDING_PARENT] == kind.lower()  # Kueue's deployment/statefulset webhook
    wait_until(f"{name}'s pod admitted by Kueue and Running", lambda: runs(api, kind, name), timeout=90)
    [wl] = workloads_of(api, kind, name, pods_of(api, kind, name))
    # Kueue's pod integration: a Deployment's pod is a Workload of its own; the set has one Workload.
    owners = {r["kind"] for r in wl["metadata"]["ownerReferences"]}
    assert owners == ({"Pod"} if kind == "Deployment" else {"StatefulSet", "Pod"}), owners


@pytest.mark.parametrize(("kind", "name"), KINDS)
def test_reclaim_scales_to_zero_and_undo_restores_the_replicas(
        settings: GpuaasSettings, store: Store, api: KubeHTTP, kind: str, name: str) -> None:
    wait_until(f"{name}'s pod admitted by Kueue and Running", lambda: runs(api, kind, name), timeout=90)
    before = {w["metadata"]["uid"] for w in workloads_of(api, kind, name, pods_of(api, kind, name))}
    live = api.get(kind, name, C)
    replicas = live["spec"]["replicas"]
    d = decision(settings, name)
    assert (d.kind, d.name) == (kind, name), d
    assert d.resource_version == live["metadata"]["resourceVersion"]
    [result] = run(settings, _Now(), store, [d])
    assert result.result == "applied", result.reason
    after = api.get(kind, name, C)
    assert after["spec"]["replicas"] == 0 and RECLAIMED in after["metadata"]["annotations"]
    assert after["metadata"]["generation"] == live["metadata"]["generation"] + 1
    wait_until("the pods go", lambda: not pods_of(api, kind, name), timeout=60)
    left = left_behind(api, before)
    if left:  # Kueue's race below: the documented step clears it before the undo
        api.delete("Workload", left[0]["metadata"]["name"], C)
        wait_until("the Workload left behind goes", lambda: not left_behind(api, before))
    [again] = run(settings, _Now(), store, [d])
    assert again.result != "applied"  # no double action
    # The controllers write the object's status meanwhile; gpuaas wrote neither its spec nor its annotations.
    unchanged = api.get(kind, name, C)["metadata"]
    assert unchanged["generation"] == after["metadata"]["generation"]
    assert unchanged["annotations"] == after["metadata"]["annotations"]
    [restored] = undo(settings, store, [int(result.audit_id)])
    assert restored.result == "restored", restored.message
    back = api.get(kind, name, C)
    assert back["spec"]["replicas"] == replicas and RECLAIMED not in (back["metadata"].get("annotations") or {})
    wait_until("a new pod admitted and Running after the undo", lambda: runs(api, kind, name), timeout=90)


def test_kueue_refuses_to_resize_a_running_statefulset(api: KubeHTTP) -> None:
    """Only ``N -> 0`` and ``0 -> N`` pass Kueue's statefulset webhook: a reclaim cannot shrink a set."""
    wait_until("sts's pod admitted by Kueue and Running", lambda: runs(api, "StatefulSet", "sts"), timeout=90)
    with pytest.raises(KubeHTTPError, match="field is immutable"):
        api.merge_patch("StatefulSet", "sts", {"spec": {"replicas": 2}}, C)


def test_a_workload_left_without_an_owner_blocks_the_undo_until_it_is_deleted(
        settings: GpuaasSettings, store: Store, api: KubeHTTP) -> None:
    """The state Kueue's race leaves (above), made by hand unless the race made it: after the scale to
    zero, an ownerless Workload under the set's Workload name. gpuaas's undo fails with Kueue's reason, names that Workload and the
    command that deletes it, and changes nothing; once the Workload is deleted, the undo restores the set
    and its pod runs again."""
    wait_until("sts's pod admitted by Kueue and Running", lambda: runs(api, "StatefulSet", "sts"), timeout=90)
    [wl] = workloads_of(api, "StatefulSet", "sts", pods_of(api, "StatefulSet", "sts"))
    [result] = run(settings, _Now(), store, [decision(settings, "sts")])
    assert result.result == "applied", result.reason
    wait_until("the pod goes", lambda: not pods_of(api, "StatefulSet", "sts"), timeout=60)
    meta = wl["metadata"]
    if not left_behind(api, {meta["uid"]}):  # where Kueue's race left it there already, that is the state
        api.create({"apiVersion": wl["apiVersion"], "kind": "Workload", "spec": wl["spec"],
                    "metadata": {"name": meta["name"], "namespace": C, "labels": meta.get("labels") or {},
                                 "annotations": meta.get("annotations") or {}}}, exist_ok=False)
    wait_until("Kueue reserves quota for the ownerless Workload", lambda: is_true(
        api.get("Workload", meta["name"], C), "QuotaReserved"))
    # The reclaim flow names it and the step that frees its quota, and never acts on it.
    idle = reclaim_operation.verdicts(read_snapshot(settings), settings.policy)
    [row] = idle[idle["name"] == meta["name"]].to_dict("records")
    assert row["verdict"] == "unknown" and row["reason"].startswith(
        f"Kueue left this Workload without an owner after StatefulSet {C}/sts scaled to zero"), row
    [refused] = undo(settings, store, [int(result.audit_id)])
    assert refused.result == "failed" and "previous scale-down" in refused.message, refused
    # The undo names the Workload and the step that clears it.
    assert (f"Kueue left the set's Workload {C}/{meta['name']} without an owner" in refused.message
            and f"kubectl delete workload -n {C} {meta['name']}" in refused.message), refused.message
    assert api.get("StatefulSet", "sts", C)["spec"]["replicas"] == 0
    api.delete("Workload", meta["name"], C)
    wait_until("the Workload left behind goes", lambda: not any(w["metadata"]["name"] == meta["name"]
                                                                  for w in api.list("Workload", C)))
    [restored] = undo(settings, store, [int(result.audit_id)])
    assert restored.result == "restored", restored.message
    wait_until("a new pod admitted and Running after the undo", lambda: runs(api, "StatefulSet", "sts"), timeout=90)
