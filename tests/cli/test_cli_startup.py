"""Start-up of the command line: ``--help`` imports nothing heavy, every command still loads, ``--wide`` anywhere.

Sub-commands load lazily (``gpuaas.cli.app``); these tests make sure that stays true and that
the lazy list does not drift from the commands themselves.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import COMMANDS, GROUPS, _load, _short_help, app

HEAVY = ("pandas", "scipy", "prefect", "sqlalchemy", "kubernetes", "pydantic", "numpy", "httpx")


def test_help_imports_none_of_the_heavy_libraries() -> None:
    code = ("import sys; from gpuaas.cli.app import app; from typer.testing import CliRunner; "
            "r = CliRunner().invoke(app, ['--help']); assert r.exit_code == 0, r.output; "
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert proc.stdout.strip() == ""


def test_capacity_as_json_imports_neither_the_load_tester_nor_its_libraries(tmp_path: Path) -> None:
    """``gpuaas capacity --format json`` imported ``gpuaas.loadtest`` (httpx, SQLAlchemy) for its JSON alone."""
    sweep = tmp_path / "sweep.csv"
    sweep.write_text("rate_rps,replicas,gpus,latency_p50_s,latency_p95_s,latency_p99_s,quality\n1,1,1,0.1,0.2,inf,1\n")
    code = ("import sys; from gpuaas.cli.app import app; from typer.testing import CliRunner; "
            f"r = CliRunner().invoke(app, ['capacity', {str(sweep)!r}, '--slo-seconds', '1', '--format', 'json']); "
            "assert r.exit_code == 0, r.output; assert 'null' in r.output and 'Infinity' not in r.output, r.output; "
            "print(','.join(m for m in ('gpuaas.loadtest', 'httpx', 'sqlalchemy') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert proc.stdout.strip() == ""


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_command_loads_and_its_listed_help_is_its_own(name: str) -> None:
    result = CliRunner().invoke(app, [*name.split(), "--help"])
    assert result.exit_code == 0, result.output
    command = _load(name)
    assert (command.help or "").split("\n\n")[0].replace("\n", " ").strip() == _short_help(name)


@pytest.mark.parametrize("name", ["", *COMMANDS])
def test_help_at_80_columns_cuts_no_option_and_no_word(name: str) -> None:
    """Rich squeezes a help table that cannot fit and ends what it cut with an ellipsis: an option a
    reader cannot copy (``--max-requests…``) or half a path."""
    result = CliRunner().invoke(app, [*name.split(), "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.output.splitlines()) <= 80
    cut = [line for line in result.output.splitlines() if "\u2026" in line]
    assert not cut, cut


def test_help_lists_every_command_and_the_exit_codes() -> None:
    out = CliRunner().invoke(app, ["--help"], terminal_width=200).output
    assert all(f" {name.split()[0]} " in out for name in COMMANDS)
    for group, help_text in GROUPS.items():
        listed = CliRunner().invoke(app, [group, "--help"], terminal_width=200).output
        assert help_text in " ".join(listed.split())
        assert all(f" {key.split()[1]} " in listed for key in COMMANDS if key.split()[0] == group)
    assert "3 degraded" in out


def test_help_gives_a_flag_no_type_and_an_option_its_values() -> None:
    """A flag takes no value: ``--apply <bool>`` in help reads as if it took one (``--apply true`` is refused)."""
    out = CliRunner().invoke(app, ["reclaim", "--help"], terminal_width=200).output
    rows = {line.split()[1]: line for line in out.splitlines() if line.startswith("│ --")}
    assert set(rows) >= {"--apply", "--format", "--wide", "--help"}
    for flag in ("--apply", "--wide", "--help"):
        assert not rows[flag].split()[2].startswith("<"), rows[flag]  # the next word is its help, not a type
    assert "<table|json>" in rows["--format"]
    assert "<bool>" not in CliRunner().invoke(app, ["--help"], terminal_width=200).output


def test_version_is_the_installed_distributions() -> None:
    from importlib.metadata import version

    proc = subprocess.run([sys.executable, "-m", "gpuaas.cli.app", "--version"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == f"gpuaas {version('gpuaas')} (Python {sys.version.split()[0]})\n"


@pytest.mark.parametrize("argv", [["audit", "list", "--wide"], ["--wide", "audit", "list"],
                                  ["audit", "--wide", "list"], ["config", "check", "--wide", "examples/policy.yaml"]])
def test_wide_is_accepted_before_and_after_the_sub_command(argv: list[str]) -> None:
    assert CliRunner().invoke(app, ["db", "upgrade"]).exit_code == 0  # audit list reads only a database that exists
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(("profile", "env_url", "expected", "loads_prefect"), [
    (None, None, "None", False),
    (None, "http://127.0.0.1:4200/api", "http://127.0.0.1:4200/api", False),
    ("http://10.0.0.1:4200/api", None, "http://10.0.0.1:4200/api", True),
], ids=["nothing-set", "environment", "profile"])
def test_whether_a_prefect_api_is_configured_is_read_without_prefect_where_only_the_environment_can_say(
        tmp_path: Path, profile: str | None, env_url: str | None, expected: str, loads_prefect: bool) -> None:
    """Importing Prefect costs seconds: the command line asks Prefect only where a file could set an API URL."""
    home = tmp_path / "prefect-home"
    home.mkdir()
    if profile:
        (home / "profiles.toml").write_text(f'active = "remote"\n[profiles.remote]\nPREFECT_API_URL = "{profile}"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")} | {"PREFECT_HOME": str(home)}
    if env_url:
        env["PREFECT_API_URL"] = env_url
    code = "import sys; from gpuaas.cli._flows import prefect_api_url; print(prefect_api_url(), 'prefect' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, check=True)
    assert proc.stdout.split() == [expected, str(loads_prefect)]
