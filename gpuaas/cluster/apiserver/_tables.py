"""Server-side printing: the ``meta.k8s.io`` Table a client asks for instead of the objects.

Why: ``kubectl get`` sends ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io,...,application/json`` and
prints the columns the server chooses: a custom resource's ``additionalPrinterColumns`` (``_crd_columns``), a
built-in kind's printer (``_core_printers``). Answered here as upstream answers it (``asTable`` in
``apiserver/pkg/endpoints/handlers/response.go``, the CRD ``tableconvertor``): Name first, then the CRD's
columns, or Age where it declares none; each row's ``object`` a ``PartialObjectMetadata`` unless
``includeObject`` asks for the ``Object`` or ``None``. Ages are measured against the store's clock, the time
of the emulated cluster. A client whose first acceptable media type is not a Table gets the objects, as before.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from functools import cache, partial
from typing import Any

from ._core_printers import AGE_DESCRIPTION, NAME, PRINTERS, Cells, Column, since
from ._crd_columns import CRD_COLUMNS, PrinterColumn
from ._errors import ApiError
from ._resources import RESOURCES

__all__ = ["Printer", "metadata_list_of", "printed", "table_of"]

Printer = Callable[[list[dict[str, Any]], dict[str, Any]], dict[str, Any]]
"""Objects (as served) and their list's metadata -> the Table of them."""

_TABLE_VERSIONS = ("v1", "v1beta1")
_INCLUDE_OBJECT = ("", "Metadata", "Object", "None")
_BUILT_IN_GROUPS = ("", "apps", "batch", "events.k8s.io")
_DEFAULT_COLUMNS = (PrinterColumn("Age", "date", ".metadata.creationTimestamp", AGE_DESCRIPTION),)


def _media_ranges(accept: str) -> list[tuple[str, dict[str, str]]]:
    """``(type/subtype, params)`` of each Accept clause, in the order goautoneg's ``ParseAccept`` ranks them."""
    clauses: list[tuple[float, bool, bool, str, dict[str, str]]] = []
    for part in accept.split(","):
        media, *raw = (p.strip() for p in part.split(";"))
        kind, _, sub = media.partition("/")
        if not media or (not sub and kind != "*"):
            continue
        params: dict[str, str] = {}
        for param in raw:
            key, eq, value = param.partition("=")
            if eq and "=" not in value:
                params[key.strip()] = value.strip()
        try:
            q = float(params.pop("q", "1"))
        except ValueError:
            q = 0.0
        clauses.append((-q, kind == "*", (sub or "*") == "*", f"{kind}/{sub or '*'}", params))
    return [(media, params) for *_, media, params in sorted(clauses, key=lambda c: c[:3])]


def _requested_version(accept: str) -> str | None:
    """The meta.k8s.io version of the Table asked for, or None where the client takes the objects first.

    A Table clause naming another group or version is passed over, as upstream passes it over; any other
    clause the emulator answers with JSON stops the search (it serves no protobuf or YAML; a metadata list is
    ``metadata_list_of``'s)."""
    for media, params in _media_ranges(accept):
        if media not in ("application/json", "application/*", "*/*"):
            continue
        if params.get("as") != "Table":
            return None
        if params.get("g") == "meta.k8s.io" and params.get("v") in _TABLE_VERSIONS:
            return params["v"]
    return None


def metadata_list_of(accept: str) -> Printer | None:
    """The ``PartialObjectMetadataList`` printer where the client's first acceptable JSON media type asks for one
    (``application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1``, the metadata-only list client-go's
    metadata client and a reader of annotations alone send), else None. Served as upstream serves it, for built-in
    kinds and custom resources alike: each item its ``metadata`` alone, kind and apiVersion ``meta.k8s.io``."""
    for media, params in _media_ranges(accept):
        if media not in ("application/json", "application/*", "*/*"):
            continue
        if params.get("as") != "PartialObjectMetadataList" or params.get("g") != "meta.k8s.io" or (
                params.get("v") not in _TABLE_VERSIONS):
            return None
        return partial(_metadata_list, f"meta.k8s.io/{params['v']}")
    return None


def _metadata_list(version: str, objects: list[dict[str, Any]], metadata: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "PartialObjectMetadataList", "apiVersion": version, "metadata": metadata,
            "items": [{"kind": "PartialObjectMetadata", "apiVersion": version, "metadata": obj.get("metadata") or {}}
                      for obj in objects]}


# --- the JSONPath subset of printer columns: .a.b, [?(@.k==v)], [n], [a:b] ------------------------------------
_STEP = re.compile(r"\.([\w-]+)|\[\?\(@\.([\w-]+)==('[^']*'|\"[^\"]*\"|[^)]+)\)\]|\[(-?\d*)(:?)(-?\d*)\]")
Step = tuple[str, Any, Any]


@cache
def _compile(path: str) -> tuple[Step, ...]:
    steps: list[Step] = []
    for m in _STEP.finditer(path):
        field, key, literal, start, colon, end = m.groups()
        if field is not None:
            steps.append(("field", field, None))
        elif key is not None:  # a quoted string ('x' or "x"), true, false or a number
            quoted = literal[0] in "'\"" and literal[-1] == literal[0]
            steps.append(("filter", key, literal[1:-1] if quoted else json.loads(literal)))
        elif colon:
            steps.append(("slice", int(start) if start else None, int(end) if end else None))
        else:
            steps.append(("index", int(start), None))
    return tuple(steps)


def _same(a: Any, b: Any) -> bool:
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def _find(path: str, obj: Any) -> list[Any]:
    """Every value ``path`` reaches in ``obj``; missing keys reach nothing (``AllowMissingKeys``)."""
    nodes = [obj]
    for step, a, b in _compile(path):
        found: list[Any] = []
        for node in nodes:
            if step == "field" and isinstance(node, dict) and a in node:
                found.append(node[a])
            elif step == "filter" and isinstance(node, list):
                found += [x for x in node if isinstance(x, dict) and a in x and _same(x[a], b)]
            elif step == "slice" and isinstance(node, list):
                found += node[a:b]
            elif step == "index" and isinstance(node, list) and -len(node) <= a < len(node):
                found.append(node[a])
        nodes = found
    return nodes


def _go_float(value: float) -> str:
    """A float as Go's ``fmt.Fprint`` writes it (shortest digits; an exponent below 1e-4 and from 1e6)."""
    if value == 0:
        return "0"
    sign, digits, exp = Decimal(repr(value)).normalize().as_tuple()
    text, point = "".join(map(str, digits)), len(digits) + int(exp) - 1
    if point < -4 or point >= 6:
        mantissa = text[0] + (f".{text[1:]}" if len(text) > 1 else "")
        return f"{'-' if sign else ''}{mantissa}e{'-' if point < 0 else '+'}{abs(point):02d}"
    return f"{Decimal(repr(value)).normalize():f}"


def _text(value: Any) -> str:
    """What the column's JSONPath prints for a value (``PrintResults``): JSON for objects and lists."""
    if value is None:
        return "<no value>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, dict | list):
        text = json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
        return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return str(value)


def _cell(column: PrinterColumn, obj: dict[str, Any], now: datetime) -> Any:
    """The tableconvertor's cell: the first value found, as the column's type (None where it is not one)."""
    found = _find(column.json_path, obj)
    if not found:
        return None
    value, typ = found[0], column.type
    if typ == "string":
        return _text(value)
    if isinstance(value, bool):
        return value if typ == "boolean" else None
    if typ == "integer" and isinstance(value, int | float):
        return int(value)
    if typ == "number" and isinstance(value, int | float):
        return float(value)
    if typ == "date" and isinstance(value, str):
        return "<unknown>" if value in ("", "null") else since(value, now)  # "<invalid>" where it is no time
    return None


@cache
def _printer(kind: str, version: str) -> tuple[list[Column], Cells]:
    """Column definitions and the cells of one object, for ``kind`` served as ``version``."""
    if RESOURCES[kind].group in _BUILT_IN_GROUPS:
        return PRINTERS[kind]
    columns = CRD_COLUMNS.get((kind, version)) or _DEFAULT_COLUMNS
    definitions = [NAME] + [{
        "name": c.name, "type": c.type, "format": c.format, "priority": c.priority,
        "description": c.description or f"Custom resource definition column (in JSONPath format): {c.json_path}",
    } for c in columns]

    def cells(obj: dict[str, Any], now: datetime) -> list[Any]:
        return [(obj.get("metadata") or {}).get("name"), *(_cell(c, obj, now) for c in columns)]

    return definitions, cells


def table_of(headers: Mapping[str, str], query: Mapping[str, str], kind: str, version: str,
             now: Callable[[], datetime]) -> Printer | None:
    """The Table printer the client asked for (a 400 for an ``includeObject`` upstream does not know), or None
    where it takes the objects themselves."""
    table_version = _requested_version(headers.get("accept", ""))
    if table_version is None:
        return None
    include = query.get("includeObject", "")
    if include not in _INCLUDE_OBJECT:
        raise ApiError.bad_request(f"Unable to convert to Table as requested: includeObject: Invalid value: "
                                   f"{json.dumps(include)}: must be 'Metadata', 'Object', 'None', or empty")
    definitions, cells = _printer(kind, version)

    def row_object(obj: dict[str, Any]) -> dict[str, Any] | None:
        if include == "None":
            return None
        if include == "Object":
            return obj
        return {"kind": "PartialObjectMetadata", "apiVersion": f"meta.k8s.io/{table_version}",
                "metadata": obj.get("metadata") or {}}

    def printer(objects: list[dict[str, Any]], metadata: dict[str, Any]) -> dict[str, Any]:
        at = now()
        at = at.replace(tzinfo=UTC) if at.tzinfo is None else at
        return {"kind": "Table", "apiVersion": f"meta.k8s.io/{table_version}", "metadata": metadata,
                "columnDefinitions": definitions,
                "rows": [{"cells": cells(obj, at), "object": row_object(obj)} for obj in objects]}

    return printer


def printed(obj: dict[str, Any], printer: Printer | None) -> dict[str, Any]:
    """One object as got: itself, or its one-row Table carrying its resourceVersion."""
    if printer is None:
        return obj
    return printer([obj], {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion", "")})
