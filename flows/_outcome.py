"""How a flow run ends: Completed, with its headline as the state's message.

The Prefect UI shows a run's state message in the runs list and on the run page; without one
it reads "None" and an operator must open the artifacts to learn what the run did. Returning a
Completed state carrying the headline puts that sentence there; Prefect unwraps the state, so a
caller of the flow (the command line, a parent flow) still gets the result dict, which also
carries the headline for the command line's first line.
"""

from __future__ import annotations

from typing import Any, cast

__all__ = ["finished"]


def finished(result: dict[str, Any], headline: str) -> dict[str, Any]:
    """``result`` plus ``headline``, as a Completed state whose message is the headline (typed as the dict it becomes).

    The headline is also the run's last log line: the run page opens on its logs."""
    from prefect import get_run_logger
    from prefect.states import Completed

    get_run_logger().info("%s", headline)
    return cast(dict[str, Any], Completed(message=headline, data={**result, "headline": headline}))
