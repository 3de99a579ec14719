"""Kueue admission in the embedded cluster: quota, cohorts, order, life cycle, visibility.

Cases (every expectation is computed by hand in the case's comment):
* cohort borrowing and lending: lendingLimit keeps a lender's guaranteed part, borrowingLimit caps
  a borrower, and ``borrowed`` in ClusterQueue status;
* priority then FIFO order, and BestEffortFIFO (a big head does not block smaller workloads);
* finish frees quota and admits the next; spec.active=false evicts, true requeues;
* lowering nominalQuota below usage evicts nothing and shows borrowed;
* cpu/memory accounting and flavor fallback; pod requests (limits, init containers);
* visibility positions, limit and offset; the same results with attach() (incremental passes).
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuaas.cluster.apiserver import ApiError, ObjectStore
from gpuaas.cluster.kueue import KueueController
from gpuaas.cluster.kueue import testing as t

GPU = "nvidia.com/gpu"


def status_of(store: ObjectStore, kind: str, namespace: str | None, name: str) -> dict[str, Any]:
    return store.get(kind, namespace, name).get("status") or {}


def cond(store: ObjectStore, namespace: str, name: str, kind: str) -> dict[str, Any] | None:
    conditions = status_of(store, "Workload", namespace, name).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), None)


def reserved(store: ObjectStore, namespace: str, name: str) -> bool:
    found = cond(store, namespace, name, "QuotaReserved")
    return bool(found and found["status"] == "True")


def cq_gpu(store: ObjectStore, name: str, field: str = "flavorsReservation") -> dict[str, tuple[str, str]]:
    """``{flavor: (total, borrowed)}`` for nvidia.com/gpu in a ClusterQueue's status."""
    out = {}
    for flavor in status_of(store, "ClusterQueue", None, name)[field]:
        res = next(r for r in flavor["resources"] if r["name"] == GPU)
        out[flavor["name"]] = (res["total"], res["borrowed"])
    return out


@pytest.fixture
def clock() -> t.FakeClock:
    return t.FakeClock()


@pytest.fixture
def store(clock: t.FakeClock) -> ObjectStore:
    return ObjectStore(clock)


def _cohort(store: ObjectStore, with_c: bool) -> None:
    """team-a: 8 GPUs, lendingLimit 2 (keeps 6); team-b: 8 GPUs, borrowingLimit 4; team-c: 8, no limits."""
    store.create(t.resource_flavor("h100", gpu="h100"))
    store.create(t.cluster_queue("team-a", {"h100": {GPU: (8, None, 2)}}, cohort="ab"))
    store.create(t.cluster_queue("team-b", {"h100": {GPU: (8, 4, None)}}, cohort="ab"))
    queues = ["a", "b"]
    if with_c:
        store.create(t.cluster_queue("team-c", {"h100": {GPU: 8}}, cohort="ab"))
        queues.append("c")
    for ns in queues:
        store.create(t.local_queue(ns, "q", f"team-{ns}"))


COHORT_CASES = [
    pytest.param(
        # pool = a lends 2 + b lends 8 = 10. wb1 8 -> b avail = min(10-8, 8-8+4) = 2: wb2 (4) no, wb3 (2) yes.
        False, [("b", "wb1", 8), ("b", "wb2", 4), ("b", "wb3", 2)], {"wb1", "wb3"},
        {"team-a": ("0", "0"), "team-b": ("10", "2")}, id="b-borrows-only-what-a-lends"),
    pytest.param(
        # pool = 2 + 8 + 8 = 18. After wb1 8: b avail = min(18-8, 0+4) = 4: wb2 (6) no, wb3 (4) yes.
        True, [("b", "wb1", 8), ("b", "wb2", 6), ("b", "wb3", 4)], {"wb1", "wb3"},
        {"team-a": ("0", "0"), "team-b": ("12", "4"), "team-c": ("0", "0")}, id="borrowing-limit-caps-b"),
    pytest.param(
        # a has no borrowingLimit: 6 local + draws on the pool of 18: 6 + 4 + 2 = 12, borrowed 4.
        True, [("a", "wa1", 6), ("a", "wa2", 4), ("a", "wa3", 2)], {"wa1", "wa2", "wa3"},
        {"team-a": ("12", "4"), "team-b": ("0", "0"), "team-c": ("0", "0")}, id="a-borrows-from-c"),
    pytest.param(
        # a's 6 guaranteed GPUs go first (nominal before borrowing in one round), then wb1 10 takes the
        # whole pool (10, borrowed 2); wa2 (2): a avail = max(0, 6-6) + (10 - 10) = 0 -> pending.
        False, [("b", "wb1", 10), ("a", "wa1", 6), ("a", "wa2", 2)], {"wb1", "wa1"},
        {"team-a": ("6", "0"), "team-b": ("10", "2")}, id="lending-limit-keeps-a-guaranteed"),
]


@pytest.mark.parametrize(("with_c", "workloads", "admitted", "usage"), COHORT_CASES)
@pytest.mark.parametrize("attached", [False, True], ids=["resync", "attached"])
def test_cohort_borrowing_and_lending(
    store: ObjectStore, clock: t.FakeClock, with_c: bool, workloads: list[tuple[str, str, int]],
    admitted: set[str], usage: dict[str, tuple[str, str]], attached: bool,
) -> None:
    _cohort(store, with_c)
    kueue = KueueController(store, clock)
    if attached:
        kueue.attach()
    for ns, name, gpus in workloads:
        clock.advance(1)
        store.create(t.workload(ns, name, "q", gpus))
    kueue.reconcile()
    assert {name for ns, name, _ in workloads if reserved(store, ns, name)} == admitted
    assert {cq: cq_gpu(store, cq)["h100"] for cq in usage} == usage
    assert {cq: cq_gpu(store, cq, "flavorsUsage")["h100"] for cq in usage} == usage
    for ns, name, _ in workloads:
        if name not in admitted:
            message = cond(store, ns, name, "QuotaReserved")["message"]
            assert message.startswith("couldn't assign flavors to pod set main: insufficient unused quota")
    # A second pass changes nothing.
    again = kueue.reconcile()
    assert again.admitted == [] and again.released == []


def test_pending_message_names_the_shortfall(store: ObjectStore, clock: t.FakeClock) -> None:
    _cohort(store, with_c=False)
    kueue = KueueController(store, clock)
    store.create(t.workload("b", "wb1", "q", 8))
    store.create(t.workload("b", "wb2", "q", 4))
    kueue.reconcile()
    assert cond(store, "b", "wb2", "QuotaReserved") == {
        "type": "QuotaReserved", "status": "False", "reason": "Pending",
        "message": "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
                   "in flavor h100, 2 more needed",
        "lastTransitionTime": "2026-01-05T09:00:00Z",
    }
    status = status_of(store, "ClusterQueue", None, "team-b")
    assert (status["pendingWorkloads"], status["reservingWorkloads"], status["admittedWorkloads"]) == (1, 1, 1)
    lq = status_of(store, "LocalQueue", "b", "q")
    assert (lq["pendingWorkloads"], lq["reservingWorkloads"], lq["admittedWorkloads"]) == (1, 1, 1)
    assert lq["flavorsReservation"] == [{"name": "h100", "resources": [{"name": GPU, "total": "8"}]}]


def _single(store: ObjectStore, gpus: int = 4) -> None:
    store.create(t.resource_flavor("h100", gpu="h100"))
    store.create(t.cluster_queue("cq", {"h100": {GPU: gpus}}))
    store.create(t.local_queue("ns", "q", "cq"))
    store.create(t.local_queue("ns", "q2", "cq"))


ORDER_CASES = [
    pytest.param(
        # 4 GPUs; all ask 4: highest priority first, then FIFO among equals.
        [("low-1", 0, 4), ("high", 100, 4), ("mid", 10, 4), ("low-2", 0, 4)],
        ["high", "mid", "low-1", "low-2"], id="priority-then-fifo"),
    pytest.param(
        # BestEffortFIFO: big (8 > 4) can never fit and does not block small ones behind it.
        [("big", 0, 8), ("small-1", 0, 2), ("small-2", 0, 2), ("small-3", 0, 2)],
        ["small-1+small-2", "small-3"], id="best-effort-fifo-skips-unfit-head"),
]


@pytest.mark.parametrize(("workloads", "waves"), ORDER_CASES)
def test_admission_order_and_finish_admits_next(
    store: ObjectStore, clock: t.FakeClock, workloads: list[tuple[str, int, int]], waves: list[str]
) -> None:
    """Each wave is what one pass admits; finishing a wave frees quota for the next."""
    _single(store)
    kueue = KueueController(store, clock)
    for name, priority, gpus in workloads:
        clock.advance(1)
        store.create(t.workload("ns", name, "q", gpus, priority=priority))
    for wave in waves:
        result = kueue.reconcile()
        assert sorted(result.admitted) == sorted(f"ns/{n}" for n in wave.split("+"))
        for name in wave.split("+"):
            kueue.finish("ns", name)
            finished = cond(store, "ns", name, "Finished")
            assert finished is not None and finished["reason"] == "Succeeded"
    assert cq_gpu(store, "cq")["h100"] == ("0", "0")


def test_finish_failed_and_unknown(store: ObjectStore, clock: t.FakeClock) -> None:
    _single(store)
    kueue = KueueController(store, clock)
    store.create(t.workload("ns", "w", "q", 4))
    kueue.reconcile()
    kueue.finish("ns", "w", succeeded=False, message="OOMKilled")
    assert cond(store, "ns", "w", "Finished") == {
        "type": "Finished", "status": "True", "reason": "Failed", "message": "OOMKilled",
        "lastTransitionTime": "2026-01-05T09:00:00Z"}
    with pytest.raises(ApiError) as err:
        kueue.finish("ns", "missing")
    assert err.value.status == 404


@pytest.mark.parametrize("attached", [False, True], ids=["resync", "attached"])
def test_deactivation_evicts_frees_and_reactivation_requeues(
    store: ObjectStore, clock: t.FakeClock, attached: bool
) -> None:
    _single(store)
    kueue = KueueController(store, clock)
    if attached:
        kueue.attach()
    store.create(t.workload("ns", "first", "q", 4))
    clock.advance(1)
    store.create(t.workload("ns", "second", "q", 4))
    kueue.reconcile()
    assert reserved(store, "ns", "first") and not reserved(store, "ns", "second")

    clock.advance(60)
    store.patch("Workload", "ns", "first", {"spec": {"active": False}})
    result = kueue.reconcile()
    assert result.released == ["ns/first"] and result.admitted == ["ns/second"]
    evicted, requeued = cond(store, "ns", "first", "Evicted"), cond(store, "ns", "first", "Requeued")
    assert (evicted["status"], evicted["reason"]) == ("True", "Deactivated")
    assert (requeued["status"], requeued["reason"]) == ("False", "Deactivated")
    assert "admission" not in status_of(store, "Workload", "ns", "first")
    assert cond(store, "ns", "first", "QuotaReserved")["status"] == "False"
    assert kueue.pending_workloads("ClusterQueue", None, "cq")["items"] == []  # deactivated is not queued

    clock.advance(60)
    store.patch("Workload", "ns", "first", {"spec": {"active": True}})
    kueue.reconcile()
    requeued = cond(store, "ns", "first", "Requeued")
    assert (requeued["status"], requeued["reason"]) == ("True", "Reactivated")
    # Evicted stays true while it waits (as the real Kueue leaves it; the differential suite holds this).
    assert cond(store, "ns", "first", "Evicted")["status"] == "True"
    items = kueue.pending_workloads("ClusterQueue", None, "cq")["items"]
    assert [i["metadata"]["name"] for i in items] == ["first"]
    kueue.finish("ns", "second")
    assert kueue.reconcile().admitted == ["ns/first"]
    assert cond(store, "ns", "first", "Evicted")["status"] == "False"  # the admission clears it


def test_a_reactivated_workload_keeps_its_creation_time_place_in_the_queue(
    store: ObjectStore, clock: t.FakeClock
) -> None:
    """Kueue orders a queue by creation time (``GetQueueOrderTimestamp``; a deactivation is not one of the
    evictions that move a Workload back): one created before another still goes first once reactivated."""
    _single(store, gpus=8)
    kueue = KueueController(store, clock)
    store.create(t.workload("ns", "running", "q", 8))
    kueue.reconcile()
    clock.advance(1)
    store.create(t.workload("ns", "early", "q", 4))
    store.patch("Workload", "ns", "early", {"spec": {"active": False}})
    kueue.reconcile()
    clock.advance(60)
    store.create(t.workload("ns", "late", "q", 4))
    kueue.reconcile()
    clock.advance(60)
    store.patch("Workload", "ns", "early", {"spec": {"active": True}})
    kueue.reconcile()
    items = kueue.pending_workloads("ClusterQueue", None, "cq")["items"]
    assert [i["metadata"]["name"] for i in items] == ["early", "late"]
    kueue.finish("ns", "running")
    assert kueue.reconcile().admitted == ["ns/early", "ns/late"]


def test_lowering_nominal_quota_evicts_nothing_and_shows_borrowed(store: ObjectStore, clock: t.FakeClock) -> None:
    _cohort(store, with_c=False)
    store.create(t.resource_flavor("spare"))
    store.create(t.cluster_queue("solo", {"h100": {GPU: 8}}))
    store.create(t.local_queue("s", "q", "solo"))
    kueue = KueueController(store, clock)
    store.create(t.workload("b", "wb", "q", 8))
    store.create(t.workload("s", "ws", "q", 8))
    kueue.reconcile()

    for name in ("team-b", "solo"):
        cq = store.get("ClusterQueue", None, name)
        cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 5
        store.replace(cq)
    result = kueue.reconcile()
    assert result.released == [] and reserved(store, "b", "wb") and reserved(store, "s", "ws")
    # In a cohort, usage above nominal is borrowed (8 - 5 = 3); without one Kueue reports 0.
    assert cq_gpu(store, "team-b")["h100"] == ("8", "3")
    assert cq_gpu(store, "solo")["h100"] == ("8", "0")
    store.create(t.workload("s", "ws2", "q", 1))
    assert kueue.reconcile().admitted == []  # over-committed: new admissions block


def test_cpu_memory_accounting_and_flavor_fallback(store: ObjectStore, clock: t.FakeClock) -> None:
    """cq covers cpu, memory and GPUs in two flavors; a100 is tried first."""
    store.create(t.resource_flavor("a100", gpu="a100"))
    store.create(t.resource_flavor("h100", gpu="h100"))
    store.create(t.cluster_queue("cq", {
        "a100": {"cpu": "10", "memory": "64Gi", GPU: 4},
        "h100": {"cpu": "100", "memory": "1Ti", GPU: 8},
    }))
    store.create(t.local_queue("ns", "q", "cq"))
    kueue = KueueController(store, clock)
    # 2 pods x (2 GPU, 2500m cpu): 4 GPUs and 5 cpu fit a100.
    store.create(t.workload("ns", "w1", "q", 2, count=2, cpu="2500m"))
    # 1 pod x (1 GPU, 5500m): a100 has 5 cpu left -> falls back to h100.
    store.create(t.workload("ns", "w2", "q", 1, cpu="5500m"))
    kueue.reconcile()
    flavors = [
        status_of(store, "Workload", "ns", n)["admission"]["podSetAssignments"][0]["flavors"] for n in ("w1", "w2")
    ]
    assert flavors == [{"cpu": "a100", GPU: "a100"}, {"cpu": "h100", GPU: "h100"}]
    usage = status_of(store, "Workload", "ns", "w1")["admission"]["podSetAssignments"][0]
    assert (usage["count"], usage["resourceUsage"]) == (2, {"cpu": "5", GPU: "4"})
    reservation = {f["name"]: {r["name"]: r["total"] for r in f["resources"]}
                   for f in status_of(store, "ClusterQueue", None, "cq")["flavorsReservation"]}
    assert reservation == {"a100": {"cpu": "5", "memory": "0", GPU: "4"},
                           "h100": {"cpu": "5500m", "memory": "0", GPU: "1"}}


def test_visibility_positions_limit_offset(store: ObjectStore, clock: t.FakeClock) -> None:
    _single(store, gpus=0)
    kueue = KueueController(store, clock)
    for name, queue, priority in [("a", "q", 0), ("b", "q2", 0), ("c", "q", 5), ("d", "q2", 0)]:
        clock.advance(1)
        store.create(t.workload("ns", name, queue, 1, priority=priority))
    kueue.reconcile()
    cq = kueue.pending_workloads("ClusterQueue", None, "cq")
    assert cq["kind"] == "PendingWorkloadsSummary" and cq["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta2"
    # Order: c (priority 5), then FIFO a, b, d.
    assert [(i["metadata"]["name"], i["localQueueName"], i["positionInClusterQueue"], i["positionInLocalQueue"])
            for i in cq["items"]] == [("c", "q", 0, 0), ("a", "q", 1, 1), ("b", "q2", 2, 0), ("d", "q2", 3, 1)]
    assert cq["items"][0]["priority"] == 5
    assert cq["items"][0]["metadata"]["creationTimestamp"] == "2026-01-05T09:00:03Z"
    lq = kueue.pending_workloads("LocalQueue", "ns", "q2")
    assert [(i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"]) for i in lq["items"]] == [
        ("b", 2, 0), ("d", 3, 1)]
    page = kueue.pending_workloads("ClusterQueue", None, "cq", limit=1, offset=1)
    assert [i["metadata"]["name"] for i in page["items"]] == ["a"]
    with pytest.raises(ApiError):
        kueue.pending_workloads("ClusterQueue", None, "nope")


def test_missing_local_queue_is_inadmissible(store: ObjectStore, clock: t.FakeClock) -> None:
    _single(store)
    kueue = KueueController(store, clock)
    store.create(t.workload("ns", "w", "no-such-queue", 1))
    kueue.reconcile()
    found = cond(store, "ns", "w", "QuotaReserved")
    assert (found["reason"], found["message"]) == ("Inadmissible", "LocalQueue no-such-queue doesn't exist")


def test_pod_requests_default_to_limits_and_init_containers_count_by_max(
    store: ObjectStore, clock: t.FakeClock
) -> None:
    """Per pod: containers 1 + 500m cpu, but the init container's 4 cpu is larger; GPUs from limits."""
    store.create(t.resource_flavor("h100"))
    store.create(t.cluster_queue("cq", {"h100": {"cpu": 16, GPU: 8}}))
    store.create(t.local_queue("ns", "q", "cq"))
    obj = t.workload("ns", "w", "q", 2, count=2, cpu="1")
    pod = obj["spec"]["podSets"][0]["template"]["spec"]
    pod["containers"].append({"name": "sidecar", "resources": {"requests": {"cpu": "500m"}}})
    pod["initContainers"] = [{"name": "init", "resources": {"limits": {"cpu": "4"}}}]
    store.create(obj)
    KueueController(store, clock).reconcile()
    assignment = status_of(store, "Workload", "ns", "w")["admission"]["podSetAssignments"][0]
    assert assignment["resourceUsage"] == {"cpu": "8", GPU: "4"}


def test_client_deleting_a_job_workload_gets_it_recreated(store: ObjectStore, clock: t.FakeClock) -> None:
    _single(store)
    kueue = KueueController(store, clock)
    kueue.attach()
    store.create(t.notebook("ns", "nb", "q", 2))
    kueue.reconcile()
    old = kueue.workload_for("Notebook", "ns", "nb")
    assert old is not None
    store.delete("Workload", "ns", old["metadata"]["name"])
    result = kueue.reconcile()
    new = kueue.workload_for("Notebook", "ns", "nb")
    assert new is not None and new["metadata"]["uid"] != old["metadata"]["uid"]
    assert result.admitted == [f"ns/{new['metadata']['name']}"]
    assert cq_gpu(store, "cq")["h100"] == ("2", "0")  # the old reservation was given back, not doubled


def test_cluster_queue_with_missing_flavor_is_inactive(store: ObjectStore, clock: t.FakeClock) -> None:
    store.create(t.cluster_queue("cq", {"ghost": {GPU: 8}}))
    store.create(t.local_queue("ns", "q", "cq"))
    store.create(t.workload("ns", "w", "q", 1))
    KueueController(store, clock).reconcile()
    active = status_of(store, "ClusterQueue", None, "cq")["conditions"][0]
    assert (active["status"], active["reason"]) == ("False", "FlavorNotFound")
    assert cond(store, "ns", "w", "QuotaReserved")["reason"] == "Inadmissible"


@pytest.mark.slow
def test_scale_invariants_200_queues_5000_workloads_2000_nodes(store: ObjectStore, clock: t.FakeClock) -> None:
    """Status equals the admitted set everywhere, and no cohort hands out more than it has."""
    store.create(t.resource_flavor("h100", gpu="h100"))
    for i in range(200):
        limits = (16, 8 if i % 3 == 0 else None, 4 if i % 5 == 0 else None)
        store.create(t.cluster_queue(f"cq{i}", {"h100": {GPU: limits}}, cohort=f"co{i % 20}"))
        store.create(t.local_queue(f"ns{i}", "q", f"cq{i}"))
    for i in range(2000):
        store.create(t.node(f"n{i:04d}", 8, gpu="h100"))
    sizes = [1, 2, 4, 8, 3]
    for j in range(5000):
        store.create(t.workload(f"ns{(j * 7) % 200}", f"w{j}", "q", sizes[j % 5], priority=j % 3))
    kueue = KueueController(store, clock)
    kueue.attach()
    kueue.reconcile()
    for j in range(0, 5000, 50):
        if reserved(store, f"ns{(j * 7) % 200}", f"w{j}"):
            kueue.finish(f"ns{(j * 7) % 200}", f"w{j}")
    kueue.reconcile()

    by_cq: dict[str, int] = {}
    counts: dict[str, list[int]] = {}
    for w in store.list("Workload"):
        status = w.get("status") or {}
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
        cq = f"cq{w['metadata']['namespace'][2:]}"
        if conditions.get("Finished") == "True":
            continue
        if conditions.get("QuotaReserved") == "True":
            by_cq[cq] = by_cq.get(cq, 0) + int(status["admission"]["podSetAssignments"][0]["resourceUsage"][GPU])
            counts.setdefault(cq, [0, 0])[1] += 1
        else:
            counts.setdefault(cq, [0, 0])[0] += 1
    cohort_use: dict[str, int] = {}
    drawn: dict[str, int] = {}
    pool: dict[str, int] = {}
    for i in range(200):
        status = status_of(store, "ClusterQueue", None, f"cq{i}")
        total, borrowed = cq_gpu(store, f"cq{i}")["h100"]
        assert int(total) == by_cq.get(f"cq{i}", 0)
        assert int(borrowed) == max(0, int(total) - 16)
        if i % 3 == 0:
            assert int(total) <= 16 + 8  # borrowingLimit
        assert [status["pendingWorkloads"], status["reservingWorkloads"]] == counts.get(f"cq{i}", [0, 0])
        cohort_use[f"co{i % 20}"] = cohort_use.get(f"co{i % 20}", 0) + int(total)
        # What a member draws from the pool is its use above its guaranteed part (16 - lendingLimit 4).
        guaranteed = 12 if i % 5 == 0 else 0
        drawn[f"co{i % 20}"] = drawn.get(f"co{i % 20}", 0) + max(0, int(total) - guaranteed)
        pool[f"co{i % 20}"] = pool.get(f"co{i % 20}", 0) + 16 - guaranteed
    assert all(use <= 10 * 16 for use in cohort_use.values())
    assert all(drawn[co] <= pool[co] for co in pool)
