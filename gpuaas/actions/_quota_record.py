"""What a quota plan records of each queue before its first write, so that every restore puts back exactly that.

The intent row (written before any PATCH) holds, in ``evidence["entries"]``, per queue the plan
moves: the GPU entries of the moved flavors as read (``before``: nominal quota and limits, a limit
not set absent), the entries the plan's patch writes (``after``), and the queue's
``gpuaas.io/quota-plan`` annotation as it was (``annotation``, ``null`` when unset). An undo, a
rollback and the next run's recovery write ``before`` back, and only over a queue whose entries are
still ``after``: anything else is someone else's change, never overwritten.

An intent written before these were recorded has no ``entries``: its queues are restored by the
nominal quota alone (their limits as the rule leaves them, the mark removed), as they always were.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuaas.actions._quota_patches import (
    Difference,
    Entries,
    annotation_of,
    entry_differences,
    gpu_entries,
    marked_by,
    moved_entries,
    only,
)
from gpuaas.store import AuditEntry

__all__ = ["RECORD_KEY", "QueueRecord", "record_queue", "records_evidence", "records_of"]

RECORD_KEY = "entries"


@dataclass(frozen=True)
class QueueRecord:
    before: Entries
    """The moved flavors' GPU entries as read before the plan's first write."""
    after: Entries
    """The same entries as the plan's patch writes them."""
    annotation: str | None
    """The queue's ``gpuaas.io/quota-plan`` before the plan (an earlier plan's mark, or none)."""

    def covers(self, flavors: Collection[str]) -> bool:
        return all(f in self.before and f in self.after for f in flavors)

    def differences(self, obj: Mapping[str, Any], gpu_resources: Sequence[str], flavors: Collection[str], *,
                    landed: bool) -> list[Difference]:
        """How the live entries of ``flavors`` differ from the plan's (``landed``: ``after``, else ``before``)."""
        expected = only(self.after if landed else self.before, flavors)
        return entry_differences(gpu_entries(obj, gpu_resources, flavors), expected)

    def restored_mark(self, obj: Mapping[str, Any], plan_id: int) -> str | None:
        """The annotation a restore writes: the one the plan replaced while the plan's own mark is on the queue;
        a later mark (another plan moved another flavor since) stays."""
        return self.annotation if marked_by(obj) == plan_id else annotation_of(obj)


def record_queue(obj: Mapping[str, Any], moves: Mapping[str, tuple[int, int]], gpu_resources: Sequence[str],
                 manage_limits: bool) -> QueueRecord:
    """The record of one queue read just before the plan's first write; ``moves``: flavor -> (from, to)."""
    before = gpu_entries(obj, gpu_resources, moves)
    after = moved_entries(before, {f: to for f, (_, to) in moves.items()}, manage_limits)
    return QueueRecord(before, after, annotation_of(obj))


def records_evidence(records: Mapping[str, QueueRecord]) -> dict[str, Any]:
    """The records as the intent's ``evidence[RECORD_KEY]`` holds them (JSON)."""
    return {q: {"before": r.before, "after": r.after, "annotation": r.annotation} for q, r in records.items()}


def records_of(intent: AuditEntry) -> dict[str, QueueRecord]:
    """queue -> its record, as the intent holds them; empty for an intent written before they were recorded."""
    raw = (intent.evidence or {}).get(RECORD_KEY)
    if not isinstance(raw, dict):
        return {}
    return {q: QueueRecord(r.get("before") or {}, r.get("after") or {}, r.get("annotation"))
            for q, r in raw.items() if isinstance(r, dict)}
