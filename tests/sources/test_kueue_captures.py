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


def test_local_queue_usage_under_both_status_names() -> None:
    (lq,) = _yaml("localqueue-sample.yaml")
    cells = [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "6"}]}]
    new = parse_local_queue({**lq, "status": {"flavorsUsage": cells, "pendingWorkloads": 2}})
    old = parse_local_queue({**lq, "apiVersion": "kueue.x-k8s.io/v1beta1", "status": {"flavorUsage": cells}})
    assert new.cluster_queue == "cluster-queue" and new.pending_workloads == 2
    assert [(u.flavor, u.resource, u.usage) for u in new.usage] == [("h100", "nvidia.com/gpu", 6.0)]
    assert [(u.flavor, u.resource, u.usage) for u in old.usage] == [("h100", "nvidia.com/gpu", 6.0)]
