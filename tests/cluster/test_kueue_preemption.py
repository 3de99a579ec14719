"""Kueue classic preemption in the embedded cluster, on Kueue's own documented cases.

The cases are Kueue v0.19's ``pkg/scheduler/preemption/preemption_test.go`` ``TestPreemption``
table, with its ClusterQueues (``standalone``, ``c1``/``c2``, ``lend1``/``lend2``,
``preventStarvation`` (here ``prevent-starvation``)) and quantities kept and ``cpu`` read as ``nvidia.com/gpu``; the names are
Kueue's. Each case admits its Workloads one pass at a time (so admission times are ordered), then
submits the incoming one and checks which Workloads Kueue preempts and with which reason, as the
table's ``wantWorkloads`` say. Then the life cycle the preemption docs describe: Evicted(Preempted)
+ Preempted conditions with Kueue's message, requeue, re-admission, and the GPU-hours lost.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuaas.cluster.apiserver import ObjectStore
from gpuaas.cluster.kueue import KueueController
from gpuaas.cluster.kueue import testing as t

GPU = "nvidia.com/gpu"
LOWER = "LowerPriority"

# Kueue's defaultClusterQueues: (name, cohort, (nominal, borrowingLimit, lendingLimit), preemption).
QUEUES: dict[str, tuple[str | None, tuple[int, int | None, int | None], dict[str, str]]] = {
    "standalone": (None, (6, None, None), {"withinClusterQueue": LOWER}),
    "c1": ("cohort", (6, 6, None), {"withinClusterQueue": LOWER, "reclaimWithinCohort": LOWER}),
    "c2": ("cohort", (6, 6, None), {"withinClusterQueue": "Never", "reclaimWithinCohort": "Any"}),
    "lend1": ("cohort-lend", (6, None, 4), {"withinClusterQueue": LOWER, "reclaimWithinCohort": LOWER}),
    "lend2": ("cohort-lend", (6, None, 2), {"withinClusterQueue": LOWER, "reclaimWithinCohort": LOWER}),
    "prevent-starvation": (None, (6, None, None), {"withinClusterQueue": "LowerOrNewerEqualPriority"}),
    # Not in Kueue's table: the default policy (Never) on a borrower's lender.
    "n1": ("cohort-never", (6, None, None), {}),
    "n2": ("cohort-never", (6, None, None), {}),
}


def conditions(store: ObjectStore, name: str) -> dict[str, dict[str, Any]]:
    wl = store.get("Workload", "ns", name)
    return {c["type"]: c for c in (wl.get("status") or {}).get("conditions") or []}


def is_true(store: ObjectStore, name: str, kind: str) -> bool:
    found = conditions(store, name).get(kind)
    return bool(found and found["status"] == "True")


def setup(store: ObjectStore, queues: set[str]) -> None:
    store.create(t.resource_flavor("default"))
    for name in sorted(queues):
        cohort, quota, preemption = QUEUES[name]
        store.create(t.cluster_queue(name, {"default": {GPU: quota}}, cohort=cohort, preemption=preemption))
        store.create(t.local_queue("ns", name, name))


Admitted = list[tuple[str, str, int, int]]  # (ClusterQueue, name, priority, GPUs), in admission order

CASES = [
    pytest.param([("standalone", "low", -1, 2), ("standalone", "mid", 0, 2), ("standalone", "high", 1, 2)],
                 ("standalone", 1, 2), {"low": "InClusterQueue"}, id="preempt lowest priority"),
    pytest.param([("standalone", "low", -1, 2), ("standalone", "mid", 0, 2), ("standalone", "high", 1, 2)],
                 ("standalone", 2, 6), {"low": "InClusterQueue", "mid": "InClusterQueue", "high": "InClusterQueue"},
                 id="preempt multiple"),
    pytest.param([("standalone", "low", -1, 3), ("standalone", "mid", 0, 3)],
                 ("standalone", -1, 1), {}, id="no preemption for low priority"),
    pytest.param([("standalone", "low", -1, 3), ("standalone", "mid", 0, 3)],
                 ("standalone", 0, 4), {}, id="not enough low priority workloads"),
    pytest.param([("standalone", "low", -1, 1), ("standalone", "mid", 0, 1), ("standalone", "high", 1, 3)],
                 ("standalone", 1, 2), {"low": "InClusterQueue"}, id="some free quota, preempt low priority"),
    pytest.param([("standalone", "low", -1, 1), ("standalone", "mid", 0, 2), ("standalone", "high", 1, 3)],
                 ("standalone", 1, 2), {"mid": "InClusterQueue"}, id="minimal set excludes low priority"),
    pytest.param([("c1", "c1-low", -1, 3), ("c2", "c2-mid", 0, 3), ("c2", "c2-high", 1, 6)],
                 ("c1", 1, 3), {"c2-mid": "InCohortReclamation"}, id="reclaim quota from borrower"),
    pytest.param([("c1", "c1-high", 1, 4), ("c2", "c2-low-1", -1, 4)],
                 ("c1", 1, 4), {}, id="no workloads borrowing (and here it fits: 8 of the cohort's 12)"),
    pytest.param([("c1", "c1-high", 1, 4), ("c2", "c2-low-1", -1, 4), ("c2", "c2-low-2", -1, 4)],
                 ("c1", 1, 4), {}, id="not enough workloads borrowing"),
    pytest.param([("c1", "c1", 0, 2), ("c2", "c2-1", 0, 4), ("c2", "c2-2", 0, 4)],
                 ("c1", 0, 4), {}, id="do not reclaim borrowed quota from same priority for LowerPriority"),
    pytest.param([("c1", "c1-1", 0, 4), ("c1", "c1-2", 1, 4), ("c2", "c2", 0, 2)],
                 ("c2", 0, 4), {"c1-1": "InCohortReclamation"}, id="reclaim borrowed quota from same priority for Any"),
    pytest.param([("c1", "c1-low", -1, 3), ("c1", "c1-mid", 0, 2), ("c2", "c2-low", -1, 3), ("c2", "c2-mid", 0, 4)],
                 ("c1", 0, 4), {"c1-low": "InClusterQueue", "c2-low": "InCohortReclamation"},
                 id="preempt from all ClusterQueues in cohort"),
    pytest.param([("lend1", "lend1-low", -1, 3), ("lend2", "lend2-mid", 0, 3), ("lend2", "lend2-high", 1, 4)],
                 ("lend1", 1, 3), {"lend2-mid": "InCohortReclamation"}, id="reclaim quota from lender"),
    pytest.param([("n2", "n2-low", -1, 10)], ("n1", 1, 4), {}, id="reclaimWithinCohort Never keeps the borrower"),
]


@pytest.mark.parametrize(("admitted", "incoming", "want"), CASES)
def test_kueue_preemption_table(admitted: Admitted, incoming: tuple[str, int, int], want: dict[str, str]) -> None:
    clock = t.FakeClock()
    store = ObjectStore(clock)
    setup(store, {cq for cq, *_ in admitted} | {incoming[0]})
    kueue = KueueController(store, clock)
    kueue.attach()
    for cq, name, priority, gpus in admitted:
        store.create(t.workload("ns", name, cq, gpus, priority=priority))
        clock.advance(1)
        kueue.reconcile()
        assert is_true(store, name, "QuotaReserved"), name
    clock.advance(60)
    store.create(t.workload("ns", "in", incoming[0], incoming[2], priority=incoming[1]))
    result = kueue.reconcile()
    got = {name: conditions(store, name)["Preempted"]["reason"]
           for _, name, _, _ in admitted if is_true(store, name, "Evicted")}
    assert got == want
    assert sorted(result.preempted) == sorted(f"ns/{name}" for name in want)
    fits_anyway = sum(g for *_, g in admitted) + incoming[2] <= 12 and QUEUES[incoming[0]][0] == "cohort"
    assert is_true(store, "in", "QuotaReserved") == (bool(want) or fits_anyway)
    for name in want:
        assert not is_true(store, name, "QuotaReserved")
        assert conditions(store, name)["Evicted"]["reason"] == "Preempted"


def test_lower_or_newer_equal_priority_preempts_the_most_recently_admitted() -> None:
    """Kueue's "preempt newer workloads with the same priority": the incoming Workload is older
    than wl2 and wl3 (equal priority) and wl2 was admitted last, so wl2 goes."""
    clock = t.FakeClock()
    store = ObjectStore(clock)
    setup(store, {"prevent-starvation"})
    store.create(t.workload("ns", "in", "later", 2, priority=1))  # its LocalQueue comes later: it waits
    kueue = KueueController(store, clock)
    kueue.attach()
    for name, priority in (("wl1", 2), ("wl3", 1), ("wl2", 1)):
        clock.advance(1)
        store.create(t.workload("ns", name, "prevent-starvation", 2, priority=priority))
        kueue.reconcile()
    store.create(t.local_queue("ns", "later", "prevent-starvation"))
    kueue.reconcile()
    assert [n for n in ("wl1", "wl2", "wl3") if is_true(store, n, "Evicted")] == ["wl2"]
    assert conditions(store, "wl2")["Preempted"]["reason"] == "InClusterQueue"
    assert is_true(store, "in", "QuotaReserved")


def test_preempted_workload_is_requeued_readmitted_and_its_lost_work_counted() -> None:
    """team-b borrows team-a's idle quota; team-a's job reclaims it: the docs' condition pair,
    Kueue's message, requeue with Requeued=True, re-admission once there is room again."""
    clock = t.FakeClock()
    store = ObjectStore(clock)
    store.create(t.resource_flavor("default"))
    for team in ("team-a", "team-b"):
        store.create(t.cluster_queue(team, {"default": {GPU: 8}}, cohort="ml",
                                     preemption={"reclaimWithinCohort": "Any", "withinClusterQueue": LOWER}))
        store.create(t.local_queue(team, "q", team))
    kueue = KueueController(store, clock)
    kueue.attach()
    store.create(t.workload("team-b", "own", "q", 8))
    kueue.reconcile()
    clock.advance(60)
    store.create(t.workload("team-b", "borrower", "q", 4))  # 4 of team-a's 8 GPUs, admitted last
    kueue.reconcile()
    borrower = store.get("Workload", "team-b", "borrower")
    clock.advance(1800)  # the borrower has run 30 min on 4 GPUs: 2 GPU-hours
    store.create(t.workload("team-a", "reclaimer", "q", 6))
    result = kueue.reconcile()
    assert result.preempted == ["team-b/borrower"] and result.admitted == ["team-a/reclaimer"]
    assert result.preempted_gpu_hours == pytest.approx(2.0)
    conds = {c["type"]: c for c in store.get("Workload", "team-b", "borrower")["status"]["conditions"]}
    message = (f"Preempted to accommodate a workload (UID: {store.get('Workload', 'team-a', 'reclaimer')['metadata']['uid']}, "
               "JobUID: UNKNOWN) due to reclamation within the cohort; preemptor path: /ml/team-a; "
               "preemptee path: /ml/team-b")
    assert (conds["Evicted"]["status"], conds["Evicted"]["reason"], conds["Evicted"]["message"]) == (
        "True", "Preempted", message)
    assert (conds["Preempted"]["status"], conds["Preempted"]["reason"]) == ("True", "InCohortReclamation")
    assert (conds["Requeued"]["status"], conds["Requeued"]["reason"]) == ("True", "Preempted")
    assert conds["QuotaReserved"]["status"] == "False" and "admission" not in store.get(
        "Workload", "team-b", "borrower")["status"]
    status = store.get("ClusterQueue", None, "team-b")["status"]["flavorsReservation"][0]["resources"][0]
    assert (status["total"], status["borrowed"]) == ("8", "0")
    # Nothing more to preempt: a second pass changes nothing, the borrower stays pending.
    again = kueue.reconcile()
    assert again.preempted == [] and again.admitted == []
    # The reclaimer finishes: team-a lends again and the borrower is admitted again.
    clock.advance(60)
    kueue.finish("team-a", "reclaimer")
    readmitted = kueue.reconcile()
    assert readmitted.admitted == ["team-b/borrower"]
    conds = {c["type"]: c for c in store.get("Workload", "team-b", "borrower")["status"]["conditions"]}
    assert conds["Evicted"]["status"] == "False" and conds["Preempted"]["status"] == "False"
    assert conds["Evicted"]["message"] == f"Previously: {message}"
    assert borrower["metadata"]["uid"] == store.get("Workload", "team-b", "borrower")["metadata"]["uid"]
