"""A ClusterQueue's pending trace jobs, bucketed by GPU count, for the scheduler's lazy walk.

Why: the Kueue model walks every pending Workload of a queue in order each pass
(BestEffortFIFO), which costs O(backlog) per pass; a trace with a backlog of thousands and
160,000 passes would take hours. With one resource and one flavor a Workload fits exactly when
its GPUs are at most what the queue may take, so the walk can skip every Workload bigger than
that bound without changing what is admitted. Only the head of each size bucket is ever a
candidate: once a head is rejected, every bigger-or-equal Workload of the queue would be too, so
the walk's bound drops below its size for the rest of the pass.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator

from ..kueue._model import WorkloadRecord

__all__ = ["PendingQueue"]


class PendingQueue:
    """Pending records of one ClusterQueue in Kueue's order (priority, queueing time, arrival)."""

    def __init__(self) -> None:
        self._buckets: dict[int, list[tuple[tuple[int, object, int], WorkloadRecord]]] = {}
        self._cap: int | None = None  # the current pass's bound after a rejection
        self.gpus = 0  # pending GPUs in total (the backlog the demand history samples)
        self.count = 0

    def push(self, record: WorkloadRecord, gpus: int) -> None:
        heapq.heappush(self._buckets.setdefault(gpus, []), (record.order_key(), record))
        self.gpus += gpus
        self.count += 1

    def pop_head(self, record: WorkloadRecord, gpus: int) -> None:
        """Remove ``record``: its bucket's head, unless a job preempted in this pass has since been
        requeued in front of it (then it is found and taken out of the middle)."""
        bucket = self._buckets[gpus]
        if bucket[0][1] is record:
            heapq.heappop(bucket)
        else:
            bucket[:] = [entry for entry in bucket if entry[1] is not record]
            heapq.heapify(bucket)
        if not bucket:
            del self._buckets[gpus]
        self.gpus -= gpus
        self.count -= 1

    def records(self) -> Iterator[WorkloadRecord]:
        """Every pending record, in no order (the nightly plan reads how long the oldest waited)."""
        for bucket in self._buckets.values():
            for _, record in bucket:
                yield record

    def rejected(self, gpus: int) -> None:
        """The scheduler found no room for a head of ``gpus``: nothing as big fits this pass."""
        self._cap = gpus - 1 if self._cap is None else min(self._cap, gpus - 1)

    def walk(self, bound: Callable[[], int]) -> Iterator[WorkloadRecord]:
        """Heads in queue order whose GPUs are within ``bound()`` (re-read before every yield)."""
        self._cap = None
        while True:
            limit = bound()
            if self._cap is not None:
                limit = min(limit, self._cap)
            best: tuple[tuple[int, object, int], WorkloadRecord] | None = None
            for gpus, bucket in self._buckets.items():
                if gpus <= limit and (best is None or bucket[0][0] < best[0]):
                    best = bucket[0]
            if best is None:
                return
            yield best[1]
