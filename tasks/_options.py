"""Task options shared by every I/O task: which errors are retried, and how.

The error type decides: a ``TransientError`` (timeout, refused connection, 5xx, 429) is
worth another attempt with exponential backoff and jitter; a ``PermanentError`` (malformed
answer, 404, conflict, bad config) fails at once, because retrying it only delays the
operator's view of the real problem.
"""

from __future__ import annotations

import time
from typing import Any

from prefect.tasks import exponential_backoff

from gpuaas.errors import TransientError
from gpuaas.settings import GpuaasSettings

__all__ = ["IO_TASK_OPTIONS", "current_run_id", "retry_options", "retry_transient_only"]


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


IO_TASK_OPTIONS: dict[str, Any] = {
    "retries": 3,
    "retry_delay_seconds": exponential_backoff(backoff_factor=2),
    "retry_jitter_factor": 0.5,
    "retry_condition_fn": retry_transient_only,
    "timeout_seconds": 120,
}


def retry_options(settings: GpuaasSettings) -> dict[str, Any]:
    """Per-run overrides from the settings (``GPUAAS_RETRIES``, ``GPUAAS_RETRY_BACKOFF_SECONDS``)."""
    return {
        "retries": settings.retries,
        "retry_delay_seconds": exponential_backoff(backoff_factor=settings.retry_backoff_seconds)
        if settings.retry_backoff_seconds > 0 else 0,
    }


def current_run_id() -> str | None:
    """The flow run's id for audit rows, or None outside a flow run (a plain call in a REPL or test)."""
    from prefect import runtime

    return str(runtime.flow_run.id) if runtime.flow_run.id else None
