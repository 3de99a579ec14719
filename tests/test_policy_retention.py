"""``collect.retention_days`` against what the rest of the policy asks of the store.

Cases: a retention under a day is refused where the policy loads (``gpuaas config check`` and every flow), in
one line naming the file and the field; settings that ask the store for more than the retention keeps (the
full snapshots ``store.keep_full_snapshots`` every ``store.full_snapshot_every_minutes``) pass, with one
``warning:`` line naming both fields and values, and in the JSON's ``warnings``; the example policy, and the
defaults at the shortest retention, warn of nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app
from gpuaas.errors import ConfigError
from gpuaas.policy import Policy, load_policy, retention_warnings
from tests.cli.test_documented_json_keys import _documented_keys

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "policy.yaml"
runner = CliRunner()


@pytest.mark.parametrize("days", ["0.0001", "0.5", "0"])
def test_a_retention_under_a_day_is_refused_naming_the_file_and_field(tmp_path: Path, days: str) -> None:
    """0.0001 days (under nine seconds) would have deleted every earlier collect's history at the next one."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(f"collect:\n  retention_days: {days}\n", encoding="utf-8")
    result = runner.invoke(app, ["config", "check", str(policy)])
    assert result.exit_code == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"error: {policy}: collect.retention_days: must be at least 1 day, got {float(days):g}")
    assert "Traceback" not in result.output and result.stdout == ""
    with pytest.raises(ConfigError, match="collect.retention_days: must be at least 1 day"):
        load_policy(policy)  # what every flow's settings load


@pytest.mark.parametrize("days", [1, 14, 3660])
def test_a_retention_of_a_day_or_more_is_taken(tmp_path: Path, days: int) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(f"collect:\n  retention_days: {days}\n", encoding="utf-8")
    assert load_policy(policy).collect.retention_days == days


def test_full_snapshots_kept_longer_than_the_retention_are_a_warning_naming_both_fields(tmp_path: Path) -> None:
    """Hourly full snapshots, 240 of them: ten days, three longer than the seven the store keeps any row for."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("collect:\n  retention_days: 7\nstore:\n  keep_full_snapshots: 240\n"
                      "  full_snapshot_every_minutes: 60\n", encoding="utf-8")
    result = runner.invoke(app, ["config", "check", str(policy)])
    assert result.exit_code == 0, result.output
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"warning: {policy}: store.keep_full_snapshots 240 every "
                           "store.full_snapshot_every_minutes 60 span 10 days, longer than collect.retention_days 7")
    assert line.endswith("so at most 168 are kept")  # 7 days of one an hour
    doc = runner.invoke(app, ["config", "check", str(policy), "--format", "json"])
    assert doc.exit_code == 0 and json.loads(doc.stdout)["warnings"] == [line.removeprefix(f"warning: {policy}: ")]


def test_the_example_and_the_defaults_at_the_shortest_retention_warn_of_nothing() -> None:
    result = runner.invoke(app, ["config", "check", str(EXAMPLE), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["warnings"] == [] and "warning" not in result.stderr
    assert set(json.loads(result.stdout)) == _documented_keys("config check")
    assert retention_warnings(Policy.model_validate({"collect": {"retention_days": 1}})) == []
    every_collect = Policy.model_validate({"collect": {"retention_days": 1},
                                          "store": {"full_snapshot_every_minutes": 0, "keep_full_snapshots": 1000}})
    assert retention_warnings(every_collect) == []  # a document every collect: the count alone says nothing of days
