"""Steps: a flow's tasks that are Prefect tasks inside a Prefect flow run and plain calls everywhere else.

Why: Prefect has no serverless mode, and importing it alone costs seconds. The command line runs
a flow's body directly when no Prefect API is configured (``gpuaas.cli._flows``), and then nothing
may import Prefect. A ``@step`` function is that body's unit of work:

- inside a Prefect flow run (a deployment, or the command line with ``PREFECT_API_URL``) calling it
  runs a Prefect task built from the same function and options (on first use), so the run graph,
  the retries and the timeouts are Prefect's;
- anywhere else it runs its function with the step's own retries, retry condition and delays (a
  transient failure is still retried; a permanent one fails at once), without importing Prefect.

``return_state=True`` gives a state that answers what the flow bodies ask of Prefect's ``State``
(``is_completed``, ``is_final``, ``name``, ``message``, ``result``), and ``submit`` a future that
answers ``wait``, ``state`` and ``result``: a body reads the outcome the same way either way.
Timeouts are not enforced outside Prefect: each request has its own timeout from the settings.
"""

from __future__ import annotations

import logging
import random
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass
from functools import cache
from typing import Any

from gpuaas.sources import RETRYING

__all__ = ["OUTCOME_SAYS", "PlainFuture", "PlainState", "Step", "failed_state", "in_flow_run", "run_logger", "run_retried", "step"]

OUTCOME_SAYS = "gpuaas_outcome_says"
"""A log record's attribute, ``extra={OUTCOME_SAYS: text}``: the run's outcome (its headline, or the error that ends
it) will say ``text`` too. The command line prints that outcome, so it leaves such a warning out where the outcome it
printed does say ``text`` (``gpuaas.cli._flows``): a reader meets each failure once. The run's own logs keep it."""

_log = logging.getLogger(__name__)
"""Each retry of a step run here, before its wait (``RETRYING``: the command line's progress line says it)."""

_quiet = logging.getLogger("gpuaas.run")
_quiet.addHandler(logging.NullHandler())  # outside a flow run the command line prints the outcome and warnings
_quiet.propagate = False


def in_flow_run() -> bool:
    """True inside a Prefect flow run; answered without importing Prefect when nothing has."""
    context = sys.modules.get("prefect.context")
    return context is not None and context.FlowRunContext.get() is not None


def run_logger() -> logging.Logger | logging.LoggerAdapter[logging.Logger]:
    """The flow run's logger in a Prefect flow run, else a quiet one (a plain call prints its own outcome)."""
    if in_flow_run():
        from prefect import get_run_logger

        return get_run_logger()
    return _quiet


@dataclass(frozen=True)
class PlainState:
    """A final state outside Prefect: the value, or the exception that ended the call."""

    value: Any = None
    error: BaseException | None = None
    message: str | None = None

    @property
    def name(self) -> str:
        return "Failed" if self.error is not None else "Completed"

    def is_completed(self) -> bool:
        return self.error is None

    def is_failed(self) -> bool:
        return self.error is not None

    def is_final(self) -> bool:
        return True

    def result(self, raise_on_failure: bool = True) -> Any:
        if self.error is not None:
            if raise_on_failure:
                raise self.error
            return self.error
        return self.value


def failed_state(exc: BaseException) -> PlainState:
    return PlainState(error=exc, message=f"{type(exc).__name__}: {exc}")


class _Pending:
    """The state of a submitted step that has not finished: not final."""

    name = "Running"
    message = None

    def is_completed(self) -> bool:
        return False

    def is_failed(self) -> bool:
        return False

    def is_final(self) -> bool:
        return False


class PlainFuture:
    """What ``Step.submit`` returns outside Prefect: the parts of ``PrefectFuture`` the flow bodies use."""

    def __init__(self, future: Future[PlainState]) -> None:
        self._future = future

    def wait(self, timeout: float | None = None) -> None:
        wait_futures([self._future], timeout=timeout)

    @property
    def state(self) -> PlainState | _Pending:
        return self._future.result() if self._future.done() else _Pending()

    def result(self, timeout: float | None = None, raise_on_failure: bool = True) -> Any:
        return self._future.result(timeout=timeout).result(raise_on_failure=raise_on_failure)


@cache
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=8, thread_name_prefix="gpuaas-step")


def _unwrapped(value: Any) -> Any:
    """A ``quote(...)``d argument (see ``tasks._options.unwalked``) as the value itself."""
    annotations = sys.modules.get("prefect.utilities.annotations")
    return value.unwrap() if annotations is not None and isinstance(value, annotations.BaseAnnotation) else value



def run_retried(name: str, call: Callable[[], Any], attempts: int, delay: Callable[[int], float],
                may_retry: Callable[[PlainState], bool] | None = None) -> PlainState:
    """``call()`` run to a final state, never raising: up to ``attempts`` times, waiting ``delay(attempt)`` after
    each failure that ``may_retry`` allows (all, when None), as Prefect retries a task. Each retry is logged before
    its wait with ``RETRYING``, so that a command line's progress line names what it waits for."""
    for attempt in range(1, attempts + 1):
        try:
            return PlainState(call())
        except Exception as exc:  # noqa: BLE001 - becomes the Failed state, as in Prefect
            failed = failed_state(exc)
            if attempt == attempts or (may_retry is not None and not may_retry(failed)):
                return failed
            wait = delay(attempt)
            _log.warning("%s: retry #%d/%d in %.1f s: %s", name, attempt, attempts - 1, wait, exc,
                         extra={RETRYING: (str(exc), attempt, attempts - 1, wait)})
            time.sleep(wait)
    raise AssertionError("unreachable: the last attempt returns")  # pragma: no cover


class Step:
    """A function and its task options (``retries``, ``retry_delay_seconds``, ``retry_jitter_factor``,
    ``retry_condition_fn``, ``timeout_seconds``, ``name``, ``task_run_name``); see the module's docstring."""

    def __init__(self, fn: Callable[..., Any], options: dict[str, Any]) -> None:
        self.fn = fn
        self.options = options
        self.__doc__ = fn.__doc__
        self.__name__ = getattr(fn, "__name__", "step")
        self._task: Any = None

    def with_options(self, **options: Any) -> Step:
        return Step(self.fn, {**self.options, **options})

    def as_task(self) -> Any:
        """The Prefect task of this step (imports Prefect)."""
        if self._task is None:
            from prefect import task
            from prefect.cache_policies import NO_CACHE

            self._task = task(self.fn, **{"cache_policy": NO_CACHE, **self.options})
        return self._task

    def __call__(self, *args: Any, return_state: bool = False, **kwargs: Any) -> Any:
        if in_flow_run():
            return self.as_task()(*args, return_state=return_state, **kwargs)
        kwargs.pop("wait_for", None)
        state = self._run(args, kwargs)
        return state if return_state else state.result()

    def submit(self, *args: Any, **kwargs: Any) -> Any:
        """A future of the call: Prefect's in a flow run, else one of a thread of this process."""
        if in_flow_run():
            return self.as_task().submit(*args, **kwargs)
        kwargs.pop("return_state", None)
        kwargs.pop("wait_for", None)
        return PlainFuture(_pool().submit(self._run, args, kwargs))

    def _delay(self, attempt: int) -> float:
        """Seconds before retry ``attempt`` (1-based), jittered as Prefect does (up to ``retry_jitter_factor`` more)."""
        delays = self.options.get("retry_delay_seconds") or 0
        if callable(delays):
            delays = delays(int(self.options.get("retries") or 0))
        if isinstance(delays, list | tuple):
            value = float(delays[min(attempt - 1, len(delays) - 1)]) if delays else 0.0
        else:
            value = float(delays)
        jitter = self.options.get("retry_jitter_factor")
        return value + random.uniform(0, value * jitter) if jitter and value else value  # noqa: S311 - not crypto

    def _run(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> PlainState:
        """The function run to a final state: retried as the options say, never raising."""
        args = tuple(_unwrapped(a) for a in args)
        kwargs = {k: _unwrapped(v) for k, v in kwargs.items()}
        condition = self.options.get("retry_condition_fn")
        return run_retried(str(self.options.get("name") or self.__name__), lambda: self.fn(*args, **kwargs),
                           int(self.options.get("retries") or 0) + 1, self._delay,
                           None if condition is None else lambda failed: bool(condition(self, None, failed)))


def step(**options: Any) -> Callable[[Callable[..., Any]], Step]:
    """``@step(name=..., retries=...)``: the function as a ``Step`` with these task options."""
    def decorate(fn: Callable[..., Any]) -> Step:
        return Step(fn, options)
    return decorate
