"""Running a flow from the command line: directly, or through Prefect when an API is configured.

The command line runs the same flow the scheduler runs, so that "run it now" and "what ran at
02:00" are the same code. Where it runs:

- ``PREFECT_API_URL`` set (environment or Prefect profile): through that Prefect server, so the run,
  its logs, its state message and its artifacts show in the UI next to the scheduled ones;
- otherwise in this process as plain calls (``flows._direct``): no temporary Prefect server (that
  cost several seconds per command, more than most commands' work), same bodies, same tasks, same
  retries; nothing is recorded in Prefect, everything is still recorded in the audit log.

Prefect is imported only here, lazily, so commands that don't run flows stay fast and the library
stays Prefect-free.
"""

from __future__ import annotations

import os
from contextlib import nullcontext
from typing import Any

from gpuaas.cli._common import fail, progress
from gpuaas.errors import GpuaasError

__all__ = ["prefect_api_url", "run_flow"]

# Before Prefect is first imported (it reads its settings once): no phoning home, and no run logs or
# tracebacks on the terminal (set PREFECT_LOGGING_LEVEL=INFO to see them); errors are printed once, cleanly.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "CRITICAL")  # the CLI prints the outcome itself


def prefect_api_url() -> str | None:
    """The Prefect API this process would report to, or None: then flows run directly."""
    from prefect.settings import get_current_settings

    return get_current_settings().api.url or None


def run_flow(flow: Any, what: str, **parameters: Any) -> Any:
    """Run ``flow`` with a spinner on stderr; a failed run exits 1 with its error."""
    from flows._direct import direct_runs

    through_prefect = prefect_api_url() is not None
    with progress(what), (nullcontext() if through_prefect else direct_runs()):
        try:
            state = flow(**parameters, return_state=True)
        except RuntimeError as exc:  # Prefect's own start-up errors (API unreachable) come before any state
            raise fail(f"Prefect could not start the run: {exc}") from exc
    if not state.is_completed():
        error = state.result(raise_on_failure=False)
        if isinstance(error, GpuaasError):
            raise fail(str(error))
        raise fail(f"flow run {state.name.lower()}: {error}")
    return state.result()
