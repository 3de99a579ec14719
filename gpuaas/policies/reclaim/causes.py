"""Why a reclaim target is not acted on this run, as a type, and when an unchanged skip needs no new audit row.

Every skip and deferral carries a ``SkipCause`` beside its reason. The reason is for people and keeps its
wording (numbers included: a rank, a resourceVersion, an age); the cause is for comparing one run with the
next, exactly, without reading the words. The audit row holds it as ``evidence["cause"]``.

A skip that persists (a notebook opted out all week, a deferral that stays over the cap) is the same
decision every 15 minutes. ``unchanged_since`` says when a run may point at the row an earlier run wrote
instead of appending the same row again: the object's last reclaim row is a skip or deferral of the same
uid, mode, outcome and cause, written less than ``reclaim.record_skips_every_minutes`` ago. Anything else
(another cause, a recreated object, a planned decision or a restore in between, the interval elapsed)
is recorded at once, so any window of the interval plus one run holds a row of every persisting skip.

Two causes are kept by the object itself (``KEPT_BY_THE_OBJECT``): a GitOps controller that would undo the stop,
and an earlier stop that did not hold. The action finds them on the live object, after the cap, so such an object
would take a place under the cap every run, and the objects behind it would wait forever. Their rows record the
resourceVersion the guard judged (``evidence["judged_version"]``); ``still_held_back`` says when the plan may skip
the object before the cap instead: its newest row is such a skip (or failed stop) of the same uid, and the
snapshot's resourceVersion is the one that row judged. Any change of the object makes it a candidate again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from gpuaas.instant import as_utc, utc_stamp
from gpuaas.models import Outcome

__all__ = ["KEPT_BY_THE_OBJECT", "RECORDED_SKIP_OUTCOMES", "LastRow", "SkipCause", "still_held_back",
           "unchanged_phrase", "unchanged_since"]


class SkipCause(StrEnum):
    """One member per kind of reason a reclaim target is skipped or deferred."""

    past_evidence = "past-evidence"
    """An apply run judged a snapshot further back than ``collect.max_staleness_seconds``."""
    source_missing = "source-missing"
    """The Kubernetes or Prometheus source did not answer for the snapshot."""
    degraded = "degraded"
    """Another required source (OpenCost where configured) did not answer."""
    stale_telemetry = "stale-telemetry"
    """The telemetry is older than ``collect.max_staleness_seconds``."""
    keda = "keda"
    """Its rule says ``actuator: keda``: KEDA scales it on the published idle signal."""
    partly_busy = "partly-busy"
    """Not every Workload of the target is idle."""
    owner_missing = "owner-missing"
    """The owner gpuaas would stop is not in the snapshot."""
    opted_out = "opted-out"
    """``gpuaas.io/reclaim: "never"`` on its owner."""
    already_stopped = "already-stopped"
    """The snapshot shows its owner stopped."""
    no_workers = "no-workers"
    """An elastic RayCluster with no workers left to scale to zero."""
    already_deactivated = "already-deactivated"
    """A Workload with ``spec.active: false`` that Kueue has not evicted yet."""
    already_decided = "already-decided"
    """The audit log already decides this window (a re-run, or an overlapping run)."""
    restored_recently = "restored-recently"
    """An undo restored it less than one window ago."""
    over_cap = "over-cap"
    """Deferred: over ``reclaim.max_actions_per_run``."""
    change_freeze = "change-freeze"
    """Its tenant's change freeze holds it back."""
    queue_misnamed = "queue-misnamed"
    """A frozen tenant names a ClusterQueue the cluster lacks, and this target belongs to no tenant."""
    object_deleted = "object-deleted"
    """The object was gone when the action read it."""
    no_uid = "no-uid"
    """The snapshot holds no uid and resourceVersion for it."""
    recreated = "recreated"
    """Another object (another uid) now has its name."""
    changed = "changed"
    """Its resourceVersion changed since the snapshot."""
    found_stopped = "found-stopped"
    """The live object, read before the write, is already stopped."""
    being_deleted = "being-deleted"
    """The live object carries a ``deletionTimestamp``: its deletion frees it."""
    gitops_managed = "gitops-managed"
    """A GitOps controller applies a stop field (server-side apply) or tracks the object: it would undo the stop."""
    reverted = "reverted"
    """Another manager started it again after a gpuaas stop less than one window ago (treated like an undo)."""
    stop_not_held = "stop-not-held"
    """An earlier stop was answered 200 but did not hold (or its field was refused), and its spec is unchanged since."""


RECORDED_SKIP_OUTCOMES = frozenset({Outcome.skipped, Outcome.deferred})
"""The outcomes a run may leave unrecorded when an earlier row already says the same."""

KEPT_BY_THE_OBJECT = frozenset({SkipCause.gitops_managed, SkipCause.stop_not_held})
"""Guard causes that stay while the object stays the same: judged again only once it changes."""


@dataclass(frozen=True)
class LastRow:
    """What ``unchanged_since`` needs of an object's newest reclaim row: the store's answer, in plain values."""

    audit_id: int
    at: datetime
    uid: str | None
    mode: str
    outcome: str
    cause: str | None
    """``evidence["cause"]``; None on rows that carry none (plans, completions, restores)."""
    version: str | None = None
    """``evidence["judged_version"]``: the resourceVersion a guard judged (rows of ``KEPT_BY_THE_OBJECT`` causes)."""
    reason: str = ""
    refers_to: int | None = None
    """The intent row a completion closes (a failed stop): the id its run's result named."""


def unchanged_since(last: LastRow | None, *, uid: str | None, mode: str, outcome: str, cause: SkipCause | None,
                    at: datetime, every: timedelta, version: str | None = None) -> LastRow | None:
    """``last`` when a skip or deferral (``outcome``, ``cause``) of the object it was read for is unchanged since it,
    else None (record a new row). ``last`` is the object's newest reclaim row, whatever it says; ``at`` is the
    wall clock of this run. Pure.

    A row that carries no cause, or another uid, mode, outcome or cause, ends the streak: so does a planned
    decision or a restore in between, since it is then the newest row. ``every`` of zero records every run.
    ``version``: for a cause the object keeps (``KEPT_BY_THE_OBJECT``), the resourceVersion judged; a row that judged
    another (or none) ends the streak too, so that the next plan finds the version it compares.
    """
    if last is None or cause is None or outcome not in RECORDED_SKIP_OUTCOMES or every <= timedelta(0):
        return None
    if as_utc(at) - as_utc(last.at) >= every:
        return None
    same = (last.uid, last.mode, last.outcome, last.cause) == (uid, str(mode), str(outcome), str(cause))
    if cause in KEPT_BY_THE_OBJECT and version is not None and last.version != version:
        return None
    return last if same else None


def unchanged_phrase(last: LastRow) -> str:
    """``unchanged, as recorded in audit #123 at 2026-12-01 02:15 UTC``: where a run that wrote nothing points."""
    return f"unchanged, as recorded in audit #{last.audit_id} at {utc_stamp(last.at, '%Y-%m-%d %H:%M UTC')}"


_STILL = {SkipCause.gitops_managed: "still managed by its GitOps controller",
          SkipCause.stop_not_held: "its stop still would not hold"}
_EARLIER = re.compile("^(?:" + "|".join(map(re.escape, _STILL.values())) + r") \(audit #\d+, unchanged since\): ")


def still_held_back(last: LastRow | None, *, uid: str | None,
                    resource_version: str | None) -> tuple[SkipCause, str] | None:
    """(cause, reason) when ``last``, the object's newest reclaim row, is a skip or failed stop of a
    ``KEPT_BY_THE_OBJECT`` cause of this uid that judged this resourceVersion: the object is as the guard found it,
    and the guard would say the same. None otherwise, rows that record no version included (judged live). Pure.

    The reason names ``last`` (a failed stop: its intent, the id its run named) and keeps what it said, not what an
    earlier such reason wrapped around it: ``still managed by its GitOps controller (audit #123, unchanged since):
    synced by Argo CD (...): ...``.
    """
    if last is None or last.cause not in KEPT_BY_THE_OBJECT or last.outcome not in (Outcome.skipped, Outcome.failed):
        return None
    if uid is None or not resource_version or (last.uid, last.version) != (uid, resource_version):
        return None
    cause = SkipCause(last.cause)
    earlier = last.refers_to or last.audit_id
    return cause, f"{_STILL[cause]} (audit #{earlier}, unchanged since): {_EARLIER.sub('', last.reason, 1)}"
