"""Tasks of the incident-review flow: check the undo ids, read the window from the store, publish.

The undo itself is the reclaim flow's task (``tasks.reclaim.undo_actions``: ``undo_entries`` and
every undoer it dispatches to), so an undo started from a review is the same undo as ``gpuaas undo``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import pandas as pd

from gpuaas.actions.undo import UNDOERS
from gpuaas.errors import ConfigError
from gpuaas.models import Snapshot
from gpuaas.policies.incident import IncidentReview, build_review, scope_for
from gpuaas.settings import GpuaasSettings
from gpuaas.store import AuditEntry, Store, open_store
from reports.incident import event_rows, incident_markdown, plot_png, summary_line
from tasks._artifacts import markdown_artifact, table_artifact
from tasks._options import gpuaas_task

__all__ = ["MARKDOWN_KEY", "TABLE_KEY", "check_undo_ids", "missing_audit_ids", "publish_incident_artifacts",
           "read_review"]

MARKDOWN_KEY = "incident-review"
TABLE_KEY = "incident-review-timeline"
_REFERENT_DEPTH = 3
"""Rows before the window that rows in it refer to: an apply's plan, an undo's reclaim, its intent."""


def missing_audit_ids(settings: GpuaasSettings, audit_ids: Iterable[int]) -> list[int]:
    """The ids that name no audit row (the CLI checks before it starts a run, the flow again inside it)."""
    with open_store(settings) as store:
        return [int(i) for i in audit_ids if store.get_audit(int(i)) is None]


@gpuaas_task("check-undo-ids")
def check_undo_ids(settings: GpuaasSettings, audit_ids: Sequence[int]) -> None:
    """Every id names an audit row, or nothing is undone: a typo must not undo the ids around it."""
    missing = missing_audit_ids(settings, audit_ids)
    if missing:
        raise ConfigError(f"no audit row {', '.join(f'#{i}' for i in missing)} (ids: `gpuaas audit list` or this "
                          "review's timeline); nothing undone", field="undo")


def _referents(store: Store, rows: Sequence[AuditEntry]) -> list[AuditEntry]:
    known = {r.id for r in rows}
    out: list[AuditEntry] = []
    wanted = {r.refers_to for r in rows if r.refers_to is not None} - known
    for _ in range(_REFERENT_DEPTH):
        found = [row for i in sorted(i for i in wanted if i is not None) if (row := store.get_audit(i)) is not None]
        out += found
        known |= {r.id for r in found}
        wanted = {r.refers_to for r in found if r.refers_to is not None} - known
        if not wanted:
            break
    return out


def _placements(store: Store) -> list[tuple[str, str]]:
    """(namespace, ClusterQueue) of the workloads in the newest stored snapshot: the map a namespace
    filter needs when the policy's tenants do not name the namespace (only read when filtering)."""
    record = store.latest_snapshot(full=True)
    if record is None or "snapshot" not in record.payload:
        return []
    workloads = Snapshot.from_json(record.payload["snapshot"]).workloads
    if workloads.empty or not {"namespace", "cluster_queue"} <= set(workloads.columns):
        return []
    pairs = workloads[["namespace", "cluster_queue"]].dropna().drop_duplicates()
    return [(str(ns), str(cq)) for ns, cq in pairs.itertuples(index=False)]


def _queue_tenants(queue_rows: pd.DataFrame) -> list[tuple[str, str]]:
    if queue_rows.empty:
        return []
    pairs = queue_rows[["cluster_queue", "tenant"]].dropna().drop_duplicates()
    return [(str(q), str(t)) for q, t in pairs.itertuples(index=False)]


@gpuaas_task("read-incident-window", retries=2, retry_delay_seconds=2)
def read_review(settings: GpuaasSettings, start: datetime, end: datetime, namespaces: Sequence[str],
                queues: Sequence[str]) -> IncidentReview:
    """The stored history and audit rows of ``[start, end)``, built into the review (pure)."""
    with open_store(settings) as store:
        queue_rows = store.queue_history(start, end)
        tenant_rows = store.tenant_history(start, end)
        audit = store.audit(since=start, until=end, limit=None)
        referents = _referents(store, audit)
        placements = _placements(store) if namespaces or queues else []
    tenants = [(t.name, t.namespaces, t.cluster_queues) for t in settings.policy.tenants]
    scope = scope_for(namespaces, queues, tenants=tenants, placements=placements,
                      queue_tenants=_queue_tenants(queue_rows))
    return build_review(queue_rows, tenant_rows, audit, start, end, scope, referents=referents,
                        undoable_actions=set(UNDOERS))


@gpuaas_task("publish-incident-artifacts")
def publish_incident_artifacts(review: IncidentReview, undo: list[dict[str, Any]] | None,
                               busy: str | None) -> None:
    """The timeline as markdown (with the plot) and as a table; no table of placeholders when it is empty."""
    summary = summary_line(review, undo, busy)
    markdown_artifact(key=MARKDOWN_KEY, markdown=incident_markdown(review, plot_png(review), undo, busy),
                             description="Incident review: fleet, decisions and actions in the window")
    rows = event_rows(review)
    if rows:
        table_artifact(key=TABLE_KEY, table=rows, description=summary)
    else:
        markdown_artifact(key=TABLE_KEY, markdown=f"{summary}\n\nNo audit rows in the window for this scope.\n",
                                 description="Incident review timeline")
