"""A run that ends Failed on what it found logs one line, as a worker's engine runs it; a fault keeps its traceback.

Each flow here is run the way ``python -m prefect.engine`` runs a deployment's flow on a worker:
``run_flow`` with the run logger as its error logger, which logs what the run raises once more. The
records are formatted as Prefect's handlers format them (with ``exc_info``, a traceback).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from prefect import flow, task

import flows  # noqa: F401 - importing the flows package is what a deployment's entrypoint does
from flows import RunFailed
from flows._outcome import failed
from gpuaas.errors import ConfigError

pytestmark = pytest.mark.usefixtures("prefect_harness")

BAD_FIELD = "policy.yaml: reclaim.idle.window_minutes: must be more than 0"


@task(name="read-policy")
def _read_policy() -> None:
    raise ConfigError(BAD_FIELD)


@task(name="divide")
def _divide() -> float:
    return 1 / 0


@flow(name="bad-input")
def _bad_input() -> None:
    _read_policy()


@flow(name="verdict")
def _verdict() -> dict[str, Any]:
    return failed({"actions": 1}, "1 write failed: Deployment team-a/chat, bind gpuaas-reclaimer.")


@flow(name="fault")
def _fault() -> float:
    return _divide()


class _Formatted(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture()
def logged() -> Iterator[_Formatted]:
    handler, prefect = _Formatted(), logging.getLogger("prefect")
    prefect.addHandler(handler)
    try:
        yield handler
    finally:
        prefect.removeHandler(handler)


def _as_a_worker_runs(run: Any) -> BaseException:
    """What ``run_flow`` raises on the worker, after its error logger has logged it."""
    from prefect.flow_engine import run_flow

    with pytest.raises(BaseException) as raised:
        run_flow(run, error_logger=logging.getLogger("prefect.flow_runs"))
    return raised.value


def test_a_flow_s_bad_input_is_one_line_without_a_traceback(logged: _Formatted) -> None:
    error = _as_a_worker_runs(_bad_input)
    assert isinstance(error, ConfigError)
    text = "\n".join(logged.lines)
    assert "Traceback" not in text, text
    # said where the task failed, and in the states: not again as the flow's or the engine's exception
    assert [line for line in logged.lines if f"ConfigError({BAD_FIELD!r})" in line] == [
        f"ERROR prefect.task_runs Task run failed with exception: ConfigError({BAD_FIELD!r})"], text
    assert "unexpected exception" not in text, text
    assert any("Finished in state Failed" in line and BAD_FIELD in line for line in logged.lines), text


def test_a_run_s_verdict_is_its_headline_once(logged: _Formatted) -> None:
    error = _as_a_worker_runs(_verdict)
    assert isinstance(error, RunFailed) and error.result["actions"] == 1
    text = "\n".join(logged.lines)
    assert "Traceback" not in text and "unexpected exception" not in text, text
    errors = [line for line in logged.lines if line.startswith("ERROR")]
    assert errors == ["ERROR prefect.flow_runs 1 write failed: Deployment team-a/chat, bind gpuaas-reclaimer."], text


def test_a_fault_keeps_its_traceback(logged: _Formatted) -> None:
    error = _as_a_worker_runs(_fault)
    assert isinstance(error, ZeroDivisionError)
    text = "\n".join(logged.lines)
    assert "Traceback" in text and "1 / 0" in text, text


def test_the_first_error_record_of_a_known_failure_says_its_line_even_when_prefect_s_message_does_not() -> None:
    """A flow that fails to load logs "Unexpected exception encountered when trying to load flow" with the
    error only in its traceback: the traceback goes, the error's line stays in the message."""
    from flows._logs import KnownFailures

    error = ConfigError(BAD_FIELD)
    debug = logging.LogRecord("prefect.flow_runs", logging.DEBUG, __file__, 1, "Crash details:", (), (ConfigError, error, None))
    load = logging.LogRecord("prefect.flow_runs", logging.ERROR, __file__, 1,
                             "Unexpected exception encountered when trying to load flow", (), (ConfigError, error, None))
    again = logging.LogRecord("prefect.engine", logging.ERROR, __file__, 1, "Execution exited", (), (ConfigError, error, None))
    known = KnownFailures()
    assert known.filter(debug) and debug.exc_info is None  # below error level: not counted as said
    assert known.filter(load) and load.exc_info is None
    assert load.getMessage() == f"Unexpected exception encountered when trying to load flow: {BAD_FIELD}"
    assert not known.filter(again)
