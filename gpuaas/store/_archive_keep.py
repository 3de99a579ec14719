"""Which audit rows older than an archive's cutoff gpuaas still reads, and so must stay in the database.

An archive moves old rows to a file; the rows the tool reads again must not go with them. Each rule below names
a reader, and a row it keeps takes every row connected to it with it (``refers_to`` either way, transitively, and
the rows of the same idempotency key), so the rows left in the database never refer to a row that is gone and
``gpuaas undo``, the recoveries and an incident review find every chain whole:

* ``linked``: connected to a row at or after the cutoff: a completion, an undo or a recovery of it is still in the
  database, and reads it (``undo._belongs_to``, ``audit_subject.owners``, ``incident._referents``); a decision key
  counts its attempts over all its rows (``Store.append_decisions``).
* ``open_intent``: an apply-mode intent (``planned``) that no row of its own action closes: a run or an undo killed
  between its intent and its completion. ``gpuaas undo`` settles it from the object (``settle_reclaim``,
  ``settle_restore``, the quota undo's resumption).
* ``reclaim_not_restored``: an applied reclaim never restored: the object may still be stopped, its
  ``gpuaas.io/reclaimed`` annotation and its Events name the row, and ``gpuaas undo`` needs its ``before``.
* ``hold_not_released``: a deadline hold or demotion never released: the Workload may still be held, its
  ``gpuaas.io/deadline-hold`` annotation names the row, and ``gpuaas undo`` releases it from there.
* ``latest_quota_plan``: per ClusterQueue and flavor, the plan of the latest change applied to it (and, where that
  plan was undone, each older plan back to one that was not): its undo reads the plan's rows.
* ``newest_entry``: the log's newest row, whatever it is. SQLite numbers a new row one past the highest id there
  (``audit_log`` has no ``AUTOINCREMENT``), so a log archived to its last row would hand the archived ids out again,
  and ``audit #7`` in an archive, an Event or an annotation would name two rows. Only a log with no row since the
  cutoff (gpuaas stopped for a month) meets this rule.

The rules are computed in the database, a page of ids at a time: only the ids kept are held in memory.
The action names are the writers' (``gpuaas.actions``), repeated here because the store sits below them;
``tests/store/test_archive_keep.py`` pins them to the writers' constants.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import Table, or_, select
from sqlalchemy.orm import Session

from gpuaas.models import Outcome
from gpuaas.store._models import AuditEntry, as_utc

__all__ = ["CLOSED_WITHOUT_EFFECT", "HOLD_ACTIONS", "KeptBack", "PAGE", "kept_back", "restored_ids"]

PAGE = 5000
"""Rows read at a time while the rules and the archive page through the log by id."""
_IN_LIST = 500
"""Values per ``IN (...)`` list, as ``Store`` uses."""
_TABLE: Table = AuditEntry.__table__  # type: ignore[attr-defined]
_C = _TABLE.c

RECLAIM_ACTION = "reclaim"
HOLD_ACTIONS = ("deadline-hold", "deadline-demote")
RELEASE_ACTION = "deadline-release"
PLAN_ACTION = "quota-plan"
CHANGE_ACTION = "quota-change"
RESTORE_KEY = "restore/"
"""The idempotency key prefix of every undo of a reclaim or a quota plan: ``restore/<its intent id>``."""
CLOSED_WITHOUT_EFFECT = frozenset({Outcome.failed, Outcome.skipped, Outcome.changed, Outcome.deferred})
"""Completion outcomes that say the write never reached the object; any other (``applied``, ``unknown``...) may
have."""


class KeptBack(StrEnum):
    """Why an old row stays, in the order a row is counted under (a row two rules keep counts under the first)."""

    linked = "linked to a newer entry (refers_to or idempotency key)"
    open_intent = "an apply intent never completed (its undo or recovery settles it)"
    reclaim_not_restored = "an applied reclaim never restored (the object may still be stopped)"
    hold_not_released = "a deadline hold or demotion never released"
    latest_quota_plan = "the latest quota plan of a ClusterQueue (its undo reads it)"
    newest_entry = "the newest entry of the log (SQLite would hand its id and those before it out again)"


def _chunks(items: Sequence[Any], size: int = _IN_LIST) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def restored_ids(session: Session) -> set[int]:
    """The intents (reclaims, quota plans) an undo restored: ``restored`` rows of key ``restore/<id>``. Undos are rare
    next to the rows of a log, so the set is small."""
    keys = session.execute(select(_C.idempotency_key).where(
        _C.outcome == Outcome.restored, _C.idempotency_key.like(f"{RESTORE_KEY}%")))
    return {int(key.removeprefix(RESTORE_KEY)) for (key,) in keys if key and key.removeprefix(RESTORE_KEY).isdigit()}


def _old(cutoff: datetime) -> Any:
    return _C.created_at < cutoff


def _seeds_linked(session: Session, cutoff: datetime) -> set[int]:
    """Old rows a newer row refers to, that refer to a newer row, or share a newer row's idempotency key."""
    older_table, newer_table = _TABLE.alias("older"), _TABLE.alias("newer")
    older, newer = older_table.c, newer_table.c
    found: set[int] = set()
    for on in (newer.refers_to == older.id, older.refers_to == newer.id):
        found.update(int(i) for (i,) in session.execute(
            select(older.id).join(newer_table, on).where(older.created_at < cutoff, newer.created_at >= cutoff)))
    newer_keys = select(_C.idempotency_key).where(_C.created_at >= cutoff, _C.idempotency_key.is_not(None))
    found.update(int(i) for (i,) in session.execute(select(_C.id).where(
        _old(cutoff), _C.idempotency_key.in_(newer_keys))))
    return found


def _old_intents(session: Session, cutoff: datetime) -> Iterator[list[tuple[int, str]]]:
    """Pages of (id, action) of the old apply-mode intents, by id."""
    after = 0
    while True:
        page = [(int(i), str(a)) for i, a in session.execute(
            select(_C.id, _C.action).where(
                _old(cutoff), _C.id > after, _C.outcome == Outcome.planned,
                _C.mode == "apply").order_by(_C.id).limit(PAGE))]
        if not page:
            return
        yield page
        after = page[-1][0]


def _referrers(session: Session, ids: Iterable[int]) -> dict[int, list[tuple[int, str, str]]]:
    """id -> (id, action, outcome) of each row that refers to it."""
    out: dict[int, list[tuple[int, str, str]]] = {}
    for chunk in _chunks(sorted(set(ids))):
        for i, ref, action, outcome in session.execute(select(
                _C.id, _C.refers_to, _C.action, _C.outcome).where(
                _C.refers_to.in_(chunk))):
            out.setdefault(int(ref), []).append((int(i), str(action), str(outcome)))
    return out


def _reached(completions: list[tuple[int, str, str]]) -> bool:
    """Whether a write may be in place: no completion (it may have landed) or one that does not say it did not."""
    return not completions or any(outcome not in CLOSED_WITHOUT_EFFECT for _, _, outcome in completions)


def _seeds_by_intent(session: Session, cutoff: datetime, restored: set[int]) -> dict[KeptBack, set[int]]:
    """The old intents the open-intent, reclaim and hold rules keep."""
    seeds: dict[KeptBack, set[int]] = {k: set() for k in (KeptBack.open_intent, KeptBack.reclaim_not_restored,
                                                          KeptBack.hold_not_released)}
    for page in _old_intents(session, cutoff):
        referring = _referrers(session, (i for i, _ in page))
        release_intents = {i: [r for r in referring.get(i, []) if r[1] == RELEASE_ACTION and r[2] == Outcome.planned]
                           for i, action in page if action in HOLD_ACTIONS}
        releases = _referrers(session, (r[0] for rs in release_intents.values() for r in rs))
        for i, action in page:
            rows = referring.get(i, [])
            own = [r for r in rows if r[1] == action]
            if action == RECLAIM_ACTION:  # a restore intent closes it too: the undo found the stop's mark
                own += [r for r in rows if r[1] == "restore" and r[2] == Outcome.planned]
            if not own:
                seeds[KeptBack.open_intent].add(i)
            elif action == RECLAIM_ACTION and _reached([r for r in own if r[1] == action]) and i not in restored:
                seeds[KeptBack.reclaim_not_restored].add(i)
            elif action in HOLD_ACTIONS and _reached(own) and not any(
                    outcome == Outcome.released for r in release_intents.get(i, [])
                    for _, _, outcome in releases.get(r[0], [])):
                seeds[KeptBack.hold_not_released].add(i)
    return seeds


def _applied_change(evidence: Any) -> bool:
    """Whether a ``quota-change`` row moved a queue for an apply (not a rollback or an undo putting one back)."""
    why = evidence.get("why") if isinstance(evidence, dict) else None
    return why in (None, "apply")


def _seeds_quota(session: Session, cutoff: datetime, restored: set[int]) -> set[int]:
    """The plans each (ClusterQueue, flavor)'s undo may still read: the plan of its latest applied change and,
    while that plan was undone, the one before it. Read over the whole log (the latest change may be new)."""
    plans: dict[tuple[str, str], list[int]] = {}
    after = 0
    while True:
        page = list(session.execute(select(
            _C.id, _C.name, _C.refers_to, _C.before, _C.evidence).where(
            _C.action == CHANGE_ACTION, _C.outcome == Outcome.applied,
            _C.id > after).order_by(_C.id).limit(PAGE)))
        if not page:
            break
        after = int(page[-1][0])
        for _, queue, plan, before, evidence in page:
            if plan is None or not _applied_change(evidence):
                continue
            for flavor in (before or {}):
                held = plans.setdefault((str(queue), str(flavor)), [])
                if not held or held[-1] != plan:
                    held.append(int(plan))
    wanted: set[int] = set()
    for history in plans.values():
        for plan in reversed(history):
            wanted.add(plan)
            if plan not in restored:
                break
    old: set[int] = set()
    for chunk in _chunks(sorted(wanted)):
        old.update(int(i) for (i,) in session.execute(select(_C.id).where(
            _C.id.in_(chunk), _old(cutoff))))
    return old


def _close(session: Session, cutoff: datetime, seeds: set[int], reason: KeptBack, kept: dict[int, KeptBack]) -> None:
    """Keep ``seeds`` for ``reason`` and every old row connected to them not kept yet, a breadth of chains at a time."""
    frontier = sorted(seeds - kept.keys())
    while frontier:
        for i in frontier:
            kept[i] = reason
        found: set[int] = set()
        for chunk in _chunks(frontier):
            links = list(session.execute(select(_C.refers_to, _C.idempotency_key).where(
                _C.id.in_(chunk))))
            parents = [int(r) for r, _ in links if r is not None]
            keys = sorted({str(k) for _, k in links if k is not None})
            near = [_C.refers_to.in_(chunk)]
            if parents:
                near.append(_C.id.in_(parents))
            if keys:
                near.append(_C.idempotency_key.in_(keys))
            found.update(int(i) for (i,) in session.execute(select(_C.id).where(_old(cutoff), or_(*near))))
        frontier = sorted(found - kept.keys())


def kept_back(session: Session, cutoff: datetime) -> dict[int, KeptBack]:
    """Every row older than ``cutoff`` that stays, with the first rule that keeps it (module docstring)."""
    cutoff = as_utc(cutoff)
    restored = restored_ids(session)
    kept: dict[int, KeptBack] = {}
    _close(session, cutoff, _seeds_linked(session, cutoff), KeptBack.linked, kept)
    by_intent = _seeds_by_intent(session, cutoff, restored)
    for reason in (KeptBack.open_intent, KeptBack.reclaim_not_restored, KeptBack.hold_not_released):
        _close(session, cutoff, by_intent[reason], reason, kept)
    _close(session, cutoff, _seeds_quota(session, cutoff, restored), KeptBack.latest_quota_plan, kept)
    newest = session.execute(select(_C.id).where(_old(cutoff)).order_by(_C.id.desc()).limit(1)).scalar()
    newer = session.execute(select(_C.id).where(_C.id > (newest or 0)).limit(1)).scalar()
    if newest is not None and newer is None:  # the newest row of the whole log is old: it stays
        _close(session, cutoff, {int(newest)}, KeptBack.newest_entry, kept)
    return kept
