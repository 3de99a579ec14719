"""The run locks of the store: a named lock with a holder and an expiry, taken by one flow run at a time.

A part of ``Store`` (``Sessions``): the store hands out the sessions.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col

from gpuaas.store._database import Sessions
from gpuaas.store._models import RunLock, as_utc, utc_now

__all__ = ["RunLocks"]


class RunLocks(Sessions):
    """Take, renew, read and release the named run locks."""

    def acquire_lock(self, name: str, holder: str, ttl: timedelta, now: datetime | None = None) -> bool:
        """Take the named lock unless someone else holds an unexpired one."""
        now = as_utc(now or utc_now())
        with self.session() as session:
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
        now = as_utc(now or utc_now())
        with self.session() as session:
            done = session.execute(update(RunLock).where(col(RunLock.name) == name, col(RunLock.holder) == holder,
                                                         col(RunLock.expires_at) >= now)
                                   .values(expires_at=now + ttl))
            session.commit()
            return bool(getattr(done, "rowcount", 0))

    def lock_holder(self, name: str, now: datetime | None = None) -> str | None:
        """Who holds the named lock unexpired (for the message of a run that has to give up)."""
        now = as_utc(now or utc_now())
        with self.session() as session:
            held = session.get(RunLock, name)
            return held.holder if held is not None and as_utc(held.expires_at) >= now else None

    def release_lock(self, name: str, holder: str) -> None:
        with self.session() as session:
            session.execute(delete(RunLock).where(col(RunLock.name) == name, col(RunLock.holder) == holder))
            session.commit()
