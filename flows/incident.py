"""The incident_review flow (on demand): what the fleet looked like in a window, what gpuaas did, undo it.

Check (the window and every undo id, before anything is written), undo (only the ids asked for,
through the same undo path and under the same ``cluster-writes`` lock as ``gpuaas undo``),
read (the stored per-queue and per-tenant history and the audit rows of the window: any window
inside the retention, no snapshot needed), publish (the ``incident-review`` markdown timeline with
its plot, the ``incident-review-timeline`` table). An undo is an explicit request, so it is not a
dry-run, as with ``gpuaas undo``; each undoer still refuses to write over a later change, and the
artifact says what was undone and what was refused and why.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from prefect import flow, get_run_logger

from flows._hooks import FLOW_HOOKS
from flows._outcome import failed, finished
from gpuaas.actions import new_holder
from gpuaas.models import NOT_OK
from gpuaas.operations.incident import window
from gpuaas.settings import load_settings
from reports import counted
from reports.incident import incident_json, incident_markdown
from tasks.incident import check_undo_ids, publish_incident_artifacts, read_review
from tasks.reclaim import undo_actions
from tasks.writes import WritesBusy, cluster_writes


@flow(name="incident_review", log_prints=False, **FLOW_HOOKS)
def incident_review(start: str = "1h", end: str = "now", namespaces: list[str] | None = None,
                    queues: list[str] | None = None, undo: list[int] | None = None) -> dict[str, Any]:
    """Review one window; returns the review as JSON (``reports.incident.incident_json``) plus its markdown.

    Args:
        start: Start of the window: an ISO time such as 2026-11-29T02:00 (UTC unless it carries an offset like +01:00), or a duration before now: 90m, 2h, 7d.
        end: End of the window (exclusive): an ISO time, a duration before now, or now.
        namespaces: Only these namespaces (empty: the whole fleet). Reaches the queue history through the policy's tenants and where the namespace's workloads were queued.
        queues: Only these ClusterQueues (empty: all), and the decisions about their quota and their namespaces' workloads.
        undo: Audit ids to reverse (reclaims, deadline holds, quota plans: the undoable ids of the timeline). Not a dry-run, like `gpuaas undo`: each is restored under the cluster-writes lock, never over a later change; an unknown id undoes nothing.
    """
    logger = get_run_logger()
    settings = load_settings()
    window(start, end, datetime.now(UTC))  # bad input fails the run before any write
    undone: list[dict[str, Any]] | None = None
    busy = None
    if undo:
        check_undo_ids(settings, list(undo))
        started = time.monotonic()
        try:
            with cluster_writes(settings, new_holder("incident_review")):
                undone = [asdict(r) for r in undo_actions(settings, list(undo))]
        except WritesBusy as exc:
            busy = str(exc)
            logger.warning("undo: %s", busy)
        for u in undone or []:
            logger.info("undo #%s: %s, %s", u["audit_id"], u["result"], u["message"])
        logger.info("undo: %s in %.2fs", counted(len(undo), "id"), time.monotonic() - started)

    # Resolved again after the undo, so that a window ending now includes the undo's own audit rows.
    begin, until = window(start, end, datetime.now(UTC))
    started = time.monotonic()
    review = read_review(settings, begin, until, list(namespaces or []), list(queues or []))
    logger.info("read: %s, %s, %s in %.2fs", counted(len(review.fleet), "collect"),
                counted(len(review.events), "audit row"), counted(len(review.actions), "action"), time.monotonic() - started)
    publish_incident_artifacts(review, undone, busy)
    doc = {**incident_json(review, undone, busy), "markdown": incident_markdown(review, None, undone, busy)}
    # an undo the cluster refused, or whose answer was lost: a red run, as `gpuaas incident --undo` exits 1
    close = failed if any(u["result"] in NOT_OK for u in undone or []) else finished
    return close(doc, str(doc["summary"]))


if __name__ == "__main__":
    incident_review()
