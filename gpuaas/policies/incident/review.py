"""Incident review: what the fleet looked like in a window, and what gpuaas decided and did in it. Pure.

The fleet's state comes from the per-queue and per-tenant aggregates every collect stores
(``gpuaas.fleet_history``): they cover the whole retention, whereas full snapshots are kept only
as the policy says (the newest few), so the timeline never depends on one being there. What gpuaas
did comes from the audit log, one event per row, oldest first, each with its reason and a short
phrase of its evidence; rows that complete or step through an earlier one (``refers_to``) are
grouped with it to say how each action ended ("3 reclaims (2 applied, 1 dry-run)").

The window and the filters (namespaces, ClusterQueues) are ``gpuaas.policies.incident._scope``.
Idle GPUs are stored per tenant only: a filter that names no tenant shows them as unknown (with
a note), never as the whole fleet's.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pandas as pd

from gpuaas.audit_subject import owners, subject
from gpuaas.models import Outcome
from gpuaas.phrases import duration
from gpuaas.policies.incident._scope import AuditRow, Scope, parse_instant, resolve_window, row_in_scope, scope_for
from gpuaas.policy import Mode

__all__ = [
    "FLEET_COLUMNS", "ActionOutcome", "AuditRow", "IncidentEvent", "IncidentReview", "QuotaChange", "QuotaLine",
    "Scope", "build_review", "evidence_phrase", "parse_instant", "resolve_window", "scope_for",
]

FLEET_COLUMNS = ["at", "pending_workloads", "pending_gpus", "nominal_gpus", "usage_gpus", "allocated_gpus",
                 "idle_gpus", "unknown_gpus"]
STEP_ACTIONS = frozenset({"quota-change"})
"""Rows that are one step of the action they refer to (a quota plan's patches), not an action of their own."""


# -- the timeline ------------------------------------------------------------------------------

@dataclass(frozen=True)
class IncidentEvent:
    """One audit row: a decision, an action, one of its steps, or how it ended."""

    at: datetime
    audit_id: int
    flow: str
    action: str
    kind: str
    namespace: str | None
    name: str
    mode: str
    outcome: str
    reason: str
    evidence: str
    """A short phrase of the row's evidence (the numbers the decision rested on), or ``""``."""
    refers_to: int | None
    undoable: bool
    """An applied action gpuaas can reverse: pass ``audit_id`` to ``undo``."""
    flow_run_id: str | None = None
    owner: str | None = None
    """``Kind name`` of the owner a reclaim stopped through this Workload (its own evidence or its referent's)."""

    @property
    def object_ref(self) -> str:
        """The object written."""
        return subject(self.kind, self.namespace, self.name, None)

    @property
    def subject(self) -> str:
        """The object as the deciding command named it: the owner first, where a reclaim stopped one."""
        return subject(self.kind, self.namespace, self.name, self.owner)


@dataclass(frozen=True)
class ActionOutcome:
    """How one action that started in the window ended: its first row and its final result."""

    audit_id: int
    action: str
    object_ref: str
    mode: str
    result: str
    """applied | dry-run | skipped | deferred | failed | restored | open (apply mode, no completion row yet)"""
    subject: str = ""
    """The object as the deciding command named it (``IncidentEvent.subject``)."""


@dataclass(frozen=True)
class QuotaChange:
    at: datetime
    queue: str
    flavor: str
    before: float
    after: float


@dataclass(frozen=True)
class QuotaLine:
    """One queue and flavor's nominal quota over the window."""

    queue: str
    flavor: str
    first: float
    last: float
    changes: tuple[QuotaChange, ...]


@dataclass(frozen=True)
class IncidentReview:
    start: datetime
    end: datetime
    scope: Scope
    fleet: pd.DataFrame
    """FLEET_COLUMNS, one row per collect in the window, oldest first (NaN: not known for this scope)."""
    quotas: list[QuotaLine]
    events: list[IncidentEvent]
    actions: list[ActionOutcome]
    notes: list[str]

    @property
    def quota_changes(self) -> list[QuotaChange]:
        return sorted((c for line in self.quotas for c in line.changes), key=lambda c: (c.at, c.queue, c.flavor))


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _moves(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """``team-a-cq h100 12 -> 8`` for every queue and flavor that moved (a quota plan's before/after)."""
    out = []
    for queue in sorted(set(before) | set(after)):
        b, a = before.get(queue), after.get(queue)
        if isinstance(b, dict) and isinstance(a, dict):
            out += [f"{queue} {f} {b.get(f)} -> {a.get(f)}" for f in sorted(set(b) | set(a)) if b.get(f) != a.get(f)]
        elif queue != "resourceVersion" and b != a and (_number(b) is not None or _number(a) is not None):
            out.append(f"{queue} {b} -> {a}")
    return ", ".join(out)


def evidence_phrase(row: AuditRow) -> str:
    """The numbers behind a row, as people read them: ``window 30m, max activity 0.00 ≤ 0.05, coverage 100%``: a
    duration as ``gpuaas.phrases.duration`` writes it everywhere (``1h00m``), a share as the reclaim table does."""
    ev = row.evidence or {}
    parts: list[str] = []
    if row.action == "reclaim" and ev:
        window, top, threshold = _number(ev.get("window_minutes")), _number(ev.get("activity_max")), _number(
            ev.get("threshold"))
        if window is not None:
            parts.append(f"window {duration(window * 60)}")
        if top is not None and threshold is not None:
            parts.append(f"max activity {top:.2f} {'≤' if top <= threshold else '>'} {threshold:.2f}")
        coverage = _number(ev.get("coverage"))
        if coverage is not None:
            parts.append(f"coverage {coverage:.0%}")
        gpus = _number(ev.get("gpus_requested"))
        if gpus is not None:
            parts.append(f"{gpus:g} GPU{'' if gpus == 1 else 's'}")
        requests = _number(ev.get("requests"))
        if requests is not None:
            parts.append(f"{requests:g} requests")
    elif row.kind in ("Cohort", "ClusterQueue") and (row.before or row.after):
        moved = _moves(row.before or {}, row.after or {})
        if moved:
            parts.append(moved)
    return ", ".join(parts)


def _root_of(row: AuditRow, rows: Mapping[int, AuditRow]) -> int | None:
    """The action a row completes or steps through; None when it starts one itself."""
    if row.refers_to is None:
        return None
    parent = rows.get(row.refers_to)
    if row.action in STEP_ACTIONS or parent is None or parent.action == row.action:
        return row.refers_to
    return None  # a different action referring to one (an undo of a reclaim): an action of its own


def _outcomes(window_rows: Sequence[AuditRow], rows: Mapping[int, AuditRow],
              owner: Mapping[int, str]) -> list[ActionOutcome]:
    completions: dict[int, list[AuditRow]] = {}
    for row in rows.values():
        root = _root_of(row, rows)
        if root is not None and row.action not in STEP_ACTIONS:
            completions.setdefault(root, []).append(row)
    out = []
    for row in window_rows:
        if row.id is None or _root_of(row, rows) is not None:
            continue
        done = sorted(completions.get(row.id, []), key=lambda r: (r.created_at, r.id or 0))
        result = done[-1].outcome if done else row.outcome
        if result == Outcome.planned:  # nothing closed it: a dry-run, or an apply still open (crashed, in progress)
            result = Outcome.dry_run if row.mode == Mode.dry_run else Outcome.open
        out.append(ActionOutcome(row.id, row.action, subject(row.kind, row.namespace, row.name, None), row.mode,
                                 result, subject(row.kind, row.namespace, row.name, owner.get(row.id))))
    return out


_UNDO_ROWS = {"restore": Outcome.restored, "deadline-release": Outcome.released}
"""The action and outcome of a row that put an earlier action back: a reclaim's or quota plan's restore, a deadline
hold's release (``gpuaas undo`` of a hold releases it)."""


def _undone(rows: Mapping[int, AuditRow]) -> set[int]:
    """Actions a later undo restored or released (directly, or through the undo's own intent row)."""
    restored = set()
    for row in rows.values():
        if _UNDO_ROWS.get(row.action) == row.outcome and row.refers_to is not None:
            target = rows.get(row.refers_to)
            if target is not None and target.action == row.action and target.refers_to is not None:
                restored.add(target.refers_to)  # completion -> restore intent -> the reclaim
            else:
                restored.add(row.refers_to)
    return restored


def _events(window_rows: Sequence[AuditRow], rows: Mapping[int, AuditRow], undoable_actions: Collection[str],
            outcomes: Sequence[ActionOutcome], owner: Mapping[int, str]) -> list[IncidentEvent]:
    ended = {o.audit_id: o.result for o in outcomes}
    undone = _undone(rows)
    events = []
    for row in window_rows:
        rid = int(row.id or 0)
        undoable = (row.action in undoable_actions and row.mode == "apply" and ended.get(rid) == Outcome.applied
                    and rid not in undone)
        events.append(IncidentEvent(
            at=row.created_at, audit_id=rid, flow=row.flow, action=row.action, kind=row.kind,
            namespace=row.namespace, name=row.name, mode=row.mode, outcome=row.outcome,
            reason=" ".join((row.reason or "").split()), evidence=evidence_phrase(row), refers_to=row.refers_to,
            undoable=undoable, flow_run_id=row.flow_run_id, owner=owner.get(rid)))
    return events


# -- the fleet ---------------------------------------------------------------------------------

_QUEUE_SUMS = ["pending_workloads", "pending_gpus", "nominal_gpus", "usage_gpus"]
_TENANT_SUMS = ["allocated_gpus", "idle_gpus", "unknown_gpus"]


def _sums(rows: pd.DataFrame, columns: list[str], times: pd.DatetimeIndex) -> pd.DataFrame:
    """Column sums per collect; a collect that stored rows but none in the scope sums to zero."""
    if rows.empty:
        return pd.DataFrame(0.0, index=times, columns=columns)
    return rows.groupby("collected_at")[columns].sum().astype(float).reindex(times, fill_value=0.0)


def _fleet(queue_rows: pd.DataFrame, scoped_queues: pd.DataFrame, tenant_rows: pd.DataFrame,
           tenants: frozenset[str] | None) -> pd.DataFrame:
    """One row per collect of the window; a column no stored row covers for the scope is NaN (unknown)."""
    q_times = pd.DatetimeIndex(queue_rows["collected_at"].unique()).sort_values()
    t_times = pd.DatetimeIndex(tenant_rows["collected_at"].unique()).sort_values()
    times = q_times.union(t_times)
    if times.empty:
        return pd.DataFrame(columns=FLEET_COLUMNS)
    frame = pd.DataFrame(index=times.rename("at"), columns=FLEET_COLUMNS[1:], dtype=float)
    if len(q_times):
        frame.loc[q_times, _QUEUE_SUMS] = _sums(scoped_queues, _QUEUE_SUMS, q_times).to_numpy()
    if len(t_times) and (tenants is None or tenants):
        scoped = tenant_rows if tenants is None else tenant_rows[tenant_rows["tenant"].isin(sorted(tenants))]
        frame.loc[t_times, _TENANT_SUMS] = _sums(scoped, _TENANT_SUMS, t_times).to_numpy()
    return frame.reset_index().reindex(columns=FLEET_COLUMNS)


def _quota_lines(queue_rows: pd.DataFrame) -> list[QuotaLine]:
    lines: list[QuotaLine] = []
    if queue_rows.empty:
        return lines
    for (queue, flavor), rows in queue_rows.sort_values("collected_at").groupby(["cluster_queue", "flavor"],
                                                                               sort=True):
        values = rows["nominal_gpus"].astype(float).to_numpy()
        moved = [i for i in range(1, len(values)) if values[i] != values[i - 1]]
        at = rows["collected_at"].iloc[moved] if moved else []
        changes = tuple(QuotaChange(t.to_pydatetime(), str(queue), str(flavor), float(values[i - 1]), float(values[i]))
                        for t, i in zip(at, moved))
        lines.append(QuotaLine(str(queue), str(flavor), float(values[0]), float(values[-1]), changes))
    return lines


def _filter_queue_rows(queue_rows: pd.DataFrame, scope: Scope) -> pd.DataFrame:
    if not scope.filtered or queue_rows.empty:
        return queue_rows
    names = set(queue_rows["cluster_queue"].astype(str))
    allowed = {q for q in names if scope.queue_ok(q)}
    keep = queue_rows["cluster_queue"].isin(sorted(allowed))
    if scope.namespaces and not scope.queues:  # a tenant's queue not yet seen holding a workload of the namespace
        keep = keep | queue_rows["tenant"].isin(sorted(scope.tenants() or ()))
    return queue_rows[keep]


def build_review(queue_rows: pd.DataFrame, tenant_rows: pd.DataFrame, audit_rows: Sequence[AuditRow],
                 start: datetime, end: datetime, scope: Scope | None = None, *,
                 referents: Iterable[AuditRow] = (), undoable_actions: Collection[str] = ()) -> IncidentReview:
    """The review of ``[start, end)``.

    ``queue_rows``/``tenant_rows``: ``Store.queue_history``/``tenant_history`` over the window;
    ``audit_rows``: ``Store.audit`` over it; ``referents``: rows before the window that rows in it refer
    to (an apply completing a plan made earlier); ``undoable_actions``: the actions the undo path reverses.
    """
    scope = scope or Scope()
    in_window = [r for r in audit_rows if start <= r.created_at < end]
    rows: dict[int, AuditRow] = {int(r.id): r for r in referents if r.id is not None}
    rows.update({int(r.id): r for r in in_window if r.id is not None})
    kept = sorted((r for r in in_window if row_in_scope(r, scope, rows)), key=lambda r: (r.created_at, r.id or 0))
    owner = owners(kept, rows.get)
    outcomes = _outcomes(kept, rows, owner)
    events = _events(kept, rows, undoable_actions, outcomes, owner)

    notes: list[str] = []
    queues = _filter_queue_rows(queue_rows, scope)
    tenants = scope.tenants()
    if tenants is not None and not tenants:
        notes.append("idle GPUs are stored per tenant, and no tenant of the policy matches these filters: "
                     "idle GPUs are not shown (unknown, not zero)")
    unmatched = sorted(ns for ns in scope.namespaces if not scope.ns_queues.get(ns))
    if unmatched:
        notes.append(f"no ClusterQueue known for namespace {', '.join(unmatched)} (no tenant of the policy names it "
                     "and no stored workload of it was seen): its backlog is not in the series")
    if queue_rows.empty and tenant_rows.empty:
        notes.append("no stored fleet history in the window: collect did not run then, or its rows are past the "
                     "retention")
    return IncidentReview(start, end, scope, _fleet(queue_rows, queues, tenant_rows, tenants), _quota_lines(queues), events,
                          outcomes, notes)
