"""One scheduling pass: flavor assignment and admission order.

Order. Each ClusterQueue orders its pending Workloads by priority (higher first), then by the
time they were queued (FIFO: creation, or the last requeue), as Kueue's queue heap does. The
queueing strategy is **BestEffortFIFO** by default: a head that does not fit is marked
inadmissible for this pass and the next one is tried in the next round, so a large job never blocks
smaller ones behind it (it costs its queue a round). Under **StrictFIFO** a head that does not fit
(and cannot preempt) blocks its queue for the pass: the Workloads behind it are not tried.

Rounds. Like Kueue's scheduler cycle, every round takes the head of each ClusterQueue; a head
that does not fit is set aside and its queue puts forward nothing else that round. The nominated
heads are admitted in the order: heads that fit in nominal quota first, then borrowers; within
each, priority then FIFO. A head whose fit was spoiled by an earlier admission in
the same round is nominated again next round. Each round admits at least one head or sets one
aside, so a pass is O(workloads x (pod sets x flavors + ClusterQueues)).

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

from collections.abc import Callable, Generator, Iterable, Iterator, Mapping

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
    queues: Mapping[str, Iterable[WorkloadRecord | int]],
    admit: Callable[[str, WorkloadRecord, Assignment], None],
    reject: Callable[[str, WorkloadRecord, str], None],
    preemption: Preemption | None = None,
) -> None:
    """Admit what fits from ``queues`` (ClusterQueue -> pending records, already ordered).

    Kueue's cycles: every round each ClusterQueue puts forward its next record only. One that does
    not fit (and cannot preempt) is set aside for the pass and costs its queue the round; the next
    record is tried next round. A queue may be any iterable, consumed lazily; besides records it may
    yield an ``int`` n: the next n records of the queue, left out by the caller because they cannot
    fit (the replay's size-bucketed queues), each costing the queue a round as if it were set aside.
    Those are left out on the book as it was: when a preemption frees quota while such a queue still
    has rounds to lose, the queue (a generator) is sent how many it has lost, and answers with its
    next item again from there.
    """
    cursors: dict[str, Iterator[WorkloadRecord | int]] = {cq: iter(queues[cq]) for cq in queues}
    current: dict[str, WorkloadRecord | int | None] = {}
    skipped: dict[str, int] = {}  # the last count of left-out records each queue yielded
    # A record asking what an earlier one of the same queue and priority was refused on the same book
    # (no admission or eviction since; queued no earlier, so with no more preemption candidates) is
    # refused the same way, without another search of a full cohort.
    version = 0
    refused: dict[tuple[str, tuple[object, ...]], tuple[int, str]] = {}

    def advance(cq: str) -> None:
        current[cq] = item = next(cursors[cq], None)
        if isinstance(item, int):
            assert item > 0, f"{cq}: a queue left out {item} records"
            skipped[cq] = item

    def loosened() -> None:
        """Quota was freed: queues losing rounds to left-out records say again what comes next."""
        for cq in live:
            item, cursor = current[cq], cursors[cq]
            if isinstance(item, int) and isinstance(cursor, Generator):
                try:
                    current[cq] = again = cursor.send(skipped[cq] - item)
                except StopIteration:
                    current[cq] = None
                    continue
                if isinstance(again, int):
                    skipped[cq] = again

    for cq in cursors:
        advance(cq)
    live = [cq for cq in sorted(queues) if current[cq] is not None and cq in book.queues]

    while live:
        skipping = [item for cq in live if isinstance(item := current[cq], int)]
        if len(skipping) == len(live):  # no queue puts a record forward: the book stays as it is
            lost = min(skipping) - 1
            for cq in live:
                item = current[cq]
                assert isinstance(item, int)
                current[cq] = item - lost
        heads: list[tuple[bool, tuple[object, ...], str, WorkloadRecord]] = []
        for cq in live:
            record = current[cq]
            if isinstance(record, int):  # one record left out by the caller: this round is lost
                if book.queues[cq].strict_fifo:
                    current[cq] = None  # the head blocks the queue
                elif record > 1:
                    current[cq] = record - 1
                else:
                    advance(cq)
                continue
            assert record is not None
            ask = (cq, _request_key(record))
            known = refused.get(ask)
            result: Assignment | str = known[1] if known is not None and known[0] == version else \
                assign_flavors(book, cq, record)
            if isinstance(result, str):
                plan = None if known is not None and known[0] == version or preemption is None else \
                    preemption.plan(cq, record)
                if plan is None:
                    refused[ask] = (version, result)
                    reject(cq, record, result)
                    if book.queues[cq].strict_fifo:
                        current[cq] = None  # the head blocks the queue
                    else:
                        advance(cq)  # set aside: the queue's next record is tried next round
                    continue
                usage = plan[0][1]
            else:
                usage = result[1]
            heads.append((book.would_borrow(cq, usage), record.order_key(), cq, record))
        heads.sort(key=lambda head: (head[0], head[1]))
        for _, _, cq, record in heads:
            result = assign_flavors(book, cq, record)
            if isinstance(result, str) and preemption is not None:
                plan = preemption.plan(cq, record)
                if plan is not None:
                    preemption.issue(cq, record, plan[1])
                    version += 1
                    loosened()
                    result = assign_flavors(book, cq, record)
            if isinstance(result, str):
                continue  # spoiled by an earlier admission this round: nominate again
            admit(cq, record, result)
            version += 1
            if preemption is not None:
                preemption.admitted(record)
            advance(cq)
        live = [cq for cq in live if current[cq] is not None]
