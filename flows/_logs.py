"""A run that ends Failed on what it found logs one line, not a traceback.

Prefect logs every exception a run raises with its traceback, and a worker's engine logs it again
as "exited with unexpected exception" when a Failed state's data is raised to it. For gpuaas's own
failures that is noise in the run's logs, where an ops engineer reads them: a ``GpuaasError`` says
in one line which file, field or source is wrong, and a ``RunFailed`` is the run's verdict, whose
headline the run has logged already. So these two lose their traceback where they are first logged,
and every later record of the same exception is dropped. Any other exception is a fault in gpuaas
or a library and keeps its traceback: that is what its bug report needs.
"""

from __future__ import annotations

import logging

from flows._outcome import RunFailed
from gpuaas.errors import GpuaasError

__all__ = ["KnownFailures", "quiet_known_failures"]

PREFECT_LOGGERS = ("prefect.flow_runs", "prefect.task_runs", "prefect.engine")
"""Where Prefect's engines log a run's exception: the run loggers and the engines' own."""

_LOGGED = "_gpuaas_logged"


class KnownFailures(logging.Filter):
    """One line per known failure: the first error record keeps its message, the error's own line added where
    the message lacks it, without the traceback; later records of the same exception are dropped. A record
    below error level (Prefect's "crash details" at debug) loses its traceback but does not count as said."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if not isinstance(error, GpuaasError | RunFailed):
            return True
        if isinstance(error, RunFailed) or getattr(error, _LOGGED, False):
            return False  # a verdict's headline, or an error already said once
        said = str(error)
        if said and said not in record.getMessage():
            record.msg, record.args = "%s: %s", (record.getMessage(), said)
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        if record.levelno >= logging.ERROR:
            try:
                setattr(error, _LOGGED, True)
            except (AttributeError, TypeError):  # an exception that takes no attribute is said again, never lost
                pass
        return True


_FILTER = KnownFailures()


def quiet_known_failures() -> None:
    """Put the filter on Prefect's engine and run loggers (idempotent: each holds it once)."""
    for name in PREFECT_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
