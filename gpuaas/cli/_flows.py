"""Running a Prefect flow from the command line.

The CLI is an entry point like a deployment: it may start the same flow the scheduler runs,
so that "run it now" and "what ran at 02:00" are the same code. Prefect is imported only
here, lazily, so commands that don't run flows stay fast and the library stays Prefect-free.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from gpuaas.cli._common import fail, progress
from gpuaas.errors import GpuaasError

__all__ = ["run_flow"]

# Before Prefect is first imported (it reads its settings once): no phoning home, and no run logs or
# tracebacks on the terminal (set PREFECT_LOGGING_LEVEL=INFO to see them); errors are printed once, cleanly.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "CRITICAL")  # the CLI prints the outcome itself
# Without PREFECT_API_URL the CLI starts Prefect's ephemeral server; its 20 s default is too short on a
# busy 2-core host, where starting it was seen to take longer and the run failed before it began.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")


def _start_ephemeral_server_quietly() -> None:
    """Start Prefect's temporary API server with its output in a log file, not on the terminal.

    Without ``PREFECT_API_URL`` a flow run starts that server as a child process sharing our stderr;
    on a busy host its shutdown prints asyncio tracebacks there, after gpuaas has said what happened.
    Starting it first, with file descriptor 2 pointed at a log file, keeps the terminal to gpuaas's
    own one-line messages; Prefect then reuses the running server (it is a per-port singleton).
    """
    from prefect.settings import get_current_settings

    settings = get_current_settings()
    if settings.api.url or not settings.server.ephemeral.enabled:
        return
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()
    if server.running:
        return
    log = Path(tempfile.gettempdir()) / f"gpuaas-prefect-server-{os.getuid()}.log"
    saved = os.dup(2)
    try:
        with log.open("ab") as sink:
            os.dup2(sink.fileno(), 2)
            try:
                server.start()
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)


def run_flow(flow: Any, what: str, **parameters: Any) -> Any:
    """Run ``flow`` in this process with a spinner on stderr; a failed run exits 1 with its error."""
    try:
        _start_ephemeral_server_quietly()
    except RuntimeError as exc:
        raise fail(f"Prefect could not start its temporary API server: {exc}") from exc
    with progress(what):
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
