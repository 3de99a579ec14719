"""gpuaas's writes against the real kube-apiserver and the real Kueue manager.

Scenario (``conftest.CONFORMANCE``): cohort ``c``; team-a 8 GPUs runs Job ``wl`` (2) and RayCluster
``ray`` (2); team-b 4 GPUs, borrowing 0, runs ``b-run`` (2) while ``b-big`` (8) and ``b-late`` (4)
wait. Covers: Kueue creates the Workloads from the jobs; collect reads the backlog Kueue reports;
reclaim of a Job's and of a RayCluster's Workload (``spec.active``): apply, second apply, undo,
with Kueue's reaction; the stop annotation of a Notebook and of an InferenceService, applied, applied again
and undone; a client's suspend of an admitted RayCluster set back by Kueue; a real 409; a quota plan applied and undone through the real
ClusterQueue validation and webhooks, with a pending Workload admitted and a lendingLimit lowered and put back; a quota lowered below usage;
a deadline hold and its release; a demotion and its release; a Job's deadline read for the Workload Kueue made;
reads through ``v1beta1``; a Job's reclaim opt-out read for the Workload Kueue made.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pandas as pd
import pytest

from gpuaas.actions import KubeWriter
from gpuaas.actions._quota_patches import QUOTA_ANNOTATION
from gpuaas.actions.deadline_holds import apply_nudges
from gpuaas.actions.quotas import apply_quota_plan, quota_moved_since
from gpuaas.cluster.real import KubeHTTP, RealCluster
from gpuaas.errors import Conflict
from gpuaas.operations import incident
from gpuaas.operations import reclaim as reclaim_operation
from gpuaas.operations.collect import read_snapshot
from gpuaas.policies.deadlines import Nudge
from gpuaas.policies.quotas import QueueDemand, QuotaLimits, plan_quotas
from gpuaas.policies.reclaim import Decision
from gpuaas.policy import Mode
from gpuaas.settings import GpuaasSettings
from gpuaas.store import Store
from tests.actions.reclaim_scenario import run, undo
from tests.real.conftest import condition, is_true, owned_workloads, wait_until, workload_of

pytestmark = [pytest.mark.real]

A, B = "team-a", "team-b"


def reserved(api: KubeHTTP, kind: str, name: str, ns: str = A) -> bool:
    return is_true(workload_of(api, kind, name, ns), "QuotaReserved")


def settled_pending(api: KubeHTTP, job: str) -> dict[str, Any]:
    """The Workload of Job ``job`` of team-b once Kueue has marked it pending (QuotaReserved False): a write
    before that races Kueue's own status update and meets a 409."""
    wl = workload_of(api, "Job", job, B)
    name = wl["metadata"]["name"]
    wait_until(f"Kueue marks {name} pending", lambda: condition(api.get("Workload", name, B), "QuotaReserved")
               .get("status") == "False")
    return api.get("Workload", name, B)


def decision(settings: GpuaasSettings, name: str) -> Decision:
    """The reclaim operation's decision for the workload of ``name`` taken as idle (its pods' series are busy
    and minutes old: too short a history to be idle on its own)."""
    snapshot = read_snapshot(settings)
    idle = reclaim_operation.verdicts(snapshot, settings.policy)
    mine = (idle["name"] == name) | (idle["owner_name"] == name)
    idle.loc[mine, "verdict"] = "idle"
    idle.loc[mine, "idle_seconds"] = 1800.0
    found = [d for d in reclaim_operation.propose(snapshot, idle, settings.policy, Mode.apply)
             if name in (d.name, d.stops[1])]
    assert found, f"no decision for {name}"
    return found[0]


def events_on(api: KubeHTTP, obj: dict[str, Any]) -> dict[str, str]:
    """The notes of gpuaas's Events on ``obj`` by reason, as the real API server stored them."""
    meta = obj["metadata"]
    found = [e for e in api.list("Event", meta.get("namespace") or "default")
             if e["regarding"].get("uid") == meta["uid"] and e["reportingController"] == "gpuaas.io/gpuaas"]
    assert all(e["regarding"]["kind"] == obj["kind"] and e["type"] == "Normal" for e in found), found
    return {e["reason"]: e["note"] for e in found}


def test_kueue_creates_and_admits_the_workloads(api: KubeHTTP) -> None:
    wait_until("wl, ray and b-run admitted", lambda: reserved(api, "Job", "wl") and reserved(api, "RayCluster", "ray")
               and reserved(api, "Job", "b-run", B))
    wait_until("b-big pending", lambda: (workload_of(api, "Job", "b-big", B).get("status") or {}).get("conditions") is not None)
    assert not reserved(api, "Job", "b-big", B) and not reserved(api, "Job", "b-late", B)
    # Kueue reserves the quota first and starts the job in a later reconcile of the job.
    wait_until("Kueue starts the job it admitted", lambda: api.get("Job", "wl", A)["spec"]["suspend"] is False)
    assert api.get("Job", "b-big", B)["spec"]["suspend"] is True


def test_collect_reads_the_backlog_kueue_reports(settings: GpuaasSettings, api: KubeHTTP) -> None:
    wait_until("b-big pending", lambda: not reserved(api, "Job", "b-big", B))
    # Kueue writes the queues' pending counts on its own schedule, after the Workloads' conditions.
    wait_until("Kueue reports 2 pending on team-b's queues",
               lambda: api.get("ClusterQueue", _cq(api, B)).get("status", {}).get("pendingWorkloads") == 2
               and api.get("LocalQueue", _lq(api, B), B).get("status", {}).get("pendingWorkloads") == 2, timeout=90)
    snapshot = read_snapshot(settings)
    assert snapshot.sources["kube"].ok, snapshot.sources["kube"]
    queues = snapshot.queues.set_index("name")
    lq_pending = api.get("LocalQueue", _lq(api, B), B)["status"]["pendingWorkloads"]
    cq_status = api.get("ClusterQueue", _cq(api, B))["status"]
    assert cq_status["pendingWorkloads"] == lq_pending == 2
    assert int(queues.loc[_cq(api, B), "pending_workloads"]) == cq_status["pendingWorkloads"]
    # Kueue's own metric, scraped by the real Prometheus from the manager's HTTPS /metrics with the token.
    query = f'sum(kueue_pending_workloads{{cluster_queue="{_cq(api, B)}"}})'

    def metric() -> float | None:
        data = httpx.get(f"{settings.prometheus_url}/api/v1/query", params={"query": query}, timeout=5).json()
        result = data["data"]["result"]
        return float(result[0]["value"][1]) if result else None

    # Kueue updates the gauge on its own schedule: a first scrape may still read 0, the next ones must say 2.
    wait_until("Prometheus scrapes kueue_pending_workloads at 2", lambda: metric() == 2, timeout=90)
    assert metric() == 2


def test_a_jobs_deadline_reaches_the_snapshot_through_the_workload_kueue_made(settings: GpuaasSettings,
                                                                              api: KubeHTTP) -> None:
    """Annotated on the batch Job ``b-run``, as a team submits it: Kueue copies no annotation onto the Workload it
    made, and the snapshot still plans that Workload with the Job's deadline and run time. The JobSet and Kubeflow
    lists answer 404 here (no such CRD installed) and are skipped: the source stays ok."""
    wait_until("b-run admitted", lambda: reserved(api, "Job", "b-run", B))
    due = {"gpuaas.io/deadline": "2030-01-01T00:00:00Z", "gpuaas.io/expected-runtime": "2h"}
    api.merge_patch("Job", "b-run", {"metadata": {"annotations": due}}, B)
    try:
        wl = workload_of(api, "Job", "b-run", B)
        assert not set(due) & set(wl["metadata"].get("annotations") or {})
        snapshot = read_snapshot(settings)
        assert snapshot.sources["kube"].ok, snapshot.sources["kube"]
        row = snapshot.workloads.set_index("name").loc[wl["metadata"]["name"]]
        assert (row["owner_kind"], row["kind"]) == ("Job", "Workload")
        assert row["deadline_at"] == pd.Timestamp("2030-01-01T00:00:00Z") and row["runtime_seconds"] == 7200
    finally:
        api.merge_patch("Job", "b-run", {"metadata": {"annotations": dict.fromkeys(due)}}, B)


def test_a_jobs_opt_out_keeps_the_workload_kueue_made_out_of_reclaim(settings: GpuaasSettings, api: KubeHTTP) -> None:
    """``gpuaas.io/reclaim: "Never"`` on the batch Job ``wl``, as a team writes it: the Workload Kueue made carries
    no annotation of the Job's, and the reclaim verdict still excludes it as opted out; the opt-out removed, the
    Workload is judged on its telemetry again."""
    wait_until("wl admitted", lambda: reserved(api, "Job", "wl"))
    name = workload_of(api, "Job", "wl", A)["metadata"]["name"]

    def verdict() -> tuple[str, str]:
        snapshot = read_snapshot(settings)
        assert snapshot.sources["kube"].ok, snapshot.sources["kube"]
        row = reclaim_operation.verdicts(snapshot, settings.policy).set_index("name").loc[name]
        return str(row["verdict"]), str(row["reason"])

    api.merge_patch("Job", "wl", {"metadata": {"annotations": {"gpuaas.io/reclaim": "Never"}}}, A)
    try:
        assert "gpuaas.io/reclaim" not in (workload_of(api, "Job", "wl", A)["metadata"].get("annotations") or {})
        assert verdict() == ("excluded", 'opted out (gpuaas.io/reclaim: "never")')
    finally:
        api.merge_patch("Job", "wl", {"metadata": {"annotations": {"gpuaas.io/reclaim": None}}}, A)
    assert "opted out" not in verdict()[1]


def _lq(api: KubeHTTP, ns: str) -> str:
    return str(api.list("LocalQueue", ns)[0]["metadata"]["name"])


def _cq(api: KubeHTTP, ns: str) -> str:
    return str(api.list("LocalQueue", ns)[0]["spec"]["clusterQueue"])


def test_reclaim_of_a_jobs_workload_is_an_eviction_and_its_undo_a_readmission(
        settings: GpuaasSettings, store: Store, api: KubeHTTP) -> None:
    wait_until("wl admitted", lambda: reserved(api, "Job", "wl"))
    d = decision(settings, workload_of(api, "Job", "wl", A)["metadata"]["name"])
    assert d.kind == "Workload", d
    [result] = run(settings, _Now(), store, [d])
    assert result.result == "applied", result.reason
    wl = workload_of(api, "Job", "wl", A)
    assert wl["spec"]["active"] is False
    wait_until("Kueue evicts the deactivated Workload and releases its quota",
               lambda: not reserved(api, "Job", "wl") and api.get("Job", "wl", A)["spec"]["suspend"] is True)
    evicted = [c for c in workload_of(api, "Job", "wl", A)["status"]["conditions"] if c["type"] == "Evicted"]
    assert evicted and evicted[0]["reason"] == "Deactivated"
    [again] = run(settings, _Now(), store, [d])
    assert again.result != "applied"  # no double action
    [restored] = undo(settings, store, [int(result.audit_id)])
    assert restored.result == "restored", restored.message
    wait_until("re-admitted after the undo", lambda: reserved(api, "Job", "wl"))
    # kubectl describe shows the team what happened and how to undo it.
    events = events_on(api, workload_of(api, "Job", "wl", A))
    assert set(events) == {"Reclaimed", "Restored"}, events
    assert events["Reclaimed"].startswith("Stopped by gpuaas: ")
    assert events["Reclaimed"].endswith(f"Audit #{result.audit_id}; to restore it: gpuaas undo {result.audit_id}")
    assert f"the undo of audit #{result.audit_id}" in events["Restored"]
    # and `kubectl describe job wl`, what the team runs, shows the same, naming the Workload gpuaas wrote
    name = workload_of(api, "Job", "wl", A)["metadata"]["name"]
    on_job = events_on(api, api.get("Job", "wl", A))
    assert set(on_job) == {"Reclaimed", "Restored"}, on_job
    assert on_job["Reclaimed"].startswith(f"Through its Kueue Workload {name}: Stopped by gpuaas: ")


def test_a_clients_suspend_of_an_admitted_raycluster_is_set_back_by_kueue(api: KubeHTTP) -> None:
    """Kueue owns an admitted RayCluster's ``spec.suspend``: a client's suspend is set back to false
    and the Workload keeps its quota. Why a reclaim deactivates the Workload instead (next test)."""
    wait_until("ray admitted", lambda: reserved(api, "RayCluster", "ray"))
    api.merge_patch("RayCluster", "ray", {"spec": {"suspend": True}}, A)
    wait_until("Kueue sets spec.suspend back to false",
               lambda: api.get("RayCluster", "ray", A)["spec"]["suspend"] is False)
    assert reserved(api, "RayCluster", "ray")  # the quota was never released


def test_reclaim_of_an_admitted_raycluster_deactivates_its_workload_and_kueue_suspends_it(
        settings: GpuaasSettings, store: Store, api: KubeHTTP) -> None:
    wait_until("ray admitted", lambda: reserved(api, "RayCluster", "ray"))
    workload = workload_of(api, "RayCluster", "ray", A)["metadata"]["name"]
    d = decision(settings, "ray")
    assert (d.kind, d.name, d.evidence.get("owner")) == ("Workload", workload, "RayCluster ray"), d
    [result] = run(settings, _Now(), store, [d])
    assert result.result == "applied", result.reason
    wait_until("Kueue evicts the Workload, releases its quota and suspends the RayCluster",
               lambda: not reserved(api, "RayCluster", "ray") and api.get("RayCluster", "ray", A)["spec"]["suspend"])
    [again] = run(settings, _Now(), store, [d])
    assert again.result != "applied"  # no double action
    [restored] = undo(settings, store, [int(result.audit_id)])
    assert restored.result == "restored", restored.message
    wait_until("re-admitted and resumed after the undo", lambda: reserved(api, "RayCluster", "ray")
               and api.get("RayCluster", "ray", A)["spec"]["suspend"] is False)


@pytest.mark.parametrize(("kind", "name", "annotation", "stopped"), [
    ("Notebook", "nb", "kubeflow-resource-stopped", None),
    ("InferenceService", "isvc", "serving.kserve.io/stop", "true"),
])
def test_reclaim_of_a_notebook_or_an_inference_service_is_its_stop_annotation_and_undo_removes_it(
        settings: GpuaasSettings, store: Store, api: KubeHTTP, kind: str, name: str, annotation: str,
        stopped: str | None) -> None:
    """The real API server (open-schema CRDs: no controller runs for them) takes the stop annotation
    at the object's resourceVersion; the second apply finds it stopped; the undo removes it.

    No pod runs for these kinds on this backend, so there is no telemetry and no snapshot row to plan from: the
    decision is the one the planner makes for an idle object, built from the live object."""
    live = api.get(kind, name, A)["metadata"]
    d = Decision(kind=kind, namespace=A, name=name, uid=live["uid"], tenant=A, gpus=1.0, idle_seconds=1800.0,
                 free="quota", outcome="planned", reason="idle (conformance)",
                 resource_version=live["resourceVersion"], idempotency_key=f"conformance-{kind}-{name}",
                 mode=Mode.apply.value)
    [result] = run(settings, _Now(), store, [d])
    assert result.result == "applied", result.reason
    value = (api.get(kind, name, A)["metadata"].get("annotations") or {}).get(annotation)
    assert value is not None and (stopped is None or value == stopped), value
    [again] = run(settings, _Now(), store, [d])
    assert again.result != "applied"  # no double action
    [restored] = undo(settings, store, [int(result.audit_id)])
    assert restored.result == "restored", restored.message
    assert annotation not in (api.get(kind, name, A)["metadata"].get("annotations") or {})


def test_an_elastic_rayclusters_workers_go_to_zero_and_kueue_readmits_it_at_its_smaller_size(
        settings: GpuaasSettings, store: Store, api: KubeHTTP) -> None:
    """Freeing compute from an admitted elastic RayCluster sets its workers to 0. On Kueue v0.17 with
    its default feature gates (``ElasticJobsViaWorkloadSlices`` is alpha, off) the shrink is not made in
    place: Kueue suspends the RayCluster, replaces its Workload by one of the smaller size, admits
    that and resumes the cluster (a restart of the Ray head with a real operator). The undo puts the
    workers back the same way."""
    wait_until("eray admitted", lambda: reserved(api, "RayCluster", "eray"), timeout=60)
    live = api.get("RayCluster", "eray", A)
    [first] = owned_workloads(api, "RayCluster", "eray", A)
    before = [(g["groupName"], g.get("replicas")) for g in live["spec"]["workerGroupSpecs"]]
    assert any(r for _, r in before), before
    d = Decision(kind="RayCluster", namespace=A, name="eray", uid=live["metadata"]["uid"], tenant=A, gpus=1.0,
                 idle_seconds=1800.0, free="compute", outcome="planned", reason="idle (conformance)",
                 resource_version=live["metadata"]["resourceVersion"], idempotency_key="conformance-eray",
                 mode=Mode.apply.value)
    [result] = run(settings, _Now(), store, [d])
    assert result.result == "applied", result.reason
    assert [g.get("replicas") for g in api.get("RayCluster", "eray", A)["spec"]["workerGroupSpecs"]] == [0] * len(before)

    def readmitted(workers: int) -> bool:
        found = owned_workloads(api, "RayCluster", "eray", A)
        return (len(found) == 1 and found[0]["metadata"]["uid"] != first["metadata"]["uid"]
                and [ps.get("count") for ps in found[0]["spec"]["podSets"]][1:] == [workers] * len(before)
                and is_true(found[0], "QuotaReserved") and api.get("RayCluster", "eray", A)["spec"]["suspend"] is False)

    wait_until("Kueue replaces the Workload by one without workers, admits it and resumes the RayCluster",
               lambda: readmitted(0), timeout=60)
    [again] = run(settings, _Now(), store, [d])
    assert again.result != "applied"  # no double action
    [restored] = undo(settings, store, [int(result.audit_id)])
    assert restored.result == "restored", restored.message
    back = api.get("RayCluster", "eray", A)
    assert [(g["groupName"], g.get("replicas")) for g in back["spec"]["workerGroupSpecs"]] == before
    wait_until("the undo's full-size Workload admitted", lambda: any(
        [ps.get("count") for ps in w["spec"]["podSets"]][1:] == [r for _, r in before] and is_true(w, "QuotaReserved")
        for w in owned_workloads(api, "RayCluster", "eray", A)), timeout=60)


def test_a_stale_resource_version_gets_a_real_409(settings: GpuaasSettings, api: KubeHTTP) -> None:
    with KubeWriter(settings) as writer:
        nb = writer.get("Notebook", A, "nb")
        stale = nb["metadata"]["resourceVersion"]
        writer.patch("Notebook", A, "nb", {"metadata": {"resourceVersion": stale, "labels": {"touched": "1"}}})
        with pytest.raises(Conflict):
            writer.patch("Notebook", A, "nb", {"metadata": {"resourceVersion": stale, "labels": {"touched": "2"}}})


def nudge_now(api: KubeHTTP, action: str, name: str) -> Nudge:
    """A hold or demotion planned on team-b's Workload ``name`` as it is now: the action refuses any other."""
    meta = api.get("Workload", name, B)["metadata"]
    return Nudge(action, B, name, "deadline test", uid=meta["uid"], resource_version=meta["resourceVersion"])


def test_a_deadline_hold_deactivates_a_pending_workload_and_its_release_requeues_it(
        store: Store, settings: GpuaasSettings, api: KubeHTTP) -> None:
    wl = settled_pending(api, "b-late")
    name = wl["metadata"]["name"]
    with KubeWriter(settings) as writer:
        [held] = apply_nudges([nudge_now(api, "hold", name)], store, writer, mode=Mode.apply, flow_run_id=None)
        assert held.result == "applied", held
        assert api.get("Workload", name, B)["spec"]["active"] is False
        wait_until("Kueue marks the held Workload deactivated",
                   lambda: is_true(api.get("Workload", name, B), "Evicted"))
        [released] = apply_nudges([Nudge("release", B, name, "deadline test")], store, writer, mode=Mode.apply,
                                  flow_run_id=None)
        assert released.result in ("applied", "released"), released
    after = api.get("Workload", name, B)
    assert after["spec"]["active"] is True
    assert "gpuaas.io/deadline-hold" not in (after["metadata"].get("annotations") or {})
    events = events_on(api, after)
    assert events["HeldForDeadline"].startswith("Held by gpuaas until its release: deadline test. ")
    assert events["Released"].startswith("Released by gpuaas: deadline test")


def test_a_deadline_demotion_lowers_a_pending_workloads_priority_and_its_release_restores_it(
        store: Store, settings: GpuaasSettings, api: KubeHTTP) -> None:
    wl = settled_pending(api, "b-late")
    name = wl["metadata"]["name"]
    prior = int(wl["spec"].get("priority") or 0)
    with KubeWriter(settings) as writer:
        [demoted] = apply_nudges([nudge_now(api, "demote", name)], store, writer, mode=Mode.apply,
                                 flow_run_id=None)
        assert demoted.result == "applied", demoted
        now = api.get("Workload", name, B)
        assert now["spec"]["priority"] == prior - 1 and now["spec"].get("active", True) is True
        assert not is_true(now, "QuotaReserved")  # still queued, one priority lower
        [row] = [r for r in store.audit(limit=None) if r.id == demoted.audit_id]
        assert row.action == "deadline-demote" and row.before == {"priority": prior}
        [released] = apply_nudges([Nudge("release", B, name, "deadline test")], store, writer, mode=Mode.apply,
                                  flow_run_id=None)
        assert released.result == "released", released
    after = api.get("Workload", name, B)
    assert after["spec"]["priority"] == prior
    assert "gpuaas.io/deadline-hold" not in (after["metadata"].get("annotations") or {})


LIMITS = QuotaLimits(max_step_gpus=8, max_step_percent=100, max_total_moved_gpus=8, hysteresis_gpus=1)


def gpu_entry(api: KubeHTTP, cq: str) -> dict[str, str]:
    """The queue's one GPU entry without its name, quantities as strings (as the API may store either)."""
    res = api.get("ClusterQueue", cq)["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    return {k: str(v) for k, v in res.items() if k != "name"}


def set_gpu_entry(api: KubeHTTP, cq: str, fields: dict[str, Any]) -> None:
    groups = api.get("ClusterQueue", cq)["spec"]["resourceGroups"]
    name = groups[0]["flavors"][0]["resources"][0]["name"]
    groups[0]["flavors"][0]["resources"][0] = {"name": name, **fields}
    api.merge_patch("ClusterQueue", cq, {"spec": {"resourceGroups": groups}})


def plan_mark(api: KubeHTTP, cq: str) -> str | None:
    return (api.get("ClusterQueue", cq)["metadata"].get("annotations") or {}).get(QUOTA_ANNOTATION)


def test_a_quota_plan_passes_kueues_validation_admits_and_is_undone(store: Store, settings: GpuaasSettings,
                                                                     api: KubeHTTP) -> None:
    """Limits included: team-a lends all its 8 GPUs (``lendingLimit: 8``, as good as none, there to be seen
    moving), so the plan's 8 -> 4 must lower it to 4 in the same patch or Kueue's webhook refuses the patch, and
    the undo must put 8 back with the quota; team-b carries an earlier plan's mark, which the undo puts back."""
    qa, qb = _cq(api, A), _cq(api, B)
    wait_until("b-big pending", lambda: not reserved(api, "Job", "b-big", B))
    scenario_a, earlier = gpu_entry(api, qa), '{"before": {"h100": 2}, "plan_id": 1}'
    try:
        set_gpu_entry(api, qa, {"nominalQuota": 8, "lendingLimit": 8})
        api.merge_patch("ClusterQueue", qb, {"metadata": {"annotations": {QUOTA_ANNOTATION: earlier}}})
        _quota_plan_applied_and_undone(store, settings, api, qa, qb)
        assert gpu_entry(api, qa) == {"nominalQuota": "8", "lendingLimit": "8"}
        assert gpu_entry(api, qb) == {"nominalQuota": "4", "borrowingLimit": "0"}
        assert plan_mark(api, qb) == earlier and plan_mark(api, qa) is None
    finally:
        set_gpu_entry(api, qa, scenario_a)
        api.merge_patch("ClusterQueue", qb, {"metadata": {"annotations": {QUOTA_ANNOTATION: None}}})


def _quota_plan_applied_and_undone(store: Store, settings: GpuaasSettings, api: KubeHTTP, qa: str, qb: str) -> None:
    plan = plan_quotas([QueueDemand(qa, {"h100": 8}, {"h100": 4}), QueueDemand(qb, {"h100": 4}, {"h100": 8})],
                       LIMITS)
    assert plan.moved_gpus == 4
    with KubeWriter(settings) as writer:
        result = apply_quota_plan(store, writer, "c", plan, mode=Mode.apply, degraded=None, flow_run_id=None,
                                  evidence={}, gpu_resources=["nvidia.com/gpu"])
        assert result.outcome == "applied", result.message
        assert gpu_entry(api, qa) == {"nominalQuota": "4", "lendingLimit": "4"}  # lowered with the quota
        wait_until("b-big admitted under team-b's new quota of 8", lambda: reserved(api, "Job", "b-big", B)
                   or reserved(api, "Job", "b-late", B))
        [undone] = incident.undo(store, writer, [result.plan_id], flow_run_id=None)
        assert undone.result == "restored", undone.message
    queue = api.get("ClusterQueue", qb)
    quota = queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]
    assert str(quota) == "4"
    events = events_on(api, queue)  # a ClusterQueue is cluster-scoped: its Events are in "default"
    assert events["QuotaMoved"] == (f"Nominal GPU quota moved by gpuaas rebalance: h100 4 -> 8. Plan "
                                    f"#{result.plan_id}; to reverse it: gpuaas undo {result.plan_id}")
    assert events["QuotaRestored"] == f"Nominal GPU quota restored by gpuaas (undo of plan #{result.plan_id}): h100 8 -> 4"
    # Lowered below its usage, team-b's queue evicts nothing: it now counts as borrowing.
    assert reserved(api, "Job", "b-big", B) or reserved(api, "Job", "b-late", B)
    # The day's step is spent, undo or not: the same plan made again today moves nothing.
    moved = quota_moved_since(store, datetime.now(UTC) - timedelta(hours=24))
    assert moved == {(qa, "h100"): (0, 4), (qb, "h100"): (4, 0)}
    again = plan_quotas([QueueDemand(qa, {"h100": 8}, {"h100": 4}, moved_24h={"h100": moved[(qa, "h100")]}),
                         QueueDemand(qb, {"h100": 4}, {"h100": 8}, moved_24h={"h100": moved[(qb, "h100")]})], LIMITS)
    assert again.moved_gpus == 0


def test_objects_read_through_v1beta1(api: KubeHTTP, real_cluster: RealCluster) -> None:
    cq = api.request("GET", f"/apis/kueue.x-k8s.io/v1beta1/clusterqueues/{_cq(api, A)}")
    assert cq["apiVersion"] == "kueue.x-k8s.io/v1beta1" and cq["spec"]["cohort"] == "c"
    wls = api.request("GET", f"/apis/kueue.x-k8s.io/v1beta1/namespaces/{A}/workloads")["items"]
    assert wls and all(w["apiVersion"] == "kueue.x-k8s.io/v1beta1" for w in wls)


class _Now:
    """What ``reclaim_scenario.run`` reads of a cluster: its clock (the wall clock here)."""

    class clock:  # noqa: N801 - mirrors EmbeddedCluster.clock
        @staticmethod
        def now() -> object:
            from datetime import UTC, datetime

            return datetime.now(UTC)
