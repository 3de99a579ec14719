"""``--format json``: the top-level keys a command prints are the ones docs/cli.md's machine-output table lists."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app

CLI_DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
EXAMPLES = CLI_DOC.parents[1] / "examples"
runner = CliRunner()


def _documented_keys(command: str) -> set[str]:
    """The keys of ``command``'s row of the machine-output table (its second cell)."""
    for line in CLI_DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if len(cells) == 3 and cells[0] == f"`{command}`":
            return set(re.findall(r"`([a-z_]+)`", cells[1]))
    raise AssertionError(f"docs/cli.md has no machine-output row for {command}")


def test_incident_prints_the_keys_the_documentation_lists() -> None:
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0  # an empty store: the review reads only it
    result = runner.invoke(app, ["incident", "--from", "1h", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert set(json.loads(result.stdout)) == _documented_keys("incident")


@pytest.mark.parametrize(("row", "argv"), [
    ("audit list", ["audit", "list"]),
    ("plan quotas FILE", ["plan", "quotas", str(EXAMPLES / "quota_problem.yaml")]),
    ("plan deadlines FILE", ["plan", "deadlines", str(EXAMPLES / "deadline_problem.yaml")]),
])
def test_the_commands_that_read_only_the_store_or_a_file_print_their_documented_keys(row: str,
                                                                                    argv: list[str]) -> None:
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    result = runner.invoke(app, [*argv, "--format", "json"])
    assert result.exit_code == 0, result.output
    assert set(json.loads(result.stdout)) == _documented_keys(row) and "headline" not in _documented_keys(row)
