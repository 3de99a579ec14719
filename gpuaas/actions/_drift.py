"""Is the live object still the one a plan was made on? The check every write makes before it writes.

A plan decides on the snapshot's object, named by its uid and resourceVersion. Before a write the action reads the
object again: one recreated under the same name, or edited since, is decided again next run, never written on.
Each action maps the ``Drift`` to its own outcome (a reclaim's ``SkipCause``, a nudge's ``Outcome``); the words
are the same everywhere.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

__all__ = ["Drift", "drift"]


class Drift(StrEnum):
    """How the live object differs from the snapshot's."""

    unknown = "unknown"
    """The snapshot holds no uid or resourceVersion for it: nothing to compare, so no write."""
    recreated = "recreated"
    edited = "edited"


def drift(uid: str | None, resource_version: str | None, obj: dict[str, Any]) -> tuple[Drift, str] | None:
    """(how, why) the live ``obj`` is not the snapshot's object with ``uid`` at ``resource_version``; None when it
    is. A recreated object is named before an edited one: a new uid changes the resourceVersion too."""
    meta = obj.get("metadata") or {}
    live_uid, live_rv = meta.get("uid"), meta.get("resourceVersion")
    if not uid or not resource_version:
        return Drift.unknown, "the snapshot holds no uid and resourceVersion for it: no write on unknown state"
    if live_uid != uid:
        return Drift.recreated, (f"a different object now has this name (uid {uid} in the snapshot, {live_uid} now): "
                                 "deleted and recreated, never touched")
    if live_rv != resource_version:
        return Drift.edited, (f"changed since the snapshot (resourceVersion {resource_version} -> {live_rv}): "
                              "decided again next run")
    return None
