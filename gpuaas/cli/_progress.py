"""A long step's progress on stderr, for the commands that run one (a flow, the embedded cluster's start).

Apart from the consoles, errors and tables every sub-command shares (``_common``), through whose
``err_console`` it writes, as every other line on stderr is written. A source retried during the step is said on
its progress line, naming the source, what it answered and the attempt (``_Retries``): the libraries log each
retry (``RETRYING``) and know nothing of the command line.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.text import Text

from gpuaas.cli._common import err_console
from gpuaas.sources import RETRYING

__all__ = ["Step", "progress", "say"]


class Step:
    """What :func:`progress` yields: called with each stage's message; ``failed`` set where the step ends in an
    error it hands back rather than raises (a flow run's Failed state), so that its last line does not say done."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say, self.failed = say, False

    def __call__(self, message: str) -> None:
        self.say(message)


RETRY_LOGGERS = ("gpuaas", "tasks")
"""The loggers of the retry loops a step may wait in: the Kubernetes lister's requests, the steps' reads of a source."""


def _seconds(delay_s: float) -> str:
    return f"{delay_s:.0f} s" if delay_s >= 1 else f"{delay_s:.1f} s"


class _Retries(logging.Handler):
    """The retries logged during a step, as its progress line: ``Prometheus at http://…: HTTP 503 from
    /api/v1/query; retry 2 of 3 in 4 s``. Any other record goes where it went without this handler: to the
    handlers above it, or, where there are none, to ``logging.lastResort`` (stderr), as before."""

    def __init__(self, step: Step) -> None:
        super().__init__(logging.DEBUG)
        self.step = step

    def emit(self, record: logging.LogRecord) -> None:
        """Never raises: it runs inside the retry loop it reports on, where an error of its own would end the loop
        (and ``handleError`` would print a traceback). A line that cannot be shown is left out."""
        try:
            said = getattr(record, RETRYING, None)
            if said is not None:
                failure, attempt, retries, delay_s = said
                self.step(f"{failure}; retry {attempt} of {retries} in {_seconds(float(delay_s))}")
            elif not self._heard(record) and logging.lastResort and record.levelno >= logging.lastResort.level:
                logging.lastResort.handle(record)
        except Exception:  # noqa: BLE001, S110 - the progress line is a courtesy; the work goes on
            pass

    def _heard(self, record: logging.LogRecord) -> bool:
        """Whether a handler besides this one gets ``record`` (``Logger.callHandlers``' walk up the tree)."""
        logger: logging.Logger | None = logging.getLogger(record.name)
        while logger is not None:
            if any(h is not self for h in logger.handlers):
                return True
            logger = logger.parent if logger.propagate else None
        return False


@contextmanager
def _retries_said(step: Step) -> Iterator[None]:
    handler = _Retries(step)
    loggers = [logging.getLogger(name) for name in RETRY_LOGGERS]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


@contextmanager
def progress(what: str) -> Iterator[Step]:
    """A long step's progress on stderr; yields a :class:`Step`, called with each stage's message and each retry of
    a source (``_Retries``).

    On a terminal a spinner line that changes in place. Otherwise (``make``, CI, a pipe) a
    spinner prints nothing at all, so plain lines instead: one when the step starts, one per
    stage, one with the time it took: a log that says where a slow run is. That last line says
    ``failed after`` when the step raised or was marked failed: ``done`` just above an ``error:``
    line would read as success.
    """
    started = time.monotonic()
    if err_console.is_terminal:
        with err_console.status(f"{what}…") as status:
            step = Step(lambda message: status.update(Text(f"{what}: {message}")))  # a message is text, never markup
            with _retries_said(step):
                yield step
        return

    def line(text: str) -> None:
        err_console.print(text, markup=False, highlight=False, soft_wrap=True)

    line(f"{what}…")
    step = Step(lambda message: line(f"  {message}"))
    try:
        with _retries_said(step):
            yield step
    except BaseException:
        step.failed = True
        raise
    finally:
        line(f"{what}: {'failed after' if step.failed else 'done in'} {time.monotonic() - started:.1f} s")


def say(line: str) -> None:
    """One line of a long command's progress on stderr, as written (no markup): stdout stays its answer."""
    err_console.print(line, markup=False, highlight=False)
