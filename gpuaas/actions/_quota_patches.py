"""ClusterQueue quota patches: read a queue's GPU entries, and write them, CRD-valid, with its resourceVersion.

A merge patch replaces lists whole, so the patch carries the queue's complete
``spec.resourceGroups`` as read, with only the GPU entries of the moved flavors changed;
everything else in the ClusterQueue is left as it was. Quantities keep the type they were read
with (``16`` or ``"16"``).

Every quantity read here is exact and never rounded (``Decimal``): a ``1500m`` quota rounded to 2 and
moved by a whole GPU would write a cohort total it does not have. The planner plans no cohort whose GPU
quota is not a whole number of GPUs, so a plan's target always is one; a queue someone edits to such a
quota between the plan and its write no longer equals the plan's ``before`` (``gpu_nominal``), and the
write is refused as someone else's change.

An *entry* is one GPU resource's quota as the queue holds it: ``nominalQuota`` and, where the
queue sets them, ``lendingLimit`` and ``borrowingLimit`` (a limit not set is absent, which Kueue
reads as no limit: never the same as 0). A plan's patch moves the nominal quota and its limits by
the rule of ``manage_limits`` in the policy:

* off (default): ``borrowingLimit`` is left alone; ``lendingLimit`` too, unless it would exceed
  the new quota (Kueue's webhook rejects a lendingLimit above nominalQuota): then it is lowered
  to the quota;
* on: ``lendingLimit`` moves with the quota (the part the queue never lends, nominal -
  lendingLimit, stays), clamped to ``[0, nominal]``; ``borrowingLimit`` moves against it (the
  most the queue can hold, nominal + borrowingLimit, stays), clamped at 0.

The clamps lose what was there (lendingLimit 2 lowered by 4 is 0; raised by 4 again it is 4), so
a restore never runs the rule backwards: it writes the entries recorded before the plan's first
write (``entries_patch``). Every plan patch also sets ``gpuaas.io/quota-plan`` (JSON: the plan's
audit id, the prior nominal quota and the prior entries of the flavors it moves), so the object
itself says which plan last moved it and from what.
"""

from __future__ import annotations

import copy
import json
import operator
from collections.abc import Collection, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any, NamedTuple

from gpuaas.quantity import parse_quantity_exact

__all__ = ["QUOTA_ANNOTATION", "QUOTA_FIELDS", "Amount", "Difference", "Entries", "annotation_of", "entries_patch",
           "entry_differences", "gpu_entries", "gpu_nominal", "marked_by", "moved_entries", "only", "plan_mark",
           "quota_patch"]

QUOTA_ANNOTATION = "gpuaas.io/quota-plan"
QUOTA_FIELDS = ("nominalQuota", "lendingLimit", "borrowingLimit")
"""The fields of a resource's quota in a ClusterQueue flavor (besides its ``name``)."""
Entries = dict[str, dict[str, dict[str, Any]]]
"""flavor -> GPU resource -> its entry (the ``QUOTA_FIELDS`` it sets, each as read; a field not set is absent)."""


Amount = int | Decimal
"""A quantity as read: an ``int`` when it is a whole number (what plans, audit rows and JSON hold), else the
exact ``Decimal``, which equals no whole number."""


def _amount(value: Any) -> Decimal:
    """The exact quantity (absent: 0), never rounded."""
    return parse_quantity_exact(value) if value is not None else Decimal(0)


def _plain(number: Decimal) -> Amount:
    """A whole number as the ``int`` plans and JSON hold; any other kept exact, so that it equals no whole one."""
    return int(number) if number == number.to_integral_value() else number.normalize()


def _like(read: Any, value: Decimal) -> Any:
    """``value`` in the type ``read`` has (``16`` or ``"16"``); one that is no whole number as its exact text."""
    plain = _plain(value)
    if isinstance(plain, Decimal):
        return format(plain, "f")
    return str(plain) if isinstance(read, str) else plain


def _groups(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list((obj.get("spec") or {}).get("resourceGroups") or [])


def _resources(groups: Sequence[Mapping[str, Any]], gpu_resources: Collection[str],
               flavors: Collection[str] | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """(flavor, resource) of every GPU resource of ``groups``, in ``flavors`` only when named."""
    for group in groups:
        for flavor in group.get("flavors") or []:
            if flavors is not None and flavor.get("name") not in flavors:
                continue
            for res in flavor.get("resources") or []:
                if res.get("name") in gpu_resources:
                    yield flavor["name"], res


def gpu_nominal(obj: Mapping[str, Any], gpu_resources: Sequence[str]) -> dict[str, Amount]:
    """flavor -> GPU nominal quota of a ClusterQueue as read (GPU resources summed per flavor), exact: a ``1500m``
    is 1.5, which equals no plan's whole ``before``."""
    out: dict[str, Decimal] = {}
    for flavor, res in _resources(_groups(obj), gpu_resources):
        out[flavor] = out.get(flavor, Decimal(0)) + _amount(res.get("nominalQuota"))
    return {flavor: _plain(total) for flavor, total in out.items()}


def gpu_entries(obj: Mapping[str, Any], gpu_resources: Sequence[str], flavors: Collection[str]) -> Entries:
    """The GPU entries of ``flavors`` in a ClusterQueue as read."""
    out: Entries = {}
    for flavor, res in _resources(_groups(obj), gpu_resources, flavors):
        out.setdefault(flavor, {})[res["name"]] = {k: res[k] for k in QUOTA_FIELDS if res.get(k) is not None}
    return out


def only(entries: Mapping[str, Mapping[str, Mapping[str, Any]]], flavors: Collection[str]) -> Entries:
    """``entries`` of ``flavors`` alone (a patch step writes only the flavors it moves)."""
    return {f: {r: dict(e) for r, e in res.items()} for f, res in entries.items() if f in flavors}


def moved_entries(before: Entries, target: Mapping[str, int], manage_limits: bool) -> Entries:
    """The entries a plan's patch writes: each GPU resource of a flavor of ``target`` at its new nominal quota,
    its limits moved by the rule of ``manage_limits``."""
    out: Entries = {}
    for flavor, resources in before.items():
        if flavor not in target:
            continue
        new = Decimal(operator.index(target[flavor]))  # a whole number of GPUs, else a TypeError: never truncated
        for name, entry in resources.items():
            res = dict(entry)
            res["nominalQuota"] = _like(entry.get("nominalQuota"), new)
            _follow_limits(res, new - _amount(entry.get("nominalQuota")), new, manage_limits)
            out.setdefault(flavor, {})[name] = res
    return out


def _follow_limits(res: dict[str, Any], delta: Decimal, new: Decimal, manage: bool) -> None:
    lending = res.get("lendingLimit")
    if lending is not None:
        value = _amount(lending) + (delta if manage else 0)
        res["lendingLimit"] = _like(lending, max(Decimal(0), min(new, value)))
    borrowing = res.get("borrowingLimit")
    if manage and borrowing is not None:
        res["borrowingLimit"] = _like(borrowing, max(Decimal(0), _amount(borrowing) - delta))


def entries_patch(obj: Mapping[str, Any], entries: Entries, mark: str | None) -> dict[str, Any]:
    """The merge patch that sets each GPU entry of ``entries`` to exactly that entry (a field it lacks is removed)
    and ``gpuaas.io/quota-plan`` to ``mark`` (``None`` removes it)."""
    groups = copy.deepcopy(_groups(obj))
    names = {name for resources in entries.values() for name in resources}
    for flavor, res in _resources(groups, names, entries):
        entry = entries[flavor].get(res["name"])
        if entry is None:
            continue
        for key in QUOTA_FIELDS:
            res.pop(key, None)
        res.update({k: entry[k] for k in QUOTA_FIELDS if entry.get(k) is not None})
    meta = obj.get("metadata") or {}
    return {"metadata": {"resourceVersion": meta.get("resourceVersion"), "annotations": {QUOTA_ANNOTATION: mark}},
            "spec": {"resourceGroups": groups}}


def plan_mark(plan_id: int, before: Entries) -> str:
    """The ``gpuaas.io/quota-plan`` a plan's patch sets: its id, and what the flavors it moves held before it."""
    nominal = {f: _like(0, sum((_amount(e.get("nominalQuota")) for e in res.values()), Decimal(0)))
               for f, res in before.items()}
    return json.dumps({"plan_id": plan_id, "before": nominal, "entries": before}, sort_keys=True)


def annotation_of(obj: Mapping[str, Any]) -> str | None:
    """The queue's ``gpuaas.io/quota-plan`` as read (``None``: not set)."""
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(QUOTA_ANNOTATION)
    return value if isinstance(value, str) else None


def marked_by(obj: Mapping[str, Any]) -> int | None:
    """The plan id in the queue's ``gpuaas.io/quota-plan`` (``None``: unset or not one gpuaas wrote)."""
    try:
        found = json.loads(annotation_of(obj) or "null")
    except (ValueError, RecursionError):  # RecursionError: an annotation nested past the decoder's depth
        return None
    plan_id = found.get("plan_id") if isinstance(found, dict) else None
    return plan_id if isinstance(plan_id, int) else None


def quota_patch(obj: Mapping[str, Any], target: Mapping[str, int], plan_id: int, gpu_resources: Sequence[str], *,
                manage_limits: bool, restore: bool = False) -> dict[str, Any]:
    """The merge patch that sets each flavor in ``target`` to its GPU nominal quota, its limits by the rule.

    What moves a queue whose prior entries no plan recorded (an intent written before they were): a restore
    then removes the mark, and the limits are what the rule makes of them."""
    before = gpu_entries(obj, gpu_resources, target)
    mark = None if restore else plan_mark(plan_id, before)
    return entries_patch(obj, moved_entries(before, target, manage_limits), mark)


class Difference(NamedTuple):
    """One field of a GPU entry that is not what was expected."""

    flavor: str
    resource: str
    field: str
    live: Any
    expected: Any

    def says(self, expected_as: str) -> str:
        """``h100 lendingLimit is 3, <expected_as> 4``."""
        return f"{self.flavor} {self.field} is {_shown(self.live)}, {expected_as} {_shown(self.expected)}"


def _shown(value: Any) -> str:
    return "absent" if value is None else str(value)


def _same(a: Any, b: Any) -> bool:
    """Equal quantities (``16`` and ``"16"`` are), exactly; absent equals absent only."""
    if a is None or b is None:
        return a is None and b is None
    return _amount(a) == _amount(b)


def entry_differences(live: Entries, expected: Entries) -> list[Difference]:
    """Each field of ``expected`` whose live value differs (a resource gone differs in its nominal quota)."""
    out = []
    for flavor, resources in expected.items():
        for name, want in resources.items():
            have = live.get(flavor, {}).get(name) or {}
            out += [Difference(flavor, name, k, have.get(k), want.get(k)) for k in QUOTA_FIELDS
                    if not _same(have.get(k), want.get(k))]
    return out
