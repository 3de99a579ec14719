"""Tasks of the incident-review flow around ``gpuaas.operations.incident``: check the undo ids, read, plan, publish.

The undo itself is the reclaim flow's task (``tasks.reclaim.undo_actions``, over ``gpuaas.operations.incident.undo``),
so an undo started from a review is the same undo as ``gpuaas undo``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from gpuaas.operations import incident as operation
from gpuaas.policies.incident import IncidentReview
from gpuaas.settings import GpuaasSettings
from gpuaas.store import open_store
from reports.incident import event_rows, incident_markdown, plot_png, summary_line
from tasks._artifacts import markdown_artifact, table_artifact, without_headline
from tasks._options import gpuaas_task

__all__ = ["MARKDOWN_KEY", "TABLE_KEY", "check_undo_ids", "publish_incident_artifacts", "read_review"]

MARKDOWN_KEY = "incident-review"
TABLE_KEY = "incident-review-timeline"


@gpuaas_task("check-undo-ids")
def check_undo_ids(settings: GpuaasSettings, audit_ids: Sequence[int]) -> None:
    """Every id names an audit row, or nothing is undone: a typo must not undo the ids around it."""
    with open_store(settings, read_only=True) as store:
        operation.check_undo_ids(store, audit_ids)


@gpuaas_task("read-incident-window", retries=2, retry_delay_seconds=2)
def read_review(settings: GpuaasSettings, start: datetime, end: datetime, namespaces: Sequence[str],
                queues: Sequence[str]) -> IncidentReview:
    """The stored history and audit rows of ``[start, end)``, then the review of them (pure)."""
    with open_store(settings, read_only=True) as store:
        records = operation.read(store, start, end, scoped=bool(namespaces or queues), skip_interval=timedelta(
            minutes=settings.policy.reclaim.record_skips_every_minutes))
    return operation.plan(records, settings.policy, namespaces, queues)


@gpuaas_task("publish-incident-artifacts")
def publish_incident_artifacts(review: IncidentReview, undo: list[dict[str, Any]] | None,
                               busy: str | None) -> None:
    """The timeline as markdown (with the plot) and as a table; no table of placeholders when it is empty."""
    summary = summary_line(review, undo, busy)
    # the review's sentence as the description, on every card that lists it, and once on its page
    markdown = without_headline(incident_markdown(review, plot_png(review), undo, busy))
    markdown_artifact(key=MARKDOWN_KEY, markdown=markdown, description=summary)
    rows = event_rows(review)
    if rows:
        table_artifact(key=TABLE_KEY, table=rows, description=f"Incident review timeline: the {len(rows)} audit "
                                                                   "rows of the window, oldest first; each one's "
                                                                   f"reason and evidence in {MARKDOWN_KEY}")
    else:
        markdown_artifact(key=TABLE_KEY, markdown=f"{summary}\n\nNo audit rows in the window for this scope.\n",
                          description="Incident review timeline")
