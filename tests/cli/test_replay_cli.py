"""``gpuaas replay reclaim`` in-process: JSON keys and numbers, table, malformed input."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import cast

import pytest
from typer.testing import CliRunner

from gpuaas.cli import _backtest, replay_cmd
from gpuaas.cli.app import app as main_app
from gpuaas.errors import ConfigError
from gpuaas.settings import GpuaasSettings

TRACE = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "traces" / "alibaba-genai-2026"
PARTS = [TRACE / "pod_gpu_duty_cycle_part1.csv", TRACE / "pod_gpu_duty_cycle_part2.csv"]
KEYS = {"pods", "observed_gpu_hours", "reclaimed_gpu_hours", "wakeups", "bound_gpu_hours"}

runner = CliRunner()


@pytest.fixture(scope="module")
def util_args() -> list[str]:
    if not all(p.is_file() for p in PARTS):
        pytest.fail(f"trace fixture missing under {TRACE}")
    return [arg for p in PARTS for arg in ("--utilization", str(p))]


def test_fixed_json_reproduces_the_bound(util_args: list[str]) -> None:
    result = runner.invoke(main_app, ["replay", "reclaim", *util_args, "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert KEYS <= data.keys()
    assert data["policy"] == "fixed" and data["pods"] == 96
    assert data["reclaimed_gpu_hours"] == data["bound_gpu_hours"]
    assert data["qps_samples_while_down"] is None


def test_adaptive_json_via_main_app_with_qps(util_args: list[str]) -> None:
    args = ["replay", "reclaim", *util_args, "--qps", str(TRACE / "qps.csv"), "--adaptive", "--format", "json"]
    result = runner.invoke(main_app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert KEYS <= data.keys() and KEYS <= data["fixed"].keys()
    assert data["reclaimed_gpu_hours"] > data["fixed"]["reclaimed_gpu_hours"]
    assert data["wakeups"] <= data["fixed"]["wakeups"]
    assert data["bound_gpu_hours"] == data["fixed"]["reclaimed_gpu_hours"]
    assert isinstance(data["qps_samples_while_down"], int)


def test_table_lists_both_rows(util_args: list[str]) -> None:
    result = runner.invoke(main_app, ["replay", "reclaim", *util_args, "--adaptive"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "fixed" in result.stdout and "adaptive" in result.stdout


def test_malformed_csv_exits_1_naming_file_and_column(tmp_path: Path) -> None:
    bad = tmp_path / "broken.csv"
    bad.write_text("value,timestamp_anon,container_ip\n12,1662858720,p\nbusy,1662858780,p\n")
    result = runner.invoke(main_app, ["replay", "reclaim", "--utilization", str(bad), "--format", "json"])
    assert result.exit_code == 1
    assert "broken.csv" in result.stderr and "value" in result.stderr and "line 3" in result.stderr
    assert result.stdout == ""


def test_missing_file_exits_1(tmp_path: Path) -> None:
    result = runner.invoke(main_app, ["replay", "reclaim", "--utilization", str(tmp_path / "nope.csv")])
    assert result.exit_code == 1
    assert "nope.csv: no such file" in result.stderr


def test_budget_replays_the_refits_of_the_live_flow(util_args: list[str]) -> None:
    # The trace runs from 01:12 UTC to 00:00 the next day: with a daily refit no boundary before the
    # end has history, so the budget's replay is the fixed rule's, as the live flow would be.
    daily = runner.invoke(main_app, ["replay", "reclaim", *util_args, "--budget", "1", "--format", "json"])
    assert daily.exit_code == 0, daily.output
    data = json.loads(daily.stdout)
    assert data["reclaimed_gpu_hours"] == data["fixed"]["reclaimed_gpu_hours"]
    assert "chosen again at 1 refit boundary (24 h apart from 00:00 UTC)" in daily.stderr
    hourly = runner.invoke(main_app, ["replay", "reclaim", *util_args, "--budget", "1", "--refit-hours", "6",
                                      "--format", "json"])
    assert hourly.exit_code == 0, hourly.output
    assert json.loads(hourly.stdout)["reclaimed_gpu_hours"] != data["fixed"]["reclaimed_gpu_hours"]
    assert "chosen again at 4 refit boundaries (6 h apart" in hourly.stderr
    zero = runner.invoke(main_app, ["replay", "reclaim", *util_args, "--budget", "0"])
    assert zero.exit_code == 2 and zero.stdout == ""
    assert zero.stderr.strip().splitlines() == [
        "error: Invalid value for '--budget': must be above 0 wake-ups per workload per day (got '0'); "
        "see gpuaas replay reclaim --help"]


@pytest.mark.parametrize(("flags", "name"), [(["--budget", "inf"], "--budget"),
                                             (["--budget", "1", "--refit-hours", "1e308"], "--refit-hours"),
                                             (["--budget", "1", "--history-hours", "1000"], "--history-hours")])
def test_an_out_of_range_flag_is_refused_naming_it(util_args: list[str], flags: list[str], name: str) -> None:
    result = runner.invoke(main_app, ["replay", "reclaim", *util_args, *flags])
    assert result.exit_code == 2 and result.stdout == ""
    assert f"Invalid value for '{name}'" in result.stderr and "ValidationError" not in result.output


@pytest.mark.parametrize(("flags", "name"), [(["--since", "2d"], "--since"), (["--namespace", "team-a"], "--namespace")])
def test_a_prometheus_flag_without_prometheus_is_refused(util_args: list[str], flags: list[str], name: str) -> None:
    """Given with a trace CSV, it would be ignored, and the reader would think the replay covered that span."""
    result = runner.invoke(main_app, ["replay", "reclaim", *util_args, *flags])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        f"error: {name}: reads the Prometheus history: give it with --from-prometheus, or leave it out; "
        "see gpuaas replay reclaim --help"]


@pytest.mark.parametrize(("with_csv", "line"), [
    (False, "error: give --utilization CSV(s) or --from-prometheus; see gpuaas replay reclaim --help"),
    (True, "error: give --utilization CSV(s) or --from-prometheus, not both; see gpuaas replay reclaim --help"),
], ids=["neither", "both"])
def test_a_replay_needs_one_source_of_history(util_args: list[str], with_csv: bool, line: str) -> None:
    """Neither a trace nor Prometheus, or both, is how the command was called: a usage error (exit 2)."""
    result = runner.invoke(main_app, ["replay", "reclaim", *(util_args + ["--from-prometheus"] if with_csv else [])])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [line]


@pytest.mark.parametrize(("since", "line"), [
    ("2x", "error: Invalid value for '--since': expected a duration like 2h or 7d or an ISO time (UTC unless it has "
           "an offset) (got '2x'); see gpuaas replay reclaim --help"),
    ("2999-01-01", "error: Invalid value for '--since': must be in the past (got '2999-01-01'); "
                   "see gpuaas replay reclaim --help"),
    # One range query per --chunk-hours of history: 0001-01-01 would be 17.7 million of them.
    *[(since, f"error: Invalid value for '--since': at most 90d back, the longest history a Prometheus is commonly "
              f"set to keep (got '{since}'); see gpuaas replay reclaim --help")
      for since in ("0001-01-01", "100000d", "91d")],
], ids=["not-a-time", "in-the-future", "year-1", "100000-days", "91-days"])
def test_a_bad_since_is_a_usage_error_before_prometheus_is_asked(since: str, line: str) -> None:
    result = runner.invoke(main_app, ["replay", "reclaim", "--from-prometheus", "--since", since])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [line]


def test_ninety_days_back_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bound itself is allowed: the history asked for is the 90 days before now."""
    asked: list[timedelta] = []

    def history(settings: object, start: datetime, end: datetime, **_: object) -> None:
        asked.append(end - start)
        raise ConfigError("stop here")

    monkeypatch.setattr(replay_cmd, "fleet_history", history)
    result = runner.invoke(main_app, ["replay", "reclaim", "--from-prometheus", "--since", "90d"])
    assert result.exit_code == 1 and "stop here" in result.stderr, result.output
    assert asked == [timedelta(days=90)]


def test_the_history_pull_bounds_its_own_span(monkeypatch: pytest.MonkeyPatch) -> None:
    """Called past the command, ``fleet_history`` still refuses a span its range queries could not bound."""
    monkeypatch.setattr(_backtest, "read_fleet_history", lambda *a, **k: pytest.fail("Prometheus was asked"))
    end = datetime(2026, 11, 29, tzinfo=UTC)
    with pytest.raises(ConfigError, match=r"^--since: at most 90d back \(got 2026-08-30"):
        _backtest.fleet_history(cast(GpuaasSettings, None), end - timedelta(days=91), end, namespaces=(),
                                threshold_pct=5.0, chunk_hours=1.0)


def test_a_trace_may_span_two_years_to_the_end_of_the_year_9999(tmp_path: Path) -> None:
    """Both bounds on a duty-cycle CSV's times are allowed, and its reclaims print as dates."""
    last = 253402300799
    trace = tmp_path / "edge.csv"
    trace.write_text("timestamp,pod,value\n" + f"{last - 2 * 365 * 86400},a,50\n"
                     + "".join(f"{t},a,0\n" for t in range(last - 1200, last + 1, 60)))
    result = runner.invoke(main_app, ["replay", "reclaim", "--utilization", str(trace), "--window", "5",
                                      "--format", "json", "--reclaims"])
    assert result.exit_code == 0, result.output
    assert [r["reclaim_at"] for r in json.loads(result.stdout)["reclaims"]] == ["9999-12-31T23:44:59Z"]


_FIXED_HEADLINE = re.compile(
    r"Reclaim replay: the fixed 30-minute window would reclaim (?P<reclaimed>[\d,]+) of (?P<observed>[\d,]+) "
    r"observed GPU-hours on (?P<pods>\d+) pods \(idle at duty cycle <= 5 %\) for (?P<wakeups>\d+) wake-ups; "
    r"the trade at every window: the same command with --frontier\.")


def test_the_first_line_is_the_replay_in_numbers(util_args: list[str]) -> None:
    """Above the table, and on stderr beside the JSON that carries it: its numbers are the JSON's own."""
    table = runner.invoke(main_app, ["replay", "reclaim", *util_args], env={"COLUMNS": "400"})
    assert table.exit_code == 0, table.output
    as_json = runner.invoke(main_app, ["replay", "reclaim", *util_args, "--format", "json"])
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.stdout)
    first = table.stdout.splitlines()[0]
    assert first == data["headline"] == as_json.stderr.splitlines()[0]
    shape = _FIXED_HEADLINE.fullmatch(first)
    assert shape, first
    assert int(shape["reclaimed"].replace(",", "")) == round(data["reclaimed_gpu_hours"])
    assert int(shape["observed"].replace(",", "")) == round(data["observed_gpu_hours"])
    assert (int(shape["pods"]), int(shape["wakeups"])) == (data["pods"], data["wakeups"])


def test_an_adaptive_replay_leads_with_both_rows(util_args: list[str]) -> None:
    result = runner.invoke(main_app, ["replay", "reclaim", *util_args, "--budget", "2", "--refit-hours", "6",
                                      "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    fixed = data["fixed"]
    assert result.stderr.splitlines()[0] == data["headline"] == (
        f"Reclaim replay: the window refit for --budget 2 wake-ups per workload per day (base 30 min) would reclaim "
        f"{data['reclaimed_gpu_hours']:,.0f} of {data['observed_gpu_hours']:,.0f} observed GPU-hours on "
        f"{data['pods']} pods (idle at duty cycle <= 5 %) for {data['wakeups']} wake-ups, against "
        f"{fixed['reclaimed_gpu_hours']:,.0f} for {fixed['wakeups']} wake-ups with the fixed 30-minute window; the "
        "trade at every window: the same command with --frontier.")
    assert "chosen again at 4 refit boundaries" in result.stderr.splitlines()[1]  # the refit note after it


def test_the_table_fits_80_columns_with_its_headers_in_words(util_args: list[str]) -> None:
    result = runner.invoke(main_app, ["replay", "reclaim", *util_args, "--adaptive"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    table = result.stdout.split("Reclaim replay, idle <=")[1]
    assert max(len(line) for line in table.splitlines()) <= 80
    assert "reclaimed" in table and "wake-ups" in table and "reclaimed_gpu_hours" not in table


def test_a_window_of_zero_minutes_is_refused_as_the_policy_refuses_it(util_args: list[str]) -> None:
    """A 0-minute window stops every idle spell as it starts, a rule no policy may hold (``window_minutes`` is
    above 0): the replay would print GPU-hours a deployed reclaim can never save."""
    result = runner.invoke(main_app, ["replay", "reclaim", *util_args, "--window", "0"])
    assert result.exit_code == 2 and result.stdout == ""
    assert "--window must be above 0 minutes" in result.stderr and "Traceback" not in result.output


def test_the_frontier_table_fits_80_columns_leaving_its_diagnostics_out() -> None:
    """Eight columns do not fit 80: the per-workload-day rate and the context's ceiling go first, named under the
    table, and the ratio and the headroom stay."""
    part = TRACE / "pod_gpu_duty_cycle_part1.csv"
    result = runner.invoke(main_app, ["replay", "reclaim", "--utilization", str(part), "--frontier"],
                           env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "headroom" in result.stdout and "vs fixed at" in result.stdout
    assert "(not shown at 80 columns: wake-ups per workload-day, context ceiling; --wide shows them)" in " ".join(
        " ".join(lines).split())
