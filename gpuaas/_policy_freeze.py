"""Change freezes: stretches of time in which the flows that write run as dry-run, whatever their mode.

Platform teams freeze changes over a holiday, a launch or a weekend. A policy that says
``mode: apply`` should not need editing twice around each one, and a scheduled run should not be
the one change made during it. A freeze is either one stretch (``start`` to ``end``) or a recurring
one (a five-field cron ``schedule`` that starts it, and ``duration_minutes``, read in ``timezone``),
the way Karpenter's disruption budgets and Argo CD's sync windows are written. Both are read on the local
clock, so that a weekend is Friday 16:00 to Monday 08:00 there whatever the clocks did; whether a freeze
is on is decided in absolute time, so that it never switches off inside the window it announced, the
nights the clocks change included.

While a freeze names a flow, that flow decides and audits as in dry-run and writes nothing new,
an explicit ``--apply`` included. A freeze that names ``tenants`` (a team's launch) holds back only
what is theirs: reclaim does not stop their workloads, deadlines does not hold or demote them, and
rebalance leaves their ClusterQueues' quota where it is; the rest of the fleet runs in its mode. What only restores a prior state still happens: ``undo``, and the
deadlines flow's release of its own holds when their time comes (a freeze must not keep a Workload
held past its planned start). The functions here are pure: the instant is an argument.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from functools import lru_cache
from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError
from pydantic import AfterValidator, AwareDatetime, BeforeValidator, Field, model_validator

from gpuaas._policy_model import _Model

__all__ = ["HELD_BACK", "Freeze", "FreezeOn", "WritingFlow", "freeze_on", "freezes_on", "freezes_phrase", "next_freeze",
           "tenant_freezes", "unknown_freeze_tenant"]

_MAX_EXTENSIONS = 400
"""How many back-to-back recurrences ``until`` follows (a freeze every day for a day is on for a year)."""


class WritingFlow(StrEnum):
    """The flows that write to the cluster, the ones a freeze holds back."""

    reclaim = "reclaim"
    rebalance = "rebalance"
    deadlines = "deadlines"


def _cron(expr: str) -> str:
    fields = expr.split()
    if len(fields) != 5:
        raise ValueError(f"{expr!r} is not a cron schedule of five fields (minute hour day-of-month month day-of-week)")
    try:
        CronSim(expr, datetime(2000, 1, 1, tzinfo=UTC))
    except CronSimError as exc:
        raise ValueError(f"{expr!r} is not a cron schedule: {exc}") from None
    return " ".join(fields)


def _zone(name: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{name!r} is not an IANA time zone (e.g. UTC, Europe/Berlin, America/New_York)") from None
    return name


def _in_utc(at: datetime) -> datetime:
    """Every freeze is compared and said in UTC: an instant UTC cannot hold (``9999-12-31T23:59:59-12:00`` is
    in the year 10000) would pass here and fail every run that reads the policy."""
    try:
        at.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{at.isoformat()} is outside what UTC can hold (years 1 to 9999)") from None
    return at


def _not_a_number(at: object) -> object:
    """An instant is written as a date and time: pydantic would read a number as seconds since 1970, so
    ``20261220`` (a date without its dashes) would be a day in August 1970, and the freeze on ever since."""
    if isinstance(at, int | float):
        raise ValueError(f"{str(at).lower()} is not a date and time: write one with a time zone, "
                         "e.g. 2026-12-20T00:00:00Z")
    return at


Instant = Annotated[AwareDatetime, BeforeValidator(_not_a_number), AfterValidator(_in_utc)]


class Freeze(_Model):
    """One change freeze: a stretch (``start``, ``end``) or a recurring one (``schedule``, ``duration_minutes``)."""

    name: Annotated[str, Field(min_length=1, max_length=63)]
    """Said in every headline and log line of a run it holds back (``year-end``, ``weekend``)."""
    start: Instant | None = None
    """Its beginning, with a time zone (``2026-12-20T00:00:00Z``)."""
    end: Instant | None = None
    """Its end (not included)."""
    schedule: Annotated[str, AfterValidator(_cron)] | None = None
    """A cron schedule of five fields that starts it each time (``0 16 * * fri``: Fridays at 16:00)."""
    duration_minutes: Annotated[float, Field(gt=0, le=31 * 24 * 60)] | None = None
    """How long each recurrence lasts, in minutes on the clock of ``timezone`` (``3840``: Friday 16:00 to Monday
    08:00 there, on the weekends the clocks change too)."""
    timezone: Annotated[str, AfterValidator(_zone)] = "UTC"
    """The zone the schedule and the duration are read in, daylight saving included."""
    flows: list[WritingFlow] = Field(default_factory=lambda: list(WritingFlow), min_length=1)
    """The flows it holds back; by default all three that write."""
    tenants: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    """The tenants of the policy it holds back: their workloads and their ClusterQueues' quota; empty, the
    whole fleet."""

    @model_validator(mode="after")
    def _one_form(self) -> Freeze:
        stretch = (self.start is not None, self.end is not None)
        recurring = (self.schedule is not None, self.duration_minutes is not None)
        if any(stretch) and any(recurring):
            raise ValueError("a freeze is either start and end, or schedule and duration_minutes, not both")
        if any(stretch) and not all(stretch):
            raise ValueError(f"{'end' if self.start else 'start'} is missing: a stretch needs both start and end")
        if any(recurring) and not all(recurring):
            raise ValueError(f"{'duration_minutes' if self.schedule else 'schedule'} is missing: a recurring "
                             "freeze needs both schedule and duration_minutes")
        if not any(stretch) and not any(recurring):
            raise ValueError("give start and end, or schedule and duration_minutes")
        if self.start is not None and self.end is not None and self.end <= self.start:
            raise ValueError(f"end {self.end.isoformat()} is not after start {self.start.isoformat()}")
        return self

    def last_start(self, now: datetime) -> datetime | None:
        """The latest start at or before ``now`` (None when it has not started yet), in UTC for a schedule."""
        if self.start is not None:
            return self.start if self.start <= now else None
        return _last_start(str(self.schedule), self.timezone, now)

    def first_start_after(self, now: datetime) -> datetime | None:
        """The earliest start after ``now`` (None for a stretch that has started), in UTC for a schedule: the
        first time of the schedule the local clock has not reached by ``now``."""
        if self.start is not None:
            return self.start if self.start > now else None
        zone = ZoneInfo(self.timezone)
        for wall in CronSim(str(self.schedule), _clock(now, zone)):
            if (at := _reached(wall, zone)) > now:
                return at
        return None

    def end_of(self, started: datetime) -> datetime:
        """When the occurrence that began at ``started`` ends, back-to-back recurrences included."""
        if self.end is not None:
            return self.end
        return _end_of(str(self.schedule), self.timezone, float(self.duration_minutes or 0), started)


def _clock(at: datetime, zone: ZoneInfo) -> datetime:
    """What the clock of ``zone`` reads at ``at``, without a zone: the time a cron schedule is matched on."""
    return at.astimezone(zone).replace(tzinfo=None)


def _reached(wall: datetime, zone: ZoneInfo) -> datetime:
    """The first instant (UTC) the clock of ``zone`` reads ``wall`` or later: when a recurrence due at ``wall``
    starts or ends.

    A time the clocks show twice (they go back) is reached the first time, so a start there happens
    once, as Prefect runs it. A time they skip (they go forward) is reached at the jump, the first
    instant after the gap, so a freeze due to start there is not dropped and covers what is left of
    its window, and one due to end there ends when the clock passes its end.
    """
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)  # the first pass of a repeated time
    if _clock(first, zone) == wall:
        return first
    # Skipped: the jump lies between the readings before and after the gap, both whole seconds apart from it.
    before = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    low, high = math.floor(min(first, before).timestamp()), math.ceil(max(first, before).timestamp())
    while high - low > 1:  # the clock reads less than wall at low, wall or more at high
        middle = (low + high) // 2
        if _clock(datetime.fromtimestamp(middle, UTC), zone) >= wall:
            high = middle
        else:
            low = middle
    return datetime.fromtimestamp(high, UTC)


def _last_start(schedule: str, timezone: str, now: datetime) -> datetime | None:
    """The latest start of a recurring freeze at or before ``now``, found in absolute time.

    Not by a search back from the local clock's reading: in the hour the clocks repeat, that reading
    is earlier than times already passed, and the search would miss the start of this very night.
    Every time of the schedule up to the reading has been reached, so the latest of those is a safe
    point; the times after it are followed forward while the clock has reached them by ``now``.
    """
    zone = ZoneInfo(timezone)
    reading = _clock(now, zone)
    safe = next(iter(CronSim(schedule, reading.replace(microsecond=0) + timedelta(seconds=1), reverse=True)), None)
    latest = None if safe is None else _reached(safe, zone)
    for wall in CronSim(schedule, reading if safe is None else safe):
        at = _reached(wall, zone)
        if at > now:
            break
        latest = at
    return latest


def _end_of_one(timezone: str, minutes: float, started: datetime) -> datetime:
    """When the one recurrence that began at ``started`` ends: ``minutes`` later on the local clock, so that
    Friday 16:00 plus 3840 minutes is Monday 08:00 there whether or not the clocks changed over the weekend."""
    zone = ZoneInfo(timezone)
    return _reached(_clock(started, zone) + timedelta(minutes=minutes), zone)


@lru_cache(maxsize=256)
def _end_of(schedule: str, timezone: str, minutes: float, started: datetime) -> datetime:
    """When the recurrence that began at ``started`` ends, back-to-back recurrences included.

    A start that comes later ends no sooner (both are read on one clock that only moves on), so the
    latest start by the end found so far carries the freeze furthest: follow it until none does.
    Remembered, as every run and every collect while a freeze is on asks for the same start's end.
    """
    until = _end_of_one(timezone, minutes, started)
    for _ in range(_MAX_EXTENSIONS):
        latest = _last_start(schedule, timezone, until)
        if latest is None or (further := _end_of_one(timezone, minutes, latest)) <= until:
            break
        until = further
    return until


def _utc(at: datetime) -> str:
    """An instant as every freeze line writes it: ``2027-01-04 00:00 UTC``."""
    return f"{at.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


@dataclass(frozen=True)
class FreezeOn:
    """A freeze that holds a flow back now, and until when; ``tenant`` when it holds back one tenant only."""

    name: str
    until: datetime
    tenant: str | None = None

    def __str__(self) -> str:
        """How a held-back run's headline names it: ``change freeze year-end until 2027-01-04 00:00 UTC``, or
        for one tenant ``change freeze launch of tenant team-a until ...``."""
        of = f" of tenant {self.tenant}" if self.tenant else ""
        return f"change freeze {self.name}{of} until {_utc(self.until)}"


def unknown_freeze_tenant(freezes: Sequence[Freeze], tenants: Sequence[str]) -> tuple[str, str] | None:
    """(field, message) of the first tenant a freeze names that ``tenants`` lacks, or None: a freeze of no tenant
    the policy knows would hold back nothing, so a typo must not read as a freeze."""
    for i, freeze in enumerate(freezes):
        for j, tenant in enumerate(freeze.tenants):
            if tenant not in tenants:
                return (f"freezes[{i}].tenants[{j}]", f"{tenant!r} is not a tenant of the policy ("
                        + (f"tenants: {', '.join(tenants)})" if tenants else "it defines none)"))
    return None


HELD_BACK = "held back by the "
"""How the reason of what a tenant's change freeze held back begins (``str(FreezeOn)`` follows)."""


def _on(freezes: Sequence[Freeze], flow: WritingFlow, now: datetime) -> list[tuple[Freeze, datetime]]:
    """Each freeze that names ``flow`` and is on at ``now``, with when it ends."""
    now = now if now.tzinfo else now.replace(tzinfo=UTC)
    on = []
    for freeze in freezes:
        if flow not in freeze.flows:
            continue
        started = freeze.last_start(now)
        if started is not None and now < (until := freeze.end_of(started)):
            on.append((freeze, until))
    return on


def freezes_on(freezes: Sequence[Freeze], flow: WritingFlow, now: datetime) -> list[FreezeOn]:
    """Every freeze that holds ``flow`` back at ``now``: one for the whole fleet, one per tenant for a freeze of
    some tenants (what a dashboard lists; a run names the one that ends last, :func:`freeze_on`)."""
    return [FreezeOn(f.name, until, tenant) for f, until in _on(freezes, flow, now)
            for tenant in (f.tenants if f.tenants else [None])]


def freeze_on(freezes: Sequence[Freeze], flow: WritingFlow, now: datetime) -> FreezeOn | None:
    """The whole-fleet freeze that holds ``flow`` back at ``now`` (the one that ends last when several do), or
    None. A freeze of some tenants is :func:`tenant_freezes`'."""
    on = [FreezeOn(f.name, until) for f, until in _on(freezes, flow, now) if not f.tenants]
    return max(on, key=lambda f: f.until, default=None)


def tenant_freezes(freezes: Sequence[Freeze], flow: WritingFlow, now: datetime) -> dict[str, FreezeOn]:
    """Tenant -> the freeze of named tenants that holds back ``flow``'s changes to what is theirs at ``now`` (the
    one that ends last when several do)."""
    out: dict[str, FreezeOn] = {}
    for freeze, until in _on(freezes, flow, now):
        for tenant in freeze.tenants:
            if tenant not in out or until > out[tenant].until:
                out[tenant] = FreezeOn(freeze.name, until, tenant)
    return out


def next_freeze(freezes: Sequence[Freeze], now: datetime) -> tuple[Freeze, datetime] | None:
    """The freeze that starts next after ``now``, and when: what ``gpuaas config check`` announces."""
    coming = [(f, start) for f in freezes if (start := f.first_start_after(now)) is not None]
    return min(coming, key=lambda pair: pair[1], default=None)


def freezes_phrase(freezes: Sequence[Freeze], now: datetime) -> str:
    """What ``gpuaas config check`` says of the freezes: how many, the one on now, or the next one."""
    if not freezes:
        return "no change freeze"
    said = f"{len(freezes)} change freeze{'s' if len(freezes) > 1 else ''}"
    on = [found for flow in WritingFlow if (found := freeze_on(freezes, flow, now))]
    on += [found for flow in WritingFlow for found in tenant_freezes(freezes, flow, now).values()]
    if on:
        last = max(on, key=lambda f: f.until)
        return f"{said}, {_named(freezes, last.name)} on now until {_utc(last.until)}"
    coming = next_freeze(freezes, now)
    if coming is None:
        return f"{said}, all past"
    return f"{said}, the next: {_named(freezes, coming[0].name)} from {_utc(coming[1])}"


def _named(freezes: Sequence[Freeze], name: str) -> str:
    """``launch (tenants team-a, team-b)`` for a freeze of some tenants; the whole fleet's, its name alone."""
    tenants = next((f.tenants for f in freezes if f.name == name), [])
    return f"{name} ({'tenant' if len(tenants) == 1 else 'tenants'} {', '.join(tenants)})" if tenants else name
