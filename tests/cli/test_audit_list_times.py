"""``gpuaas audit list --since/--until``: a time without an offset is UTC, ``--until now`` is the end of a window
as ``gpuaas incident --to`` takes it, an empty answer says which UTC window found nothing, and a date no calendar
has says what is wrong with it in one line."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app
from gpuaas.settings import load_settings
from gpuaas.store import AuditEntry, open_store

runner = CliRunner()
AT = datetime(2026, 11, 29, 2, 30, tzinfo=UTC)


@pytest.fixture()
def one_row() -> None:
    """One audit row at 02:30 UTC."""
    store = open_store(load_settings())
    try:
        with store.session() as session:
            session.add(AuditEntry(created_at=AT, flow="reclaim", action="reclaim", kind="Notebook", namespace="a",
                                   name="nb", mode="dry-run", outcome="planned"))
            session.commit()
    finally:
        store.close()


def _names(*args: str) -> list[object]:
    result = runner.invoke(app, ["audit", "list", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return [e["name"] for e in json.loads(result.stdout)["entries"]]


@pytest.mark.usefixtures("one_row")
def test_a_time_without_an_offset_is_utc() -> None:
    assert _names("--since", "2026-11-29T02:00", "--until", "2026-11-29T03:00") == ["nb"]
    # 02:00 in Berlin is 01:00 UTC, and 03:00 there 02:00 UTC: the row is after that window.
    assert _names("--since", "2026-11-29T02:00+01:00", "--until", "2026-11-29T03:00+01:00") == []


@pytest.mark.usefixtures("one_row")
def test_until_now_is_the_end_of_the_window() -> None:
    assert _names("--since", "2026-11-29T02:00", "--until", "now") == ["nb"]
    assert _names("--since", "2026-11-29T02:00", "--to", "NOW") == ["nb"]


@pytest.mark.usefixtures("one_row")
def test_an_empty_answer_says_the_utc_instants_it_read() -> None:
    result = runner.invoke(app, ["audit", "list", "--since", "2026-11-29T03:00+01:00", "--until", "2026-11-29T02:15"])
    assert result.exit_code == 0, result.output
    assert result.stdout == ("audit log: 0 entries match --since 2026-11-29T03:00+01:00 (2026-11-29 02:00:00 UTC) "
                             "--until 2026-11-29T02:15 (2026-11-29 02:15:00 UTC).\n")


@pytest.mark.parametrize(("option", "value", "why"), [
    ("--since", "2026-02-30", "day is out of range for month"),
    ("--since", "2026-02-29T10:00", "day is out of range for month"),  # 2026 is no leap year
    ("--until", "2026-13-01", "month must be in 1..12"),
    ("--until", "2026-11-29T24:30", "hour must be in 0..23"),
    ("--since", "2026-11-29T02:00+25:00", "the offset from UTC must be less than 24 hours"),
])
def test_a_time_no_calendar_has_is_one_line_saying_why(option: str, value: str, why: str) -> None:
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    result = runner.invoke(app, ["audit", "list", option, value])
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"error: Invalid value for '{option}'") and why in line and f"(got {value!r})" in line
    assert "Traceback" not in result.output


def test_now_is_no_start() -> None:
    """``now`` ends a window; as its start it would find nothing ever, so it is refused naming the forms."""
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    result = runner.invoke(app, ["audit", "list", "--since", "now"])
    assert result.exit_code == 2 and "an ISO time (UTC unless it has an offset)" in result.stderr
