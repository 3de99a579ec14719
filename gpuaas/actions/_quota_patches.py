"""ClusterQueue quota patches: read a queue's GPU quota, and move it, CRD-valid, with its resourceVersion.

A merge patch replaces lists whole, so the patch carries the queue's complete
``spec.resourceGroups`` as read, with only the GPU ``nominalQuota`` values of the moved
flavors changed (and, by the stated rule, their limits); everything else in the ClusterQueue
is left as it was. Quantities keep the type they were read with (``16`` or ``"16"``).

Limits (``manage_limits`` in the policy):

* off (default): ``borrowingLimit`` is left alone; ``lendingLimit`` too, unless it would exceed
  the new quota (Kueue's webhook rejects a lendingLimit above nominalQuota): then it is lowered
  to the quota;
* on: ``lendingLimit`` moves with the quota (the part the queue never lends, nominal -
  lendingLimit, stays), clamped to ``[0, nominal]``; ``borrowingLimit`` moves against it (the
  most the queue can hold, nominal + borrowingLimit, stays), clamped at 0.

Every patch also sets ``gpuaas.io/quota-plan`` (JSON: the plan's audit id and the prior values
of the flavors it moves), so the object itself says which plan last moved it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from gpuaas.quantity import parse_quantity

__all__ = ["QUOTA_ANNOTATION", "gpu_nominal", "quota_patch"]

QUOTA_ANNOTATION = "gpuaas.io/quota-plan"


def _amount(value: Any) -> int:
    return int(round(parse_quantity(value))) if value is not None else 0


def _like(read: Any, value: int) -> Any:
    return str(value) if isinstance(read, str) else value


def gpu_nominal(obj: Mapping[str, Any], gpu_resources: Sequence[str]) -> dict[str, int]:
    """flavor -> GPU nominal quota of a ClusterQueue as read (GPU resources summed per flavor)."""
    out: dict[str, int] = {}
    for group in (obj.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                if res.get("name") in gpu_resources:
                    out[flavor["name"]] = out.get(flavor["name"], 0) + _amount(res.get("nominalQuota"))
    return out


def quota_patch(obj: Mapping[str, Any], target: Mapping[str, int], plan_id: int, gpu_resources: Sequence[str], *,
                manage_limits: bool, restore: bool = False) -> dict[str, Any]:
    """The merge patch that sets each flavor in ``target`` to its GPU nominal quota."""
    groups = copy.deepcopy((obj.get("spec") or {}).get("resourceGroups") or [])
    before: dict[str, int] = {}
    for group in groups:
        for flavor in group.get("flavors") or []:
            if flavor.get("name") not in target:
                continue
            for res in flavor.get("resources") or []:
                if res.get("name") not in gpu_resources:
                    continue
                old = _amount(res.get("nominalQuota"))
                new = int(target[flavor["name"]])
                before[flavor["name"]] = old
                res["nominalQuota"] = _like(res.get("nominalQuota"), new)
                _follow_limits(res, new - old, new, manage_limits)
    meta = obj.get("metadata") or {}
    mark = None if restore else json.dumps({"plan_id": plan_id, "before": before}, sort_keys=True)
    return {"metadata": {"resourceVersion": meta.get("resourceVersion"), "annotations": {QUOTA_ANNOTATION: mark}},
            "spec": {"resourceGroups": groups}}


def _follow_limits(res: dict[str, Any], delta: int, new: int, manage: bool) -> None:
    lending = res.get("lendingLimit")
    if lending is not None:
        value = _amount(lending) + (delta if manage else 0)
        res["lendingLimit"] = _like(lending, max(0, min(new, value)))
    borrowing = res.get("borrowingLimit")
    if manage and borrowing is not None:
        res["borrowingLimit"] = _like(borrowing, max(0, _amount(borrowing) - delta))
