"""A ClusterQueue's pending trace jobs, bucketed by GPU count, for the scheduler's lazy walk.

Why: the Kueue model walks every pending Workload of a queue in order each pass
(BestEffortFIFO), which costs O(backlog) per pass; a trace with a backlog of thousands and
160,000 passes would take hours. With one resource and one flavor a Workload fits exactly when
its GPUs are at most what the queue may take, so the walk can skip every Workload bigger than
that bound without changing what is admitted. Kueue puts forward one Workload per queue per
cycle, and one that does not fit costs its queue that cycle: the walk says how many records it left
out before each one it yields (an ``int``), and the scheduler counts them as rounds lost. Each
bucket is kept sorted, so that count is a bisection per bucket. A pass sees the records pending when it starts (as the emulator's controller does): a
record pushed during a pass (a preempted job) joins the buckets when the next pass starts.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Generator, Iterator
from datetime import datetime
from itertools import islice

from ..kueue._model import WorkloadRecord

__all__ = ["PendingQueue"]

Key = tuple[int, datetime, int]
Entry = tuple[Key, WorkloadRecord]


def _key(entry: Entry) -> Key:
    return entry[0]


class PendingQueue:
    """Pending records of one ClusterQueue in Kueue's order (priority, queueing time, arrival)."""

    def __init__(self) -> None:
        self._buckets: dict[int, list[Entry]] = {}  # GPUs -> entries sorted by order key
        self._late: list[tuple[Entry, int]] = []  # pushed since the last pass started
        self.gpus = 0  # pending GPUs in total (the backlog the demand history samples)
        self.count = 0

    def push(self, record: WorkloadRecord, gpus: int) -> None:
        self._late.append(((record.order_key(), record), gpus))
        self.gpus += gpus
        self.count += 1

    def _settle(self) -> None:
        for entry, gpus in self._late:
            insort(self._buckets.setdefault(gpus, []), entry, key=_key)
        self._late.clear()

    def remove(self, record: WorkloadRecord, gpus: int) -> None:
        """Take ``record`` (one the current pass put forward) out of its bucket."""
        bucket = self._buckets[gpus]
        i = bisect_left(bucket, record.order_key(), key=_key)
        assert bucket[i][1] is record
        del bucket[i]
        if not bucket:
            del self._buckets[gpus]
        self.gpus -= gpus
        self.count -= 1

    def records(self) -> Iterator[WorkloadRecord]:
        """Every pending record, in no order (the nightly plan reads how long the oldest waited)."""
        for bucket in self._buckets.values():
            for _, record in bucket:
                yield record
        for (_, record), _ in self._late:
            yield record

    def ordered(self) -> list[WorkloadRecord]:
        """Every pending record in queue order (the un-bucketed walk, to check the bucketed one)."""
        self._settle()
        return [record for _, record in heapq.merge(*self._buckets.values(), key=_key)]

    def _starts(self, last: Key | None) -> dict[int, int]:
        """Per bucket, the index of its first record after ``last`` (all of it when None)."""
        return {gpus: 0 if last is None else bisect_right(bucket, last, key=_key)
                for gpus, bucket in self._buckets.items()}

    def _after(self, last: Key | None, n: int) -> Key:
        """The order key of the ``n``-th record after ``last`` (1-based)."""
        tails = [islice(self._buckets[gpus], i, None) for gpus, i in self._starts(last).items()]
        return next(islice(heapq.merge(*tails, key=_key), n - 1, None))[0]

    def walk(self, bound: Callable[[], int], loosens: bool = False) -> Generator[WorkloadRecord | int, int | None, None]:
        """Records in queue order whose GPUs are within ``bound()`` (re-read before every one), each
        after the number of records left out before it, when there are any. Sent ``n`` instead of
        resumed after such a number: quota was freed after ``n`` of them had been passed over, so what
        follows them is walked again. ``loosens``: quota may be freed in the pass (preemption), so the
        records after the last that fits are counted out too, for the scheduler to send back."""
        self._settle()
        last: Key | None = None  # the order key of the last record yielded
        while True:
            limit = bound()
            starts = self._starts(last)
            best: Entry | None = None
            for gpus, i in starts.items():
                bucket = self._buckets[gpus]
                if gpus <= limit and i < len(bucket) and (best is None or bucket[i][0] < best[0]):
                    best = bucket[i]
            if best is None and not loosens:
                return
            skipped = sum((len(self._buckets[gpus]) if best is None else
                           bisect_left(self._buckets[gpus], best[0], key=_key)) - i for gpus, i in starts.items())
            if skipped:
                passed = yield skipped
                if passed is not None:
                    last = self._after(last, passed) if passed else last
                    continue
            if best is None:
                return
            yield best[1]
            last = best[0]
