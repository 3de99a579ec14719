"""The ``gpuaas.io/deadline-hold`` mark on a Workload: how it reads, and which marks the plan counts as holds.

Anyone who may edit a Workload may write that annotation. Taken on its word, a mark on a pending Workload would
keep it out of the plan's holds and demotions (it reads as held already) and make the plan count a hold that
is not there. So the plan counts a mark as gpuaas's hold or demotion only where the audit log proves gpuaas
wrote it and it still holds (``RecordedHolds``: read by the operation once per run, in one query, before the pure
plan). Any other mark is planned as no hold at all: its Workload may be held or demoted like any other (the
hold writes its own mark, with the prior state read from the live object, over the one found), it is never
released by the plan, and the pool's notes say so. A plan with no audit log behind it (a replay, a benchmark)
passes None: every mark counts.

Pure: the snapshot's Workloads in, the marks out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, NamedTuple

import pandas as pd

__all__ = ["HOLD_ANNOTATION", "UNRECORDED", "RecordedHolds", "SnapshotMark", "counts_as_held", "is_demotion", "mark_id", "parse_hold",
           "release_is_due", "snapshot_marks", "unrecorded_note"]

HOLD_ANNOTATION = "gpuaas.io/deadline-hold"
UNRECORDED = f"its {HOLD_ANNOTATION} mark is not one gpuaas recorded: planned as not held"

RecordedHolds = frozenset[tuple[str, int]]
"""(uid, audit id) of every mark on the snapshot's Workloads that names a hold or demotion gpuaas recorded on
that very object, with the same ``before``, written and not released (the release path's own proof)."""


class SnapshotMark(NamedTuple):
    """A mark as the snapshot read it: on which Workload (namespace, name, uid), its text and its reading."""

    namespace: str
    name: str
    uid: str | None
    text: str
    mark: dict[str, Any]

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


def parse_hold(value: object) -> dict[str, Any] | None:
    """The hold annotation as a dict (``audit_id``, ``release_at``, ``before``), None when absent.

    An unreadable annotation yields ``{}``: a mark, but one that names no hold (never counted as one where the
    audit log is read, and never released: the release writes what a mark says).
    """
    if not isinstance(value, str) or not value:
        return None
    try:
        data = json.loads(value)
    except (ValueError, RecursionError):  # RecursionError: an annotation nested past the decoder's depth
        return {}
    return data if isinstance(data, dict) else {}


def mark_id(mark: Mapping[str, Any]) -> int | None:
    """The audit id a mark names; None for anything but a whole number (``true`` is not row 1)."""
    value = mark.get("audit_id")
    return value if type(value) is int else None


def release_is_due(hold: Mapping[str, Any], now: datetime) -> bool:
    """True when the hold's ``release_at`` has come, or it cannot be read.

    A time without a zone is taken as UTC (gpuaas writes UTC), so that a hand-edited mark is still compared,
    never a reason to keep a Workload held.
    """
    try:
        when = datetime.fromisoformat(str(hold["release_at"]))
    except (KeyError, ValueError):
        return True
    return _utc(when) <= _utc(now)


def _utc(at: datetime) -> datetime:
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at


def is_demotion(hold: Mapping[str, Any]) -> bool:
    """True for gpuaas's mark of a demotion (the prior ``spec.priority`` recorded), False for a hold."""
    before = hold.get("before")
    return isinstance(before, dict) and "priority" in before


def counts_as_held(mark: Mapping[str, Any] | None, uid: str | None, recorded: RecordedHolds | None) -> bool:
    """Whether the plan takes ``mark``, read on the Workload of ``uid``, as gpuaas's hold or demotion."""
    if mark is None:
        return False
    audit_id = mark_id(mark)
    return recorded is None or (uid is not None and audit_id is not None and (uid, audit_id) in recorded)


def snapshot_marks(workloads: pd.DataFrame) -> list[SnapshotMark]:
    """Every mark on the snapshot's Workloads, in their order."""
    if workloads.empty or "deadline_hold" not in workloads:
        return []
    uids = workloads["uid"] if "uid" in workloads else pd.Series([None] * len(workloads), index=workloads.index)
    out = []
    for ns, name, uid, text in zip(workloads["namespace"], workloads["name"], uids, workloads["deadline_hold"],
                                   strict=True):
        mark = parse_hold(text)
        if mark is not None:
            out.append(SnapshotMark(str(ns), str(name), uid_text(uid), str(text), mark))
    return out


def uid_text(value: object) -> str | None:
    """A uid (or resourceVersion) cell as text; None for a cell left empty (a frame built without them)."""
    if value is None or pd.isna(value) or str(value) == "":
        return None
    return str(value)


def unrecorded_note(ref: str) -> str:
    """What the plan's pool says of a Workload whose mark it does not count."""
    return f"{ref}: {UNRECORDED}"
