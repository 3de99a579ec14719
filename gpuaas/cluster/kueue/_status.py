"""Workload conditions, written the way Kueue writes them.

A condition carries ``lastTransitionTime`` from the injected clock, and only moves when its
status changes, so readers can compute "idle since" and wait times from it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from gpuaas.instant import utc_stamp

__all__ = ["condition", "rfc3339", "set_condition", "state_conditions"]


def rfc3339(moment: datetime) -> str:
    return utc_stamp(moment)


def condition(conditions: list[dict[str, Any]], kind: str) -> dict[str, Any] | None:
    return next((c for c in conditions if c.get("type") == kind), None)


def set_condition(
    conditions: list[dict[str, Any]], kind: str, status: bool, reason: str, message: str, now: datetime
) -> list[dict[str, Any]]:
    """Return ``conditions`` with ``kind`` set; the transition time moves only on a status change."""
    text = "True" if status else "False"
    old = condition(conditions, kind)
    since = old["lastTransitionTime"] if old and old.get("status") == text and "lastTransitionTime" in old else None
    new = {
        "type": kind,
        "status": text,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since or rfc3339(now),
    }
    return [c for c in conditions if c.get("type") != kind] + [new]


def state_conditions(
    conditions: list[dict[str, Any]], changes: list[tuple[str, bool, str, str]], now: datetime
) -> list[dict[str, Any]]:
    """Apply several ``(type, status, reason, message)`` changes in order."""
    for kind, status, reason, message in changes:
        conditions = set_condition(conditions, kind, status, reason, message, now)
    return conditions
