"""Recurring change freezes on the nights the clocks change: on for the whole window they announce, ended
exactly when they say.

``duration_minutes`` is counted on the local clock of the freeze's ``timezone``; a time of the schedule is
reached the first time that clock reads it or later (once, in the first pass, when the clocks go back; at
the jump when they go forward and skip it). The model below knows nothing of cron libraries or of the
code under test: it reads the local clock minute by minute in UTC and matches the schedule's fields itself.
"""

from __future__ import annotations

import asyncio
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuaas.policy import Freeze, WritingFlow, freeze_on

MINUTE = timedelta(minutes=1)
DAYS = {"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}

NIGHTS = {  # (zone, the UTC day of the change): clocks forward, then back
    ("Europe/Berlin", "forward"): datetime(2026, 3, 29, tzinfo=UTC),
    ("Europe/Berlin", "back"): datetime(2026, 10, 25, tzinfo=UTC),
    ("America/Los_Angeles", "forward"): datetime(2026, 3, 8, tzinfo=UTC),
    ("America/Los_Angeles", "back"): datetime(2026, 11, 1, tzinfo=UTC),
}


def _field(spec: str, low: int, high: int) -> set[int]:
    """The values one cron field of the kinds tested here allows: ``*``, ``*/k``, ``a``, ``a-b``, ``a,b``."""
    out: set[int] = set()
    for part in spec.split(","):
        part = str(DAYS.get(part, part))
        if part.startswith("*"):
            step = int(part[2:]) if "/" in part else 1
            out |= set(range(low, high + 1, step))
        elif "-" in part:
            a, b = (DAYS.get(x, x) for x in part.split("-"))
            out |= set(range(int(a), int(b) + 1))
        else:
            out.add(int(part))
    return out


@dataclass(frozen=True)
class _Model:
    """The freeze as a person reads the policy: starts and ends found by watching the local clock."""

    schedule: str
    minutes: int
    zone: ZoneInfo

    def matches(self) -> Callable[[datetime], bool]:
        minute, hour, _, _, weekday = self.schedule.split()
        minutes, hours, weekdays = _field(minute, 0, 59), _field(hour, 0, 23), _field(weekday, 0, 6)
        return lambda wall: wall.minute in minutes and wall.hour in hours and wall.isoweekday() % 7 in weekdays

    def on(self, first: datetime, count: int) -> list[bool]:
        """Whether the freeze is on at each of ``count`` minutes from ``first`` (UTC); ``first`` lies far
        enough before the minutes asked about that no recurrence started before it reaches them."""
        clock = [(first + k * MINUTE).astimezone(self.zone).replace(tzinfo=None) for k in range(count)]
        highest = list(clock)  # the furthest the clock has read by each minute
        for k in range(1, count):
            highest[k] = max(highest[k - 1], clock[k])
        cover, matches = [0] * (count + 1), self.matches()
        for k in range(1, count):
            wall = highest[k - 1] + MINUTE  # each time of day first reached at minute k starts once, there
            while wall <= clock[k]:
                if matches(wall):
                    end = bisect_left(highest, clock[k] + timedelta(minutes=self.minutes), lo=k)
                    cover[k] += 1
                    cover[min(end, count)] -= 1
                    break  # several times the clocks skip start at one instant, each lasting from its reading
                wall += MINUTE
        on, running = [], 0
        for k in range(count):
            running += cover[k]
            on.append(running > 0)
        return on


def _night(zone: str, day: datetime) -> Iterator[datetime]:
    """Every minute from 20:00 UTC the day before the change to 16:00 UTC the day of it."""
    t = day - timedelta(hours=4)
    while t < day + timedelta(hours=16):
        yield t
        t += MINUTE


CASES = [
    ("30 2 * * *", 120),   # starts in the skipped hour or in the repeated one, in Berlin
    ("0 */2 * * *", 120),  # meant to be on without a break
    ("0 1 * * *", 180),    # ends in or after the hour that changes
    ("30 1 * * *", 60),    # starts in the repeated hour in Los Angeles
    ("45 0 * * *", 75),
    ("0 * * * *", 30),     # hourly, half of each hour
    ("0 22 * * sat", 600),
]


@pytest.mark.parametrize(("zone", "way"), list(NIGHTS), ids=[f"{z}-{w}" for z, w in NIGHTS])
@pytest.mark.parametrize(("schedule", "minutes"), CASES, ids=[f"{s}/{m}" for s, m in CASES])
def test_a_freeze_stays_on_for_the_window_it_announces_and_ends_when_it_says(zone: str, way: str, schedule: str,
                                                                           minutes: int) -> None:
    freeze = Freeze(name="f", schedule=schedule, duration_minutes=minutes, timezone=zone)
    model = _Model(schedule, minutes, ZoneInfo(zone))
    day = NIGHTS[(zone, way)]
    minutes_of_night = list(_night(zone, day))
    lead = 48 * 60  # the model's own clock watching starts two days before
    expected = model.on(minutes_of_night[0] - lead * MINUTE, lead + len(minutes_of_night) + 48 * 60)[lead:]
    horizon = minutes_of_night[0] + len(expected) * MINUTE  # a freeze on past it is followed only so far
    announced: datetime | None = None
    for k, t in enumerate(minutes_of_night):
        found = freeze_on([freeze], WritingFlow.reclaim, t)
        assert (found is not None) == expected[k], (t, found)
        if announced is not None and t < announced:
            assert found is not None, f"off at {t} inside the window to {announced}"
            assert found.until == announced or announced >= horizon, (t, found.until, announced)
        if found is not None:
            end = next((j for j in range(k, len(expected)) if not expected[j]), None)
            if end is None:  # on past the model's last minute (every two hours for two hours: for good)
                assert found.until >= t + (len(expected) - k) * MINUTE
            else:
                assert found.until == t + (end - k) * MINUTE, f"at {t}: says until {found.until}, ends otherwise"
            announced = found.until


def test_the_maintenance_window_of_the_night_the_clocks_go_back_is_one_stretch() -> None:
    """02:30 in Berlin for 120 minutes on the local clock: 02:30 CEST to 04:30 CET, one stretch of three hours."""
    freeze = Freeze(name="nightly", schedule="30 2 * * *", duration_minutes=120, timezone="Europe/Berlin")
    begin, end = datetime(2026, 10, 25, 0, 30, tzinfo=UTC), datetime(2026, 10, 25, 3, 30, tzinfo=UTC)
    assert freeze_on([freeze], WritingFlow.reclaim, begin - timedelta(seconds=1)) is None
    t = begin
    while t < end:  # the hour that repeats, 02:00 to 03:00 CET, included
        found = freeze_on([freeze], WritingFlow.reclaim, t)
        assert found is not None and found.until == end, t
        t += timedelta(minutes=5)
    assert freeze_on([freeze], WritingFlow.reclaim, end) is None


@pytest.mark.parametrize("zone", ["Europe/Berlin", "America/Los_Angeles"])
def test_a_freeze_every_two_hours_for_two_hours_has_no_hole_when_the_clocks_go_forward(zone: str) -> None:
    freeze = Freeze(name="always", schedule="0 */2 * * *", duration_minutes=120, timezone=zone)
    jump = next(t for t in _night(zone, NIGHTS[(zone, "forward")])
                if (t + MINUTE).astimezone(ZoneInfo(zone)).hour - t.astimezone(ZoneInfo(zone)).hour == 2)
    for t in (jump - timedelta(hours=1), jump, jump + MINUTE, jump + timedelta(minutes=30), jump + timedelta(hours=1)):
        assert freeze_on([freeze], WritingFlow.reclaim, t) is not None, t


@pytest.mark.parametrize(("friday", "real_hours"), [(datetime(2026, 3, 27), 63), (datetime(2026, 10, 23), 65)])
def test_the_weekend_freeze_is_friday_16_00_to_monday_08_00_on_the_weekends_the_clocks_change(
        friday: datetime, real_hours: int) -> None:
    berlin = ZoneInfo("Europe/Berlin")
    weekend = Freeze(name="weekend", schedule="0 16 * * fri", duration_minutes=3840, timezone="Europe/Berlin")
    opens = friday.replace(hour=16, tzinfo=berlin)
    found = freeze_on([weekend], WritingFlow.reclaim, opens.astimezone(UTC))
    assert found is not None
    assert found.until.astimezone(berlin).replace(tzinfo=None) == friday + timedelta(days=3, hours=8)
    assert found.until - opens == timedelta(hours=real_hours)


@pytest.mark.parametrize(("zone", "way", "schedule"), [
    ("Europe/Berlin", "forward", "0 2 * * *"), ("Europe/Berlin", "back", "30 2 * * *"),
    ("America/Los_Angeles", "forward", "0 2 * * *"), ("America/Los_Angeles", "back", "30 1 * * *"),
])
def test_a_start_the_clocks_skip_or_repeat_is_when_prefect_runs_that_schedule(zone: str, way: str,
                                                                              schedule: str) -> None:
    """Prefect runs 02:00 on the night the clocks skip it at the jump, 03:00, and a time they repeat once, the
    first time: a freeze starts with the run it is meant to hold back."""
    from prefect.server.schemas.schedules import CronSchedule

    tz = ZoneInfo(zone)
    before = (NIGHTS[(zone, way)] - timedelta(days=1)).astimezone(tz).replace(hour=12)
    freeze = Freeze(name="f", schedule=schedule, duration_minutes=30, timezone=zone)
    dates = asyncio.run(CronSchedule(cron=schedule, timezone=zone).get_dates(n=2, start=before))
    runs = [datetime.fromtimestamp(d.timestamp(), UTC) for d in dates]  # a repeated time equals no other zone's
    assert freeze.first_start_after(before) == runs[0]
    assert freeze.last_start(runs[0] + timedelta(hours=3)) == runs[0]


def test_a_start_the_clocks_skip_begins_at_the_jump_and_lasts_its_minutes_from_there() -> None:
    """02:30 for 60 minutes on the night Berlin goes from 02:00 to 03:00: on from 03:00 to 04:00, the part of
    its window that exists and no less."""
    freeze = Freeze(name="f", schedule="30 2 * * *", duration_minutes=60, timezone="Europe/Berlin")
    jump = datetime(2026, 3, 29, 1, tzinfo=UTC)  # 03:00 CEST
    assert freeze_on([freeze], WritingFlow.reclaim, jump - timedelta(seconds=1)) is None
    found = freeze_on([freeze], WritingFlow.reclaim, jump)
    assert found is not None and found.until == jump + timedelta(hours=1)


# -- the property: on at t iff some start s <= t has t < end(s), and "until" is where that stops --------------

ZONES = ["Europe/Berlin", "America/Los_Angeles", "Australia/Lord_Howe", "America/Santiago", "Europe/London"]
"""Zones with daylight saving: Lord Howe moves its clocks by half an hour, Santiago at midnight."""


def _changes(zone: str) -> list[datetime]:
    """The instants (UTC, whole hours or half hours) the clocks of ``zone`` change in 2026."""
    tz = ZoneInfo(zone)
    t, out = datetime(2026, 1, 1, tzinfo=UTC), []
    while t.year == 2026:
        if (t + timedelta(minutes=30)).astimezone(tz).utcoffset() != t.astimezone(tz).utcoffset():
            out.append(t + timedelta(minutes=30))
        t += timedelta(minutes=30)
    return out


CHANGES = {zone: _changes(zone) for zone in ZONES}

minute_fields = st.one_of(st.integers(0, 59).map(str), st.sampled_from(["*/5", "*/15", "*/30", "0,30", "10,45", "*"]))
hour_fields = st.one_of(st.integers(0, 4).map(str), st.integers(0, 23).map(str),
                        st.sampled_from(["*/2", "*/3", "*/6", "1-3", "0,2", "*"]))
weekday_fields = st.sampled_from(["*", "*", "sun", "sat", "mon-fri", "fri"])


@settings(max_examples=150, deadline=None)
@given(zone=st.sampled_from(ZONES), change=st.integers(0, 1), minute=minute_fields, hour=hour_fields,
       weekday=weekday_fields, minutes=st.integers(30, 36 * 60), offset=st.integers(-36 * 60, 36 * 60),
       seconds=st.sampled_from([0, 0, 30]))
def test_a_freeze_is_on_exactly_when_a_start_before_it_has_not_ended(zone: str, change: int, minute: str, hour: str,
                                                                     weekday: str, minutes: int, offset: int,
                                                                     seconds: int) -> None:
    """Any instant near a change of the clocks: the freeze is on iff a start at or before it has not ended, and
    the end it announces is the first minute none covers."""
    schedule = f"{minute} {hour} * * {weekday}"
    freeze = Freeze(name="f", schedule=schedule, duration_minutes=minutes, timezone=zone)
    at = CHANGES[zone][change] + timedelta(minutes=offset)
    lead, ahead = minutes + 4 * 60, 24 * 60
    on = _Model(schedule, minutes, ZoneInfo(zone)).on(at - lead * MINUTE, lead + ahead)
    found = freeze_on([freeze], WritingFlow.reclaim, at + timedelta(seconds=seconds))
    assert (found is not None) == on[lead]
    if found is not None:
        end = next((k for k in range(lead, lead + ahead) if not on[k]), None)
        if end is None:
            assert found.until >= at + ahead * MINUTE
        else:
            assert found.until == at + (end - lead) * MINUTE
