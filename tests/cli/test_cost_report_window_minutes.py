"""``gpuaas cost-report --window`` under a day is whole minutes: OpenCost's ``step`` is sent in minutes, and OpenCost
does not cut its last step at the window's end, so ``--window 100s`` sent with ``step=1m`` was charged 120 s.

Such a window ends the command before any source is read (exit 2, one line naming the flag); a window of
whole minutes is sent with a step of exactly its length.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.errors import ConfigError
from gpuaas.sources.cost_window import report_periods

HELP = "; see gpuaas cost-report --help"


@pytest.mark.parametrize("window", ["100s", "90s", "1.5m", "0.01h"])
def test_a_window_of_part_minutes_is_a_usage_error_in_one_line(window: str, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuaas.cli.app import app

    monkeypatch.setenv("GPUAAS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("GPUAAS_NVML", "off")
    monkeypatch.setenv("GPUAAS_METRICS__SAMPLE_INTERVAL_SECONDS", "15")
    monkeypatch.setenv("GPUAAS_PROMETHEUS_URL", "http://127.0.0.1:9")  # never asked: the flag is refused first
    result = CliRunner().invoke(app, ["cost-report", "--window", window, "--format", "json"])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: Invalid value for '--window': a window must be whole minutes, not ")
    assert result.stderr.endswith(f"past the window's end (got '{window}')" + HELP + "\n")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.output
    assert result.stdout == ""
    assert not (tmp_path / "data").exists()


def test_whole_minutes_and_whole_days_are_one_step_each() -> None:
    assert report_periods(120.0, 15.0) == (1, 120.0)
    assert report_periods(5400.0, 15.0) == (1, 5400.0)
    assert report_periods(86400.0, 15.0) == (1, 86400.0)
    with pytest.raises(ConfigError, match="whole minutes, not 100 s"):
        report_periods(100.0, 15.0)


def test_a_window_of_astronomical_days_is_refused_in_a_short_line() -> None:
    """``1e300w`` printed its 300-digit number of days into the one line."""
    with pytest.raises(ConfigError) as refused:
        report_periods(1e300 * 7 * 86400.0, 15.0)
    assert str(refused.value).endswith("a window of at most 366 days, not 7e+300 days") and len(str(refused.value)) < 80
