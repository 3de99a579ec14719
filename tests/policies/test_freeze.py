"""Change freezes: when one holds a writing flow back, until when, and what a held-back run says.

The recurring case is checked against a brute force that knows nothing of cron libraries: a daily
or weekly start at a fixed minute, matched minute by minute, and a freeze is on at an instant when
some start lies within ``duration`` before it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpuaas.cli.app import app
from gpuaas.errors import ConfigError
from gpuaas.policy import Freeze, Mode, Policy, WritingFlow, parse_policy
from gpuaas.policy import freeze_on as on_at
from reports import frozen_lead

YEAR_END = {"name": "year-end", "start": "2026-12-20T00:00:00Z", "end": "2027-01-04T00:00:00Z"}


def _policy(*freezes: dict[str, object], **modes: str) -> Policy:
    return parse_policy({"freezes": list(freezes), **{flow: {"mode": mode} for flow, mode in modes.items()}})


def test_a_stretch_is_on_from_its_start_to_just_before_its_end() -> None:
    policy = _policy(YEAR_END)
    start, end = datetime(2026, 12, 20, tzinfo=UTC), datetime(2027, 1, 4, tzinfo=UTC)
    assert on_at(policy.freezes, WritingFlow.reclaim, start - timedelta(seconds=1)) is None
    assert on_at(policy.freezes, WritingFlow.reclaim, start).until == end  # type: ignore[union-attr]
    assert on_at(policy.freezes, WritingFlow.deadlines, end - timedelta(seconds=1)).name == "year-end"  # type: ignore[union-attr]
    assert on_at(policy.freezes, WritingFlow.rebalance, end) is None


def test_a_freeze_holds_back_only_the_flows_it_names() -> None:
    policy = _policy({**YEAR_END, "flows": ["rebalance"]})
    at = datetime(2026, 12, 24, 12, tzinfo=UTC)
    assert on_at(policy.freezes, WritingFlow.rebalance, at) is not None
    assert on_at(policy.freezes, WritingFlow.reclaim, at) is None
    assert on_at(policy.freezes, WritingFlow.deadlines, at) is None


def test_of_two_freezes_on_at_once_the_one_that_ends_last_is_named() -> None:
    long = {"name": "launch", "start": "2026-12-22T00:00:00Z", "end": "2027-01-10T00:00:00Z"}
    found = on_at(_policy(YEAR_END, long).freezes, WritingFlow.reclaim, datetime(2026, 12, 24, tzinfo=UTC))
    assert found is not None and found.name == "launch" and found.until == datetime(2027, 1, 10, tzinfo=UTC)


def test_the_run_mode_is_dry_run_while_frozen_even_when_the_operator_asks_to_apply() -> None:
    policy = _policy(YEAR_END, reclaim="apply")
    inside, outside = datetime(2026, 12, 24, tzinfo=UTC), datetime(2027, 1, 5, tzinfo=UTC)
    assert policy.run_mode(WritingFlow.reclaim, False, outside) == (Mode.apply, None)
    mode, frozen = policy.run_mode(WritingFlow.reclaim, False, inside)
    assert mode is Mode.dry_run and frozen is not None and frozen.name == "year-end"
    mode, frozen = policy.run_mode(WritingFlow.rebalance, True, inside)  # --apply by hand
    assert mode is Mode.dry_run and frozen is not None
    # A flow in dry-run is told of the freeze too (its KEDA signal is withdrawn, its headline names it).
    mode, frozen = policy.run_mode(WritingFlow.rebalance, False, inside)
    assert mode is Mode.dry_run and frozen is not None
    assert policy.run_mode(WritingFlow.rebalance, False, outside) == (Mode.dry_run, None)
    assert policy.run_mode(WritingFlow.deadlines, True, outside) == (Mode.apply, None)


def _brute_on(minute: int, hour: int, weekday: int | None, duration: timedelta, now: datetime) -> datetime | None:
    """The end of the freeze on at ``now`` (UTC, whole minutes), or None: starts matched minute by minute."""
    first = now - duration
    starts = [t for k in range(2 * int(duration.total_seconds() // 60) + 2)
              if (t := first + timedelta(minutes=k)).minute == minute and t.hour == hour
              and (weekday is None or t.weekday() == weekday)]

    def covered(t: datetime) -> bool:
        return any(s <= t < s + duration for s in starts)

    if not covered(now):
        return None
    t = now
    while covered(t):
        t += timedelta(minutes=1)
    return t


@settings(max_examples=40, deadline=None)
@given(minute=st.integers(0, 59), hour=st.integers(0, 23), weekday=st.none() | st.integers(0, 6),
       duration_minutes=st.integers(1, 3 * 24 * 60), offset_minutes=st.integers(0, 14 * 24 * 60))
def test_a_recurring_freeze_matches_a_brute_force(minute: int, hour: int, weekday: int | None,
                                                  duration_minutes: int, offset_minutes: int) -> None:
    """Starts at most daily and freezes shorter than a day apart (back to back: the test below)."""
    if weekday is None:
        duration_minutes = duration_minutes % (24 * 60 - 1) + 1
    cron_dow = "*" if weekday is None else str((weekday + 1) % 7)  # cron: 0 is Sunday; Python: 0 is Monday
    freeze = Freeze(name="f", schedule=f"{minute} {hour} * * {cron_dow}", duration_minutes=duration_minutes)
    now = datetime(2026, 11, 30, tzinfo=UTC) + timedelta(minutes=offset_minutes)
    expected = _brute_on(minute, hour, weekday, timedelta(minutes=duration_minutes), now)
    found = on_at([freeze], WritingFlow.reclaim, now)
    assert (found.until if found else None) == expected
    # Between minutes too: the instant a start is due is inside, the instant its duration ends is not.
    later = now + timedelta(seconds=30)
    found = on_at([freeze], WritingFlow.reclaim, later)
    assert (found is not None) == (expected is not None and later < expected)


def test_a_weekend_freeze_follows_its_time_zone_across_daylight_saving() -> None:
    weekend = Freeze(name="weekend", schedule="0 16 * * fri", duration_minutes=64 * 60, timezone="Europe/Berlin")
    berlin = ZoneInfo("Europe/Berlin")
    for friday in (datetime(2026, 7, 3, tzinfo=berlin), datetime(2026, 12, 4, tzinfo=berlin)):  # CEST, CET
        opens = friday.replace(hour=16)
        assert on_at([weekend], WritingFlow.reclaim, (opens - timedelta(minutes=1)).astimezone(UTC)) is None
        found = on_at([weekend], WritingFlow.reclaim, opens.astimezone(UTC))
        assert found is not None and found.until == opens + timedelta(days=2, hours=16)  # Monday 08:00 there
        assert on_at([weekend], WritingFlow.reclaim, (found.until - timedelta(seconds=1)).astimezone(UTC))
        assert on_at([weekend], WritingFlow.reclaim, found.until.astimezone(UTC)) is None
    # The same wall-clock hour is a different UTC hour in summer and in winter.
    assert on_at([weekend], WritingFlow.reclaim, datetime(2026, 7, 3, 14, 30, tzinfo=UTC)) is not None
    assert on_at([weekend], WritingFlow.reclaim, datetime(2026, 12, 4, 14, 30, tzinfo=UTC)) is None


def test_back_to_back_recurrences_are_one_freeze_until_the_last_ends() -> None:
    nightly = Freeze(name="nights", schedule="0 0 * * *", duration_minutes=25 * 60)  # overlaps the next night
    found = on_at([nightly], WritingFlow.reclaim, datetime(2026, 12, 1, 12, tzinfo=UTC))
    assert found is not None and found.until > datetime(2027, 12, 1, tzinfo=UTC)  # a year of nights, at least


def test_the_headline_names_the_freeze_in_place_of_the_hint_to_apply() -> None:
    from reports.rebalance import first_line

    frozen = on_at(_policy(YEAR_END).freezes, WritingFlow.rebalance, datetime(2026, 12, 24, tzinfo=UTC))
    assert frozen_lead(frozen) == "Change freeze year-end until 2027-01-04 00:00 UTC: dry-run, "
    assert frozen_lead(None) == "Dry-run: "
    # with nothing to do, the freeze is still said: an operator who passed --apply must learn it was overridden
    assert first_line([], "dry-run", None, frozen) == (
        "Change freeze year-end until 2027-01-04 00:00 UTC: dry-run, nothing to rebalance: no cohort with GPU quota.")
    assert first_line([], "dry-run", None, None) == "Nothing to rebalance: no cohort with GPU quota."


BAD = {
    "no time zone": ({"name": "x", "start": "2026-12-20T00:00:00", "end": "2027-01-04T00:00:00Z"},
                     "freezes[0].start: Input should have timezone info"),
    "end before start": ({"name": "x", "start": "2027-01-04T00:00:00Z", "end": "2026-12-20T00:00:00Z"},
                         "freezes[0]: end 2026-12-20T00:00:00+00:00 is not after start 2027-01-04T00:00:00+00:00"),
    "both forms": ({**YEAR_END, "schedule": "0 16 * * fri", "duration_minutes": 60},
                   "freezes[0]: a freeze is either start and end, or schedule and duration_minutes, not both"),
    "no end": ({"name": "x", "start": "2026-12-20T00:00:00Z"},
               "freezes[0]: end is missing: a stretch needs both start and end"),
    "no duration": ({"name": "x", "schedule": "0 16 * * fri"},
                    "freezes[0]: duration_minutes is missing: a recurring freeze needs both"),
    "neither": ({"name": "x"}, "freezes[0]: give start and end, or schedule and duration_minutes"),
    "six fields": ({"name": "x", "schedule": "0 0 16 * * fri", "duration_minutes": 60},
                   "freezes[0].schedule: Value error, '0 0 16 * * fri' is not a cron schedule of five fields"),
    "bad minute": ({"name": "x", "schedule": "61 16 * * fri", "duration_minutes": 60},
                   "freezes[0].schedule: Value error, '61 16 * * fri' is not a cron schedule: Bad minute"),
    "bad zone": ({"name": "x", "schedule": "0 16 * * fri", "duration_minutes": 60, "timezone": "Mars/Olympus"},
                 "freezes[0].timezone: Value error, 'Mars/Olympus' is not an IANA time zone"),
    "unknown flow": ({**YEAR_END, "flows": ["cost_report"]}, "freezes[0].flows[0]: Input should be 'reclaim'"),
    "no flow": ({**YEAR_END, "flows": []}, "freezes[0].flows: List should have at least 1 item"),
}


@pytest.mark.parametrize(("freeze", "message"), BAD.values(), ids=BAD.keys())
def test_a_wrong_freeze_is_one_line_naming_the_file_and_field(freeze: dict[str, object], message: str,
                                                              tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump({"freezes": [freeze]}))
    result = CliRunner().invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 1, result.output
    assert f"{path}: {message.replace('Value error, ', '')}" in result.output
    assert "Traceback" not in result.output


def test_two_freezes_of_one_name_are_refused() -> None:
    with pytest.raises(ConfigError, match="freeze 'year-end' is defined twice"):
        _policy(YEAR_END, YEAR_END)


def test_config_check_says_which_freeze_is_on_or_comes_next(tmp_path: Path) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    later = {"name": "launch", "start": (now + timedelta(days=2)).isoformat(),
             "end": (now + timedelta(days=3)).isoformat()}
    on = {"name": "incident", "start": (now - timedelta(hours=1)).isoformat(),
          "end": (now + timedelta(hours=5)).isoformat(), "flows": ["rebalance"]}
    past = {"name": "old", "start": "2020-01-01T00:00:00Z", "end": "2020-01-02T00:00:00Z"}
    path = tmp_path / "policy.yaml"
    for freezes, said in (([], "no change freeze"),
                          ([past], "1 change freeze, all past"),
                          ([past, later], f"2 change freezes, the next: launch from {now + timedelta(days=2):%Y-%m-%d %H:%M} UTC"),
                          ([later, on], f"2 change freezes, incident on now until "
                                        f"{now + timedelta(hours=5):%Y-%m-%d %H:%M} UTC")):
        path.write_text(yaml.safe_dump({"freezes": freezes}))
        result = CliRunner().invoke(app, ["config", "check", str(path)], env={"COLUMNS": "400"})
        assert result.exit_code == 0, result.output
        assert result.stdout.rstrip().endswith(f"deadlines dry-run, 0 tenants, 0 services, {said}"), result.stdout


def test_the_freezes_the_docs_and_the_example_show_are_valid() -> None:
    root = Path(__file__).resolve().parents[2]
    docs = (root / "docs" / "configuration.md").read_text()
    block = docs.split("## Change freezes", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    example = (root / "examples" / "policy.yaml").read_text()
    commented = example.split("# freezes:\n", 1)[1].split("\n\n", 1)[0]
    uncommented = "freezes:\n" + "\n".join(line.removeprefix("#") for line in commented.splitlines())
    for text in (block, uncommented):
        freezes = parse_policy(yaml.safe_load(text) | {"tenants": [{"name": "team-a"}]}).freezes
        assert [f.name for f in freezes] == ["year-end", "weekend", "team-a-launch"]
        assert [f.tenants for f in freezes] == [[], [], ["team-a"]]
        assert freezes[1].flows == [WritingFlow.reclaim, WritingFlow.rebalance] and freezes[1].duration_minutes == 3840
        # Friday 16:00 in Berlin (CET) to Monday 08:00.
        found = on_at(freezes, WritingFlow.reclaim, datetime(2026, 12, 5, 12, tzinfo=UTC))
        assert found is not None and found.until == datetime(2026, 12, 7, 7, tzinfo=UTC)


LAUNCH = {"name": "launch", "start": "2026-12-22T00:00:00Z", "end": "2027-01-10T00:00:00Z", "tenants": ["team-a"]}
TENANTS = [{"name": "team-a", "namespaces": ["team-a"]}, {"name": "team-b", "namespaces": ["team-b"]}]


def test_a_freeze_of_tenants_holds_back_theirs_alone_and_not_the_run() -> None:
    policy = parse_policy({"freezes": [YEAR_END | {"flows": ["rebalance"]}, LAUNCH], "tenants": TENANTS,
                           "reclaim": {"mode": "apply"}})
    at = datetime(2026, 12, 24, tzinfo=UTC)
    assert policy.run_mode(WritingFlow.reclaim, False, at) == (Mode.apply, None)  # the fleet's run still applies
    held = policy.frozen_tenants(WritingFlow.reclaim, at)
    assert list(held) == ["team-a"] and str(held["team-a"]) == (
        "change freeze launch of tenant team-a until 2027-01-10 00:00 UTC")
    assert policy.frozen_tenants(WritingFlow.reclaim, datetime(2027, 1, 10, tzinfo=UTC)) == {}
    assert on_at(policy.freezes, WritingFlow.rebalance, at).name == "year-end"  # type: ignore[union-attr]


def test_of_two_freezes_of_a_tenant_the_one_that_ends_last_is_named() -> None:
    early = LAUNCH | {"name": "demo", "end": "2026-12-28T00:00:00Z", "tenants": ["team-a", "team-b"]}
    held = parse_policy({"freezes": [early, LAUNCH], "tenants": TENANTS}).frozen_tenants(
        WritingFlow.deadlines, datetime(2026, 12, 24, tzinfo=UTC))
    assert {t: (f.name, f.until.day) for t, f in held.items()} == {"team-a": ("launch", 10), "team-b": ("demo", 28)}


def test_a_freeze_of_a_tenant_the_policy_does_not_define_is_refused_by_its_field() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_policy({"freezes": [LAUNCH | {"tenants": ["team-a", "team-z"]}], "tenants": TENANTS}, "policy.yaml")
    assert caught.value.field == "freezes[0].tenants[1]"
    assert str(caught.value) == ("policy.yaml: freezes[0].tenants[1]: 'team-z' is not a tenant of the policy "
                                 "(tenants: team-a, team-b)")


def test_config_check_names_the_tenants_of_a_freeze() -> None:
    policy = parse_policy({"freezes": [LAUNCH | {"tenants": ["team-a", "team-b"]}], "tenants": TENANTS})
    from gpuaas.policy import freezes_phrase

    assert freezes_phrase(policy.freezes, datetime(2026, 12, 24, tzinfo=UTC)) == (
        "1 change freeze, launch (tenants team-a, team-b) on now until 2027-01-10 00:00 UTC")
    assert freezes_phrase(policy.freezes, datetime(2026, 12, 1, tzinfo=UTC)) == (
        "1 change freeze, the next: launch (tenants team-a, team-b) from 2026-12-22 00:00 UTC")


def _pushed(policy: Policy, at: datetime) -> dict[tuple[str, tuple[str, ...]], float]:
    from reports.collect import policy_metrics

    return {(family.name, labels): value for family in policy_metrics(policy, at) for labels, value in family.samples}


def test_the_pushed_figures_say_which_flow_writes_which_freeze_holds_it_back_and_until_when() -> None:
    launch = {"name": "launch", "start": "2026-12-22T00:00:00Z", "end": "2026-12-28T00:00:00Z",
              "flows": ["reclaim"], "tenants": ["team-a"]}
    weekend = {"name": "weekend", "schedule": "0 16 * * fri", "duration_minutes": 3840, "flows": ["rebalance"]}
    policy = parse_policy({"tenants": [{"name": "team-a", "namespaces": ["team-a"]}],
                           "freezes": [YEAR_END, launch, weekend], "reclaim": {"mode": "apply"},
                           "rebalance": {"mode": "apply"}})
    before = datetime(2026, 12, 16, 9, tzinfo=UTC)  # a Wednesday: nothing on, the weekend's freeze next
    assert _pushed(policy, before) == {
        ("gpuaas_flow_apply_mode", ("reclaim",)): 1.0, ("gpuaas_flow_apply_mode", ("rebalance",)): 1.0,
        ("gpuaas_flow_apply_mode", ("deadlines",)): 0.0,
        ("gpuaas_flow_writes_enabled", ("reclaim",)): 1.0, ("gpuaas_flow_writes_enabled", ("rebalance",)): 1.0,
        ("gpuaas_flow_writes_enabled", ("deadlines",)): 0.0,
        ("gpuaas_next_change_freeze_timestamp_seconds", ("weekend",)): datetime(2026, 12, 18, 16, tzinfo=UTC).timestamp(),
    }
    inside = datetime(2026, 12, 26, 12, tzinfo=UTC)  # a Saturday: year-end, the weekend and team-a's launch
    pushed = _pushed(policy, inside)
    assert {k: v for k, v in pushed.items() if k[0] == "gpuaas_flow_writes_enabled"} == {
        ("gpuaas_flow_writes_enabled", (flow,)): 0.0 for flow in ("reclaim", "rebalance", "deadlines")}
    year_end = datetime(2027, 1, 4, tzinfo=UTC).timestamp()
    monday = datetime(2026, 12, 28, 8, tzinfo=UTC).timestamp()  # the weekend's, beside year-end: each freeze on
    assert {k[1]: v for k, v in pushed.items() if k[0] == "gpuaas_change_freeze_end_timestamp_seconds"} == {
        ("reclaim", "year-end", ""): year_end, ("reclaim", "launch", "team-a"): datetime(2026, 12, 28, tzinfo=UTC).timestamp(),
        ("rebalance", "year-end", ""): year_end, ("rebalance", "weekend", ""): monday,
        ("deadlines", "year-end", ""): year_end}
    assert pushed[("gpuaas_next_change_freeze_timestamp_seconds", ("weekend",))] == datetime(
        2027, 1, 1, 16, tzinfo=UTC).timestamp()
