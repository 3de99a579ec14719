"""The collect flow (every 5 minutes): one consistent snapshot of the fleet, with data quality.

Extract (one task per source, each retried on transient errors and bounded by a timeout), join (pure),
load (store and prune, artifacts, Pushgateway). One failing source degrades the snapshot; all
failing fails the run. A failed push is logged and reported as ``pushed_samples=None``.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from prefect import flow, get_run_logger

from gpuaas.models import SourceStatus
from gpuaas.snapshot import SOURCES, assemble_snapshot, failed_source, snapshot_windows
from tasks._options import push_or_warn, retry_options
from tasks.collect import count_idle_candidates, publish_artifacts, push_summary, read_one_source, store_snapshot
from tasks.notify import NOTIFY_HOOKS
from tasks.secrets import flow_settings


@flow(name="collect", log_prints=False, **NOTIFY_HOOKS)
def collect(at: datetime | None = None) -> dict[str, Any]:
    """Collect, store and publish one snapshot; returns its summary (with ``snapshot_id``).

    Args:
        at: Evaluate every query at this instant instead of now (empty: now), e.g. to look again at an incident window.
    """
    logger = get_run_logger()
    settings = flow_settings()
    now = at or datetime.now(UTC)
    windows = snapshot_windows(settings)

    started = time.monotonic()
    reader = read_one_source.with_options(**retry_options(settings))
    readings: dict[str, tuple[Any, SourceStatus]] = {}
    for name in SOURCES:
        # In the flow's own thread, so that the task timeout can interrupt a hung source.
        began = time.monotonic()
        state = reader(name, settings, now, windows, return_state=True)
        if state.is_completed():
            readings[name] = state.result()
            continue
        error = state.result(raise_on_failure=False)
        if not isinstance(error, BaseException):
            error = RuntimeError(state.message or state.name)
        readings[name] = (None, failed_source(name, error, time.monotonic() - began))  # retries included
        logger.warning("source %s failed after retries: %s", name, readings[name][1].error)
    snapshot = assemble_snapshot(settings, now, windows, readings)
    logger.info("collect: %d sources read in %.2fs", len(readings), time.monotonic() - started)

    summary = snapshot.summary()
    idle = count_idle_candidates(settings, snapshot)
    summary["snapshot_id"] = store_snapshot(settings, snapshot, summary)
    summary["idle_candidates"] = idle
    summary["degraded"] = snapshot.degraded
    summary["required_sources"] = [n for n, s in snapshot.sources.items() if s.required]
    summary["source_errors"] = {n: s.error for n, s in snapshot.sources.items() if s.error}
    publish_artifacts(snapshot, summary, idle)
    summary["pushed_samples"] = push_or_warn(settings, push_summary, snapshot, summary, idle, what="summary metrics")
    logger.info(
        "snapshot %s: %d workloads, %d unknown telemetry, %d idle candidates%s",
        summary["snapshot_id"], summary["workloads"], summary["unknown_telemetry"], idle,
        " (degraded)" if snapshot.degraded else "",
    )
    return summary


if __name__ == "__main__":
    collect()
