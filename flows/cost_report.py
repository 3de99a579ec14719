"""The cost_report flow (daily, and on demand with a window): cost per verified outcome.

Over ``gpuaas.operations.cost_report``: read (a fixed number of queries for the window, and as many
again for the previous period of the same length, to show the change), build (pure), publish (artifacts, the HTML report in the
reports directory, the Pushgateway). A failed push is a warning: the report is already written.
A configured OpenCost or Kubernetes API that does not answer (the money then comes from OpenCost's
metrics in Prometheus, or is unknown; batch outcomes are unknown) makes the run degraded, as a collect
or a reclaim is: ``degraded`` and ``source_errors`` say so, and the headline starts with the failed sources.
So does a window without any GPU telemetry (Prometheus answered, but the GPU metrics are missing or
renamed): its busy, idle and waste figures are unknown, and the headline starts with where none was found.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from prefect import flow, get_run_logger

from flows._hooks import FLOW_HOOKS
from flows._instant import UtcInstant, looked_at
from flows._outcome import finished
from gpuaas.quantity import parse_window
from gpuaas.settings import load_settings
from reports import counted
from reports.cost_report import NO_SERVICES, cost_degraded, cost_headline, cost_report_json, cost_source_errors
from tasks import push_or_warn, retry_options
from tasks.cost_report import build_report, publish_cost_artifacts, push_cost_metrics, read_window, write_html_report


@flow(name="cost_report", log_prints=False, **FLOW_HOOKS)
def cost_report(window: str = "1d", at: UtcInstant | None = None, compare: bool = True,
                html: bool = True, whole_days: bool = False) -> dict[str, Any]:
    """Cost per verified outcome over ``window`` ending at ``at`` (default now; one in the future is refused before
    anything is read); returns the JSON document.

    Args:
        whole_days: End the window at the last 00:00 UTC at or before ``at``: the daily run then reports the day
            before as a calendar day, so consecutive reports neither overlap nor leave a gap however late a worker
            starts them, and they add up to a month. Scheduled a few minutes after midnight, it also leaves OpenCost
            time to price the day's last minutes.
    """
    end = looked_at(at, datetime.now(UTC))
    if whole_days:
        end = end.replace(hour=0, minute=0, second=0, microsecond=0)
    logger = get_run_logger()
    settings = load_settings()
    window_s = parse_window(window)
    reader = read_window.with_options(**retry_options(settings))

    started = time.monotonic()
    windows = reader(settings, end, window_s, compare)
    logger.info("read: %s for the window%s in %.2fs", counted(windows.current.queries, "request"),
                f" and {windows.previous.queries} for the previous one" if windows.previous else "",
                time.monotonic() - started)

    built = build_report(settings, windows)
    report, previous = built.report, built.previous
    path = write_html_report(settings, report, previous) if html else None
    publish_cost_artifacts(report, previous, path)
    pushed = push_or_warn(settings, push_cost_metrics, report, what="cost metrics")
    logger.info("cost report %s – %s: %s, %s, %s; HTML %s", report.start, report.end,
                counted(len(report.tenants), "tenant"), counted(len(report.services), "service"),
                counted(len(report.notes), "note"), path or "not written")
    doc = cost_report_json(report, path, previous)
    doc["pushed_samples"] = pushed
    errors = cost_source_errors(report, previous)
    # no telemetry is degraded as a blind reclaim is, yet no source failed: it leads the headline, not source_errors
    doc["degraded"], doc["source_errors"] = cost_degraded(report, previous), errors
    headline = cost_headline(report, previous)  # the JSON's summary, the markdown's and the page's lead say it too
    # the run's name: the failed sources and the figures, not the caveat about the policy
    return finished(doc, headline, name=headline.removeprefix(NO_SERVICES))


if __name__ == "__main__":
    cost_report()
