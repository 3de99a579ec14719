"""Archive the audit log: its rows older than a cutoff written to a file, then removed from the database.

Why: the audit log is append-only and never pruned, so it grows for as long as gpuaas runs (a 90-day store of a
2,000-GPU fleet holds about 360,000 rows, 900 MB). A platform team that keeps the record for a retention period
needs a way to move the old part out without losing it, and without breaking what gpuaas still reads.

Order, so that a failure at any step removes nothing and leaves no file:

1. the cutoff is at least ``MIN_AGE`` ago (the recoveries look back 7 days, the daily refits and the rebalance's
   day cap less): a later one is refused;
2. the store's ``cluster-writes`` lock is taken, so no flow run writes to the cluster, undoes or recovers while the
   rows it may read are selected and removed (``gpuaas db upgrade`` and ``db copy`` refuse a held lock the same way);
3. the rows that stay are computed (``_archive_keep``: linked to a newer row, open intents, reclaims never restored,
   holds never released, the latest quota plan of each queue);
4. the others are written, a page of ids at a time, to a temporary file beside ``FILE``, fsynced, read back and
   checked (``_archive_file``);
5. one transaction removes exactly those ids, passes the append-only trigger only inside it (SQLite: the DELETE
   trigger dropped and recreated from its own text; PostgreSQL: ``DISABLE``/``ENABLE TRIGGER``, which also locks the
   table against writers until the commit), checks that no row left refers to a row removed, appends the row that
   says what left (flow ``cli``, action ``archive``), puts the file in place and commits. A failure rolls it all
   back (the trigger with it) and removes the file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Table, delete, func, insert, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from gpuaas.errors import StoreError
from gpuaas.models import Outcome
from gpuaas.store._archive_file import FORMAT, VERSION, Written, publish, write_archive
from gpuaas.store._archive_keep import PAGE, KeptBack, kept_back
from gpuaas.store._archive_names import ARCHIVE_ACTION, ARCHIVE_FLOW
from gpuaas.store._database import in_words, redact_url
from gpuaas.store._models import AuditEntry, as_utc, utc_now
from gpuaas.store._run_locks import WRITES_LOCK
from gpuaas.store._schema import schema_problem
from gpuaas.store._store import Store

__all__ = ["ARCHIVE_ACTION", "ARCHIVE_FLOW", "MIN_AGE", "ArchivePlan", "Archived", "archive_audit", "cutoff_problem",
           "plan_archive"]

MIN_AGE = timedelta(days=30)
"""The youngest cutoff an archive takes: well past the 7 days the recoveries look back (``RECOVERY_LOOKBACK``) and
the day the deadline and quota steps read, so no scheduled read misses a row."""
LEASE = timedelta(minutes=30)
"""How long the archive holds the cluster writes unless it ends first (it releases them as it ends)."""
LOCK_WAIT = "30s"
"""How long PostgreSQL may wait for the audit log's table lock (readers and writers in progress finish first)."""
SQLITE_TRIGGER = "audit_log_no_delete"
POSTGRES_TRIGGER = "audit_log_append_only"
_IN_LIST = 500
_TABLE: Table = AuditEntry.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class ArchivePlan:
    """What an archive before ``cutoff`` moves out (rows, ids, times, per flow) and what it keeps back, and why."""

    cutoff: datetime
    rows: int
    first_id: int | None
    last_id: int | None
    oldest: datetime | None
    newest: datetime | None
    by_flow: dict[str, int]
    kept: dict[KeptBack, int]
    newer: int
    """Rows at or after the cutoff: they stay whatever the rules say."""
    _kept_ids: frozenset[int] = field(default=frozenset(), repr=False, compare=False)

    def as_dict(self) -> dict[str, Any]:
        """The plan as plain JSON (``--format json``, the archive's audit row)."""
        return {"before": self.cutoff.isoformat(), "rows": self.rows, "first_id": self.first_id,
                "last_id": self.last_id, "oldest": self.oldest.isoformat() if self.oldest else None,
                "newest": self.newest.isoformat() if self.newest else None, "by_flow": self.by_flow,
                "kept_back": {k.name: n for k, n in self.kept.items()}, "newer": self.newer}


@dataclass(frozen=True)
class Archived:
    """An archive done: its plan, the file, the SHA-256 of its row lines and the audit row that records it."""

    plan: ArchivePlan
    file: Path
    sha256: str
    audit_id: int


def cutoff_problem(cutoff: datetime, now: datetime) -> str | None:
    """Why ``cutoff`` is too recent for an archive, in words; None when it is at least ``MIN_AGE`` ago."""
    latest = as_utc(now) - MIN_AGE
    if as_utc(cutoff) > latest:
        return (f"{as_utc(cutoff):%Y-%m-%d %H:%M} UTC is less than {MIN_AGE.days} days ago: the recoveries and the "
                f"daily steps still read rows that recent; give {latest:%Y-%m-%d} or earlier")
    return None


def _old_rows(session: Session, cutoff: datetime, kept: frozenset[int], columns: list[Any]) -> Iterator[Any]:
    """The rows older than ``cutoff`` that are not kept, by id, ``PAGE`` at a time."""
    after = 0
    while True:
        page = list(session.execute(select(*columns).where(
            _TABLE.c.created_at < cutoff, _TABLE.c.id > after).order_by(_TABLE.c.id).limit(PAGE)))
        if not page:
            return
        after = int(page[-1].id)
        yield from (row for row in page if int(row.id) not in kept)


def _plan(session: Session, cutoff: datetime) -> ArchivePlan:
    kept_ids = kept_back(session, cutoff)
    kept = frozenset(kept_ids)
    rows, by_flow = 0, dict[str, int]()
    first = last = None
    oldest = newest = None
    for row in _old_rows(session, cutoff, kept, [_TABLE.c.id, _TABLE.c.created_at, _TABLE.c.flow]):
        rows += 1
        by_flow[row.flow] = by_flow.get(row.flow, 0) + 1
        at = as_utc(row.created_at)
        first = row.id if first is None else first
        last = row.id
        oldest = at if oldest is None or at < oldest else oldest
        newest = at if newest is None or at > newest else newest
    newer = int(session.execute(select(func.count()).select_from(_TABLE).where(_TABLE.c.created_at >= cutoff))
                .scalar_one())
    counts = {reason: sum(1 for r in kept_ids.values() if r is reason) for reason in KeptBack}
    return ArchivePlan(cutoff, rows, first, last, oldest, newest, dict(sorted(by_flow.items())),
                       {k: n for k, n in counts.items() if n}, newer, kept)


def _refuse_recent(cutoff: datetime, now: datetime | None) -> datetime:
    cutoff = as_utc(cutoff)
    problem = cutoff_problem(cutoff, now or utc_now())
    if problem is not None:
        raise StoreError(f"--before {problem}")
    return cutoff


def plan_archive(store: Store, cutoff: datetime, *, now: datetime | None = None) -> ArchivePlan:
    """What ``archive_audit`` would move out before ``cutoff``, read only: the dry run."""
    cutoff = _refuse_recent(cutoff, now)
    with store.session() as session:
        return _plan(session, cutoff)


def archive_audit(store: Store, cutoff: datetime, file: Path, *, holder: str, now: datetime | None = None,
                  progress: Callable[[str], None] = lambda _: None) -> Archived | None:
    """Move the audit rows before ``cutoff`` that gpuaas no longer reads into ``file`` and out of the database
    (module docstring); None, with nothing written, when there are none. ``holder`` names this archive in the
    cluster-writes lock. Raises ``StoreError`` (one line naming the file or the database); then nothing is removed
    and no file is left."""
    cutoff = _refuse_recent(cutoff, now)
    problem = schema_problem(store.url, store.current_revision(), store.head_revision())
    if problem is not None:
        raise StoreError(problem)
    if file.exists():
        raise StoreError(f"{file} already exists: an archive is never written over a file; give another path")
    if not store.acquire_lock(WRITES_LOCK, holder, LEASE):
        busy = store.held_lock(WRITES_LOCK)
        who = f"{busy.holder} holds the cluster writes until {busy.expires_at:%Y-%m-%d %H:%M:%S} UTC" if busy \
            else "another run holds the cluster writes"
        raise StoreError(f"{redact_url(store.url)}: {who}: let it finish (or pause the scheduled runs) first; "
                         "nothing archived")
    try:
        with store.session() as session:
            progress("choosing the rows that stay")
            plan = _plan(session, cutoff)
            if plan.rows == 0:
                return None
            progress(f"writing {plan.rows:,} rows to {file}")
            header = {"format": FORMAT, "version": VERSION, "schema": store.current_revision(),
                      "database": redact_url(store.url), "before": cutoff.isoformat(), "rows": plan.rows,
                      "first_id": plan.first_id, "last_id": plan.last_id, "written_at": utc_now().isoformat()}
            written = write_archive(file, header, _old_rows(session, cutoff, plan._kept_ids, [_TABLE]))
        try:
            progress(f"removing {plan.rows:,} rows from the database")
            audit_id = _remove(store, written, file, plan)
        finally:
            written.temporary.unlink(missing_ok=True)
    finally:
        store.release_lock(WRITES_LOCK, holder)
    return Archived(plan, file, written.sha256, audit_id)


def _delete_rows(connection: Connection, ids: list[int]) -> int:
    """Delete the rows of ``ids``; how many went."""
    removed = 0
    for start in range(0, len(ids), _IN_LIST):
        result = connection.execute(delete(_TABLE).where(_TABLE.c.id.in_(ids[start:start + _IN_LIST])))
        removed += int(result.rowcount or 0)
    return removed


def _dangling(connection: Connection, ids: list[int]) -> int:
    """How many rows left refer to a row removed (a row written since the rows were chosen)."""
    return sum(int(connection.execute(select(func.count()).select_from(_TABLE).where(
        _TABLE.c.refers_to.in_(ids[start:start + _IN_LIST]))).scalar_one()) for start in range(0, len(ids), _IN_LIST))


def _remove(store: Store, written: Written, final: Path, plan: ArchivePlan) -> int:
    """The transaction of step 5 (module docstring); the archive's audit id."""
    ids = written.ids.tolist()
    published = False
    try:
        with store.engine.connect() as connection:
            sqlite = connection.dialect.name == "sqlite"
            if sqlite:  # the driver would not open a transaction before DDL: open it here, taking the write lock
                connection.exec_driver_sql("BEGIN IMMEDIATE")
                trigger = connection.exec_driver_sql("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND "
                                                     f"name = '{SQLITE_TRIGGER}'").scalar()
                if trigger is None:
                    raise StoreError(f"{redact_url(store.url)} has no {SQLITE_TRIGGER} trigger: the audit log is not "
                                     "append-only there; nothing archived")
                connection.exec_driver_sql(f"DROP TRIGGER {SQLITE_TRIGGER}")
            else:  # the table lock it takes waits for no reader for long: a session left open fails the archive
                connection.exec_driver_sql(f"SET LOCAL lock_timeout = '{LOCK_WAIT}'")
                connection.exec_driver_sql(f"ALTER TABLE audit_log DISABLE TRIGGER {POSTGRES_TRIGGER}")
            removed = _delete_rows(connection, ids)
            if removed != len(ids):
                raise StoreError(f"{redact_url(store.url)}: {removed:,} of the {len(ids):,} archived rows were there "
                                 "to remove (the audit log changed meanwhile); nothing removed")
            dangling = _dangling(connection, ids)
            if dangling:
                raise StoreError(f"{redact_url(store.url)}: {dangling:,} rows written meanwhile refer to archived "
                                 "rows; nothing removed, run the archive again")
            if sqlite:
                connection.exec_driver_sql(str(trigger))
            else:
                connection.exec_driver_sql(f"ALTER TABLE audit_log ENABLE TRIGGER {POSTGRES_TRIGGER}")
            audit_id = int(connection.execute(insert(_TABLE).values(_record(written, final, plan)).returning(
                _TABLE.c.id)).scalar_one())
            publish(written, final)
            published = True
            connection.commit()
    except DBAPIError as exc:
        if published:
            final.unlink(missing_ok=True)
        raise StoreError(f"nothing archived from the gpuaas database at {redact_url(store.url)}: "
                         f"{in_words(exc)}") from exc
    except BaseException:
        if published:
            final.unlink(missing_ok=True)
        raise
    return audit_id


def _record(written: Written, final: Path, plan: ArchivePlan) -> dict[str, Any]:
    """The audit row that says what left the log: how many rows, which ids and times, where to, their SHA-256."""
    where = str(final.resolve())
    return {
        "created_at": utc_now(), "flow": ARCHIVE_FLOW, "action": ARCHIVE_ACTION, "kind": "AuditLog",
        "namespace": None, "name": "audit_log", "mode": "apply", "outcome": Outcome.applied.value,
        "reason": (f"archived {written.rows:,} audit entries from before {plan.cutoff:%Y-%m-%d %H:%M} UTC "
                   f"(ids {plan.first_id} to {plan.last_id}) to {where}, sha256 {written.sha256}")[:2000],
        "evidence": {**plan.as_dict(), "file": where, "sha256": written.sha256, "format": FORMAT,
                     "version": VERSION},
        "before": None, "after": None, "idempotency_key": None, "refers_to": None, "decision": None,
    }
