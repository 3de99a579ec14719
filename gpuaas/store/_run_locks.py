"""The run locks of the store: a named lock with a holder and an expiry, taken by one flow run at a time.

A part of ``Store`` (``Sessions``): the store hands out the sessions.

A lease is counted on the database's clock where the database is shared (PostgreSQL's ``now()``), not on the
worker's: workers whose clocks disagree would otherwise disagree on whether a lease has run out, and one whose
clock is a quarter of an hour ahead would delete a live holder's lock as expired and write beside it. A SQLite file
is shared by the processes of one machine only, whose clock is the one clock there is.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import NamedTuple

from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col

from gpuaas.store._database import Sessions
from gpuaas.store._models import RunLock, as_utc, utc_now

__all__ = ["WRITES_LOCK", "HeldLock", "RunLocks"]

WRITES_LOCK = "cluster-writes"
"""The lock every run that writes to the cluster holds while it writes (``tasks.writes``); ``gpuaas db status``
says who holds it."""


class HeldLock(NamedTuple):
    """Who holds a lock, and until when unless renewed (the database's clock)."""

    holder: str
    expires_at: datetime


class RunLocks(Sessions):
    """Take, renew, read and release the named run locks."""

    @staticmethod
    def _now(session: Session, now: datetime | None) -> datetime:
        """``now`` (a test's instant), else the database's clock where the database is shared, else this host's."""
        if now is not None:
            return as_utc(now)
        if session.get_bind().dialect.name == "postgresql":
            return as_utc(session.execute(select(func.now())).scalar_one())
        return utc_now()

    def acquire_lock(self, name: str, holder: str, ttl: timedelta, now: datetime | None = None) -> bool:
        """Take the named lock unless someone else holds an unexpired one."""
        with self.session() as session:
            now = self._now(session, now)
            session.execute(delete(RunLock).where(col(RunLock.name) == name, col(RunLock.expires_at) < now))
            session.add(RunLock(name=name, holder=holder, acquired_at=now, expires_at=now + ttl))
            try:
                session.commit()
            except IntegrityError:
                session.rollback()
                held = session.get(RunLock, name)
                return held is not None and held.holder == holder
        return True

    def renew_lock(self, name: str, holder: str, ttl: timedelta, now: datetime | None = None) -> bool:
        """Extend ``holder``'s unexpired lock to ``now + ttl``; False when it holds it no longer (expired,
        released or taken), so a holder learns it lost the lock rather than write on beside another."""
        with self.session() as session:
            now = self._now(session, now)
            done = session.execute(update(RunLock).where(col(RunLock.name) == name, col(RunLock.holder) == holder,
                                                         col(RunLock.expires_at) >= now)
                                   .values(expires_at=now + ttl))
            session.commit()
            return bool(getattr(done, "rowcount", 0))

    def held_lock(self, name: str, now: datetime | None = None) -> HeldLock | None:
        """Who holds the named lock unexpired, and until when: what a run that has to give up says."""
        with self.session() as session:
            now = self._now(session, now)
            held = session.get(RunLock, name)
            if held is None or as_utc(held.expires_at) < now:
                return None
            return HeldLock(held.holder, as_utc(held.expires_at))

    def lock_holder(self, name: str, now: datetime | None = None) -> str | None:
        """Who holds the named lock unexpired."""
        held = self.held_lock(name, now)
        return held.holder if held is not None else None

    def write_problem(self) -> str | None:
        """Why this database refuses the writes every flow run makes (a user granted SELECT only, a hot standby,
        a transaction read-only by default), in the database's words; None when it takes them. Found by taking a
        lock row in a transaction that is rolled back: nothing is written."""
        from sqlalchemy import insert

        from gpuaas.errors import StoreError

        now = utc_now()
        try:
            with self.session() as session:
                try:
                    session.execute(insert(RunLock).values(name="gpuaas-write-probe", holder="preflight",
                                                           acquired_at=now, expires_at=now))
                finally:
                    session.rollback()
        except StoreError as exc:
            return str(exc)
        return None

    def release_lock(self, name: str, holder: str) -> None:
        with self.session() as session:
            session.execute(delete(RunLock).where(col(RunLock.name) == name, col(RunLock.holder) == holder))
            session.commit()
