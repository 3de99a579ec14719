"""Task options shared by every I/O task: which errors are retried, and how.

The error type decides: a ``TransientError`` (timeout, refused connection, 5xx, 429) is
worth another attempt with exponential backoff and jitter; a ``PermanentError`` (malformed
answer, 404, conflict, bad config) fails at once, because retrying it only delays the
operator's view of the real problem.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

from gpuaas.errors import ActionRefused, ConfigError, SchemaMismatch, TransientError
from gpuaas.settings import GpuaasSettings
from gpuaas.sources.failures import describe_failure
from tasks._steps import run_logger

if TYPE_CHECKING:
    from prefect import Task

T = TypeVar("T")
P = ParamSpec("P")
R = TypeVar("R")

__all__ = ["IO_TASK_OPTIONS", "current_run_id", "exponential_backoff", "gpuaas_task", "push_or_warn", "retry_options",
           "retry_transient_only", "unwalked"]


MAX_BACKOFF_S = 300.0
"""The longest wait between two tries: a source down for longer is reported by this run and tried by the next."""


def exponential_backoff(backoff_factor: float) -> Callable[[int], list[float]]:
    """Retry delays ``backoff_factor * 2**n``, as ``prefect.tasks.exponential_backoff`` (without importing Prefect),
    each at most ``MAX_BACKOFF_S``."""
    def delays(retries: int) -> list[float]:
        return [min(backoff_factor * 2**n, MAX_BACKOFF_S) for n in range(min(retries, 50))]
    return delays


def retry_transient_only(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect ``retry_condition_fn``: True only when the task raised a TransientError.

    A server that answered 429/503 with ``Retry-After`` is waited for here, before Prefect's own
    backoff: Prefect's delay is fixed per task, the server's is per answer.
    """
    try:
        state.result()
    except TransientError as exc:
        if exc.retry_after:
            time.sleep(exc.retry_after)
        return True
    except Exception:  # noqa: BLE001 - any other failure is permanent by definition
        return False
    return False


def retry_unless_misconfigured(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect ``retry_condition_fn`` of the store steps: retry whatever failed (a database busy for a moment)
    but a ``ConfigError``, which the same settings raise again (a database that holds another cluster's history),
    a database at a schema the run may not use (``SchemaMismatch``: it is there again on the next try), and a
    refusal of gpuaas's own (``ActionRefused``: a snapshot id the store does not hold), which a second try only
    delays."""
    try:
        state.result()
    except (ConfigError, SchemaMismatch, ActionRefused):
        return False
    except Exception:  # noqa: BLE001 - anything else may pass on a second try
        return True
    return False


IO_TASK_OPTIONS: dict[str, Any] = {
    "retries": 3,
    "retry_delay_seconds": exponential_backoff(backoff_factor=2),
    "retry_jitter_factor": 0.5,
    "retry_condition_fn": retry_transient_only,
    "timeout_seconds": 120,
}


def gpuaas_task(name: str, *, io: bool = False, **options: Any) -> Callable[[Callable[P, R]], Task[P, R]]:
    """The one decorator of every gpuaas Prefect task: ``@gpuaas_task("read-source", io=True)``.

    Every task is ``NO_CACHE``: their inputs are settings, clients and DataFrames, which Prefect
    hashes slowly or not at all, and many have side effects (a cached "act" would skip a write
    on the next run). ``io=True`` adds ``IO_TASK_OPTIONS`` (transient-only retries with backoff,
    a timeout) for a task that talks to a source; ``options`` are Prefect's own and win over both.
    Prefect is imported here, not with this module: the collect's steps use these options
    without it (``tasks._steps``).
    """
    from prefect import task
    from prefect.cache_policies import NO_CACHE

    merged: dict[str, Any] = {"name": name, "cache_policy": NO_CACHE, **(IO_TASK_OPTIONS if io else {}), **options}

    def decorate(fn: Callable[P, R]) -> Task[P, R]:
        return cast("Task[P, R]", task(fn, **merged))

    return decorate


def retry_options(settings: GpuaasSettings) -> dict[str, Any]:
    """Per-run overrides from the settings (``GPUAAS_RETRIES``, ``GPUAAS_RETRY_BACKOFF_SECONDS``)."""
    return {
        "retries": settings.retries,
        "retry_delay_seconds": exponential_backoff(backoff_factor=settings.retry_backoff_seconds)
        if settings.retry_backoff_seconds > 0 else 0,
    }


def current_run_id() -> str | None:
    """The flow run's id for audit rows, or None outside a flow run (a plain call in a REPL, a test, the command line)."""
    if "prefect" not in sys.modules:  # not loaded: no run to name
        return None
    from prefect import runtime

    return str(runtime.flow_run.id) if runtime.flow_run.id else None


def push_or_warn(settings: GpuaasSettings, push: Any, *args: Any, what: str) -> Any | None:
    """Run the Pushgateway task ``push(settings, *args)`` with the settings' retries; its result, or None.

    None without a Pushgateway, and None with a warning when the push still fails after its
    retries: the run's answer is already stored and the Pushgateway keeps the previous figures,
    so a push is never a reason to fail the run (or, as the reclaim flow's collect, to block it).
    """
    if not settings.pushgateway_url:
        return None
    state = push.with_options(**retry_options(settings))(settings, *args, return_state=True)
    if state.is_completed():
        return state.result()
    failure = state.result(raise_on_failure=False)
    reason = describe_failure(settings, "pushgateway", failure) if isinstance(failure, BaseException) else failure
    run_logger().warning("%s not pushed: %s", what, reason)
    return None


def unwalked(value: T) -> T:
    """``value`` as a task argument Prefect hands over without walking it.

    Prefect visits every element of a task's arguments, looking for futures and states to resolve
    and to draw in the run graph; a snapshot of 50,000 Workloads took seconds a call (``quote``
    stops that; the task still receives ``value`` itself). Without Prefect loaded nothing walks it.
    """
    if "prefect" not in sys.modules:
        return value
    from prefect.utilities.annotations import quote

    return cast(T, quote(value))
