"""Kubernetes Events on the objects gpuaas changes: what the team that owns a workload sees of it.

A data scientist whose notebook stopped does not read gpuaas's audit log; ``kubectl describe``
shows the object's Events, and event exporters forward them to chat. So every write gpuaas makes
(a stop, a restore, a deadline hold, its release, a quota move) is followed by one
``events.k8s.io/v1`` Event on the object it changed, saying what and why and the audit id to undo
it. An Event is best effort, as Kubernetes' own are: one that cannot be recorded (the role lacks
``create events``) never undoes or fails the write, and the run says so in a warning.
"""

from __future__ import annotations

import socket
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

__all__ = ["CONTROLLER", "EventReason", "event_body"]

CONTROLLER = "gpuaas.io/gpuaas"
"""``reportingController``: who wrote the Event (``kubectl get events -o wide`` shows it as its source)."""

_NOTE_BYTES = 1024
"""The API server refuses a note longer than 1 kB."""


class EventReason(StrEnum):
    """The Event's reason (what ``kubectl describe`` lists); its action is the verb gpuaas did."""

    reclaimed = "Reclaimed"
    restored = "Restored"
    held = "HeldForDeadline"
    demoted = "DemotedForDeadline"
    released = "Released"
    quota_moved = "QuotaMoved"
    quota_restored = "QuotaRestored"

    @property
    def action(self) -> str:
        return _ACTIONS[self]


_ACTIONS = {EventReason.reclaimed: "Stop", EventReason.restored: "Restore", EventReason.held: "Hold",
            EventReason.demoted: "Demote", EventReason.released: "Release", EventReason.quota_moved: "Rebalance",
            EventReason.quota_restored: "Restore"}


def _clip(note: str) -> str:
    raw = note.encode("utf-8")
    return note if len(raw) <= _NOTE_BYTES else raw[:_NOTE_BYTES - 3].decode("utf-8", "ignore") + "..."


def _reference(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    ref = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "name": str(meta.get("name", "")),
           "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion"),
           "namespace": meta.get("namespace") or None}
    return {k: v for k, v in ref.items() if v is not None}


def controller_of(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The object that controls a Kueue Workload (its RayCluster, Job, JobSet…), as a minimal object in its
    namespace, or None: what the team runs and looks at with ``kubectl describe``."""
    if obj.get("kind") != "Workload":
        return None
    meta = obj.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") and ref.get("name"):
            return {"apiVersion": ref.get("apiVersion"), "kind": ref["kind"],
                    "metadata": {"name": ref["name"], "namespace": meta.get("namespace"), "uid": ref.get("uid")}}
    return None


def event_body(obj: dict[str, Any], reason: EventReason, note: str, now: datetime | None = None,
               related: dict[str, Any] | None = None) -> dict[str, Any]:
    """The Event regarding ``obj`` (as the API server returned it), in its namespace, or ``default`` for a
    cluster-scoped object (a ClusterQueue), as Kubernetes places them; ``related``: the object gpuaas wrote, where
    the Event is on the one that controls it."""
    regarding = _reference(obj)
    name, namespace = regarding["name"], regarding.get("namespace")
    at = (now or datetime.now(UTC)).astimezone(UTC)
    body = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{name[:230].rstrip('-.')}.{uuid.uuid4().hex[:16]}", "namespace": namespace or "default"},
        "eventTime": at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingController": CONTROLLER,
        "reportingInstance": f"gpuaas-{socket.gethostname()}"[:128],
        "action": reason.action,
        "reason": reason.value,
        "type": "Normal",
        "regarding": regarding,
        "note": _clip(note),
    }
    if related is not None:
        body["related"] = _reference(related)
    return body
