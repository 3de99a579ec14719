"""Run a flow in this process as plain function calls, without a Prefect API.

Why: Prefect has no serverless mode. Without ``PREFECT_API_URL`` every flow or task call starts a
temporary API server in a subprocess (several seconds, more than most commands' own work) and
records runs nobody will ever look at. An operator at a terminal wants the answer, so the
command line runs the same flow bodies and tasks directly unless a Prefect API is configured,
in which case the run goes through Prefect and shows in its UI (``gpuaas.cli._flows``).

Inside ``direct_runs()``:
- calling a task runs its function, with the task's own retries, retry condition and delays
  (a transient failure is still retried; a permanent one fails at once);
- ``task.submit`` runs it on a thread, and the future answers ``wait``, ``state`` and ``result``;
- ``return_state=True`` gives a ``DirectState`` that answers what the flows ask of Prefect's
  ``State`` (``is_completed``, ``is_final``, ``name``, ``message``, ``result``), so a flow body reads
  the outcome the same way either way;
- a flow called inside another runs as a plain call too (subflows);
- ``get_run_logger()`` gives Prefect's null logger, and nothing may start an API server
  (ephemeral mode is off), so anything that still needs an API fails fast instead of waiting on one.

Timeouts of tasks are not enforced here: each request has its own timeout from the settings.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from contextlib import ExitStack, contextmanager
from typing import Any
from unittest import mock

from prefect import Flow, Task
from prefect.client.schemas.objects import State
from prefect.logging import disable_run_logger
from prefect.settings import PREFECT_SERVER_ALLOW_EPHEMERAL_MODE, temporary_settings
from prefect.utilities.annotations import BaseAnnotation

from tasks import PlainState, failed_state, run_retried

__all__ = ["DirectFuture", "DirectState", "direct_runs"]


DirectState = PlainState
"""A final state without an API: the steps' own (``tasks._steps``), one class for both."""


def _delay(task: Task[Any, Any], attempt: int) -> float:
    """Seconds to wait before retry ``attempt`` (1-based), from the task's ``retry_delay_seconds``."""
    delays = task.retry_delay_seconds
    if isinstance(delays, list | tuple):
        value = delays[min(attempt - 1, len(delays) - 1)] if delays else 0
    else:
        value = delays or 0
    return float(value)


def _unwrapped(value: Any) -> Any:
    """A ``quote(...)``d argument (passed as is to spare Prefect walking it) as the value itself."""
    return value.unwrap() if isinstance(value, BaseAnnotation) else value


def _run_task(task: Task[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> DirectState:
    """The task's function run to a final state: retried as the task says, never raising."""
    args = tuple(_unwrapped(a) for a in args)
    kwargs = {k: _unwrapped(v) for k, v in kwargs.items()}
    condition = task.retry_condition_fn
    return run_retried(task.name, lambda: task.fn(*args, **kwargs), (task.retries or 0) + 1,
                       lambda attempt: _delay(task, attempt),
                       None if condition is None else lambda failed: bool(condition(task, None, failed)))  # type: ignore[arg-type]


def _outcome(state: DirectState, return_state: bool) -> Any:
    return state if return_state else state.result()


def _call_task(self: Task[Any, Any], *args: Any, return_state: bool = False, wait_for: Any = None,
               **kwargs: Any) -> Any:
    return _outcome(_run_task(self, args, kwargs), return_state)


class DirectFuture:
    """What ``task.submit`` returns here: the parts of ``PrefectFuture`` the flows use."""

    def __init__(self, future: Future[DirectState]) -> None:
        self._future = future

    def wait(self, timeout: float | None = None) -> None:
        wait_futures([self._future], timeout=timeout)

    @property
    def state(self) -> Any:
        """The final state, or Prefect's Running one while the task has not finished."""
        if self._future.done():
            return self._future.result()
        from prefect.states import Running

        return Running()

    def result(self, timeout: float | None = None, raise_on_failure: bool = True) -> Any:
        return self._future.result(timeout=timeout).result(raise_on_failure=raise_on_failure)


def _submitter(pool: ThreadPoolExecutor) -> Callable[..., DirectFuture]:
    def submit(self: Task[Any, Any], *args: Any, return_state: bool = False, wait_for: Any = None,
               **kwargs: Any) -> DirectFuture:
        return DirectFuture(pool.submit(_run_task, self, args, kwargs))
    return submit


def _call_flow(self: Flow[Any, Any], *args: Any, return_state: bool = False, wait_for: Any = None,
               **kwargs: Any) -> Any:
    """The flow's body with its parameters validated and coerced as Prefect would (``at`` from a string)."""
    try:
        bound = inspect.signature(self.fn).bind_partial(*args, **kwargs).arguments
        parameters = self.validate_parameters(dict(bound)) if self.should_validate_parameters else dict(bound)
        returned = self.fn(**parameters)
        # A flow may end with a state of its own (a busy run: Completed with a message); Prefect unwraps it.
        state = (DirectState(returned.data, message=returned.message) if isinstance(returned, State)
                 else DirectState(returned))
    except Exception as exc:  # noqa: BLE001 - becomes the Failed state, as in Prefect
        state = failed_state(exc)
    return _outcome(state, return_state)


@contextmanager
def direct_runs() -> Iterator[None]:
    """Within this block flows and tasks are plain calls (see the module's docstring); not re-entrant."""
    with ExitStack() as stack:
        pool = stack.enter_context(ThreadPoolExecutor(max_workers=8, thread_name_prefix="gpuaas-task"))
        stack.enter_context(temporary_settings(updates={PREFECT_SERVER_ALLOW_EPHEMERAL_MODE: False}))
        stack.enter_context(disable_run_logger())
        stack.enter_context(mock.patch.object(Task, "__call__", _call_task))
        stack.enter_context(mock.patch.object(Task, "submit", _submitter(pool)))
        stack.enter_context(mock.patch.object(Flow, "__call__", _call_flow))
        yield
