"""How a flow run ends: Completed, with its headline as the state's message and its gist as the run's name.

The Prefect UI's runs list shows each run's flow, name, state, start, parameters and tags, but not its
state message (that is on the run page): without more a person must open each run to learn what it
did. So a run that completes is renamed to the gist of its headline (``run_name``: its first clause,
asides left out, 100 characters at most), which the list shows on the run's row, and its state
message is the whole headline. Prefect unwraps the returned state, so a caller of the flow (the
command line, a parent flow) still gets the result dict, which also carries the headline for the
command line's first line.

A run stopped before it could say what it did (a bad policy file, a bad parameter, a snapshot that
is not there: a ``GpuaasError``, or Prefect refusing the parameters) is renamed the same way, to the
gist of its error (``failure_name``), by the ``on_failure`` hook every flow carries (``flows._hooks``).
"""

from __future__ import annotations

import logging
import re
from typing import Any, cast
from uuid import UUID

from gpuaas.errors import GpuaasError
from gpuaas.policy import FreezeOn

__all__ = ["RUN_NAME_MAX", "RunFailed", "busy_outcome", "failed", "failure_name", "finished", "freeze_dict",
           "rename", "result_of", "run_name"]

RUN_NAME_MAX = 100
"""Characters of a run's name: one line of the runs list on a laptop screen."""


def run_name(headline: str) -> str:
    """The headline's gist: its first clause (up to ``;``), without parenthesised asides, cut at a word if long."""
    gist = re.sub(r"\s*\([^()]*\)", "", headline.split("; ")[0])
    gist = " ".join(gist.split()).rstrip(".")
    if len(gist) > RUN_NAME_MAX:
        gist = gist[:RUN_NAME_MAX - 1].rsplit(" ", 1)[0].rstrip(",:") + "…"
    return gist or headline[:RUN_NAME_MAX]


def freeze_dict(frozen: FreezeOn | None) -> dict[str, str] | None:
    """The change freeze that held a run back to dry-run, in the run's result (None when none did)."""
    return {"name": frozen.name, "until": frozen.until.isoformat()} if frozen else None


def finished(result: dict[str, Any], headline: str, name: str | None = None) -> dict[str, Any]:
    """``result`` plus ``headline``, as a Completed state whose message is the headline (typed as the dict it becomes);
    the flow run is renamed to ``run_name(name or headline)``.

    The headline is also the run's last log line: the run page opens on its logs."""
    from prefect.states import Completed

    return _end(Completed, logging.INFO, result, headline, name)


class RunFailed(Exception):
    """What a run that ends Failed on what it found (a failed check, a refused write) carries as its state's data.

    Prefect resolves a Failed state's data into the exception it raises to the run's caller, and logs it
    where a worker runs the flow; a plain dict there becomes "dict cannot be resolved into an exception". This
    one reads as the headline, and keeps the run's result for the command line (``result_of``)."""

    def __init__(self, headline: str, result: dict[str, Any]) -> None:
        super().__init__(headline)
        self.result = result


def result_of(value: Any) -> Any:
    """A run's result, whether it completed (the dict) or ended Failed on what it found (``RunFailed``'s)."""
    return value.result if isinstance(value, RunFailed) else value


def failed(result: dict[str, Any], headline: str) -> dict[str, Any]:
    """As ``finished``, but the run ends Failed: what it found must reach the failure notification and the runs
    list's red, not only its message. Named and logged the same way; the result travels in a ``RunFailed``."""
    from prefect.states import Failed

    done = {**result, "headline": headline}
    return _end(Failed, logging.ERROR, RunFailed(headline, done), headline, None)


def busy_outcome(result: dict[str, Any], busy: Exception, artifact_key: str | None = None) -> dict[str, Any]:
    """End a run that lost the wait for the cluster writes as Completed: its headline the state's message, the
    run's name and its artifact's description, as for any run.

    Not Failed: nothing is wrong with this run, the other one is writing and the next schedule
    decides again; an ops engineer who sees a red run looks for a fault that is not there. The
    state's data is ``result`` plus ``writes_busy`` (what the notification reads).
    """
    from prefect.states import Completed

    from reports import busy_line
    from tasks import summary_artifact

    line = busy_line(str(busy))
    if artifact_key is not None:
        summary_artifact(key=artifact_key, markdown=f"{line}\n\nThe next run decides again.\n")
    return _end(Completed, logging.WARNING, {**result, "writes_busy": str(busy)}, line, None)


def failure_name(error: BaseException | None) -> str | None:
    """The runs list's name of a run that ``error`` stopped: its gist, a file named without its folders (the state
    message keeps the whole path); None for an error that is no verdict on the input (a fault: Prefect's name stays)
    and for a ``RunFailed``, whose run ``failed`` named already."""
    from prefect.exceptions import ParameterTypeError, SignatureMismatchError

    if isinstance(error, ParameterTypeError):  # "Flow run received invalid parameters:\n - at: Input should be ..."
        bad = [line.strip().removeprefix("- ") for line in str(error).splitlines()[1:] if line.strip()]
        return run_name("; ".join(f"invalid parameter {line}" for line in bad) or str(error))
    if isinstance(error, SignatureMismatchError):
        return run_name(str(error))
    if isinstance(error, GpuaasError) and str(error).strip():
        return run_name(re.sub(r"(?<!\S)/(?:[^\s/]+/)+(?=[^\s/])", "", str(error)))
    return None


def _end(state: Any, level: int, data: Any, headline: str, name: str | None) -> dict[str, Any]:
    from prefect import get_run_logger

    logger = get_run_logger()
    logger.log(level, "%s", headline)
    rename(run_name(name or headline), logger)
    if isinstance(data, dict):
        data = {**data, "headline": headline}
    return cast(dict[str, Any], state(message=headline, data=data))


def rename(name: str, logger: Any, flow_run_id: Any = None) -> bool:
    """Rename ``flow_run_id``, else this flow run (nothing outside one); whether it was renamed. A failed rename is
    logged, never a reason to fail the run."""
    from prefect import runtime

    flow_run_id = flow_run_id or runtime.flow_run.id
    if not flow_run_id:
        return False
    from prefect.client.orchestration import get_client

    try:
        with get_client(sync_client=True) as client:
            client.update_flow_run(UUID(str(flow_run_id)), name=name)
    except Exception as exc:  # noqa: BLE001 - the run's work is done; its name is a convenience
        logger.warning("flow run not renamed to %r: %s", name, exc)
        return False
    return True
