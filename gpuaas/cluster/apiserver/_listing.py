"""One page of a list as the API server answers it: ``limit``, ``continue`` and the ``<Kind>List`` body.

Why a module of its own: more than one URL lists a stored kind (a resource at its own path, and core/v1
Events as a view of the stored events.k8s.io/v1 ones), and each must page the same way.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from typing import Any

from ._errors import ApiError
from ._store import ObjectStore

__all__ = ["list_body"]


def _encode_continue(key: tuple[str, str], resource_version: str) -> str:
    """Where to resume and the list's resourceVersion (the real token carries both too)."""
    data = {"v": 1, "rv": int(resource_version), "k": list(key)}
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode()


def _decode_continue(token: str) -> tuple[tuple[str, str], int]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        namespace, name = data["k"]
        return (str(namespace), str(name)), int(data["rv"])
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise ApiError.bad_request("continue key is not valid: incorrect encoded start resourceVersion") from exc


def list_body(store: ObjectStore, kind: str, namespace: str | None, query: dict[str, str],
              field_selector: str | None, list_kind: str, api_version: str,
              view: Callable[[dict[str, Any]], dict[str, Any]],
              table: Callable[[list[dict[str, Any]], dict[str, Any]], dict[str, Any]] | None = None) -> bytes:
    """The page of stored ``kind`` that ``query`` asks for (``labelSelector``, ``limit``, ``continue``),
    selected by ``field_selector`` (in the stored kind's field labels), each item as ``view`` shows it; with
    ``table``, the Table it prints of the items and the list's metadata instead of the list."""
    raw_limit = query.get("limit", "0")
    if not raw_limit.isdigit():
        raise ApiError.bad_request(f"invalid limit: {raw_limit!r}")
    limit = int(raw_limit) or None
    after, snapshot = _decode_continue(query["continue"]) if query.get("continue") else (None, None)
    page = store.page(kind, namespace, query.get("labelSelector"), field_selector, limit, after, snapshot)
    metadata: dict[str, Any] = {"resourceVersion": page.resource_version}
    if page.next_key is not None:
        metadata["continue"] = _encode_continue(page.next_key, page.resource_version)
        if page.remaining is not None:
            metadata["remainingItemCount"] = page.remaining
    items = [view(obj) for obj in page.items]
    body = table(items, metadata) if table is not None else {
        "kind": list_kind, "apiVersion": api_version, "metadata": metadata, "items": items}
    return json.dumps(body, separators=(",", ":")).encode()
