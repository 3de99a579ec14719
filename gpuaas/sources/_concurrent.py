"""Independent reads at the same time: a cycle waits for its slowest read, not for their sum.

Prometheus evaluates each query on one core, the API server serialises a list while we decode the
previous one; at 16,000 GPUs the reads are tens of seconds each, so the ones that do not depend
on each other go out together. A small bound (two PromQL queries at once by default) keeps a
shared production Prometheus from being hit by a whole cycle at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["PROMQL_AT_ONCE", "at_once"]

PROMQL_AT_ONCE = 2
"""PromQL queries a reader sends at the same time."""

_NOT_RUN = object()


def at_once(calls: Sequence[Callable[[], Any]], workers: int = PROMQL_AT_ONCE) -> list[Any]:
    """Every call's result, in order, after all of them finished; the first call's (in order) error
    is raised when one failed, so the caller sees the same error types as when run one by one.

    A call that fails (after the retries of its own requests) fails the whole read, so once one has failed
    the calls not yet started are not started: their requests could only be thrown away (a list of 100,000
    pods is 200 of them). Those already running finish (a request in flight is not interrupted)."""
    if len(calls) <= 1 or workers <= 1:
        return [call() for call in calls]
    failed = threading.Event()

    def guarded(call: Callable[[], Any]) -> Any:
        if failed.is_set():
            return _NOT_RUN
        try:
            return call()
        except BaseException:
            failed.set()  # before this worker takes the next call
            raise

    with ThreadPoolExecutor(max_workers=min(workers, len(calls)), thread_name_prefix="gpuaas-read") as pool:
        futures = [pool.submit(guarded, call) for call in calls]
        return [future.result() for future in futures]
