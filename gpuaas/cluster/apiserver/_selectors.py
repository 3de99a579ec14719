"""Label and field selectors, parsed once per list call into plain predicates.

The grammar follows ``k8s.io/apimachinery/pkg/labels``: requirements joined by commas,
with ``=``, ``==``, ``!=``, ``in (...)``, ``notin (...)``, ``key`` (exists) and ``!key``.
Field selectors only support the fields the real server indexes for our kinds.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from typing import Any

from ._errors import ApiError

__all__ = ["Predicate", "parse_field_selector", "parse_label_selector", "rename_field_selector"]

Predicate = Callable[[dict[str, Any]], bool]

_SET_RE = re.compile(r"^\s*(?P<key>[^\s!=,()]+)\s+(?P<op>in|notin)\s*\((?P<values>[^)]*)\)\s*$")
_CMP_RE = re.compile(r"^\s*(?P<key>[^\s!=,()]+)\s*(?P<op>==|=|!=)\s*(?P<value>[^\s,()]*)\s*$")
_EXISTS_RE = re.compile(r"^\s*(?P<neg>!?)\s*(?P<key>[^\s!=,()]+)\s*$")

_FIELDS: dict[str, tuple[str, ...]] = {
    "metadata.name": ("metadata", "name"),
    "metadata.namespace": ("metadata", "namespace"),
}
_KIND_FIELDS: dict[str, dict[str, tuple[str, ...]]] = {
    "Pod": {"spec.nodeName": ("spec", "nodeName"), "status.phase": ("status", "phase")},
    # events.k8s.io/v1's selectable fields (upstream's EventToSelectableFields, less the computed ``source``).
    "Event": {
        **{f"regarding.{f}": ("regarding", f)
           for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")},
        **{f: (f,) for f in ("reason", "reportingController", "type")},
    },
}


def _split(selector: str) -> list[str]:
    """Split on commas that are not inside ``( )``."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(selector):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(selector[start:i])
            start = i + 1
    parts.append(selector[start:])
    return [p for p in (s.strip() for s in parts) if p]


def _requirement(text: str) -> Predicate:
    if m := _SET_RE.match(text):
        key, values = m["key"], {v.strip() for v in m["values"].split(",") if v.strip()}
        if m["op"] == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if m := _CMP_RE.match(text):
        key, value = m["key"], m["value"]
        if m["op"] == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    if m := _EXISTS_RE.match(text):
        key = m["key"]
        if m["neg"]:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    raise ApiError.bad_request(f"unable to parse requirement: {text!r}")


def parse_label_selector(selector: str | None) -> Predicate | None:
    """A predicate over a whole object, or None when the selector selects everything."""
    if not selector or not selector.strip():
        return None
    requirements = [_requirement(part) for part in _split(selector)]

    def matches(obj: dict[str, Any]) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(req(labels) for req in requirements)

    return matches


def _field_value(obj: dict[str, Any], path: tuple[str, ...]) -> str:
    node: Any = obj
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
    return "" if node is None else str(node)


def _field_requirements(selector: str, supported: Collection[str]) -> list[tuple[str, str, str]]:
    """``(label, operator, value)`` of each requirement; a malformed one or an unsupported label is a 400."""
    requirements = []
    for part in _split(selector):
        m = _CMP_RE.match(part)
        if not m:
            raise ApiError.bad_request(f"invalid field selector: {part!r}")
        if m["key"] not in supported:
            raise ApiError.bad_request(f'field label not supported: {m["key"]}')
        requirements.append((m["key"], m["op"], m["value"]))
    return requirements


def parse_field_selector(selector: str | None, kind: str) -> Predicate | None:
    """Like :func:`parse_label_selector`; an unsupported field is a 400, as upstream."""
    if not selector or not selector.strip():
        return None
    fields = {**_FIELDS, **_KIND_FIELDS.get(kind, {})}
    checks = [(fields[key], value, op != "!=") for key, op, value in _field_requirements(selector, fields)]

    def matches(obj: dict[str, Any]) -> bool:
        return all((_field_value(obj, path) == value) == equal for path, value, equal in checks)

    return matches


def rename_field_selector(selector: str | None, labels: Mapping[str, str]) -> str | None:
    """``selector`` with each field label renamed by ``labels``, or None when it selects everything.

    Why: one kind served by two groups (core/v1 and events.k8s.io/v1 Events) is stored once; the real
    server converts the other group's field labels (``involvedObject.name``) to the stored ones
    (``regarding.name``) before it selects. A label ``labels`` lacks is a 400, as upstream.
    """
    if not selector or not selector.strip():
        return None
    return ",".join(f"{labels[key]}{op}{value}" for key, op, value in _field_requirements(selector, labels))
