"""A long step's progress on stderr, for the commands that run one (a flow, the embedded cluster's start).

Apart from the consoles, errors and tables every sub-command shares (``_common``), through whose
``err_console`` it writes, as every other line on stderr is written.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from gpuaas.cli._common import err_console

__all__ = ["Step", "progress", "say"]


class Step:
    """What :func:`progress` yields: called with each stage's message; ``failed`` set where the step ends in an
    error it hands back rather than raises (a flow run's Failed state), so that its last line does not say done."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say, self.failed = say, False

    def __call__(self, message: str) -> None:
        self.say(message)


@contextmanager
def progress(what: str) -> Iterator[Step]:
    """A long step's progress on stderr; yields a :class:`Step`, called with each stage's message.

    On a terminal a spinner line that changes in place. Otherwise (``make``, CI, a pipe) a
    spinner prints nothing at all, so plain lines instead: one when the step starts, one per
    stage, one with the time it took: a log that says where a slow run is. That last line says
    ``failed after`` when the step raised or was marked failed: ``done`` just above an ``error:``
    line would read as success.
    """
    started = time.monotonic()
    if err_console.is_terminal:
        with err_console.status(f"{what}…") as status:
            yield Step(lambda message: status.update(f"{what}: {message}"))
        return

    def line(text: str) -> None:
        err_console.print(text, markup=False, highlight=False, soft_wrap=True)

    line(f"{what}…")
    step = Step(lambda message: line(f"  {message}"))
    try:
        yield step
    except BaseException:
        step.failed = True
        raise
    finally:
        line(f"{what}: {'failed after' if step.failed else 'done in'} {time.monotonic() - started:.1f} s")


def say(line: str) -> None:
    """One line of a long command's progress on stderr, as written (no markup): stdout stays its answer."""
    err_console.print(line, markup=False, highlight=False)
