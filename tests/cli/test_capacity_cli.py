"""``gpuaas capacity``: the answer as JSON and a table, exit 1 on a sweep that never holds or a bad file, 2 on a
bad flag value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app

SWEEP = """rate_rps,replicas,gpus,latency_p50_s,latency_p95_s,latency_p99_s,ttft_p95_s,quality
1,2,4,0.40,0.60,0.70,0.05,1.0
2,2,4,0.45,0.70,0.90,0.06,1.0
4,2,4,0.60,0.95,1.40,0.08,0.995
8,2,4,1.50,3.10,4.00,0.90,0.90
16,2,4,0.50,0.80,0.90,0.10,1.0
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sweep.csv"
    path.write_text(text)
    return path


def test_json_answer_with_forecast(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["capacity", str(_write(tmp_path, SWEEP)), "--slo-quantile", "p95",
                                      "--slo-seconds", "1.0", "--min-quality", "0.99", "--forecast-rps", "9",
                                      "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    # 16 rps passes again, but above the failing 8: the answer stays 4
    assert data["sustainable_rate_rps"] == 4 and data["knee_rate_rps"] == 8
    assert (data["per_replica_rps"], data["per_gpu_rps"]) == (2, 1)
    assert (data["replicas_needed"], data["gpus_needed"]) == (5, 10)


def test_table_and_p99(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["capacity", str(_write(tmp_path, SWEEP)), "--slo-quantile", "p99",
                                      "--slo-seconds", "1.0"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "Sustainable capacity" in result.stdout
    line = next(x for x in result.stdout.splitlines() if "sustainable rate" in x)
    assert "2" in line.split("│")[2]


def test_never_meeting_the_slo_exits_1_and_says_so(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["capacity", str(_write(tmp_path, SWEEP)), "--slo-seconds", "0.5",
                                      "--format", "json"])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["met"] is False
    assert "never meets the SLO" in result.stderr


def test_malformed_sweep_is_one_line_naming_row_and_column(tmp_path: Path) -> None:
    bad = SWEEP.replace("2,2,4,0.45,0.70", "2,2,0,0.45,0.70")
    result = CliRunner().invoke(app, ["capacity", str(_write(tmp_path, bad)), "--slo-seconds", "1"])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [f"error: {tmp_path / 'sweep.csv'}: row 2, column gpus: must be > 0, got 0"]
    assert "Traceback" not in result.output


def test_unknown_quantile_is_a_usage_error_and_a_missing_file_exit_1(tmp_path: Path) -> None:
    path = _write(tmp_path, SWEEP)
    result = CliRunner().invoke(app, ["capacity", str(path), "--slo-quantile", "p90", "--slo-seconds", "1"])
    assert result.exit_code == 2 and result.stderr.strip().splitlines() == [
        "error: Invalid value for '--slo-quantile': unknown quantile 'p90'; expected one of p50, p95, p99; "
        "see gpuaas capacity --help"]
    result = CliRunner().invoke(app, ["capacity", str(tmp_path / "nope.csv"), "--slo-seconds", "1"])
    assert result.exit_code == 1 and "no such file" in result.stderr


@pytest.mark.parametrize(("flags", "message"), [
    (["--forecast-rps", "inf"], "error: Invalid value for '--forecast-rps': must be from 0 to 1,000,000,000 requests "
                                "per second (got 'inf'); see gpuaas capacity --help"),
    (["--min-quality", "2"], "error: Invalid value for '--min-quality': must be within 0..1 (got '2'); "
                             "see gpuaas capacity --help"),
    (["--slo-seconds", "0"], "error: Invalid value for '--slo-seconds': must be above 0 and at most a day (86400) "
                             "(got '0'); see gpuaas capacity --help"),
])
def test_a_bad_flag_is_a_usage_error_naming_the_flag(tmp_path: Path, flags: list[str], message: str) -> None:
    """A value the command refuses is a usage error (exit 2), one line with the value as typed and where help is."""
    args = ["capacity", str(_write(tmp_path, SWEEP)), "--slo-seconds", "1", *flags]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [message]


def test_the_first_line_is_the_answer_in_numbers(tmp_path: Path) -> None:
    """p99 <= 1 s: 0.70 and 0.90 hold at 1 and 2 rps, 1.40 fails at 4 rps; 2 replicas on 4 GPUs."""
    result = CliRunner().invoke(app, ["capacity", str(_write(tmp_path, SWEEP)), "--slo-quantile", "p99",
                                      "--slo-seconds", "1"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == (
        "Capacity: 2 rps sustained at p99 <= 1 s (1 per replica, 0.5 per GPU); 4 rps was the first rate to miss "
        "it; the replicas a demand needs: the same command with --forecast-rps RPS.")
    assert result.stdout.splitlines()[1].strip() == "Measured rates"  # the tables follow


def test_json_carries_the_headline_and_stderr_leads_with_it(tmp_path: Path) -> None:
    """The forecast case of ``test_json_answer_with_forecast``: 4 rps, 2 per replica, 9 rps needs 5 replicas."""
    result = CliRunner().invoke(app, ["capacity", str(_write(tmp_path, SWEEP)), "--slo-seconds", "1.0",
                                      "--min-quality", "0.99", "--forecast-rps", "9", "--format", "json"])
    assert result.exit_code == 0, result.output
    expected = ("Capacity: 4 rps sustained at p95 <= 1 s and quality >= 0.99 (2 per replica, 1 per GPU); 8 rps was "
                "the first rate to miss it; 9 rps of demand needs 5 replicas (10 GPUs).")
    assert json.loads(result.stdout)["headline"] == expected
    assert result.stderr.splitlines() == [expected]


def test_a_sweep_that_never_holds_leads_with_the_lowest_rate_and_why(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["capacity", str(_write(tmp_path, SWEEP)), "--slo-seconds", "0.5"],
                                env={"COLUMNS": "400"})
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == (
        "Capacity: no sustainable rate: the lowest measured rate, 1 rps, already misses p95 <= 0.5 s "
        "(p95 0.6s > SLO 0.5s); measure lower rates or relax --slo-seconds.")


EXTREME = "rate_rps,replicas,gpus,latency_p95_s,ttft_p95_s,achieved_ratio,latency_growth,latency_growth_s\n"
"""A sweep header with every column the policy reads; the cases below put one extreme value in one of them."""


@pytest.mark.parametrize(("row", "column", "says"), [
    ("5e-324,1,1,0.5,0.1,1,1,0", "rate_rps", "must be at least one request a day (1.16e-05), got 4.94066e-324"),
    ("1,5e-324,1,0.5,0.1,1,1,0", "replicas", "must be at least 0.001 (a thousandth), got 4.94066e-324"),
    ("1,1,5e-324,0.5,0.1,1,1,0", "gpus", "must be at least 0.001 (a thousandth), got 4.94066e-324"),
    ("1,1,1,1e308,0.1,1,1,0", "latency_p95_s",
     "must be at most a day (86400 s), or inf for a step with no answer, got 1e+308"),
    ("1,1,1,0.5,1e308,1,1,0", "ttft_p95_s", "must be at most a day (86400 s), or inf for a step with no answer"),
    ("1,1,1,0.5,0.1,1e308,1,0", "achieved_ratio", "must be from 0 to 10 (answers over requests offered), got 1e+308"),
    ("1,1,1,0.5,0.1,-inf,1,0", "achieved_ratio", "must be from 0 to 10 (answers over requests offered), got -inf"),
    ("1,1,1,0.5,0.1,1,1e308,0", "latency_growth", "must be from 0 to 1,000,000,000"),
    ("1,1,1,0.5,0.1,1,1,-1e308", "latency_growth_s", "must be within a day (86400 s) either way, got -1e+308"),
], ids=["denormal-rate", "denormal-replicas", "denormal-gpus", "huge-latency", "huge-ttft", "huge-achieved",
        "minus-infinite-achieved", "huge-growth", "huge-growth-seconds"])
def test_an_extreme_value_is_refused_naming_file_row_and_column(tmp_path: Path, row: str, column: str,
                                                                says: str) -> None:
    """A denormal rate once ended in ``OverflowError`` (a forecast over a rate per replica of 0) and a denormal count
    in ``Infinity`` in the JSON; each is refused at input, with the real-world bound it is past."""
    path = _write(tmp_path, EXTREME + row + "\n")
    result = CliRunner().invoke(app, ["capacity", str(path), "--slo-seconds", "1", "--forecast-rps", "5",
                                      "--format", "json"])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: row 1, column {column}: {says}"), lines


def _strict(text: str) -> object:
    def refuse(constant: str) -> object:
        raise AssertionError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_the_json_is_strict_where_a_step_had_no_answer(tmp_path: Path) -> None:
    """A load test writes ``inf`` for the latency of a step nothing answered: that is input it reads, and the JSON
    says ``null`` there, not ``Infinity`` (which strict parsers and PostgreSQL refuse)."""
    path = _write(tmp_path, EXTREME + "1,1,1,0.5,0.1,1,1,0\n2,1,1,inf,inf,0,1,0\n")
    result = CliRunner().invoke(app, ["capacity", str(path), "--slo-seconds", "1", "--forecast-rps", "5",
                                      "--format", "json"])
    assert result.exit_code == 0, result.output
    data = _strict(result.stdout)
    assert isinstance(data, dict) and data["sustainable_rate_rps"] == 1 and data["knee_rate_rps"] == 2
    assert [s["latency_s"] for s in data["steps"]] == [0.5, None]
