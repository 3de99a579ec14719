"""Tasks of the cost_report flow: read the window (retried when transient), build (pure), publish."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from gpuaas.operations import cost_report as operation
from gpuaas.policies.cost import CostReport
from gpuaas.pushgateway import push_metrics
from gpuaas.settings import GpuaasSettings
from reports import counted
from reports.cost_report import (
    change_rows,
    cost_report_metrics,
    funnel_rows,
    service_rows,
    summary_markdown,
    waster_rows,
)
from reports.cost_report_html import cost_per_outcome_plot, funnel_plot, render_html
from tasks._artifacts import summary_artifact, table_artifact
from tasks._options import gpuaas_task
from tasks._steps import run_logger

__all__ = ["build_report", "publish_cost_artifacts", "push_cost_metrics", "read_window", "write_html_report"]


@gpuaas_task("read-cost-window", task_run_name="read-window-{window_s}s", io=True)
def read_window(settings: GpuaasSettings, end: datetime, window_s: float, compare: bool) -> operation.CostWindows:
    """The window and, when compared, the previous one: retried as a whole when a source is transiently down."""
    return operation.read(settings, end, window_s, compare=compare)


@gpuaas_task("build-cost-report")
def build_report(settings: GpuaasSettings, windows: operation.CostWindows) -> operation.CostReportPlan:
    """Pure; an ambiguous ``pod_labels`` selector fails the run with an error naming the policy file."""
    policy_file = str(settings.policy_file) if settings.policy_file else None
    return operation.plan(windows, settings.policy, policy_file, settings.opencost_currency)


@gpuaas_task("write-html-report", retries=1)
def write_html_report(settings: GpuaasSettings, report: CostReport, previous: CostReport | None) -> str:
    """The self-contained page under ``reports_dir``; a new file per window end, written atomically. Then the pages
    written more than ``collect.retention_days`` ago go (``operation.prune_reports``); one that cannot be removed
    is a warning, never a reason to fail the report."""
    folder = Path(settings.reports_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / operation.report_file(report)
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(render_html(report, previous), encoding="utf-8")
    tmp.replace(path)
    retention = timedelta(days=settings.policy.collect.retention_days)
    removed, failed = operation.prune_reports(folder, retention, datetime.now(UTC), keep=path)
    logger = run_logger()
    if removed:
        logger.info("removed %s older than collect.retention_days (%g)", counted(len(removed), "cost report"),
                    settings.policy.collect.retention_days)
    for line in failed:
        logger.warning("old cost report not removed: %s", line)
    return str(path)


@gpuaas_task("publish-cost-artifacts")
def publish_cost_artifacts(report: CostReport, previous: CostReport | None, html_path: str | None) -> None:
    table_artifact(key="gpuaas-cost-funnel", table=funnel_rows(report),
                   description="GPU-hour funnel per tenant: allocated, busy, productive, unknown; cost and waste")
    table_artifact(key="gpuaas-cost-per-outcome", table=service_rows(report),
                   description="Verified outcomes and cost per outcome by service")
    table_artifact(key="gpuaas-cost-top-wasters", table=waster_rows(report),
                   description="Workloads with the most allocated-but-idle GPU cost")
    if previous is not None:
        table_artifact(key="gpuaas-cost-change", table=change_rows(report, previous),
                       description="Against the previous period of the same length")
    plots = [("where the allocated GPU-hours went", funnel_plot(report))]
    plots += [(f"cost per verified outcome, {kind} services", plot) for kind in ("serving", "batch")
              if (plot := cost_per_outcome_plot(report, kind)) is not None]
    summary_artifact(key="gpuaas-cost-summary", markdown=summary_markdown(report, previous, html_path, plots))


@gpuaas_task("push-cost-metrics", io=True)
def push_cost_metrics(settings: GpuaasSettings, report: CostReport) -> int:
    return push_metrics(settings, "gpuaas_cost_report", cost_report_metrics(report))
