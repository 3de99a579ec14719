"""One scheduling pass: flavor assignment and admission order.

Order. Each ClusterQueue orders its pending Workloads by priority (higher first), then by the
time they were queued (FIFO: creation, or the last requeue), as Kueue's queue heap does. The
queueing strategy is **BestEffortFIFO** by default: a head that does not fit is marked
inadmissible for this pass and the next one is tried, so a large job never blocks smaller ones
behind it. Under **StrictFIFO** a head that does not fit (and cannot preempt) blocks its queue
for the pass: the Workloads behind it are not tried.

Rounds. Like Kueue's scheduler cycle, every round takes the next nominated head of each
ClusterQueue and admits them in the order: heads that fit in nominal quota first, then
borrowers; within each, priority then FIFO. A head whose fit was spoiled by an earlier admission in
the same round is nominated again next round. Each round admits at least one head or exhausts
the queues, so a pass is O(workloads x pod sets x flavors).

Flavors. For each pod set and resource group, the ClusterQueue's flavors are tried in order and
the first where every requested covered resource fits (borrowing included: ``whenCanBorrow:
MayStopSearch``) is taken. Resources that no resource group covers are not accounted (as if the
manager excluded them), so a cpu-only head does not need cpu quota in a GPU-only queue.

Preemption. With a ``Preemption`` hook (ClusterQueues with ``spec.preemption``), a head that
fits nowhere but is eligible to preempt on a flavor (see ``_preemption``) is nominated with the
others; when its turn comes its targets are computed again on the current book, evicted, and it
is admitted. A flavor that fits is preferred to an earlier one that needs preemption
(``whenCanPreempt: TryNextFlavor``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping

from ...quantity import format_quantity
from ._model import WorkloadRecord
from ._preemption import AdmittedIndex, Target, find_targets
from ._quota import FlavorResource, QuotaBook, Usage

__all__ = ["Assignment", "Preemption", "assign_flavors", "schedule"]

Assignment = tuple[list[dict[str, str]], Usage]
"""Per pod set ``resource -> flavor`` and the total usage charged to the ClusterQueue."""


def assign_flavors(book: QuotaBook, cq_name: str, record: WorkloadRecord) -> Assignment | str:
    """Flavors for every pod set, or the reason (Kueue's message format) why none fit."""
    result = _assign(book, cq_name, record, preempt=False)
    return result if isinstance(result, str) else (result[0], result[1])


def _assign(book: QuotaBook, cq_name: str, record: WorkloadRecord,
            preempt: bool) -> tuple[list[dict[str, str]], Usage, set[FlavorResource]] | str:
    """Flavors per pod set, plus the flavor/resources that need preemption (only with ``preempt``).

    A group takes its first flavor that fits; failing that (``preempt``) its first flavor where
    every resource that does not fit asks at most the queue's nominal quota.
    """
    cq = book.queues[cq_name]
    usage: Usage = {}
    flavors: list[dict[str, str]] = []
    need: set[FlavorResource] = set()
    for podset in record.podsets:
        by_group: dict[int, dict[str, int]] = {}
        for resource, per_pod in podset.per_pod.items():
            group = cq.group_for(resource)
            if group is not None:
                by_group.setdefault(group, {})[resource] = per_pod * podset.count
        chosen: dict[str, str] = {}
        for group, needs in by_group.items():
            flavor_names = cq.groups[group][1]
            picked: str | None = None
            short: set[FlavorResource] = set()
            for flavor in flavor_names:
                if all(book.available(cq_name, (flavor, r)) - usage.get((flavor, r), 0) >= n for r, n in needs.items()):
                    picked, short = flavor, set()
                    break
                if not preempt or picked is not None:
                    continue
                missing = {(flavor, r) for r, n in needs.items()
                           if book.available(cq_name, (flavor, r)) - usage.get((flavor, r), 0) < n}
                if all(usage.get(fr, 0) + needs[fr[1]] <= cq.nominal(fr) for fr in missing):
                    picked, short = flavor, missing
            if picked is None:
                return _no_fit(book, cq_name, podset.name, flavor_names, needs, usage)
            need |= short
            for resource, amount in needs.items():
                chosen[resource] = picked
                usage[(picked, resource)] = usage.get((picked, resource), 0) + amount
        flavors.append(chosen)
    return flavors, usage, need


class Preemption:
    """The scheduler's hook into preemption: who would make room for a head, and evicting them.

    ``evict(target, preemptor, cq)`` does the eviction (conditions, quota release); the index of
    admitted Workloads is kept current here, so ``admitted(record)`` must be called on every
    admission of the pass.
    """

    def __init__(self, book: QuotaBook, admitted: AdmittedIndex,
                 evict: Callable[[Target, WorkloadRecord, str], None]) -> None:
        self.book, self.index, self._evict = book, admitted, evict

    def plan(self, cq: str, record: WorkloadRecord) -> tuple[Assignment, list[Target]] | None:
        """The preempt-mode assignment and its targets, or None (no flavor eligible, no targets)."""
        if not self.book.queues[cq].preemption.enabled:
            return None
        result = _assign(self.book, cq, record, preempt=True)
        if isinstance(result, str) or not result[2]:
            return None
        flavors, usage, need = result
        targets = find_targets(self.book, cq, record, usage, need, self.index)
        return ((flavors, usage), targets) if targets else None

    def issue(self, cq: str, record: WorkloadRecord, targets: list[Target]) -> None:
        for target in targets:
            owner = target.record.cluster_queue or ""
            self._evict(target, record, cq)
            self.index.remove(target.record, owner)

    def admitted(self, record: WorkloadRecord) -> None:
        self.index.add(record)


def _no_fit(
    book: QuotaBook, cq_name: str, podset: str, flavor_names: tuple[str, ...], needs: dict[str, int], usage: Usage
) -> str:
    reasons = []
    for flavor in flavor_names:
        for resource, need in sorted(needs.items()):
            missing = need - (book.available(cq_name, (flavor, resource)) - usage.get((flavor, resource), 0))
            if missing > 0:
                more = format_quantity(resource, missing)
                reasons.append(f"insufficient unused quota for {resource} in flavor {flavor}, {more} more needed")
                break
    return f"couldn't assign flavors to pod set {podset}: {'; '.join(reasons) or 'no flavor fits'}"


def _request_key(record: WorkloadRecord) -> tuple[object, ...]:
    """What flavor assignment and the preemption search read of a record, but its queueing time."""
    return (record.priority, tuple((ps.name, ps.count, tuple(sorted(ps.per_pod.items()))) for ps in record.podsets))


def schedule(
    book: QuotaBook,
    queues: Mapping[str, Iterable[WorkloadRecord]],
    admit: Callable[[str, WorkloadRecord, Assignment], None],
    reject: Callable[[str, WorkloadRecord, str], None],
    preemption: Preemption | None = None,
) -> None:
    """Admit what fits from ``queues`` (ClusterQueue -> pending records, already ordered).

    A queue may be any iterable; it is consumed lazily, so a caller can skip records that cannot
    fit without changing the outcome (the replay's size-bucketed queues do).
    """
    cursors: dict[str, Iterator[WorkloadRecord]] = {cq: iter(queues[cq]) for cq in queues}
    current: dict[str, WorkloadRecord | None] = {cq: next(cursors[cq], None) for cq in cursors}
    live = [cq for cq in sorted(queues) if current[cq] is not None and cq in book.queues]

    def advance(cq: str) -> None:
        current[cq] = next(cursors[cq], None)

    while live:
        heads: list[tuple[bool, tuple[object, ...], str, WorkloadRecord]] = []
        still: list[str] = []
        for cq in live:
            # The book does not change while heads are chosen: a record asking what an earlier one of
            # the same queue and priority was refused (queued no earlier, so with no more preemption
            # candidates) is refused the same way, without another search of a full cohort.
            refused: dict[tuple[object, ...], str] = {}
            while (record := current[cq]) is not None:
                ask = _request_key(record)
                if ask in refused:
                    reject(cq, record, refused[ask])
                    advance(cq)
                    continue
                result = assign_flavors(book, cq, record)
                if isinstance(result, str):
                    plan = preemption.plan(cq, record) if preemption is not None else None
                    if plan is None:
                        refused[ask] = result
                        reject(cq, record, result)
                        if book.queues[cq].strict_fifo:
                            current[cq] = None  # the head blocks the queue
                            break
                        advance(cq)
                        continue
                    usage = plan[0][1]
                else:
                    usage = result[1]
                heads.append((book.would_borrow(cq, usage), record.order_key(), cq, record))
                still.append(cq)
                break
        if not heads:
            return
        heads.sort(key=lambda head: (head[0], head[1]))
        for _, _, cq, record in heads:
            result = assign_flavors(book, cq, record)
            if isinstance(result, str) and preemption is not None:
                plan = preemption.plan(cq, record)
                if plan is not None:
                    preemption.issue(cq, record, plan[1])
                    result = assign_flavors(book, cq, record)
            if isinstance(result, str):
                continue  # spoiled by an earlier admission this round: nominate again
            admit(cq, record, result)
            if preemption is not None:
                preemption.admitted(record)
            advance(cq)
        live = still
