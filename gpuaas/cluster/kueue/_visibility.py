"""The on-demand visibility API: ``PendingWorkloadsSummary`` for a ClusterQueue or LocalQueue.

Positions are 0-based and follow the admission order (priority, then FIFO), exactly the order the
scheduler walks; only queued workloads are listed, never admitted, held or deactivated ones.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ._model import WorkloadRecord
from ._status import rfc3339

__all__ = ["pending_summary"]

API_VERSION = "visibility.kueue.x-k8s.io/v1beta2"


def pending_summary(
    ordered: Iterable[tuple[WorkloadRecord, str]],
    *,
    local_queue: tuple[str, str] | None,
    limit: int = 1000,
    offset: int = 0,
) -> dict[str, Any]:
    """Build the summary from one ClusterQueue's pending workloads in order, with their LocalQueue.

    ``ordered`` yields ``(record, local queue name)``; with ``local_queue=(namespace, name)`` only
    that queue's workloads are listed (their ClusterQueue positions still count everyone).
    """
    items: list[dict[str, Any]] = []
    per_lq: dict[tuple[str, str], int] = {}
    for cq_position, (record, lq) in enumerate(ordered):
        lq_key = (record.namespace, lq)
        lq_position = per_lq.get(lq_key, 0)
        per_lq[lq_key] = lq_position + 1
        if local_queue is not None and lq_key != local_queue:
            continue
        items.append(_item(record, lq, cq_position, lq_position))
    return {
        "kind": "PendingWorkloadsSummary",
        "apiVersion": API_VERSION,
        "metadata": {"creationTimestamp": None},
        "items": items[offset : offset + limit] if limit >= 0 else items[offset:],
    }


def _item(record: WorkloadRecord, lq: str, cq_position: int, lq_position: int) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": record.name,
        "namespace": record.namespace,
        "creationTimestamp": rfc3339(record.created),
    }
    if record.owner:
        meta["ownerReferences"] = [{k: record.owner[k] for k in ("apiVersion", "kind", "name", "uid") if k in record.owner}]
    return {
        "metadata": meta,
        "priority": record.priority,
        "localQueueName": lq,
        "positionInClusterQueue": cq_position,
        "positionInLocalQueue": lq_position,
    }
