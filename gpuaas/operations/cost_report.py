"""The cost report, as one use case: from a window of the sources to the report.

1. ``read``: everything the sources hold for the window (a fixed number of requests, whatever the
   fleet), and for the previous window of the same length when a comparison is asked for.
2. ``plan``: the report, pure: the GPU-hour funnel, outcomes against SLO and quality, cost per
   verified outcome, waste; for both windows.

Nothing is applied: the report writes no cluster object and no audit row. The flow publishes it (the
HTML page, the artifacts, the metrics); ``gpuaas cost-report`` runs the flow.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from gpuaas.models import CostInputs
from gpuaas.policies.cost import CostReport, build_cost_report, comparison_note
from gpuaas.policy import Policy
from gpuaas.settings import GpuaasSettings
from gpuaas.sources.cost_window import read_cost_inputs

__all__ = ["CostReportPlan", "CostWindows", "plan", "read"]


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


def plan(windows: CostWindows, policy: Policy, policy_file: str | None = None) -> CostReportPlan:
    """The reports, pure; an ambiguous ``pod_labels`` selector is a ``ConfigError`` naming ``policy_file``.

    A previous period whose data spans less than ``COMPLETE_SHARE`` of it is not compared with: the
    current report's notes say so (and how much it held), in the JSON, the tables and the HTML alike."""
    report = build_cost_report(windows.current, policy, policy_file)
    previous = build_cost_report(windows.previous, policy, policy_file) if windows.previous is not None else None
    if previous is not None and (why := comparison_note(previous)) is not None:
        report = replace(report, notes=[*report.notes, why])
    return CostReportPlan(report=report, previous=previous)

