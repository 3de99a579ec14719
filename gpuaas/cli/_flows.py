"""Running a Prefect flow from the command line.

The CLI is an entry point like a deployment: it may start the same flow the scheduler runs,
so that "run it now" and "what ran at 02:00" are the same code. Prefect is imported only
here, lazily, so commands that don't run flows stay fast and the library stays Prefect-free.
"""

from __future__ import annotations

import os
from typing import Any

from gpuaas.cli._common import err_console, fail
from gpuaas.errors import GpuaasError

__all__ = ["run_flow"]

# Before Prefect is first imported (it reads its settings once): no phoning home, and no run logs or
# tracebacks on the terminal (set PREFECT_LOGGING_LEVEL=INFO to see them); errors are printed once, cleanly.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "CRITICAL")  # the CLI prints the outcome itself
# Without PREFECT_API_URL the CLI starts Prefect's ephemeral server; its 20 s default is too short on a
# busy 2-core host, where starting it was seen to take longer and the run failed before it began.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")


def run_flow(flow: Any, what: str, **parameters: Any) -> Any:
    """Run ``flow`` in this process with a spinner on stderr; a failed run exits 1 with its error."""
    with err_console.status(f"{what}…"):
        try:
            state = flow(**parameters, return_state=True)
        except RuntimeError as exc:  # Prefect's own start-up errors (no API server) come before any state
            raise fail(f"Prefect could not start the run: {exc}") from exc
    if not state.is_completed():
        error = state.result(raise_on_failure=False)
        if isinstance(error, GpuaasError):
            raise fail(str(error))
        raise fail(f"flow run {state.name.lower()}: {error}")
    return state.result()
