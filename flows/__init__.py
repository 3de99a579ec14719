"""Prefect flows: thin orchestration over ``tasks``. One module per flow."""

from flows._logs import quiet_known_failures
from flows._outcome import RunFailed, result_of

quiet_known_failures()  # a known failure logs one line in a run, not a traceback (flows._logs)

__all__ = ["RunFailed", "result_of"]
