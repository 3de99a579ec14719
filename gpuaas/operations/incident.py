"""The incident review, as one use case: a window of the fleet's history and of gpuaas's audit log, without Prefect.

The path of one review, in order (every caller takes it: the ``incident_review`` flow, ``gpuaas incident``, the
tests):

1. ``window`` and ``missing_audit_ids``: the window resolved, every undo id naming an audit row. Both are
   checked before anything is written, so that a typo never undoes the ids around it.
2. ``undo`` (only the ids asked for): the same undo as ``gpuaas undo``, each undoer refusing to write over a
   later change. The caller holds the cluster-writes lock around it.
3. ``read``: the stored per-queue and per-tenant history and the audit rows of the window, with the rows
   before it that rows in it refer to (any window inside the retention; no snapshot needed).
4. ``plan``: the review, pure: the scope (namespaces and queues, through the policy's tenants and where the
   workloads were queued) and the timeline of the fleet, the decisions and the actions in it.

Nothing is applied beyond the undo: the flow publishes the review (the markdown timeline, the table).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import pandas as pd

from gpuaas.actions import UNDOERS, KubeWriter, UndoResult, undo_entries
from gpuaas.actions.reclaim import FLOW as RECLAIM_FLOW
from gpuaas.errors import ConfigError
from gpuaas.instant import utc_stamp
from gpuaas.models import Snapshot
from gpuaas.phrases import counted
from gpuaas.policies.incident import IncidentReview, build_review, resolve_window, scope_for
from gpuaas.policies.reclaim import RECORDED_SKIP_OUTCOMES
from gpuaas.policy import Policy
from gpuaas.store import AuditEntry, Store

__all__ = ["REFERENT_DEPTH", "IncidentRecords", "check_undo_ids", "missing_audit_ids", "plan", "read", "undo", "window"]

REFERENT_DEPTH = 3
"""Rows before the window that rows in it refer to, followed this many links back: an apply's plan, an undo's
reclaim, its intent."""


@dataclass(frozen=True)
class IncidentRecords:
    """What the store holds about ``[start, end)``: everything ``plan`` needs, read once."""

    start: datetime
    end: datetime
    queue_rows: pd.DataFrame
    tenant_rows: pd.DataFrame
    audit: list[AuditEntry]
    referents: list[AuditEntry] = field(default_factory=list)
    """Rows before the window that rows in it refer to."""
    placements: list[tuple[str, str]] = field(default_factory=list)
    """(namespace, ClusterQueue) of the workloads in the newest full snapshot; read only for a scoped review."""
    skips_before: list[AuditEntry] = field(default_factory=list)
    """Reclaim skips and deferrals recorded less than ``reclaim.record_skips_every_minutes`` before the window, of
    objects with no reclaim row in it: unchanged, they may have held through the window without a row in it."""
    skip_interval: timedelta = timedelta(0)
    """``reclaim.record_skips_every_minutes`` as the review was read with."""


def window(start: str | datetime, end: str | datetime, now: datetime) -> tuple[datetime, datetime]:
    """``[start, end)`` from ISO times or durations before ``now``; a ``ConfigError`` naming ``start`` or ``end``."""
    return resolve_window(start, end, now)


def missing_audit_ids(store: Store, audit_ids: Iterable[int]) -> list[int]:
    """The ids that name no audit row, each once, in the order given (``gpuaas undo 7 7`` names #7 once)."""
    return [i for i in dict.fromkeys(int(i) for i in audit_ids) if store.get_audit(i) is None]


def check_undo_ids(store: Store, audit_ids: Sequence[int]) -> None:
    """Every id names an audit row, or a ``ConfigError`` naming the missing ones: then nothing is undone."""
    missing = missing_audit_ids(store, audit_ids)
    if missing:
        raise ConfigError(f"no audit row {', '.join(f'#{i}' for i in missing)} (ids: `gpuaas audit list` or this "
                          "review's timeline); nothing undone", field="undo")


def undo(store: Store, writer: KubeWriter, audit_ids: Sequence[int], *,
         flow_run_id: str | None) -> list[UndoResult]:
    """Reverse the actions named by ``audit_ids`` (reclaims, deadline holds, quota plans), never over a later change.

    The one undo of every audited action: ``gpuaas undo`` (through the reclaim flow) and a review's undo both take it.
    """
    return undo_entries(store, writer, list(audit_ids), flow_run_id=flow_run_id)


def _referents(store: Store, rows: Sequence[AuditEntry]) -> list[AuditEntry]:
    known = {r.id for r in rows}
    out: list[AuditEntry] = []
    wanted = {r.refers_to for r in rows if r.refers_to is not None} - known
    for _ in range(REFERENT_DEPTH):
        found = [row for i in sorted(i for i in wanted if i is not None) if (row := store.get_audit(i)) is not None]
        out += found
        known |= {r.id for r in found}
        wanted = {r.refers_to for r in found if r.refers_to is not None} - known
        if not wanted:
            break
    return out


def _followers(store: Store, rows: Sequence[AuditEntry], end: datetime) -> list[AuditEntry]:
    """Rows written from ``end`` on that refer to ``rows`` (and to those, ``REFERENT_DEPTH`` links on): how an
    action of the window ended, or that it was undone, may be written after the window closed."""
    known = {r.id for r in rows}
    out: list[AuditEntry] = []
    wanted = sorted(i for i in known if i is not None)
    for _ in range(REFERENT_DEPTH):
        found = [row for row in store.audit(since=end, refers_to=wanted, limit=None) if row.id not in known]
        out += found
        known |= {r.id for r in found}
        wanted = sorted(r.id for r in found if r.id is not None)
        if not wanted:
            break
    return out


def _placements(store: Store) -> list[tuple[str, str]]:
    record = store.latest_snapshot(full=True)
    if record is None or "snapshot" not in record.payload:
        return []
    workloads = Snapshot.from_json(record.payload["snapshot"]).workloads
    if workloads.empty or not {"namespace", "cluster_queue"} <= set(workloads.columns):
        return []
    pairs = workloads[["namespace", "cluster_queue"]].dropna().drop_duplicates()
    return [(str(ns), str(cq)) for ns, cq in pairs.itertuples(index=False)]


def _skips_before(store: Store, audit: Sequence[AuditEntry], start: datetime, every: timedelta) -> list[AuditEntry]:
    """The newest reclaim row of each object in ``[start - every, start)`` when it is a skip or deferral with a
    cause and the object has no reclaim row in the window: a skip that stayed the same wrote none there."""
    if every <= timedelta(0):
        return []
    inside = {(r.kind, r.namespace or "", r.name) for r in audit if r.flow == RECLAIM_FLOW}
    newest: dict[tuple[str, str, str], AuditEntry] = {}
    for row in store.audit(flow=RECLAIM_FLOW, since=start - every, until=start, limit=None):  # oldest first
        newest[(row.kind, row.namespace or "", row.name)] = row
    return [row for key, row in newest.items() if key not in inside
            and row.outcome in RECORDED_SKIP_OUTCOMES and (row.evidence or {}).get("cause")]


def read(store: Store, start: datetime, end: datetime, *, scoped: bool,
         skip_interval: timedelta = timedelta(0)) -> IncidentRecords:
    """The history and audit rows of ``[start, end)``, with the rows before it they refer to and the rows after it
    that refer to them (how each action ended, whether it was undone); with ``scoped``, also where the workloads
    were queued (the map a namespace filter needs when the policy's tenants do not name the namespace).
    ``skip_interval`` (``reclaim.record_skips_every_minutes``): also the unchanged skips that may have held
    through the window without a row in it (``IncidentRecords.skips_before``)."""
    audit = store.audit(since=start, until=end, limit=None)
    return IncidentRecords(start=start, end=end, queue_rows=store.queue_history(start, end),
                           tenant_rows=store.tenant_history(start, end), audit=audit,
                           referents=[*_referents(store, audit), *_followers(store, audit, end)],
                           placements=_placements(store) if scoped else [],
                           skips_before=_skips_before(store, audit, start, skip_interval), skip_interval=skip_interval)


def _queue_tenants(queue_rows: pd.DataFrame) -> list[tuple[str, str]]:
    if queue_rows.empty:
        return []
    pairs = queue_rows[["cluster_queue", "tenant"]].dropna().drop_duplicates()
    return [(str(q), str(t)) for q, t in pairs.itertuples(index=False)]


def plan(records: IncidentRecords, policy: Policy, namespaces: Sequence[str] = (),
         queues: Sequence[str] = ()) -> IncidentReview:
    """The review of ``records`` for ``namespaces`` and ``queues`` (empty: the whole fleet). Pure."""
    tenants = [(t.name, t.namespaces, t.cluster_queues) for t in policy.tenants]
    scope = scope_for(namespaces, queues, tenants=tenants, placements=records.placements,
                      queue_tenants=_queue_tenants(records.queue_rows))
    review = build_review(records.queue_rows, records.tenant_rows, records.audit, records.start, records.end, scope,
                          referents=records.referents, undoable_actions=set(UNDOERS))
    note = _skips_note(records)
    return replace(review, notes=[*review.notes, note]) if note else review


def _skips_note(records: IncidentRecords) -> str | None:
    """The note naming the skips recorded shortly before the window that may have held through it unrecorded: a
    reclaim skip or deferral that stays the same is recorded once per ``reclaim.record_skips_every_minutes``."""
    rows = records.skips_before
    if not rows:
        return None
    named = ", ".join(f"{r.object_ref} ({(r.evidence or {}).get('cause')}, #{r.id})" for r in rows[:3])
    more = f" and {len(rows) - 3} more" if len(rows) > 3 else ""
    minutes = records.skip_interval.total_seconds() / 60
    since = utc_stamp(records.start - records.skip_interval, "%Y-%m-%dT%H:%M")
    return (f"{counted(len(rows), 'reclaim skip')} recorded in the {minutes:g} min before the window may have held "
            f"through it without a row in it (an unchanged skip is recorded once per {minutes:g} min, "
            f"reclaim.record_skips_every_minutes): {named}{more}; see gpuaas audit list --flow reclaim --since {since}")
