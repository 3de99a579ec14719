"""The Kueue parsers on upstream objects, read in place from the shared fixtures.

Why these and not hand-made dicts: they are what real clusters and Kueue's own docs show,
in both API versions. The v1beta1 Workload lists (DataDog's Kueue integration fixtures) use
``spec.priorityClassName``; Kueue v0.19's docs use ``priorityClassRef``, ``cohortName`` and
``lendingLimit``; the status snippets exercise the state order (Finished beats Admitted and
Evicted; Evicted with no reservation is pending).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from gpuaas.models import WorkloadState
from gpuaas.sources._kube_kueue import parse_cluster_queue, parse_local_queue, parse_workload, workload_state
from tests.sources.helpers import fixture_path

GPU = ("nvidia.com/gpu",)


def _json(name: str) -> Any:
    return json.loads(fixture_path("kueue", "third_party", "datadog-integrations-core", name).read_text())


def _yaml(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(fixture_path("kueue", "docs-extracted", name).read_text()) if d]


def test_v1beta1_workload_lists_states_and_priority_class_name() -> None:
    (pending,) = (parse_workload(o, GPU) for o in _json("workload-list-pending.json"))
    (admitted,) = (parse_workload(o, GPU) for o in _json("workload-list-admitted.json"))
    (finished,) = (parse_workload(o, GPU) for o in _json("workload-list-evicted-finished.json"))
    assert (pending.state, admitted.state, finished.state) == (
        WorkloadState.pending, WorkloadState.admitted, WorkloadState.finished)  # Finished wins over Admitted/Evicted
    assert {w.priority_class for w in (pending, admitted, finished)} == {"high"}  # v1beta1 field name
    assert pending.priority == 100 and pending.queue == "gpu" and pending.cluster_queue is None
    assert admitted.cluster_queue == "default"
    assert admitted.admitted_at == datetime(2026, 6, 16, 10, 0, 8, tzinfo=UTC)  # the Admitted transition
    assert pending.gpus == 0.0 and pending.admitted_at is None  # sparse fixture: no podSets at all


def test_evicted_without_reservation_is_pending() -> None:
    (doc,) = _yaml("workload-status-preempted-then-pending.yaml")
    assert workload_state(doc) is WorkloadState.pending


def test_a_workload_evicted_by_a_pods_ready_timeout_queues_as_of_its_eviction_a_preempted_one_as_of_its_creation(
        ) -> None:
    """Kueue's queue-order timestamp (``GetQueueOrderTimestamp``, default ``Eviction`` requeuing timestamp)."""
    (preempted,) = _yaml("workload-status-preempted-then-pending.yaml")
    preempted["metadata"] = {"name": "w", "namespace": "ns", "creationTimestamp": "2024-03-21T15:40:00Z"}
    created = datetime(2024, 3, 21, 15, 40, tzinfo=UTC)
    assert parse_workload(preempted, GPU).queued_at == created
    evicted = next(c for c in preempted["status"]["conditions"] if c["type"] == "Evicted")
    for reason in ("PodsReadyTimeout", "AdmissionCheck"):
        evicted.update(reason=reason, message="Exceeded the PodsReady timeout")
        assert parse_workload(preempted, GPU).queued_at == datetime(2024, 3, 21, 15, 49, 55, tzinfo=UTC), reason
    evicted["status"] = "False"  # requeued and admitted again since: its creation time
    assert parse_workload(preempted, GPU).queued_at == created
    assert parse_workload(preempted, GPU).requeue_at is None
    preempted["status"]["requeueState"] = {"count": 1, "requeueAt": "2024-03-21T15:51:00Z"}
    assert parse_workload(preempted, GPU).requeue_at == datetime(2024, 3, 21, 15, 51, tzinfo=UTC)


def test_v1beta2_priority_class_ref_and_pod_set_counts() -> None:
    (ref,) = _yaml("workload-v1beta2-priorityclassref-snippet.yaml")
    wl = parse_workload(ref, GPU)
    assert (wl.priority_class, wl.priority, wl.state) == ("sample-priority", 10000, WorkloadState.pending)
    (sample,) = _yaml("workload-v1beta2-spec-sample.yaml")
    sample["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": 2}
    assert parse_workload(sample, GPU).gpus == 6.0  # 3 pods x a limit-only GPU request (requests default to limits)


def test_cluster_queue_lending_limit_and_cohort_in_both_versions() -> None:
    team_a, team_b = (parse_cluster_queue(d) for d in _yaml("clusterqueues-cohort-lendinglimit-team-ab.yaml"))
    assert (team_a.cohort, team_b.cohort) == ("team-ab", "team-ab")
    (quota,) = team_b.quotas
    assert (quota.flavor, quota.resource, quota.nominal, quota.lending_limit, quota.borrowing_limit) == (
        "default-flavor", "cpu", 12.0, 1.0, None)
    old = _yaml("clusterqueues-cohort-lendinglimit-team-ab.yaml")[1]
    old["apiVersion"] = "kueue.x-k8s.io/v1beta1"
    old["spec"]["cohort"] = old["spec"].pop("cohortName")
    assert parse_cluster_queue(old).cohort == "team-ab"
    assert team_a.reclaim_within_cohort == "Never"  # Kueue's default: it cannot take back what it lends
    old["spec"]["preemption"] = {"reclaimWithinCohort": "LowerPriority", "withinClusterQueue": "Never"}
    assert parse_cluster_queue(old).reclaim_within_cohort == "LowerPriority"
    # Whether a lowered priority would make a running Workload easier to preempt: any rule comparing priorities.
    assert not team_a.priority_preemption and parse_cluster_queue(old).priority_preemption
    for preemption, compares in [({"withinClusterQueue": "LowerOrNewerEqualPriority"}, True),
                                 ({"borrowWithinCohort": {"policy": "LowerPriority"}}, True),
                                 ({"reclaimWithinCohort": "Any", "withinClusterQueue": "Never",
                                   "borrowWithinCohort": {"policy": "Never"}}, False)]:
        old["spec"]["preemption"] = preemption
        assert parse_cluster_queue(old).priority_preemption is compares, preemption
    # Each rule as written, for who may preempt whom; Kueue's default Never where it is left out.
    assert team_a.within_cluster_queue == "Never"
    old["spec"]["preemption"] = {"withinClusterQueue": "LowerOrNewerEqualPriority", "reclaimWithinCohort": "Any",
                                 "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100}}
    parsed = parse_cluster_queue(old)
    assert (parsed.within_cluster_queue, parsed.reclaim_within_cohort) == ("LowerOrNewerEqualPriority", "Any")


def test_local_queue_usage_under_both_status_names() -> None:
    (lq,) = _yaml("localqueue-sample.yaml")
    cells = [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "6"}]}]
    new = parse_local_queue({**lq, "status": {"flavorsUsage": cells, "pendingWorkloads": 2}})
    old = parse_local_queue({**lq, "apiVersion": "kueue.x-k8s.io/v1beta1", "status": {"flavorUsage": cells}})
    assert new.cluster_queue == "cluster-queue" and new.pending_workloads == 2
    assert [(u.flavor, u.resource, u.usage) for u in new.usage] == [("h100", "nvidia.com/gpu", 6.0)]
    assert [(u.flavor, u.resource, u.usage) for u in old.usage] == [("h100", "nvidia.com/gpu", 6.0)]


def _gpu_job_workload(version: str) -> dict[str, Any]:
    """Kueue's docs Workload (podSet ``main``, 3 pods) asking for the GPU of its provisioning sample Job."""
    (wl,) = _yaml("workload-v1beta2-spec-sample.yaml")
    job = yaml.safe_load(fixture_path("kueue", "samples", "job-gpu-request-sample.yaml").read_text())
    wl["apiVersion"] = f"kueue.x-k8s.io/{version}"
    wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"] = (
        job["spec"]["template"]["spec"]["containers"][0]["resources"])  # nvidia.com/gpu: 1 per pod
    return wl


def _admitted(wl: dict[str, Any], assignments: list[dict[str, Any]], **status: Any) -> dict[str, Any]:
    conditions = [{"type": t, "status": "True", "reason": t, "message": "",
                   "lastTransitionTime": "2026-03-10T10:00:00Z"} for t in ("QuotaReserved", "Admitted")]
    return {**wl, "status": {"admission": {"clusterQueue": "team-a-cq", "podSetAssignments": assignments},
                             "conditions": conditions, **status}}


@pytest.mark.parametrize("version", ["v1beta2", "v1beta1"])
def test_gpus_held_are_what_kueue_admitted_less_reclaimable_pods(version: str) -> None:
    """An admitted Workload holds ``min(podSetAssignments[].count, spec count - reclaimablePods)`` pods'
    worth of ``resourceUsage`` (Kueue's totalRequestsFromAdmission; same fields in both versions);
    a pending one asks for its spec."""
    wl = _gpu_job_workload(version)
    assert parse_workload(wl, GPU).gpus == 3.0  # pending: what it asks for
    partial = {**wl, "spec": {**wl["spec"], "podSets": [{**wl["spec"]["podSets"][0], "minCount": 1}]}}
    one_of_three = {"name": "main", "count": 1, "flavors": {"nvidia.com/gpu": "h100"},
                    "resourceUsage": {"cpu": "100m", "memory": "100Mi", "nvidia.com/gpu": "1"}}
    assert parse_workload(_admitted(partial, [one_of_three]), GPU).gpus == 1.0  # partial admission
    # Reserved but not yet Admitted (admission checks pending) holds its quota all the same.
    reserved = _admitted(partial, [one_of_three])
    reserved["status"]["conditions"][1]["status"] = "False"
    assert parse_workload(reserved, GPU).state is WorkloadState.quota_reserved
    assert parse_workload(reserved, GPU).gpus == 1.0

    (snippet,) = _yaml("workload-status-reclaimablepods-snippet.yaml")  # podset1: 2, podset2: 2 reclaimable
    main = wl["spec"]["podSets"][0]
    two_sets = {**wl, "spec": {**wl["spec"], "podSets": [{**main, "name": n} for n in ("podset1", "podset2")]}}
    no_usage = [{"name": n, "count": 3, "flavors": {"nvidia.com/gpu": "h100"}} for n in ("podset1", "podset2")]
    assert parse_workload(_admitted(two_sets, no_usage), GPU).gpus == 6.0
    freed = _admitted(two_sets, no_usage, reclaimablePods=snippet["status"]["reclaimablePods"])
    assert parse_workload(freed, GPU).gpus == 2.0  # (3 - 2) pods x 1 GPU, twice
    with_usage = [{**a, "resourceUsage": {"nvidia.com/gpu": "6"}} for a in no_usage]  # 2 GPUs a pod, as admitted
    freed = _admitted(two_sets, with_usage, reclaimablePods=snippet["status"]["reclaimablePods"])
    assert parse_workload(freed, GPU).gpus == 4.0  # resourceUsage scaled to the pods still held

    # Elastic scale-down lowers the spec count in place while the admission keeps the old one.
    shrunk = {**wl, "spec": {**wl["spec"], "podSets": [{**main, "count": 2}]}}
    whole = [{**one_of_three, "count": 3, "resourceUsage": {"nvidia.com/gpu": "3"}}]
    assert parse_workload(_admitted(shrunk, whole), GPU).gpus == 2.0
    # A partial admission keeps its smaller count while the spec, less what is reclaimable, is above it.
    partial_freed = _admitted(partial, [one_of_three], reclaimablePods=[{"name": "main", "count": 1}])
    assert parse_workload(partial_freed, GPU).gpus == 1.0
    # An assignment without count (Workloads admitted before the field existed) stands for the spec's count.
    legacy = [{"name": "main", "flavors": {"nvidia.com/gpu": "h100"}}]
    assert parse_workload(_admitted(wl, legacy, reclaimablePods=[{"name": "main", "count": 1}]), GPU).gpus == 2.0
