"""The collect flow (every 5 minutes): one consistent snapshot of the fleet, with data quality.

The body is ``flows._collect.collect_snapshot`` (Prefect-free, so the command line can run it without
Prefect); as a flow its steps are Prefect tasks, and the run ends Completed with its headline as the
state message.
"""

from __future__ import annotations

from typing import Any

from prefect import flow

from flows._collect import collect_snapshot
from flows._hooks import FLOW_HOOKS
from flows._instant import UtcInstant
from flows._outcome import finished


@flow(name="collect", log_prints=False, **FLOW_HOOKS)
def collect(at: UtcInstant | None = None) -> dict[str, Any]:
    """Collect, store and publish one snapshot; returns its summary (with ``snapshot_id``).

    Args:
        at: Evaluate every query at this instant instead of now (empty: now), e.g. to look again at an incident window; one in the future is refused.
    """
    summary = collect_snapshot(at)
    return finished(summary, summary["headline"])


if __name__ == "__main__":
    collect()
