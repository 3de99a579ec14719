"""Prefect flows: thin orchestration over ``tasks``. One module per flow."""

from flows._outcome import RunFailed, result_of

__all__ = ["RunFailed", "result_of"]
