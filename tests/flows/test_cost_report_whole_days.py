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


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    """History across the last midnight UTC: two hours before it, up to one after (none from the future)."""
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    midnight = now.replace(hour=0, minute=0)
    end = min(midnight + timedelta(hours=1), now)
    with cost_cluster(tmp_path_factory.mktemp("cost-days"), end=end,
                      history=end - (midnight - timedelta(hours=2))) as cluster:
        yield cluster


def test_whole_days_ends_the_window_at_midnight_utc(fleet: EmbeddedCluster, prefect_harness: None, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in {**fleet.settings_env(), "GPUAAS_NVML": "off", "GPUAAS_POLICY_FILE": str(COST_POLICY),
                       "GPUAAS_DATA_DIR": str(tmp_path / "data")}.items():
        monkeypatch.setenv(key, value)
    before = datetime.now(UTC)
    result = CliRunner().invoke(app, ["cost-report", "--window", "2h", "--whole-days", "--format", "json",
                                      "--no-compare"])
    midnight = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    assert before.date() == midnight.date(), "the test ran across midnight UTC: run it again"
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["start"], doc["end"]) == ((midnight - timedelta(hours=2)).isoformat(), midnight.isoformat()), doc
    assert Path(doc["report"]).name.endswith(f"{midnight:%Y%m%dT%H%M%SZ}-7200s.html")
    # the two hours before midnight, not the last two of the wall clock (no sample there) nor the hour after it
    allocated = doc["cluster"]["allocated_gpu_hours"]
    assert allocated is not None and allocated > 0
    latest = CliRunner().invoke(app, ["cost-report", "--window", "2h", "--format", "json", "--no-compare"])
    assert latest.exit_code == 3 and "no GPU telemetry" in latest.output  # without it: the wall clock's last 2 h
