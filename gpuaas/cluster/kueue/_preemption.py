"""Kueue's classic preemption for a flat cohort: which admitted Workloads make room, and why.

Without it a rebalance replay is not honest: a queue that lent its quota gets it back only by
evicting the borrowers, and the work they lose is the price of borrowing. The algorithm follows
Kueue v0.19 (``pkg/scheduler/preemption``: ``preemption.go`` ``classicalPreemptions``,
``fillBackWorkloads``, ``workloadFits``; ``classical/candidate_generator.go`` and
``hierarchical_preemption.go``; ``common/ordering.go`` and ``preemption_policy.go``):

* **Eligible** (``flavorassigner.fitsResourceQuota``): a flavor/resource that does not fit may
  preempt only when the Workload's request there is at most the queue's ``nominalQuota``.
* **Candidates**: admitted Workloads using a flavor/resource that needs preemption, from the same
  ClusterQueue if ``withinClusterQueue`` allows (``LowerPriority``: lower priority;
  ``LowerOrNewerEqualPriority``: also equal priority queued later), and from *other ClusterQueues
  of the cohort that are borrowing* (usage above nominal) if ``reclaimWithinCohort`` allows
  (``LowerPriority`` or ``Any``). A cohort candidate is a *reclaim* (reason
  ``InCohortReclamation``) when the preemptor fits within its own nominal quota; otherwise it may
  only be taken if the preemptor would not borrow afterwards.
* **Order** (``CandidatesOrdering``): other ClusterQueues before the preemptor's own, then lower
  priority, then the most recently admitted, then UID; reclaim candidates before the others,
  same-queue candidates last.
* **Targets**: candidates are removed greedily in that order, skipping a cohort candidate whose
  queue is no longer above nominal, until the preemptor fits (with or without borrowing, in the
  order Kueue tries them); then the set is minimised by adding candidates back in reverse.

Not emulated: ``borrowWithinCohort`` (treated as ``Never``), fair sharing, hierarchical cohorts,
admission fair sharing, and the wait for evicted pods to terminate (an eviction is immediate, so
the preemptor is admitted in the same pass: Kueue reserves the freed quota for it in its cycle).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from ._model import WorkloadRecord
from ._quota import ClusterQueueQuota, FlavorResource, QuotaBook, Usage

__all__ = ["IN_CLUSTER_QUEUE", "IN_COHORT_RECLAMATION", "AdmittedIndex", "Target", "find_targets",
           "preemption_message"]

IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
_HUMAN = {IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
          IN_COHORT_RECLAMATION: "reclamation within the cohort"}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Target:
    """One Workload to evict, and the ``Preempted`` condition's reason."""

    record: WorkloadRecord
    reason: str


class AdmittedIndex:
    """Admitted Workloads per ClusterQueue, kept current as the pass admits and evicts."""

    def __init__(self, records: Iterable[WorkloadRecord] = ()) -> None:
        self.by_queue: dict[str, dict[tuple[str, str], WorkloadRecord]] = {}
        for record in records:
            self.add(record)

    def add(self, record: WorkloadRecord) -> None:
        if record.cluster_queue:
            self.by_queue.setdefault(record.cluster_queue, {})[record.key] = record

    def remove(self, record: WorkloadRecord, cq: str) -> None:
        self.by_queue.get(cq, {}).pop(record.key, None)

    def of(self, cq: str) -> Iterable[WorkloadRecord]:
        return self.by_queue.get(cq, {}).values()


def satisfies_policy(preemptor: WorkloadRecord, candidate: WorkloadRecord, policy: str) -> bool:
    """``SatisfiesPreemptionPolicy``; the emulator's queue-order timestamp is ``queued_at``."""
    lower = preemptor.priority > candidate.priority
    if policy == "LowerPriority":
        return lower
    if policy == "LowerOrNewerEqualPriority":
        return lower or (preemptor.priority == candidate.priority and preemptor.queued_at < candidate.queued_at)
    return policy == "Any"


def _order(preemptor_cq: str, record: WorkloadRecord) -> tuple[bool, int, float, str]:
    admitted = (record.admitted_at or _EPOCH).timestamp()
    return (record.cluster_queue == preemptor_cq, record.priority, -admitted, record.uid or record.name)


def _uses(record: WorkloadRecord, need: set[FlavorResource]) -> bool:
    return any(fr in need for fr in record.usage)


def _above_nominal(cq: ClusterQueueQuota, need: set[FlavorResource]) -> bool:
    """Not ``IsWithinNominalInResources``: usage above nominal in one of ``need``."""
    return any(cq.usage.get(fr, 0) > cq.nominal(fr) for fr in need)


def _fits(book: QuotaBook, cq_name: str, request: Usage, borrow: bool) -> bool:
    cq = book.queues[cq_name]
    for fr, amount in request.items():
        if not borrow and cq.usage.get(fr, 0) + amount > cq.nominal(fr):
            return False
        if amount > max(0, book.available(cq_name, fr)):
            return False
    return True


def find_targets(book: QuotaBook, cq_name: str, preemptor: WorkloadRecord, request: Usage,
                 need: set[FlavorResource], admitted: AdmittedIndex) -> list[Target]:
    """The Workloads whose eviction lets ``request`` fit in ``cq_name``; empty when none does.

    ``need`` is the flavor/resources where the request does not fit now. The book is changed
    while searching and restored before returning.
    """
    cq = book.queues[cq_name]
    policy = cq.preemption
    same: list[WorkloadRecord] = []
    if policy.within_cluster_queue != "Never":
        same = [w for w in admitted.of(cq_name)
                if _uses(w, need) and satisfies_policy(preemptor, w, policy.within_cluster_queue)]
    reclaim: list[WorkloadRecord] = []
    without_borrowing: list[WorkloadRecord] = []
    if cq.cohort is not None and policy.reclaim_within_cohort != "Never":
        advantage = all(cq.usage.get(fr, 0) + amount <= cq.nominal(fr) for fr, amount in request.items())
        into = reclaim if advantage else without_borrowing
        for other in book.queues.values():
            if other.name == cq_name or other.cohort != cq.cohort or not _above_nominal(other, need):
                continue
            into.extend(w for w in admitted.of(other.name)
                        if _uses(w, need) and satisfies_policy(preemptor, w, policy.reclaim_within_cohort))
    for group in (same, reclaim, without_borrowing):
        group.sort(key=lambda w: _order(cq_name, w))
    candidates = ([(w, IN_COHORT_RECLAMATION, False) for w in reclaim]
                  + [(w, IN_COHORT_RECLAMATION, True) for w in without_borrowing]
                  + [(w, IN_CLUSTER_QUEUE, False) for w in same])
    if not reclaim and not without_borrowing:
        attempts = [True]
    elif not all(cq.usage.get(fr, 0) < cq.nominal(fr) for fr in need):
        attempts = [True]
    elif not reclaim:
        attempts = [False, True]
    else:
        attempts = [True, False]
    for borrow in attempts:
        removed: list[Target] = []
        for record, reason, only_without_borrowing in candidates:
            owner = record.cluster_queue or ""
            if owner != cq_name:
                if borrow and only_without_borrowing:
                    continue
                if not _above_nominal(book.queues[owner], need):
                    continue
            book.add(owner, record.usage, -1)
            removed.append(Target(record, reason))
            if _fits(book, cq_name, request, borrow):
                targets = _fill_back(book, cq_name, request, borrow, removed)
                _restore(book, targets)
                return targets
        _restore(book, removed)
    return []


def _fill_back(book: QuotaBook, cq_name: str, request: Usage, borrow: bool, targets: list[Target]) -> list[Target]:
    """Kueue's minimisation: give back, last-but-one first, every target the preemptor can spare."""
    targets = list(targets)
    for i in range(len(targets) - 2, -1, -1):
        record = targets[i].record
        book.add(record.cluster_queue or "", record.usage)
        if _fits(book, cq_name, request, borrow):
            targets[i] = targets[-1]
            targets.pop()
        else:
            book.add(record.cluster_queue or "", record.usage, -1)
    return targets


def _restore(book: QuotaBook, targets: list[Target]) -> None:
    for target in targets:
        book.add(target.record.cluster_queue or "", target.record.usage)


def preemption_message(preemptor: WorkloadRecord, preemptor_path: str, preemptee_path: str, reason: str) -> str:
    """The ``Evicted``/``Preempted`` message Kueue writes (``preemptionMessage``)."""
    job_uid = (preemptor.owner or {}).get("uid") or "UNKNOWN"
    return (f"Preempted to accommodate a workload (UID: {preemptor.uid or 'UNKNOWN'}, JobUID: {job_uid}) due to "
            f"{_HUMAN.get(reason, 'UNKNOWN')}; preemptor path: {preemptor_path}; preemptee path: {preemptee_path}")
