"""The rules a deadline nudge applies to the live Workload, pure: whether it may be held or demoted, what that
changes, and the merge patches of a hold and of its release. The action (``deadline_holds``) and the flow
replay (``gpuaas.cluster.deadline_flow_replay``) both write by them, so the two cannot drift apart."""

from __future__ import annotations

import json
from typing import Any

from gpuaas.actions._drift import Drift, drift
from gpuaas.models import Outcome
from gpuaas.policies.deadlines import HOLD_ANNOTATION, Nudge, NudgeAction, is_demotion, parse_hold

__all__ = ["changed_since", "hold_patch", "not_holdable", "prior_state", "release_patch", "unholdable"]

_LOWEST_PRIORITY = -(2**31)


def _conditions(obj: dict[str, Any]) -> dict[str, str]:
    return {c.get("type", ""): c.get("status", "") for c in (obj.get("status") or {}).get("conditions") or []}


def not_holdable(obj: dict[str, Any], over: str | None = None) -> str | None:
    """Why the live ``obj`` may not be held or demoted now; None when it may. ``over``: a mark the plan found
    gpuaas did not record (``Nudge.over_mark``), which a hold may write over; any other mark is a hold already."""
    mark = (obj["metadata"].get("annotations") or {}).get(HOLD_ANNOTATION)
    if parse_hold(mark) is not None and (over is None or mark != over):
        return "already held by gpuaas"
    if (obj.get("spec") or {}).get("active") is False:
        return "deactivated by someone else (spec.active: false): left alone"
    conds = _conditions(obj)
    for ctype in ("Finished", "Admitted", "QuotaReserved"):
        if conds.get(ctype) == "True":
            return f"no longer pending ({ctype}): decided again next run"
    return None


def prior_state(obj: dict[str, Any], action: NudgeAction) -> dict[str, Any]:
    """What a hold (``spec.active``) or a demotion (``spec.priority``, Kueue's 0 when unset) changes, as it is now."""
    spec = obj.get("spec") or {}
    return {"priority": int(spec.get("priority") or 0)} if action is NudgeAction.demote else {"active": spec.get("active")}


def hold_patch(obj: dict[str, Any], mark: dict[str, Any]) -> dict[str, Any]:
    """The merge patch of a hold or a demotion (the mark's ``before`` says which), at the version read."""
    before = mark.get("before") or {}
    spec = {"priority": int(before["priority"]) - 1} if is_demotion(mark) else {"active": False}
    return {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"],
                         "annotations": {HOLD_ANNOTATION: json.dumps(mark, sort_keys=True)}},
            "spec": spec}


def release_patch(obj: dict[str, Any], hold: dict[str, Any]) -> dict[str, Any]:
    """The merge patch of a release: the recorded ``spec.priority`` or ``spec.active`` back (true when unknown).

    A priority someone changed since the demotion is theirs, and one the mark does not say as a number (edited by
    hand) cannot be put back: only the annotation goes.
    """
    recorded = hold.get("before")
    before: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
    if is_demotion(hold):
        prior = _whole(before["priority"])
        ours = prior is not None and int((obj.get("spec") or {}).get("priority") or 0) == prior - 1
        spec: dict[str, Any] = {"priority": prior} if ours else {}
    else:
        spec = {"active": True if before.get("active") is None else before["active"]}
    patch: dict[str, Any] = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"],
                                          "annotations": {HOLD_ANNOTATION: None}}}
    return patch | {"spec": spec} if spec else patch


def _whole(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def changed_since(n: Nudge, obj: dict[str, Any]) -> tuple[Outcome, str] | None:
    """Why the live ``obj`` is not the Workload the plan was made on (``drift``): (outcome, reason), None when it is.

    One recreated under the same name, or edited since (its priority, its podSets), may no longer be one to hold or
    demote, so it is decided again next run, never nudged.
    """
    moved = drift(n.uid, n.resource_version, obj)
    if moved is None:
        return None
    return (Outcome.skipped if moved[0] is Drift.unknown else Outcome.changed), moved[1]


def unholdable(n: Nudge, obj: dict[str, Any]) -> tuple[Outcome, str] | None:
    why = not_holdable(obj, n.over_mark)
    if why is None and n.action is NudgeAction.demote and prior_state(obj, n.action)["priority"] <= _LOWEST_PRIORITY:
        why = "already at the lowest priority Kueue allows: left alone"
    return None if why is None else (Outcome.skipped, why)
