"""``gpuaas cost-report --window``: a bad value is a usage error, and the window is written as people say it.

A value that is not a window, a window of zero, and a window shorter than one GPU sample step
(the report counts GPU-hours in whole steps, so a shorter window would be charged a step it does not
span) each end the command before any source is read: exit 2, one line naming the flag, what was
given and where help is. The headline writes the window rounded (``1 min``, ``1.5 h``), never
``0.0166667 h``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.errors import ConfigError
from gpuaas.policies.cost import CostReport
from gpuaas.sources.cost_window import report_periods
from reports.cost_report import cost_first_line, window_length

HELP = "; see gpuaas cost-report --help"


@pytest.mark.parametrize(("window", "line"), [
    ("abc", "error: Invalid value for '--window': expected a window like 6h or 7d (got 'abc')" + HELP),
    ("0d", "error: Invalid value for '--window': the window must be positive (got '0d')" + HELP),
    ("30s", "error: Invalid value for '--window': a window must span at least one GPU sample step, 60 s "
            "(metrics.sample_interval_seconds): GPU-hours are counted in whole steps (got '30s')" + HELP),
    ("0.5m", "error: Invalid value for '--window': a window must span at least one GPU sample step, 60 s "
             "(metrics.sample_interval_seconds): GPU-hours are counted in whole steps (got '0.5m')" + HELP),
    ("36h", "error: Invalid value for '--window': a window longer than a day must be whole days, not 1.5 days "
            "(got '36h')" + HELP),
    ("inf", "error: Invalid value for '--window': expected a window like 6h or 7d (got 'inf')" + HELP),
    ("367d", "error: Invalid value for '--window': a window of at most 366 days, not 367 days (got '367d')" + HELP),
    ("99999999d", "error: Invalid value for '--window': a window of at most 366 days, not 99,999,999 days "
                  "(got '99999999d')" + HELP),
    ("1e300w", "error: Invalid value for '--window': a window of at most 366 days, not 7e+300 days "
               "(got '1e300w')" + HELP),
    *((w, "error: Invalid value for '--window': a window must be whole minutes, not " + s + " s: OpenCost prices in "
       "steps of whole minutes, so its last step would run past the window's end (got '" + w + "')" + HELP)
      for w, s in (("100s", "100"), ("90s", "90"), ("1.5m", "90"), ("1.01h", "3636"))),
])
def test_a_bad_window_is_a_usage_error_in_one_line(window: str, line: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuaas.cli.app import app

    monkeypatch.setenv("GPUAAS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("GPUAAS_NVML", "off")
    monkeypatch.setenv("GPUAAS_METRICS__SAMPLE_INTERVAL_SECONDS", "60")
    monkeypatch.setenv("GPUAAS_PROMETHEUS_URL", "http://127.0.0.1:9")  # never asked: the flag is refused first
    result = CliRunner().invoke(app, ["cost-report", "--window", window, "--format", "json"])
    assert result.exit_code == 2, result.output
    assert result.stderr == line + "\n"
    assert result.stdout == ""
    assert not (tmp_path / "data").exists()  # refused before anything was written


def test_the_shortest_window_is_one_sample_step() -> None:
    assert report_periods(60.0, 60.0) == (1, 60.0)
    assert report_periods(7 * 86400.0, 60.0) == (7, 86400.0)
    assert report_periods(366 * 86400.0, 60.0) == (366, 86400.0)  # a year, the longest
    with pytest.raises(ConfigError, match="at least one GPU sample step, 60 s"):
        report_periods(59.0, 60.0)


@pytest.mark.parametrize(("seconds", "text"), [
    (60, "1 min"), (15, "0.25 min"), (90, "1.5 min"), (1800, "30 min"), (3600, "1 h"), (5400, "1.5 h"),
    (4500, "1.25 h"), (86400, "24 h"), (14 * 86400, "336 h"), (365 * 86400, "8,760 h"),
])
def test_the_window_is_written_rounded(seconds: float, text: str) -> None:
    assert window_length(seconds) == text


def test_the_headline_of_a_one_minute_window() -> None:
    now = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
    cluster = {"allocated_gpu_hours": 0.5, "total_cost": 4.25, "gpu_cost": 4.0, "waste_cost": 2.5,
               "verified_requests": 10.0, "verified_jobs": 0.0}
    report = CostReport(window_s=60.0, start=now, end=now, tenants=[], services=[{"service": "s"}], cluster=cluster,
                        wasters=[], daily=[], batch=[], notes=[], queries=0)
    assert cost_first_line(report).startswith("1 min of GPUs: $4.25 allocated to workloads ($4.00 on GPUs), $2.50 of it")
    empty = CostReport(window_s=60.0, start=now, end=now, tenants=[], services=[{"service": "s"}],
                       cluster={"allocated_gpu_hours": 0.0}, wasters=[], daily=[], batch=[], notes=[], queries=0)
    assert cost_first_line(empty) == "No GPU-hours allocated in the 1 min window: nothing to cost."
