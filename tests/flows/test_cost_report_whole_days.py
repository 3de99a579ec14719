"""The daily cost report covers calendar days: ``whole_days`` ends its window at the last 00:00 UTC, so the daily
runs (scheduled at 00:15 UTC, a worker maybe late) neither overlap nor leave a gap and add up to a month."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app
from gpuaas.cluster.runner import EmbeddedCluster
from tests.cost_fleet import COST_POLICY, cost_cluster

MIDNIGHT = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=2)
"""A midnight two days back: the test's instants never depend on the hour it runs at."""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    """Three hours of history across ``MIDNIGHT``: two before it, one after."""
    with cost_cluster(tmp_path_factory.mktemp("cost-days"), end=MIDNIGHT + timedelta(hours=1),
                      history=timedelta(hours=3)) as cluster:
        yield cluster


@pytest.fixture()
def pointed(fleet: EmbeddedCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> EmbeddedCluster:
    for key, value in {**fleet.settings_env(), "GPUAAS_NVML": "off", "GPUAAS_POLICY_FILE": str(COST_POLICY),
                       "GPUAAS_DATA_DIR": str(tmp_path / "data")}.items():
        monkeypatch.setenv(key, value)
    return fleet


def test_whole_days_ends_the_window_at_the_midnight_before_the_instant(pointed: EmbeddedCluster,
                                                                      prefect_harness: None) -> None:
    from flows.cost_report import cost_report

    late = MIDNIGHT + timedelta(hours=4)  # a worker four hours late, long after the history's end
    day = cost_report(window="2h", at=late, whole_days=True, compare=False, return_state=True)
    assert day.is_completed(), day.message
    doc = day.result()
    assert (doc["start"], doc["end"]) == ((MIDNIGHT - timedelta(hours=2)).isoformat(), MIDNIGHT.isoformat())
    assert doc["degraded"] is False and doc["cluster"]["allocated_gpu_hours"] > 0  # the two hours before midnight
    assert Path(doc["report"]).name.endswith(f"{MIDNIGHT:%Y%m%dT%H%M%SZ}-7200s.html")
    latest = cost_report(window="2h", at=late, compare=False, return_state=True).result()
    assert latest["end"] == late.isoformat() and latest["degraded"] is True  # without it: the 2 h before `at`


def test_the_command_line_flag_reports_yesterday(pointed: EmbeddedCluster, prefect_harness: None) -> None:
    before = datetime.now(UTC)
    result = CliRunner().invoke(app, ["cost-report", "--window", "1d", "--whole-days", "--format", "json",
                                      "--no-compare"])
    after = datetime.now(UTC)
    doc = json.loads(result.stdout)
    midnights = {t.replace(hour=0, minute=0, second=0, microsecond=0).isoformat() for t in (before, after)}
    assert doc["end"] in midnights and doc["window_s"] == 86400, doc["end"]
    assert result.exit_code == 3  # yesterday holds none of the fleet's history, two days back: no telemetry
