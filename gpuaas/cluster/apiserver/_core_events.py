"""core/v1 Events: a read-only view of the stored ``events.k8s.io/v1`` Events.

Why: gpuaas writes its Events through ``events.k8s.io/v1``, but ``kubectl describe`` (and every core/v1
client) reads them at ``/api/v1/namespaces/{ns}/events`` with a field selector on ``involvedObject.*``.
On a real API server both groups are views of the same stored objects; here they are too: the events.k8s.io
ones are stored, and this module converts them on the way out, as upstream's
``Convert_v1_Event_To_core_Event`` (``pkg/apis/events/v1/conversion.go``) does, and renames a core field
selector to the stored field labels, as upstream's field label conversion does. Writes stay on
events.k8s.io/v1: nothing in gpuaas or its tests writes core Events.
"""

from __future__ import annotations

from typing import Any

from ._errors import ApiError
from ._selectors import rename_field_selector
from ._store import ObjectStore

__all__ = ["DISCOVERY", "field_selector", "get", "parse_path", "to_core"]

_FIELD_LABELS: dict[str, str] = {
    **{f"involvedObject.{f}": f"regarding.{f}"
       for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")},
    "reportingComponent": "reportingController",
    **{f: f for f in ("metadata.name", "metadata.namespace", "reason", "type")},
}
"""core/v1 field label -> the stored events.k8s.io/v1 one (upstream's core selectable fields, less the
computed ``source``, which falls back to the reporting controller)."""


DISCOVERY: dict[str, Any] = {"name": "events", "singularName": "event", "namespaced": True, "kind": "Event",
                             "verbs": ["get", "list"], "shortNames": ["ev"]}
"""Its entry in ``/api/v1`` discovery: the verbs it serves, so a client that reads discovery does not try more."""


def parse_path(rest: list[str]) -> tuple[str | None, str | None] | None:
    """``(namespace, name)`` of a core/v1 Events URL (the part after ``/api/v1``), or None when it is not one.

    ``/events`` lists every namespace's; ``/events/{name}`` without a namespace is not served (404), as upstream.
    """
    if rest == ["events"]:
        return None, None
    if len(rest) in (3, 4) and rest[0] == "namespaces" and rest[2] == "events":
        return rest[1], rest[3] if len(rest) == 4 else None
    return None


def field_selector(selector: str | None) -> str | None:
    """A core/v1 Events field selector in the stored kind's field labels (400 for one upstream does not index)."""
    return rename_field_selector(selector, _FIELD_LABELS)


def to_core(event: dict[str, Any]) -> dict[str, Any]:
    """A stored events.k8s.io/v1 Event as core/v1 shows it, field for field as upstream converts it.

    ``source`` comes from ``deprecatedSource`` only: upstream leaves it empty for an Event written through
    events.k8s.io (kubectl shows the reporting controller instead). The fields core/v1 serialises without
    ``omitempty`` (``source``, the timestamps, ``reportingComponent``/``reportingInstance``) are always present.
    """
    core: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Event", "metadata": event.get("metadata") or {},
        "involvedObject": event.get("regarding") or {},
        "reason": event.get("reason"), "message": event.get("note"),
        "source": event.get("deprecatedSource") or {},
        "firstTimestamp": event.get("deprecatedFirstTimestamp"),
        "lastTimestamp": event.get("deprecatedLastTimestamp"),
        "count": event.get("deprecatedCount"),
        "type": event.get("type"), "eventTime": event.get("eventTime"), "series": event.get("series"),
        "action": event.get("action"), "related": event.get("related"),
    }
    omitted = {key for key in ("reason", "message", "count", "type", "series", "action", "related")
               if not core[key]}
    core = {key: value for key, value in core.items() if key not in omitted}
    core["reportingComponent"] = event.get("reportingController") or ""
    core["reportingInstance"] = event.get("reportingInstance") or ""
    return core


def get(store: ObjectStore, namespace: str, name: str) -> dict[str, Any]:
    """One Event as core/v1 shows it; a missing one is core's 404 (``events "x" not found``)."""
    try:
        return to_core(store.get("Event", namespace, name))
    except ApiError as err:
        if err.status == 404:
            raise ApiError.not_found("events", name, group="", kind="events") from None
        raise
