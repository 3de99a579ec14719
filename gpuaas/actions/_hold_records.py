"""Whether a ``gpuaas.io/deadline-hold`` mark on a Workload is one gpuaas wrote: what a release must prove first.

Anyone who may edit a Workload may write that annotation, and a release writes what the mark says
(``spec.active`` or ``spec.priority`` back to its ``before``), in dry-run too. A mark taken on its word
would let gpuaas re-activate a Workload someone else deactivated, or raise a priority at every run. So
a mark is released only when it names the audit row of a hold or demotion of the deadlines flow:

* written in apply mode, on this very object (the same uid), with the same ``before``;
* whose write was not refused: its completion row says ``applied`` or ``unknown`` (a lost answer), or
  there is none (a run killed between the patch and its completion row: the mark names the intent);
* that no release has ended yet (a mark copied back after its release is not a hold).

Anything else is a ``MarkFault``: no patch, one ``skipped`` row per object and mark (``record_refusal``),
however many runs find it. The rows about every id the marks of a step name are read in one query
(``HoldRecords.load``); an id met later (a mark changed between the listing and the read) costs one more.
The deadline plan counts as held only the marks this proves (``HoldRecords.proven``), by the same rule.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from sqlalchemy import CompoundSelect, union
from sqlmodel import col, select

from gpuaas.models import Outcome, bounded_key
from gpuaas.policies.deadlines import RecordedHolds, mark_id
from gpuaas.store import AuditEntry, Store

__all__ = ["HoldRecords", "MarkFault", "mark_id", "record_refusal"]

_IN_LIST = 300
"""Ids per query: three ``IN`` lists of them stay well inside SQLite's and PostgreSQL's parameter limits."""
_LANDED = (Outcome.applied.value, Outcome.unknown.value)
"""A hold's completion outcomes that leave its mark possibly on the object."""


class MarkFault(StrEnum):
    """Why a hold mark is not one gpuaas recorded (the skip row's ``evidence.cause``)."""

    unnamed = "unnamed"
    """The mark names no audit id (unreadable, or written by hand)."""
    unrecorded = "unrecorded"
    """No hold or demotion of the deadlines flow has that id."""
    dry_run = "dry-run"
    """The row is a dry-run decision: it wrote nothing."""
    other_object = "other-object"
    """The row is about another object (another uid)."""
    other_before = "other-before"
    """The mark's ``before`` is not the one the row recorded."""
    not_written = "not-written"
    """The row's write was refused or did not land (its completion says so)."""
    released = "released"
    """The hold was released already."""


class HoldRecords:
    """The audit rows about the holds some marks name, read once per step, and the verdict on each mark."""

    def __init__(self, store: Store, flow: str, hold_actions: Iterable[str], release_action: str) -> None:
        self._store, self._flow = store, flow
        self._hold_actions, self._release_action = frozenset(hold_actions), release_action
        self._loaded: set[int] = set()
        self._rows: dict[int, AuditEntry] = {}
        self._refs: dict[int, list[AuditEntry]] = {}

    def load(self, ids: Iterable[int]) -> None:
        """Read the rows named by ``ids``, those that refer to them, and those that close a release of them."""
        wanted = sorted({i for i in ids if type(i) is int} - self._loaded)
        for start in range(0, len(wanted), _IN_LIST):
            chunk = wanted[start:start + _IN_LIST]
            releases = select(AuditEntry.id).where(col(AuditEntry.refers_to).in_(chunk),
                                                   col(AuditEntry.action) == self._release_action)
            # Three index lookups (id, refers_to, refers_to of the releases) joined, not one OR of them: with the
            # OR PostgreSQL walks every row of the flow through the (flow, created_at) index instead.
            about: CompoundSelect[tuple[int]] = union(
                select(AuditEntry.id).where(col(AuditEntry.id).in_(chunk)),
                select(AuditEntry.id).where(col(AuditEntry.refers_to).in_(chunk)),
                select(AuditEntry.id).where(col(AuditEntry.refers_to).in_(releases.scalar_subquery())))
            query = select(AuditEntry).where(col(AuditEntry.flow) == self._flow, col(AuditEntry.id).in_(about))
            with self._store.session() as session:
                for row in session.exec(query):
                    self._rows[int(row.id or 0)] = row
                    if row.refers_to is not None:
                        self._refs.setdefault(row.refers_to, []).append(row)
            self._loaded.update(chunk)

    def fault(self, mark: dict[str, Any], uid: str | None) -> tuple[MarkFault, str] | None:
        """Why ``mark``, read on the object of ``uid``, is not a hold gpuaas made and still holds; None when it is."""
        audit_id = mark_id(mark)
        if audit_id is None:
            return MarkFault.unnamed, "it names no audit row"
        self.load([audit_id])
        row = self._rows.get(audit_id)
        if row is None or row.action not in self._hold_actions or row.outcome != Outcome.planned:
            return MarkFault.unrecorded, f"audit #{audit_id} is no hold or demotion of the {self._flow} flow"
        if row.mode != "apply":
            return MarkFault.dry_run, f"audit #{audit_id} is a dry-run decision, which wrote nothing"
        if not uid or row.uid != uid:
            return MarkFault.other_object, f"audit #{audit_id} is about another object (uid {row.uid}, not {uid})"
        if row.before != mark.get("before"):
            return MarkFault.other_before, (f"audit #{audit_id} recorded before {_short(row.before)}, the mark "
                                            f"says {_short(mark.get('before'))}")
        refs = self._refs.get(audit_id, [])
        refused = [r for r in refs if r.action == row.action and r.outcome not in _LANDED]
        if refused and not any(r.action == row.action and r.outcome in _LANDED for r in refs):
            return MarkFault.not_written, f"audit #{audit_id}'s write did not land ({refused[-1].outcome})"
        for intent in refs:
            if intent.action == self._release_action and intent.outcome == Outcome.planned:
                done = [r for r in self._refs.get(int(intent.id or 0), []) if r.outcome == Outcome.released]
                if done:
                    return MarkFault.released, f"audit #{audit_id} was released already (audit #{done[0].id})"
        return None

    def proven(self, marks: Iterable[tuple[str | None, dict[str, Any]]]) -> RecordedHolds:
        """(uid, audit id) of each of ``marks`` (the uid of the object it is on, the mark) that ``fault`` finds no
        fault with: the holds the deadline plan counts. The rows about all of them are read in one query (per 300
        ids, ``load``)."""
        marks = list(marks)
        self.load(i for _, mark in marks if (i := mark_id(mark)) is not None)
        return frozenset((uid, i) for uid, mark in marks
                         if uid and (i := mark_id(mark)) is not None and self.fault(mark, uid) is None)


def record_refusal(store: Store, row: AuditEntry, mark: dict[str, Any], fault: MarkFault) -> AuditEntry:
    """The ``skipped`` row of a mark gpuaas did not record, once per object (uid) and mark: a tenant who leaves one
    on a Workload does not add a row to the audit log at every run. Returns the row that holds it."""
    text = json.dumps(mark, sort_keys=True, default=str)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    row.idempotency_key = bounded_key(f"deadline-unrecorded-mark/{row.namespace}/{row.name}/{row.uid}/{digest}")
    row.evidence = {**row.evidence, "cause": fault.value, "mark": text[:500]}
    held, _ = store.append_decision(row)
    return held


def _short(value: object) -> str:
    return json.dumps(value, sort_keys=True, default=str)[:200]
