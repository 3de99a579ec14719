"""The cost report, as one use case: from a window of the sources to the report.

1. ``read``: everything the sources hold for the window (a fixed number of requests, whatever the
   fleet), and for the previous window of the same length when a comparison is asked for.
2. ``plan``: the report, pure: the GPU-hour funnel, outcomes against SLO and quality, cost per
   verified outcome, waste; for both windows.

Nothing is applied: the report writes no cluster object and no audit row. The flow publishes it (the
HTML page, the artifacts, the metrics); ``gpuaas cost-report`` runs the flow. Each page is a file of its
own in the reports directory (``report_file``), so that a run never overwrites another window's;
``prune_reports`` removes those older than ``collect.retention_days`` once a new one is written, as the
store prunes its rows, or a daily report would fill the disk by some 100 KB a day for ever.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path

from gpuaas.instant import utc_stamp
from gpuaas.models import CostInputs
from gpuaas.phrases import DEFAULT_CURRENCY
from gpuaas.policies.cost import CostReport, build_cost_report, comparison_note
from gpuaas.policy import Policy
from gpuaas.settings import GpuaasSettings
from gpuaas.sources.cost_window import read_cost_inputs

__all__ = ["REPORT_FILE", "CostReportPlan", "CostWindows", "plan", "prune_reports", "read", "report_file"]

REPORT_FILE = re.compile(r"cost-report-\d{8}T\d{6}Z-(\d+)s\.html(?:\.tmp)?")
"""The name of every HTML page ``report_file`` gives (and of one still being written, ``.tmp``): the only files
``prune_reports`` may remove."""


@dataclass(frozen=True)
class CostWindows:
    """What the sources read: the window ending at ``end``, and the one before it when compared."""

    current: CostInputs
    previous: CostInputs | None = None


@dataclass(frozen=True)
class CostReportPlan:
    """The report of the window and, when compared, of the previous one."""

    report: CostReport
    previous: CostReport | None = None


def read(settings: GpuaasSettings, end: datetime, window_s: float, *, compare: bool = True) -> CostWindows:
    """Both windows' inputs. Raises ``SourceError`` when Prometheus does not answer (there is no funnel then)."""
    current = read_cost_inputs(settings, end, window_s)
    previous = read_cost_inputs(settings, end - timedelta(seconds=window_s), window_s) if compare else None
    return CostWindows(current, previous)


def plan(windows: CostWindows, policy: Policy, policy_file: str | None = None,
         currency: str = DEFAULT_CURRENCY) -> CostReportPlan:
    """The reports, pure; an ambiguous ``pod_labels`` selector is a ``ConfigError`` naming ``policy_file``.
    ``currency``: the ISO 4217 code of OpenCost's prices (``GPUAAS_OPENCOST_CURRENCY``), for both windows alike.

    A previous period whose data spans less than ``COMPLETE_SHARE`` of it is not compared with: the
    current report's notes say so (and how much it held), in the JSON, the tables and the HTML alike."""
    report = build_cost_report(windows.current, policy, policy_file, currency)
    previous = (build_cost_report(windows.previous, policy, policy_file, currency) if windows.previous is not None
                else None)
    if previous is not None and (why := comparison_note(previous)) is not None:
        report = replace(report, notes=[*report.notes, why])
    return CostReportPlan(report=report, previous=previous)


def report_file(report: CostReport) -> str:
    """The HTML page's file name: the window's end (UTC, to the second) and length, one file per window."""
    return f"cost-report-{utc_stamp(report.end, '%Y%m%dT%H%M%SZ')}-{int(report.window_s)}s.html"


def prune_reports(folder: Path, older_than: timedelta, now: datetime,
                  keep: Path | None = None) -> tuple[list[Path], list[str]]:
    """Remove the pages in ``folder`` last written before ``now - older_than``; returns those removed, and a line
    for each that could not be (a run publishes its report all the same).

    Only regular files directly in ``folder`` whose name is ``REPORT_FILE``'s, never ``keep`` (the page just
    written): whatever else an operator keeps there, the load tests' folder, or a link, stays untouched. The age
    is the file's modification time, when the page was written; a page is kept at least as long as the window it
    covers (its name says it), so a month's report outlives a 14-day retention until the next month's is written.
    A page another run removed first is no failure.
    """
    removed: list[Path] = []
    failed: list[str] = []
    with os.scandir(folder) as entries:
        for entry in entries:
            path = Path(entry.path)
            named = REPORT_FILE.fullmatch(entry.name)
            if named is None or path == keep:
                continue
            cutoff = (now - max(older_than, timedelta(seconds=int(named.group(1))))).timestamp()
            try:
                if not entry.is_file(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_mtime >= cutoff:
                    continue
                path.unlink()
            except FileNotFoundError:
                continue
            except OSError as exc:
                failed.append(f"{path}: {exc.strerror or exc}")
                continue
            removed.append(path)
    return removed, failed
