"""The differential suite's cases: small Kueue situations run step by step on both backends.

Each case is a set-up (flavors, ClusterQueues, LocalQueues, priority classes) and steps; a step
creates jobs or patches objects, then both backends settle and their admitted set (with the GPU
flavor each got) and evicted set must be equal. Each job is a RayCluster (a head asking no GPU, one
worker group of ``count`` pods): Kueue creates its Workload and suspends or resumes it, so an
eviction completes as in a cluster (a standalone Workload has no job to suspend and stays
reserved). Jobs are created one per second so that their creation times, Kueue's queue order, are
distinct. Names are local to a case; the runner prefixes them so that the cases share one real
cluster without seeing each other.

``KNOWN_DIFFERENCES`` lists the cases whose difference is accepted, with the reason; the fidelity
document (``docs/emulator-fidelity.md``) is generated from this module and checked for drift.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuaas.cluster.kueue import testing as t

__all__ = ["CASES", "GPU", "NIC", "KNOWN_DIFFERENCES", "Case", "Op", "Step"]

GPU = "nvidia.com/gpu"
NIC = "example.com/nic"  # a second extended resource (cpu and memory are excluded from quota, see _manifests)
LOW, HIGH = "low", "high"
PRIORITIES = {LOW: 10, HIGH: 100}


@dataclass(frozen=True)
class Op:
    """``create`` a job (``name``, ``queue``, ``gpus`` per pod, ``count`` pods, ``priority``, ``nics``),
    ``quota`` (a ClusterQueue's nominal quota), ``deactivate``/``activate`` the job's Workload, ``demote``
    it (its ``spec.priority`` one lower, as the deadline flow gives a lost deadline up)."""

    verb: str
    name: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    what: str
    ops: tuple[Op, ...]


@dataclass(frozen=True)
class Case:
    name: str
    covers: str
    queues: tuple[dict[str, Any], ...]  # ClusterQueue objects (names local to the case)
    steps: tuple[Step, ...]


def wl(name: str, queue: str, gpus: int, count: int = 1, priority: str | None = None,
       nics: int | None = None) -> Op:
    return Op("create", name, {"queue": queue, "gpus": gpus, "count": count, "priority": priority, "nics": nics})


def off(name: str) -> Op:
    return Op("deactivate", name)


def on(name: str) -> Op:
    return Op("activate", name)


def demote(name: str) -> Op:
    return Op("demote", name)


def quota(cq: str, nominal: int, flavor: str = "h100", resource: str = GPU) -> Op:
    return Op("quota", cq, {"nominal": nominal, "flavor": flavor, "resource": resource})


def cq(name: str, flavors: dict[str, Any], cohort: str | None = None, strategy: str | None = None,
       **preemption: str) -> dict[str, Any]:
    obj = t.cluster_queue(name, flavors, cohort=cohort, preemption=preemption or None)
    if strategy:
        obj["spec"]["queueingStrategy"] = strategy
    return obj


def step(what: str, *ops: Op) -> Step:
    return Step(what, ops)


WCQ = "withinClusterQueue"
RWC = "reclaimWithinCohort"

CASES: tuple[Case, ...] = (
    Case("fits", "admission within nominal quota", (cq("a", {"h100": {GPU: 8}}),), (
        step("two Workloads of 4 in a quota of 8", wl("w1", "a", 4), wl("w2", "a", 4)),)),
    Case("fifo-overflow", "FIFO admission, the third waits", (cq("a", {"h100": {GPU: 8}}),), (
        step("three Workloads of 4", wl("w1", "a", 4), wl("w2", "a", 4), wl("w3", "a", 4)),
        step("the first is deactivated: the third is admitted", off("w1")))),
    Case("best-effort-fifo", "BestEffortFIFO: a smaller Workload passes a head that does not fit",
         (cq("a", {"h100": {GPU: 8}}),), (
        step("6 admitted, 4 waits, 2 passes it", wl("w1", "a", 6), wl("w2", "a", 4), wl("w3", "a", 2)),)),
    Case("strict-fifo", "StrictFIFO: the head that does not fit blocks the queue",
         (cq("a", {"h100": {GPU: 8}}, strategy="StrictFIFO"),), (
        step("6 admitted, 4 blocks 2", wl("w1", "a", 6), wl("w2", "a", 4), wl("w3", "a", 2)),)),
    Case("cohort-borrowing", "borrowing the unused quota of a cohort",
         (cq("a", {"h100": {GPU: 4}}, cohort="c"), cq("b", {"h100": {GPU: 4}}, cohort="c")), (
        step("a takes 6 of the cohort's 8", wl("w1", "a", 6)),
        step("b's 2 still fit, b's next 2 do not", wl("w2", "b", 2), wl("w3", "b", 2)))),
    Case("borrowing-limit", "borrowingLimit caps what a queue borrows",
         (cq("a", {"h100": {GPU: (4, 1, None)}}, cohort="c"), cq("b", {"h100": {GPU: 4}}, cohort="c")), (
        step("6 is over nominal 4 + borrowing 1", wl("w1", "a", 6)),
        step("5 fits", wl("w2", "a", 5)))),
    Case("lending-limit", "lendingLimit caps what a queue lends",
         (cq("a", {"h100": {GPU: 4}}, cohort="c"), cq("b", {"h100": {GPU: (4, None, 1)}}, cohort="c")), (
        step("a cannot borrow 2 when b lends 1", wl("w1", "a", 6)),
        step("5 fits", wl("w2", "a", 5)))),
    Case("two-flavors", "flavors tried in order", (cq("a", {"h100": {GPU: 4}, "a100": {GPU: 4}}),), (
        step("h100, then a100, then nothing", wl("w1", "a", 4), wl("w2", "a", 4), wl("w3", "a", 4)),)),
    Case("flavor-fallback", "a Workload too big for the first flavor gets the second",
         (cq("a", {"h100": {GPU: 4}, "a100": {GPU: 8}}),), (
        step("6 GPUs: a100", wl("w1", "a", 6)),
        step("2 GPUs: h100", wl("w2", "a", 2)))),
    Case("multi-resource", "GPU and NIC quota in one flavor: both must fit",
         (cq("a", {"h100": {GPU: 8, NIC: 4}}),), (
        step("2 GPUs with 3 NICs", wl("w1", "a", 2, nics=3)),
        step("2 GPUs with 2 NICs do not fit the NICs left", wl("w2", "a", 2, nics=2)),
        step("the NIC quota grows", quota("a", 8, resource=NIC)))),
    Case("multi-pod", "a podSet's count multiplies its request", (cq("a", {"h100": {GPU: 8}}),), (
        step("2 pods x 3 GPUs, then 2 pods x 2", wl("w1", "a", 3, count=2), wl("w2", "a", 2, count=2)),)),
    Case("preempt-lower", "withinClusterQueue LowerPriority: a higher priority preempts",
         (cq("a", {"h100": {GPU: 8}}, **{WCQ: "LowerPriority"}),), (
        step("a low Workload takes the quota", wl("w1", "a", 8, priority=LOW)),
        step("a high one preempts it", wl("w2", "a", 8, priority=HIGH)))),
    Case("preempt-never", "withinClusterQueue Never: the higher priority waits",
         (cq("a", {"h100": {GPU: 8}}),), (
        step("a low Workload takes the quota", wl("w1", "a", 8, priority=LOW)),
        step("a high one waits", wl("w2", "a", 8, priority=HIGH)))),
    Case("priority-order", "pending Workloads are admitted by priority, then creation time",
         (cq("a", {"h100": {GPU: 4}}),), (
        step("a blocker, then low, then high", wl("w0", "a", 4), wl("w1", "a", 4, priority=LOW),
             wl("w2", "a", 4, priority=HIGH)),
        step("the blocker goes: high is admitted", off("w0")))),
    Case("nominal-first", "in a cohort, a head within its own nominal quota before an older one that borrows",
         (cq("a", {"h100": {GPU: 4}}, cohort="c"), cq("b", {"h100": {GPU: 4}}, cohort="c")), (
        step("a and b each run 4", wl("w1", "a", 4), wl("w2", "b", 4)),
        step("b's 4, then a's 4, wait", wl("w3", "b", 4), wl("w4", "a", 4)),
        step("w1 deactivated: a's newer one, within a's quota, before b's, which would borrow", off("w1")))),
    Case("head-no-fit", "in a cohort, a queue whose head does not fit puts forward no other Workload that cycle",
         (cq("a", {"h100": {GPU: 2}}, cohort="c"), cq("b", {"h100": {GPU: 2}}, cohort="c")), (
        step("a and b each run 2", wl("w1", "a", 2), wl("w2", "b", 2)),
        step("a's 4, a's 2 and b's 2 wait", wl("w3", "a", 4), wl("w4", "a", 2), wl("w5", "b", 2)),
        step("w1 deactivated: b's head takes the 2 GPUs, a's second Workload waits", off("w1")))),
    Case("reclaim-any", "reclaimWithinCohort Any: a lender takes its quota back",
         (cq("a", {"h100": {GPU: 4}}, cohort="c"), cq("b", {"h100": {GPU: 4}}, cohort="c", **{RWC: "Any"})), (
        step("a borrows all of the cohort", wl("w1", "a", 8)),
        step("b reclaims", wl("w2", "b", 4)))),
    Case("reclaim-never", "reclaimWithinCohort Never: the lender waits",
         (cq("a", {"h100": {GPU: 4}}, cohort="c"), cq("b", {"h100": {GPU: 4}}, cohort="c")), (
        step("a borrows all of the cohort", wl("w1", "a", 8)),
        step("b waits", wl("w2", "b", 4)))),
    Case("quota-raise", "a quota raised mid-run admits what now fits", (cq("a", {"h100": {GPU: 4}}),), (
        step("4 admitted, 4 waits", wl("w1", "a", 4), wl("w2", "a", 4)),
        step("nominal 4 -> 8", quota("a", 8)))),
    Case("quota-lower", "a quota lowered below usage evicts nothing", (cq("a", {"h100": {GPU: 8}}),), (
        step("8 in use", wl("w1", "a", 4), wl("w2", "a", 4)),
        step("nominal 8 -> 4", quota("a", 4)),
        step("a new Workload waits", wl("w3", "a", 2)))),
    Case("reactivation-order", "a reactivated Workload keeps its creation-time position",
         (cq("a", {"h100": {GPU: 4}}),), (
        step("w1 admitted, w2 and w3 wait", wl("w1", "a", 4), wl("w2", "a", 4), wl("w3", "a", 4)),
        step("w1 deactivated: w2 admitted", off("w1")),
        step("w1 reactivated: waits", on("w1")),
        step("w2 deactivated: w1, older than w3, is admitted", off("w2")))),
    Case("hold-release-order", "a pending Workload held and released keeps its creation-time position",
         (cq("a", {"h100": {GPU: 4}}),), (
        step("w1 admitted, w2 and w3 wait", wl("w1", "a", 4), wl("w2", "a", 4), wl("w3", "a", 4)),
        step("w2 held while pending (deactivated)", off("w2")),
        step("w2 released: waits", on("w2")),
        step("w1 deactivated: w2, older than w3, is admitted", off("w1")))),
    Case("demotion-order", "a pending Workload demoted one priority lower is admitted after a newer one",
         (cq("a", {"h100": {GPU: 4}}),), (
        step("w1 admitted, w2 and w3 wait", wl("w1", "a", 4), wl("w2", "a", 4), wl("w3", "a", 4)),
        step("w2 demoted while pending: waits", demote("w2")),
        step("w1 deactivated: w3, newer but not demoted, is admitted", off("w1")))),
    Case("newer-equal", "LowerOrNewerEqualPriority: a reactivated older Workload preempts a newer one",
         (cq("a", {"h100": {GPU: 4}}, **{WCQ: "LowerOrNewerEqualPriority"}),), (
        step("w1 admitted, w2 waits", wl("w1", "a", 4), wl("w2", "a", 4)),
        step("w1 deactivated: w2 admitted", off("w1")),
        step("w1 reactivated: it preempts the newer w2", on("w1")))),
    Case("deactivate-frees", "a deactivated Workload is evicted and its quota released",
         (cq("a", {"h100": {GPU: 4}}, cohort="c"), cq("b", {"h100": {GPU: 0}}, cohort="c")), (
        step("a runs 4, b waits for 4", wl("w1", "a", 4), wl("w2", "b", 4)),
        step("a's Workload deactivated: b borrows", off("w1")))),
    Case("reclaim-lower", "reclaimWithinCohort LowerPriority spares an equal priority",
         (cq("a", {"h100": {GPU: 4}}, cohort="c"),
          cq("b", {"h100": {GPU: 4}}, cohort="c", **{RWC: "LowerPriority"})), (
        step("a borrows 8 at high priority", wl("w1", "a", 8, priority=HIGH)),
        step("b's low Workload waits", wl("w2", "b", 4, priority=LOW)))),
)

KNOWN_DIFFERENCES: dict[str, str] = {
}
