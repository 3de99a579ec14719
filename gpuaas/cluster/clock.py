"""Simulated time for the embedded cluster.

Everything in the embedded cluster (object timestamps, Kueue's FIFO order, telemetry
timestamps, OpenCost windows) reads one injected clock, so a run is reproducible and a
test can move time by hand instead of sleeping.

* ``ManualClock``: time moves only when ``advance`` is called (tests, history replay).
* ``SimClock``: sim time runs ``speed`` times faster than wall time, but can be paused so
  that the runner replays history first (``advance`` while paused) and then ``resume``\\ s.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

__all__ = ["MAX_HISTORY", "MAX_SPEED", "Clock", "ManualClock", "SimClock", "utc"]

MAX_HISTORY = timedelta(days=60)
"""The longest history an embedded cluster backfills: its Prometheus keeps this much (its retention), so older
samples would be dropped as soon as it starts."""

MAX_SPEED = 86400.0
"""The fastest ``SimClock``, a simulated day per wall second: the live loop steps every 2 wall seconds, so a
faster clock would jump days per step. Even at this speed the simulated date reaches the year 9999, the last a
date can have, after some 34 days of running; the cluster then stops, saying so."""


def utc(value: datetime) -> datetime:
    """``value`` as an aware UTC datetime; naive values are taken to be UTC already."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@runtime_checkable
class Clock(Protocol):
    """What the embedded cluster needs from time: the current instant, and a way to move it."""

    def now(self) -> datetime: ...

    def advance(self, dt: timedelta) -> None: ...


class ManualClock:
    """A clock that stands still until told to move; the clock for tests."""

    def __init__(self, start: datetime) -> None:
        self._now = utc(start)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, dt: timedelta) -> None:
        if dt < timedelta(0):
            raise ValueError(f"a clock cannot go back ({dt})")
        with self._lock:
            self._now += dt

    def __repr__(self) -> str:
        return f"ManualClock({self._now.isoformat()})"


class SimClock:
    """Sim time = ``start`` + ``speed`` x wall time elapsed since ``resume`` (plus any ``advance``).

    It starts paused when ``paused=True``, so history can be replayed at full CPU speed
    before live time starts flowing.
    """

    def __init__(self, start: datetime, speed: float = 1.0, *, paused: bool = False) -> None:
        if not 0 < speed <= MAX_SPEED:  # nan too
            raise ValueError(f"speed must be > 0 and at most {MAX_SPEED:g}, got {speed}")
        self.speed = speed
        self._lock = threading.Lock()
        self._base = utc(start)
        self._wall: float | None = None if paused else time.monotonic()

    def now(self) -> datetime:
        with self._lock:
            return self._now_locked()

    def _now_locked(self) -> datetime:
        if self._wall is None:
            return self._base
        return self._base + timedelta(seconds=(time.monotonic() - self._wall) * self.speed)

    @property
    def paused(self) -> bool:
        return self._wall is None

    def advance(self, dt: timedelta) -> None:
        if dt < timedelta(0):
            raise ValueError(f"a clock cannot go back ({dt})")
        with self._lock:
            self._base += dt

    def pause(self) -> None:
        with self._lock:
            self._base = self._now_locked()
            self._wall = None

    def resume(self) -> None:
        with self._lock:
            if self._wall is None:
                self._wall = time.monotonic()

    def __repr__(self) -> str:
        return f"SimClock({self.now().isoformat()}, speed={self.speed})"
