"""The hooks every gpuaas flow carries: its failure named, then notified.

Apart from ``flows._outcome`` because the notifications' HTTP client loads with them: the command line runs a
flow's Prefect-free body through ``_outcome`` without a Prefect API, and must not pay for it.
"""

from __future__ import annotations

from typing import Any

from flows._outcome import failure_name, rename
from tasks.notify import NOTIFY_HOOKS

__all__ = ["FLOW_HOOKS", "name_failed_run"]


def name_failed_run(flow: Any, flow_run: Any, state: Any) -> None:
    """``on_failure`` hook: rename a run stopped by bad input or a refusal to its error's gist (``failure_name``).

    Also for a parameter Prefect refused, where no run context exists yet: hence the run's id from the hook's
    ``flow_run``. The hook's ``flow_run`` takes the name too, so the failure notification after it uses it."""
    from prefect.logging.loggers import flow_run_logger

    try:
        error = state.result(raise_on_failure=False)
    except Exception:  # noqa: BLE001 - an error that cannot be read back names nothing
        return
    name = failure_name(error if isinstance(error, BaseException) else None)
    if name and rename(name, flow_run_logger(flow_run, flow), flow_run.id):
        flow_run.name = name


FLOW_HOOKS: dict[str, Any] = {**NOTIFY_HOOKS, "on_failure": [name_failed_run, *NOTIFY_HOOKS["on_failure"]]}
"""``@flow(..., **FLOW_HOOKS)``: every gpuaas flow notifies the same way, and a run stopped by bad input is named
after it before the notification goes out."""
