"""The CLI in-process: exit codes, stdout for data, stderr for errors."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app
from gpuaas.cli.audit_cmd import parse_since
from gpuaas.cluster.services import fresh_schema_url
from gpuaas.settings import load_settings
from gpuaas.store import AuditEntry, open_store

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "policy.yaml"
runner = CliRunner()


def test_help_lists_the_commands() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("config", "db", "audit"):
        assert command in result.output


def test_config_check_accepts_the_example() -> None:
    result = runner.invoke(app, ["config", "check", str(EXAMPLE), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["valid"] is True and data["policy"]["reclaim"]["mode"] == "dry-run"


def test_config_check_rejects_a_broken_file_with_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "policy.yaml"
    bad.write_text("tenants:\n  - name: a\n    guaranteed_gpus: -2\n")
    result = runner.invoke(app, ["config", "check", str(bad)])
    assert result.exit_code == 1
    assert "tenants[0].guaranteed_gpus" in result.stderr and str(bad) in result.stderr
    assert result.stdout == ""


def test_console_script_exits_nonzero_on_bad_environment(tmp_path: Path) -> None:
    """The installed entry point, as a real process: a broken policy file in the settings."""
    bad = tmp_path / "p.yaml"
    bad.write_text("reclaim: {max_actions_per_run: -1}\n")
    env = {"GPUAAS_DATA_DIR": str(tmp_path), "GPUAAS_POLICY_FILE": str(bad), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-m", "gpuaas.cli.app", "audit", "list"], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 1
    assert "reclaim.max_actions_per_run" in proc.stderr and "p.yaml" in proc.stderr


def test_db_status_and_the_read_only_commands_never_create_a_database(tmp_path: Path) -> None:
    typo = tmp_path / "tpyo" / "gpuaas.db"
    env = {"GPUAAS_DATABASE_URL": f"sqlite:///{typo}"}
    status = runner.invoke(app, ["db", "status"], env=env)
    assert status.exit_code == 0 and "no database there yet" in status.stdout
    for args in (["audit", "list"], ["undo", "3"], ["incident", "--undo", "3"], ["incident", "--from", "2h"]):
        result = runner.invoke(app, args, env=env)
        assert result.exit_code == 1 and f"no gpuaas database at {typo}" in result.stderr, (args, result.output)
    assert not typo.parent.exists()  # not even its directory
    assert runner.invoke(app, ["db", "upgrade"], env=env).exit_code == 0 and typo.is_file()
    listed = runner.invoke(app, ["audit", "list", "--format", "json"], env=env)
    assert listed.exit_code == 0 and json.loads(listed.stdout) == {"entries": [], "total": 0}


def test_a_time_window_is_typed_the_same_on_audit_list_and_incident(tmp_path: Path) -> None:
    """An ops engineer who reviews an incident and then lists its audit rows types one window for both."""
    env = {"GPUAAS_DATABASE_URL": f"sqlite:///{tmp_path / 'gpuaas.db'}"}
    assert runner.invoke(app, ["db", "upgrade"], env=env).exit_code == 0
    for args in (["audit", "list", "--from", "3h", "--to", "1h"], ["audit", "list", "--since", "3h", "--until", "1h"]):
        listed = runner.invoke(app, [*args, "--format", "json"], env=env)
        assert listed.exit_code == 0 and json.loads(listed.stdout) == {"entries": [], "total": 0}, (args, listed.output)
    for args in (["incident", "--since", "3h", "--until", "1h"], ["incident", "--from", "3h", "--to", "1h"]):
        review = runner.invoke(app, [*args, "--format", "json"], env=env)
        assert review.exit_code == 0, (args, review.output)
        assert json.loads(review.stdout)["events"] == []
    backwards = runner.invoke(app, ["incident", "--since", "1h", "--until", "3h"], env=env)
    assert backwards.exit_code == 2 and "is not before end" in backwards.stderr


@pytest.mark.parametrize(("args", "option"), [
    (["audit", "list", "--since", "9999-12-31T23:59:59-12:00"], "'--since' / '--from'"),
    (["audit", "list", "--since", "0001-01-01T00:00:00+14:00"], "'--since' / '--from'"),
    (["audit", "list", "--until", "0001-01-01T00:00:00+14:00"], "'--until' / '--to'"),
    (["incident", "--from", "9999-12-31T23:59:59-12:00"], "'--from' / '--since'"),
    (["incident", "--to", "9999-12-31T23:59:59-12:00"], "'--to' / '--until'"),
    (["incident", "--to", "0001-01-01"], "'--to' / '--until'"),
], ids=["audit-since-late", "audit-since-early", "audit-until-early", "incident-from", "incident-to", "incident-to-only"])
def test_an_instant_utc_cannot_hold_or_a_backwards_end_names_the_option_given(tmp_path: Path, args: list[str],
                                                                               option: str) -> None:
    env = {"GPUAAS_DATABASE_URL": f"sqlite:///{tmp_path / 'gpuaas.db'}"}
    assert runner.invoke(app, ["db", "upgrade"], env=env).exit_code == 0
    result = runner.invoke(app, args, env=env)
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and f"Invalid value for {option}" in lines[0], result.output
    assert "Error" not in lines[0] and "Traceback" not in result.output


def test_db_upgrade_creates_then_reports_up_to_date() -> None:
    first = runner.invoke(app, ["db", "upgrade"])
    assert first.exit_code == 0 and "(empty) -> 0005" in first.stdout
    again = runner.invoke(app, ["db", "upgrade"])
    assert again.exit_code == 0 and "already at schema 0005" in again.stdout


def test_audit_list_filters_and_formats() -> None:
    store = open_store(load_settings())
    now = datetime.now(UTC)
    store.append(AuditEntry(created_at=now - timedelta(hours=5), flow="reclaim", action="reclaim",
                            kind="Notebook", namespace="team-a", name="nb-1", mode="apply", outcome="applied"))
    store.append(AuditEntry(created_at=now - timedelta(minutes=10), flow="rebalance", action="quota-change",
                            kind="ClusterQueue", name="team-a-cq", mode="dry-run", outcome="planned"))
    store.close()

    everything = json.loads(runner.invoke(app, ["audit", "list", "--format", "json"]).stdout)["entries"]
    assert [e["name"] for e in everything] == ["nb-1", "team-a-cq"]
    recent = json.loads(runner.invoke(app, ["audit", "list", "--since", "1h", "--format", "json"]).stdout)
    assert [e["name"] for e in recent["entries"]] == ["team-a-cq"]
    by_flow = json.loads(runner.invoke(app, ["audit", "list", "--flow", "reclaim", "--format", "json"]).stdout)
    assert [e["object"] for e in by_flow["entries"]] == ["Notebook team-a/nb-1"]
    window = json.loads(runner.invoke(app, ["audit", "list", "--since", "6h", "--until", "1h", "--format", "json"]).stdout)
    assert [e["name"] for e in window["entries"]] == ["nb-1"]
    assert list(window["entries"][0])[:4] == ["id", "created_at", "flow", "flow_run_id"]
    by_obj = runner.invoke(app, ["audit", "list", "--object", "team-a/nb-1"], env={"COLUMNS": "200"})
    assert by_obj.exit_code == 0 and "nb-1" in by_obj.stdout and "team-a-cq" not in by_obj.stdout


def test_audit_list_bad_since_is_a_usage_error() -> None:
    result = runner.invoke(app, ["audit", "list", "--since", "yesterday-ish"])
    assert result.exit_code == 2 and "--since" in result.stderr


@pytest.mark.parametrize(
    ("text", "expected"),
    [("90m", timedelta(minutes=90)), ("2h", timedelta(hours=2)), ("7d", timedelta(days=7))],
    ids=["minutes", "hours", "days"],
)
def test_parse_since_relative(text: str, expected: timedelta) -> None:
    now = datetime(2026, 11, 29, 12, tzinfo=UTC)
    assert parse_since(text, now) == now - expected


def test_parse_since_iso_defaults_to_utc() -> None:
    assert parse_since("2026-11-29T02:00:00") == datetime(2026, 11, 29, 2, tzinfo=UTC)


def test_db_upgrade_and_audit_on_postgresql(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same commands against a real PostgreSQL: only the URL differs (the password is never printed)."""
    url = fresh_schema_url(postgres_url, "cli_test")
    monkeypatch.setenv("GPUAAS_DATABASE_URL", url)
    first = runner.invoke(app, ["db", "upgrade"])
    assert first.exit_code == 0 and "(empty) -> 0005" in first.stdout and first.stdout.startswith("postgresql")
    store = open_store(load_settings())
    store.append(AuditEntry(flow="reclaim", action="reclaim", kind="Notebook", namespace="a", name="nb",
                            mode="dry-run", outcome="planned"))
    store.close()
    listed = json.loads(runner.invoke(app, ["audit", "list", "--format", "json"]).stdout)["entries"]
    assert [(e["object"], e["outcome"]) for e in listed] == [("Notebook a/nb", "planned")]


@pytest.mark.slow
def test_a_failed_flow_is_one_clear_error_line(tmp_path: Path) -> None:
    """``gpuaas collect`` with nothing reachable: exit 1, the reason once on stderr, no traceback."""
    env = {"GPUAAS_DATA_DIR": str(tmp_path), "GPUAAS_KUBECONFIG": str(tmp_path / "missing"), "GPUAAS_NVML": "off",
           "PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PREFECT_HOME": str(tmp_path / "prefect")}
    proc = subprocess.run([sys.executable, "-m", "gpuaas.cli.app", "collect"], env=env, capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 1
    assert proc.stderr.count("every source failed") == 1 and "Traceback" not in proc.stderr
    assert proc.stdout == ""
