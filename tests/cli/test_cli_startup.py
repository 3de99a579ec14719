"""Start-up of the command line: ``--help`` imports nothing heavy, every command still loads, ``--wide`` anywhere.

Sub-commands load lazily (``gpuaas.cli.app``); these tests make sure that stays true and that
the lazy list does not drift from the commands themselves.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import COMMANDS, _load, _short_help, app

HEAVY = ("pandas", "scipy", "prefect", "sqlalchemy", "kubernetes", "pydantic", "numpy", "httpx")


def test_help_imports_none_of_the_heavy_libraries() -> None:
    code = ("import sys; from gpuaas.cli.app import app; from typer.testing import CliRunner; "
            "r = CliRunner().invoke(app, ['--help']); assert r.exit_code == 0, r.output; "
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert proc.stdout.strip() == ""


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_command_loads_and_its_listed_help_is_its_own(name: str) -> None:
    result = CliRunner().invoke(app, [name, "--help"])
    assert result.exit_code == 0, result.output
    command = _load(name)
    assert (command.help or "").split("\n\n")[0].replace("\n", " ").strip() == _short_help(name)


def test_help_lists_every_command_and_the_exit_codes() -> None:
    out = CliRunner().invoke(app, ["--help"], terminal_width=200).output
    assert all(f" {name} " in out for name in COMMANDS)
    assert "3 degraded" in out


@pytest.mark.parametrize("argv", [["audit", "list", "--wide"], ["--wide", "audit", "list"],
                                  ["audit", "--wide", "list"], ["config", "check", "--wide", "examples/policy.yaml"]])
def test_wide_is_accepted_before_and_after_the_sub_command(argv: list[str]) -> None:
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
