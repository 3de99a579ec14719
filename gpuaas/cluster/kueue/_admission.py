"""One scheduling pass: flavor assignment and admission order.

Order. Each ClusterQueue orders its pending Workloads by priority (higher first), then by the
time they were queued (FIFO: creation, or the last requeue), as Kueue's queue heap does. The
queueing strategy emulated is **BestEffortFIFO** for every ClusterQueue: a head that does not fit
is marked inadmissible for this pass and the next one is tried, so a large job never blocks
smaller ones behind it. (StrictFIFO is not emulated.)

Rounds. Like Kueue's scheduler cycle, every round takes the next nominated head of each
ClusterQueue and admits them in the order: heads that fit in nominal quota first, then
borrowers; within each, priority then FIFO. A head whose fit was spoiled by an earlier admission in
the same round is nominated again next round. Each round admits at least one head or exhausts
the queues, so a pass is O(workloads x pod sets x flavors).

Flavors. For each pod set and resource group, the ClusterQueue's flavors are tried in order and
the first where every requested covered resource fits (borrowing included: ``whenCanBorrow:
MayStopSearch``) is taken. Resources that no resource group covers are not accounted (as if the
manager excluded them), so a cpu-only head does not need cpu quota in a GPU-only queue.

Preemption is not emulated: nothing is ever evicted to make room.
"""

from __future__ import annotations

from collections.abc import Callable

from ...quantity import format_quantity
from ._model import WorkloadRecord
from ._quota import QuotaBook, Usage

__all__ = ["Assignment", "assign_flavors", "schedule"]

Assignment = tuple[list[dict[str, str]], Usage]
"""Per pod set ``resource -> flavor`` and the total usage charged to the ClusterQueue."""


def assign_flavors(book: QuotaBook, cq_name: str, record: WorkloadRecord) -> Assignment | str:
    """Flavors for every pod set, or the reason (Kueue's message format) why none fit."""
    cq = book.queues[cq_name]
    usage: Usage = {}
    flavors: list[dict[str, str]] = []
    for podset in record.podsets:
        by_group: dict[int, dict[str, int]] = {}
        for resource, per_pod in podset.per_pod.items():
            group = cq.group_for(resource)
            if group is not None:
                by_group.setdefault(group, {})[resource] = per_pod * podset.count
        chosen: dict[str, str] = {}
        for group, needs in by_group.items():
            flavor_names = cq.groups[group][1]
            picked = None
            for flavor in flavor_names:
                if all(book.available(cq_name, (flavor, r)) - usage.get((flavor, r), 0) >= n for r, n in needs.items()):
                    picked = flavor
                    break
            if picked is None:
                return _no_fit(book, cq_name, podset.name, flavor_names, needs, usage)
            for resource, need in needs.items():
                chosen[resource] = picked
                usage[(picked, resource)] = usage.get((picked, resource), 0) + need
        flavors.append(chosen)
    return flavors, usage


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


def schedule(
    book: QuotaBook,
    queues: dict[str, list[WorkloadRecord]],
    admit: Callable[[str, WorkloadRecord, Assignment], None],
    reject: Callable[[str, WorkloadRecord, str], None],
) -> None:
    """Admit what fits from ``queues`` (ClusterQueue -> pending records, already ordered)."""
    position = {cq: 0 for cq in queues}
    live = [cq for cq in sorted(queues) if queues[cq] and cq in book.queues]
    while live:
        heads: list[tuple[bool, tuple[object, ...], str, WorkloadRecord]] = []
        still: list[str] = []
        for cq in live:
            entries = queues[cq]
            while position[cq] < len(entries):
                record = entries[position[cq]]
                result = assign_flavors(book, cq, record)
                if isinstance(result, str):
                    reject(cq, record, result)
                    position[cq] += 1
                    continue
                heads.append((book.would_borrow(cq, result[1]), record.order_key(), cq, record))
                still.append(cq)
                break
        if not heads:
            return
        heads.sort(key=lambda head: (head[0], head[1]))
        for _, _, cq, record in heads:
            result = assign_flavors(book, cq, record)
            if isinstance(result, str):
                continue  # spoiled by an earlier admission this round: nominate again
            admit(cq, record, result)
            position[cq] += 1
        live = still
