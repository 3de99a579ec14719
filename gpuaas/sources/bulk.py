"""Reading in bulk: Python's cyclic garbage collector paused while a collect or a report reads the fleet.

At 16,000 GPUs a collect decodes a few hundred MB of Kubernetes pages and PromQL answers (a page of
500 Workloads is about 10^5 dicts and lists) into a process that already holds a GB of objects.
While those pages are alive, every burst of allocations sets off collections, and the oldest
generation's walk the whole heap, again and again as it grows: with the collector left on, the
full-size collect spent 19 CPU seconds, with it off 14. Decoded JSON has no reference cycles, and
the pages die by reference counting once their rows are taken, so pausing the collector for the
read-and-join phase (``collector_paused``, around the collect's and the cost report's reads) lets
them go without ever being walked. The pause is counted, so concurrent and nested readers (the
sources run in threads) resume it only when the last one is done; the collector then runs as usual.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from threading import Lock

__all__ = ["collector_paused"]

_lock = Lock()
_holders = 0
_paused_here = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off for the block (if it was on), back on when the last holder leaves."""
    global _holders, _paused_here
    with _lock:
        _holders += 1
        if _holders == 1 and gc.isenabled():
            gc.disable()
            _paused_here = True
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _paused_here:
                _paused_here = False
                gc.enable()

