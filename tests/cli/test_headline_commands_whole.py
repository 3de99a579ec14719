"""A headline's suggested command is never split across lines, at any terminal width.

Covers: ``gpuaas reclaim`` (dry-run: ``to act: gpuaas reclaim --apply``; apply: ``to reverse: gpuaas undo 41 42``)
and ``gpuaas rebalance`` (``to apply: gpuaas rebalance --apply``) at 120 and 80 columns, each with a headline whose
command would straddle the terminal's edge if wrapped between any two words (checked here, so each case is one the
fix decides); the command moves whole to the next line, and the lines still read as the headline. ``unsplit`` on its
own: a command longer than the terminal still prints, folded, rather than overflowing it. The flow's run is replaced
by a result written here: the command's printing is what is tested.
"""

from __future__ import annotations

from typing import Any

import pytest
from rich.console import Console
from rich.text import Text
from typer.testing import CliRunner

from gpuaas.cli._common import unsplit
from gpuaas.cli.app import app


def _straddling(before: str, command: str, after: str, width: int) -> str:
    """``before`` + a name sized so that ``command``'s first word ends the line at ``width`` + ``after``."""
    first = command.split(" --")[0] if " --" in command else command.rsplit(" ", 1)[0]
    room = width - 1 - len(before.format(name="") + first)
    line = before.format(name=("team-" + "a" * width)[:room]) + command + after
    plain = [part.plain.rstrip() for part in Text(line).wrap(Console(), width)]
    assert not any(command in part for part in plain), "wrapped between words, the command would stay whole"
    return line


CASES = {
    "reclaim": ("3 GPUs would be freed ({name}); nothing was changed; to act: ",
                "gpuaas reclaim --apply", "."),
    "reclaim --apply": ("Stopped 2 idle workloads ({name}), freeing 3 GPUs; to reverse: ", "gpuaas undo 41 42", "."),
    "rebalance": ("8 GPUs would move ({name}); nothing was changed; to apply: ", "gpuaas rebalance --apply", "."),
}


def _result(command: str, headline: str) -> dict[str, Any]:
    if command.startswith("rebalance"):
        return {"headline": headline, "mode": "dry-run", "cohorts": [], "degraded": False}
    return {"headline": headline, "mode": "dry-run", "snapshot_id": 1, "decisions": [], "degraded": False}


@pytest.mark.parametrize("width", [120, 80])
@pytest.mark.parametrize("command", list(CASES))
def test_the_suggested_command_moves_whole_to_the_next_line(command: str, width: int, tmp_path: Any,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import gpuaas.cli.rebalance_cmd
    import gpuaas.cli.reclaim_cmd

    before, suggested, after = CASES[command]
    headline = _straddling(before, suggested, after, width)
    module = gpuaas.cli.rebalance_cmd if command.startswith("rebalance") else gpuaas.cli.reclaim_cmd
    monkeypatch.setattr(module, "run_flow", lambda flow, what, **kw: _result(command, headline))
    run = CliRunner().invoke(app, command.split(), env={"COLUMNS": str(width), "GPUAAS_DATA_DIR": str(tmp_path)})
    assert run.exit_code == 0, run.output
    lines = run.stdout.splitlines()
    printed = lines[:2]
    assert printed[1] == suggested + after  # whole, at the start of its own line
    assert " ".join(printed) == headline  # nothing lost or added, one space where the line broke
    assert all(len(line) <= width for line in printed)


def test_a_command_wider_than_the_terminal_is_folded_not_left_overflowing() -> None:
    lines = unsplit("to act: gpuaas reclaim --apply.", 15).splitlines()
    assert lines == ["to act:", "gpuaas reclaim", "--apply."]
    assert unsplit("next: gpuaas reclaim shows what would be stopped.", 24).splitlines() == [
        "next: gpuaas reclaim", "shows what would be", "stopped."]  # the words after a command are words


@pytest.mark.parametrize("width", [80, 120])
def test_a_command_with_a_relative_path_and_option_values_stays_whole(width: int) -> None:
    """The load test's next step names its CSV (a relative path) and a value after an option."""
    command = "gpuaas capacity runs/lt/sweep.csv --slo-quantile 0.99 --flow reclaim"
    line = f"{'Load test done: 12 steps, the knee at 48 req/s; ' * (width // 60 + 1)}to plan from it: {command}."
    assert command in unsplit(line, width).splitlines()[-1]
    assert all(len(part) <= width for part in unsplit(line, width).splitlines())
