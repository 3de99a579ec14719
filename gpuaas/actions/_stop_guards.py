"""Why an idle object is not stopped after all, read from the live object the action GETs anyway.

Three things the snapshot does not say, each a skip with its own ``SkipCause``:

* **Being deleted** (``metadata.deletionTimestamp``): its finalizers run, and the deletion frees it.
* **Managed by a GitOps controller** (``gitops-managed``): a manager other than gpuaas owns a stop field by
  server-side apply (``metadata.managedFields``, operation ``Apply``: Argo CD with server-side apply, Flux), or
  the object carries a GitOps tool's tracking mark (``GITOPS_MARKS``). Its next sync would set the field back:
  a stop would free nothing for long and be made again every window, each time a cold start for the team.
* **Reverted** (``reverted``): gpuaas's ``gpuaas.io/reclaimed`` mark is stale and another manager wrote a stop
  field after it: someone started it again. Like an undo, less than one window ago the evidence covers the
  time gpuaas had it stopped, so it is not stopped again within that window.

* **An earlier stop did not hold** (``stop-not-held``): its completion is ``failed`` with that cause and the object's
  ``metadata.generation`` is still the one that answer showed: the same stop would meet the same refusal.

And after a patch: ``not_held`` says where the answer differs from what the stop should leave (a mutating
webhook set ``replicas`` back; a field the schema pruned).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from gpuaas.actions._kube_writer import FIELD_MANAGER
from gpuaas.actions._patches import StopPlan, differences, reclaimed_by
from gpuaas.instant import as_utc, utc_stamp
from gpuaas.models import Outcome
from gpuaas.policies.reclaim import Decision, SkipCause
from gpuaas.store import AuditEntry, Store

__all__ = ["GITOPS_MARKS", "FieldOwner", "being_deleted", "gitops_managed", "held_back", "not_held", "reverted_by",
           "stop_not_held_before", "stop_paths"]

Path = tuple[str, ...]

GITOPS_MARKS: tuple[tuple[str, str, str], ...] = (
    ("annotations", "argocd.argoproj.io/tracking-id", "Argo CD"),
    ("labels", "argocd.argoproj.io/instance", "Argo CD"),
    ("labels", "kustomize.toolkit.fluxcd.io/name", "Flux"),
    ("labels", "helm.toolkit.fluxcd.io/name", "Flux"),
)
"""(metadata map, key, tool) of the tracking marks GitOps tools put on what they sync. Argo CD's default
``app.kubernetes.io/instance`` label is left out: Helm charts set it too, so alone it proves nothing."""

_REMEDY = ('to stop it, scale it down in Git; to let gpuaas stop it, make {who} leave {field} alone (Argo CD: '
           'ignoreDifferences on it with RespectIgnoreDifferences=true, and the field out of the applied manifest); '
           'to leave it out of reclaim: gpuaas.io/reclaim: "never"')


@dataclass(frozen=True)
class FieldOwner:
    """A ``managedFields`` entry that owns one of the stop's fields."""

    manager: str
    operation: str
    field: str
    """The field, dotted: ``spec.replicas``."""
    at: datetime | None


def stop_paths(plan: StopPlan) -> list[Path]:
    """The fields a stop writes (an elastic RayCluster's worker list as a whole)."""
    paths = [path for path, _, _ in plan.fields]
    return [*paths, ("spec", "workerGroupSpecs")] if plan.workers else paths


def _owns(fields: Any, path: Path) -> bool:
    node = fields
    for part in path:
        if not isinstance(node, dict) or f"f:{part}" not in node:
            return False
        node = node[f"f:{part}"]
    return True


def _time(value: Any) -> datetime | None:
    try:
        return as_utc(datetime.fromisoformat(str(value).replace("Z", "+00:00"))) if value else None
    except ValueError:
        return None


def field_owners(obj: dict[str, Any], paths: list[Path]) -> list[FieldOwner]:
    """The managers other than gpuaas that own one of ``paths`` on the object itself (a status entry is not one)."""
    out = []
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        if not isinstance(entry, dict) or entry.get("manager") == FIELD_MANAGER or entry.get("subresource") == "status":
            continue
        for path in paths:
            if _owns(entry.get("fieldsV1"), path):
                out.append(FieldOwner(str(entry.get("manager") or "?"), str(entry.get("operation") or "?"),
                                      ".".join(path), _time(entry.get("time"))))
    return out


def being_deleted(obj: dict[str, Any]) -> str | None:
    """Why an object with a ``deletionTimestamp`` is left alone, or None."""
    meta = obj.get("metadata") or {}
    since = meta.get("deletionTimestamp")
    if not since:
        return None
    waiting = ", ".join(str(f) for f in meta.get("finalizers") or []) or "its dependents"
    return f"being deleted since {since} (waiting on {waiting}): the deletion frees it, never stopped"


def _mark_phrase(obj: dict[str, Any]) -> str:
    mark = reclaimed_by(obj)
    return f" after gpuaas stopped it (audit #{mark.get('audit_id')})" if mark is not None else ""


def gitops_managed(obj: dict[str, Any], plan: StopPlan) -> str | None:
    """Why a GitOps controller would undo the stop (it applies a stop field, or tracks the object), or None."""
    applied = [o for o in field_owners(obj, stop_paths(plan)) if o.operation == "Apply"]
    if applied:
        owner = applied[0]
        lead = (f"reverted by {owner.manager}{_mark_phrase(obj)}" if reclaimed_by(obj) is not None
                else f"{owner.manager} sets {owner.field}")
        return (f"{lead}: it applies {owner.field} (server-side apply) and would set it back at its next sync; "
                + _REMEDY.format(who=owner.manager, field=owner.field))
    meta = obj.get("metadata") or {}
    for where, key, tool in GITOPS_MARKS:
        value = (meta.get(where) or {}).get(key)
        if value:
            field = ", ".join(".".join(p) for p in stop_paths(plan))
            return (f"synced by {tool} ({key}: {str(value)[:120]}): its next sync would undo the stop; "
                    + _REMEDY.format(who=tool, field=field))
    return None


def reverted_by(obj: dict[str, Any], plan: StopPlan) -> FieldOwner | None:
    """The newest writer of a stop field other than gpuaas, where the object carries a gpuaas mark (the caller
    knows it stale: the object runs): who started it again, and when (``managedFields`` time); None when unknown."""
    if reclaimed_by(obj) is None:
        return None
    owners = [o for o in field_owners(obj, stop_paths(plan)) if o.at is not None]
    return max(owners, key=lambda o: o.at or datetime.min, default=None)


def not_held(plan: StopPlan, answer: dict[str, Any]) -> list[str]:
    """Where the patch's answer differs from what the stop leaves (``spec.replicas is 2 (the stop sets 0)``)."""
    return differences(plan.after(), answer, source="the stop sets")


def stop_not_held_before(store: Store, d: Decision, obj: dict[str, Any], flow: str) -> AuditEntry | None:
    """The failed completion of an earlier stop of this object that did not hold, while the object's
    ``metadata.generation`` (its spec) is still the one that answer showed; None once a stop held since."""
    generation = (obj.get("metadata") or {}).get("generation")
    for row in reversed(store.object_rows(flow=flow, action="reclaim", kind=d.kind, namespace=d.namespace,
                                          name=d.name, uid=d.uid, outcomes=(Outcome.applied, Outcome.failed))):
        if row.outcome == Outcome.applied:
            return None
        if row.outcome == Outcome.failed and (row.evidence or {}).get("cause") == SkipCause.stop_not_held:
            held = (row.after or {}).get("generation")
            return row if held is not None and held == generation else None
    return None


def held_back(d: Decision, obj: dict[str, Any], plan: StopPlan, store: Store, now: datetime,
              flow: str) -> tuple[SkipCause, str] | None:
    """Why the stop the plan asks for is not made (module docstring), from the live object and ``flow``'s audit rows:
    an earlier stop that did not hold, a GitOps controller, a revert less than one window ago; or None."""
    earlier = stop_not_held_before(store, d, obj, flow)
    if earlier is not None:
        return SkipCause.stop_not_held, (
            f"an earlier stop did not hold (audit #{earlier.refers_to or earlier.id}: {earlier.reason.split('; not tried')[0][:300]}); "
            "not tried again while its "
            f"spec is unchanged (generation {(obj.get('metadata') or {}).get('generation')})")
    if (gitops := gitops_managed(obj, plan)) is not None:
        return SkipCause.gitops_managed, gitops
    owner = reverted_by(obj, plan)
    window = timedelta(minutes=float(d.evidence.get("window_minutes") or 0))
    if owner is not None and owner.at is not None and as_utc(now) - owner.at < window:
        mark = reclaimed_by(obj) or {}
        return SkipCause.reverted, (
            f"reverted by {owner.manager} at {utc_stamp(owner.at, '%Y-%m-%d %H:%M UTC')} after gpuaas stopped it "
            f"(audit #{mark.get('audit_id')}; it set {owner.field}): less than one window ago, its evidence covers "
            f"the time gpuaas had it stopped; judged again from {utc_stamp(owner.at + window, '%H:%M UTC')}")
    return None
