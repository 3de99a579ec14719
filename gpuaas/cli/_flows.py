"""Running a flow from the command line: directly, or through Prefect when an API is configured.

The command line runs the same flow the scheduler runs, so that "run it now" and "what ran at
02:00" are the same code. Where it runs:

- ``PREFECT_API_URL`` set (environment or Prefect profile): through that Prefect server, so the run,
  its logs, its state message and its artifacts show in the UI next to the scheduled ones;
- otherwise in this process as plain calls: no temporary Prefect server (that cost several seconds
  per command, more than most commands' work), same bodies, same steps, same retries; nothing is
  recorded in Prefect, everything is still recorded in the audit log. A flow whose body is
  Prefect-free (``BODIES``) is called without importing Prefect at all (importing it alone takes
  seconds); the others run under ``flows.direct``.

Whether an API is configured is read without importing Prefect where nothing could set one but the
environment (no Prefect profile, ``.env``, ``prefect.toml`` or ``[tool.prefect]`` saying otherwise).
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from gpuaas.cli._common import err_console, fail
from gpuaas.cli._progress import progress
from gpuaas.errors import GpuaasError
from gpuaas.sources import RETRYING

__all__ = ["BODIES", "prefect_api_url", "run_flow"]

RUN_LOGGER = "gpuaas.run"
"""The logger of a flow run called outside Prefect (``tasks._steps.run_logger``)."""

WARNING_LOGGERS = (RUN_LOGGER, "tasks", "gpuaas.notify", "gpuaas.store")
"""The loggers whose warnings and errors the command line prints after a run (``_warnings_after``); the store's
says that the run upgraded a SQLite file."""

BODIES = {"flows.collect:collect": "flows._collect:collect_snapshot"}
"""A flow (``module:name``) -> its Prefect-free body, which the command line calls without Prefect."""

# Before Prefect is first imported (it reads its settings once): no phoning home (the server's analytics, and the
# client's own usage data, which only DO_NOT_TRACK turns off: without it the first run prints Prefect's notice
# above the headline and keeps a device id in PREFECT_HOME), and no run logs or
# tracebacks on the terminal (set PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL=INFO to see them); errors are printed
# once, cleanly. Only the terminal's handler is quiet: a run through a Prefect API still sends its logs there,
# which a lower level on Prefect's loggers (PREFECT_LOGGING_LEVEL) would drop before they reached the API.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "CRITICAL")  # the CLI prints the outcome itself


def _prefect_config_files() -> list[Path]:
    """Files besides the environment from which Prefect's settings could take an API URL."""
    home = Path(os.environ.get("PREFECT_HOME", "~/.prefect")).expanduser()
    profiles = Path(os.environ.get("PREFECT_PROFILES_PATH", home / "profiles.toml")).expanduser()
    found = [p for p, says in ((Path(".env"), "PREFECT_API_URL"), (Path("prefect.toml"), "api"))
             if p.is_file() and says in p.read_text(errors="replace")]
    pyproject = Path("pyproject.toml")
    if pyproject.is_file() and "[tool.prefect" in pyproject.read_text(errors="replace"):
        found.append(pyproject)
    if profiles.is_file() and "PREFECT_API_URL" in profiles.read_text(errors="replace"):
        found.append(profiles)
    return found


def prefect_api_url() -> str | None:
    """The Prefect API this process would report to, or None: then flows run directly.

    Prefect's own answer where it is loaded already or a file could set one; otherwise the environment's."""
    if "prefect.settings" not in sys.modules and not _prefect_config_files():
        return os.environ.get("PREFECT_API_URL") or None
    from prefect.settings import get_current_settings

    return get_current_settings().api.url or None


def _resolve(ref: str) -> Any:
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def run_flow(flow: Any, what: str, **parameters: Any) -> Any:
    """Run ``flow`` (a flow, or ``"module:name"`` of one) with a spinner on stderr; a failed run exits 1 with its error."""
    through_prefect = prefect_api_url() is not None
    if isinstance(flow, str) and not through_prefect and flow in BODIES:
        return _run_body(_resolve(BODIES[flow]), what, parameters)
    if isinstance(flow, str):
        flow = _resolve(flow)
    from flows import RunFailed, result_of
    from flows.direct import direct_runs

    not_started: RuntimeError | None = None
    with _warnings_after() as kept, progress(what) as step, (nullcontext() if through_prefect else direct_runs()):
        try:
            state = flow(**parameters, return_state=True)
            step.failed = not state.is_completed()
        except RuntimeError as exc:  # Prefect's own start-up errors (API unreachable) come before any state
            not_started, step.failed = exc, True
        else:
            kept.outcome = _outcome_line(result_of(state.result(raise_on_failure=False)))
    if not_started is not None:  # said after the step's last line, as every failure is
        raise fail(f"Prefect could not start the run: {not_started}") from not_started
    if not state.is_completed():
        error = state.result(raise_on_failure=False)
        if isinstance(error, RunFailed):
            return error.result  # the run ended Failed on what it found (a refused write): its result, for the command
        if isinstance(error, GpuaasError):
            raise fail(str(error))
        raise fail(f"flow run {state.name.lower()}: {error}")
    return result_of(state.result())  # run directly, a returned Failed state is unwrapped into a plain one


def _outcome_line(value: Any) -> str:
    """What the command prints of a run's outcome: its result's headline (``lead``), or the error that ended it."""
    if isinstance(value, BaseException):
        return str(value)
    return str(value.get("headline") or "") if isinstance(value, dict) else ""


class _Kept(logging.Handler):
    """The warnings of a run, each with what its outcome says of it too (``tasks.OUTCOME_SAYS``); ``outcome``: the
    line the command prints of the run's outcome, set once the run has ended."""

    def __init__(self, says: str) -> None:
        super().__init__(logging.WARNING)
        self.says = says
        self.kept: list[tuple[str, str | None]] = []
        self.outcome = ""

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, RETRYING, None) is None:  # a retry is said while it waits (``_progress``), not after
            self.kept.append((record.getMessage(), getattr(record, self.says, None)))

    def lines(self) -> list[str]:
        """The warnings the outcome does not say already: a failed source that leads the headline is named there."""
        return [line for line, said in self.kept if not (said and said in self.outcome)]


@contextmanager
def _warnings_after() -> Iterator[_Kept]:
    """What a run called here warns of (a push that failed, a lock it could not renew, a notification not
    delivered), as ``warning:`` lines on stderr once it ends; not those its outcome says too (``_Kept.lines``).

    Run through Prefect, the run's own warnings are in its logs in the UI; called here, the run's logger has no
    other reader. The steps' and the notifications' loggers (``WARNING_LOGGERS``) reach no terminal either:
    Prefect's console handler, the one that would print them, is quiet for the command line.
    """
    from tasks import OUTCOME_SAYS  # here: the flow it runs has loaded it already, a command alone need not

    kept = _Kept(OUTCOME_SAYS)
    loggers = [logging.getLogger(name) for name in WARNING_LOGGERS]
    for logger in loggers:
        logger.addHandler(kept)
    try:
        yield kept
    finally:
        for logger in loggers:
            logger.removeHandler(kept)
        for line in kept.lines():
            err_console.print(f"warning: {line}", markup=False, highlight=False, soft_wrap=True)


def _run_body(body: Any, what: str, parameters: dict[str, Any]) -> Any:
    """A flow's Prefect-free body called here, failing as a failed run of the flow would."""
    error: Exception | None = None
    result: Any = None
    with _warnings_after() as kept, progress(what) as step:
        try:
            result = body(**parameters)
        except Exception as exc:  # noqa: BLE001 - a flow run would end Failed with it; the command says so, once
            error, step.failed = exc, True
        kept.outcome = _outcome_line(result if error is None else error)
    if isinstance(error, GpuaasError):
        raise fail(str(error)) from error
    if error is not None:
        raise fail(f"flow run failed: {error}") from error
    return result
