"""The collect flow's body, without Prefect: what ``flows.collect`` runs as a flow and the command line runs directly.

The phases of ``gpuaas.operations.collect``: read (one step per source, each retried on transient errors
and bounded by a timeout), assemble (the join, and the local GPUs sampled), plan (a step: the store's
cadence read, then pure), apply (a step: store and prune); then the artifacts and the Pushgateway. One failing source degrades the snapshot; all
failing fails the run. A failed push is logged and reported as ``pushed_samples=None``.

Nothing here imports Prefect: its steps (``tasks.collect``) are Prefect tasks inside a flow run and
plain calls elsewhere (``tasks._steps``).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from flows._instant import looked_at
from gpuaas.operations import collect as operation
from gpuaas.settings import GpuaasSettings, load_settings
from gpuaas.sources.bulk import collector_paused
from reports import counted, source_errors
from reports.collect import headline
from tasks import IO_TASK_OPTIONS, OUTCOME_SAYS, push_or_warn, retry_options, run_logger, unwalked
from tasks.collect import plan_collect, publish_artifacts, push_summary, read_one_source, store_snapshot

__all__ = ["collect_snapshot"]


def collect_snapshot(at: datetime | None = None) -> dict[str, Any]:
    """Collect, store and publish one snapshot; returns its summary (with ``snapshot_id`` and ``headline``).

    An ``at`` in the future is refused (``flows._instant.looked_at``) before anything is read or stored."""
    now = looked_at(at, datetime.now(UTC))  # UTC: called without Prefect's parameter validation too
    logger = run_logger()
    settings = load_settings()
    windows = operation.windows(settings)

    started = time.monotonic()
    with collector_paused():  # the pages die by refcount once joined, before the collector walks them
        readings = _read_sources(settings, now, windows)
        snapshot = operation.assemble(settings, now, windows, readings)
    logger.info("collect: %s read in %.2fs", counted(len(readings), "source"), time.monotonic() - started)

    plan = plan_collect(settings, unwalked(snapshot))
    summary = dict(plan.summary)
    summary["snapshot_id"] = store_snapshot(settings, unwalked(plan))
    summary["idle_candidates"] = idle = plan.idle_candidates
    summary["unjudged"] = [u.as_dict() for u in plan.unjudged[:operation.UNJUDGED_LISTED]]
    summary["unjudged_count"] = len(plan.unjudged)
    from gpuaas.policies.reclaim.coverage import blind_run_line  # loaded once the work has started, as its clients are
    from reports.reclaim import telemetry_counts

    unknown, judged = telemetry_counts(snapshot)
    summary["blind"] = blind_run_line(unknown, judged, idle)
    summary["degraded"] = snapshot.degraded or summary["blind"] is not None  # as a reclaim of it would be
    summary["required_sources"] = plan.required_sources
    summary["source_errors"] = source_errors(summary["sources"])
    publish_artifacts(unwalked(snapshot), summary, idle)
    summary["pushed_samples"] = push_or_warn(settings, push_summary, unwalked(snapshot), summary, idle, what="summary metrics")
    summary["headline"] = headline(summary, idle)
    return summary


def _read_sources(settings: GpuaasSettings, now: datetime, windows: list[float]) -> dict[str, operation.Reading]:
    """Each source's reading, or ``(None, status)`` with the error for one that failed after its retries."""
    logger = run_logger()
    started = time.monotonic()
    reader = read_one_source.with_options(**retry_options(settings))
    # Prometheus (the slowest at fleet scale) in the flow's own thread, so that the task timeout can
    # interrupt it; the others in the task runner's threads meanwhile, where Prefect cannot interrupt
    # a blocking read, so they are bounded by the wait instead (and each request by its own timeout):
    # a collect waits for its slowest source, not for the sum of them.
    threaded = reader.with_options(timeout_seconds=None)
    pending = {name: threaded.submit(name, settings, now, windows) for name in operation.SOURCES if name != "prometheus"}
    states: dict[str, Any] = {"prometheus": reader("prometheus", settings, now, windows, return_state=True)}
    bound_s = IO_TASK_OPTIONS["timeout_seconds"] * (settings.retries + 1)
    for name, future in pending.items():
        future.wait(timeout=max(started + bound_s - time.monotonic(), 0.0))
        states[name] = future.state
    readings: dict[str, operation.Reading] = {}
    for name in operation.SOURCES:
        state = states[name]
        if state.is_completed():
            readings[name] = state.result()
            continue
        if not state.is_final():
            error: BaseException = TimeoutError(f"no answer within {bound_s:g}s")
        else:
            error = state.result(raise_on_failure=False)
            if not isinstance(error, BaseException):
                error = RuntimeError(state.message or state.name)
        readings[name] = operation.failed(settings, name, error, time.monotonic() - started)  # retries included
        said = readings[name][1].error  # retried first where that could help
        # the outcome names a required source's failure (the headline, or the error when every source failed): a
        # terminal that prints it need not read this line too (``OUTCOME_SAYS``); the run's logs keep it
        logger.warning("source %s failed: %s", name, said, extra={OUTCOME_SAYS: said})
    return readings
