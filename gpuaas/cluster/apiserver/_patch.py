"""Applying the three patch types the API server accepts to a stored object.

Strategic merge patch is treated as a JSON merge patch: for the fields gpuaas writes
(labels, annotations, ``spec.active``, quotas, status) the two agree, and the emulator does
not know the Go struct tags that strategic merge needs for lists.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch

from ._errors import ApiError

__all__ = ["CONTENT_TYPES", "apply_patch"]

CONTENT_TYPES = {
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/json-patch+json": "json",
}


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge(result.get(key), value)
    return result


def apply_patch(obj: dict[str, Any], patch: dict[str, Any] | list[Any], patch_type: str) -> dict[str, Any]:
    """A new object: ``obj`` with ``patch`` applied. ``obj`` itself is never modified."""
    if patch_type in ("merge", "strategic"):
        if not isinstance(patch, dict):
            raise ApiError.bad_request("the body of a merge patch must be a JSON object")
        merged: dict[str, Any] = _merge(obj, patch)
        return merged
    if patch_type == "json":
        if not isinstance(patch, list):
            raise ApiError.bad_request("the body of a JSON patch must be a JSON array of operations")
        try:
            result: dict[str, Any] = jsonpatch.JsonPatch(patch).apply(obj, in_place=False)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
            # The real server answers a failed ``test`` op or a bad path with a bare 422.
            message = f"the server rejected our request due to an error in our request: {exc}"
            raise ApiError(422, "Invalid", message) from exc
        return result
    raise ApiError(415, "UnsupportedMediaType", f"the patch type {patch_type!r} is not supported")
