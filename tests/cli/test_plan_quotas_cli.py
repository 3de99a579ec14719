"""``gpuaas plan quotas FILE`` in-process: the example file's plan, and bad files naming queue and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "quota_problem.yaml"
runner = CliRunner()


def test_the_example_file_prints_every_queue_and_flavor_as_json() -> None:
    result = runner.invoke(app, ["plan", "quotas", str(EXAMPLE), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) == {"changes", "moved_gpus", "shortfall", "weighted_shortfall", "solve_seconds", "notes",
                         "unmet_guarantees"}
    assert [(c["queue"], c["flavor"], c["before"], c["after"]) for c in data["changes"]] == [
        ("team-a", "a100", 16, 12), ("team-b", "a100", 8, 12)]
    assert data["moved_gpus"] == 4 and data["shortfall"] == {"team-a": {"a100": 0.0}, "team-b": {"a100": 8.0}}
    assert data["weighted_shortfall"] == 8.0


def test_the_table_names_the_moves() -> None:
    result = runner.invoke(app, ["plan", "quotas", str(EXAMPLE)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert "4 GPUs moved, weighted shortfall 12 -> 8" in result.stdout and "+4 from team-a" in result.stdout


def test_a_recent_loss_does_not_stop_the_example_team_regaining_toward_its_demand(tmp_path: Path) -> None:
    # No reversal stops moves past a queue's demand only: team-b lost 2 GPUs but is still short, so it regains.
    problem = tmp_path / "p.yaml"
    problem.write_text(EXAMPLE.read_text().replace("demand: {a100: 20}}", "demand: {a100: 20}, recent_change: {a100: -2}}"))
    assert problem.read_text() != EXAMPLE.read_text()
    plain = json.loads(runner.invoke(app, ["plan", "quotas", str(EXAMPLE), "--format", "json"]).stdout)
    data = json.loads(runner.invoke(app, ["plan", "quotas", str(problem), "--format", "json"]).stdout)
    assert data["moved_gpus"] == plain["moved_gpus"] > 0


def test_the_deadline_example_holds_every_deadline_by_ordering() -> None:
    example = EXAMPLE.with_name("deadline_problem.yaml")
    data = json.loads(runner.invoke(app, ["plan", "deadlines", str(example), "--format", "json"]).stdout)
    assert data["feasible"] and sorted(s["start"] for s in data["schedule"]) == [0, 0, 60, 60]


@pytest.mark.parametrize(("text", "expected"), [
    ("limits: {max_step_gpus: 8, max_step_percent: 50, max_total_moved_gpus: 32}\n"
     "queues:\n  - {name: a, nominal: {a100: 4}}\n  - {name: b, nominal: {a100: 4}, weight: -1}\n",
     "p.yaml: queues[1].weight (queue b): must be a finite number from 0.000001 to 1,000,000, got -1"),
    ("limits: {max_step_gpus: 8, max_step_percent: 50, max_total_moved_gpus: 32}\n"
     "queues:\n  - {name: a, nominal: {a100: 4}, demand: {h100: 2}}\n",
     "p.yaml: queues[0].demand.h100: queue 'a': no queue has nominal quota of flavor 'h100'"),
    ("limits: {max_step_gpus: 8, max_step_percent: 50, max_total_moved_gpus: 32, hysteresis: 2}\nqueues: [{name: a, nominal: {a100: 1}}]\n",
     "p.yaml: limits.hysteresis: unknown field"),
    ("limits: {max_step_gpus: 8, max_step_percent: 50, max_total_moved_gpus: 32}\n"
     "queues:\n  - {name: a, nominal: {a100: 2}, guaranteed: {a100: 3}}\n",
     "p.yaml: queues[0].guaranteed.a100: guarantees (a 3) sum to 3 GPUs of a100, above the cohort's 2 (the sum of nominal quotas)"),
], ids=["weight", "unknown-flavor", "typo", "guarantee"])
def test_bad_input_is_one_line_naming_queue_and_field(tmp_path: Path, text: str, expected: str) -> None:
    problem = tmp_path / "p.yaml"
    problem.write_text(text)
    result = runner.invoke(app, ["plan", "quotas", str(problem), "--format", "json"], env={"COLUMNS": "400"})
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.strip() == f"error: {problem.parent}/{expected}"
    assert "Traceback" not in result.output


def test_the_solvers_own_prints_stay_out_of_the_json(tmp_path: Path) -> None:
    """Weights a million apart make HiGHS print internal diagnostics with C's printf, past every option; as a real
    process (CliRunner sees Python's writes only), stdout is the JSON and nothing else, and stderr stays clean."""
    import subprocess
    import sys

    problem = tmp_path / "far-apart.yaml"
    problem.write_text(
        "limits: {max_step_gpus: 8, max_step_percent: 50, max_total_moved_gpus: 100000, hysteresis_gpus: 1}\n"
        "queues:\n"
        "  - {name: q0, nominal: {x: 1000, y: 50}, demand: {x: 10000, y: 3}, weight: 1000}\n"
        "  - {name: q1, nominal: {x: 0, y: 100}, demand: {x: 3, y: 3}, weight: 0.001}\n"
        "  - {name: q2, nominal: {x: 100, y: 10}, demand: {x: 20, y: 10000}, weight: 0.000001}\n"
        "  - {name: q3, nominal: {y: 1000}, demand: {y: 10000}, weight: 1000}\n")
    proc = subprocess.run([sys.executable, "-m", "gpuaas.cli.app", "plan", "quotas", str(problem), "--format", "json"],
                          capture_output=True, text=True, timeout=300, env={"GPUAAS_DATA_DIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["moved_gpus"] > 0
    assert "Highs" not in proc.stderr


def test_large_shortfalls_print_as_numbers_people_write(tmp_path: Path) -> None:
    problem = tmp_path / "big.yaml"
    problem.write_text(
        "limits: {max_step_gpus: 8, max_step_percent: 50, max_total_moved_gpus: 32, hysteresis_gpus: 1}\n"
        "queues:\n"
        "  - {name: team-a, nominal: {a100: 16}, demand: {a100: 3}, weight: 1}\n"
        "  - {name: team-b, nominal: {a100: 8}, demand: {a100: 2000000}, weight: 1000}\n")
    result = runner.invoke(app, ["plan", "quotas", str(problem)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    # 1000 x (2,000,000 - 8) before; team-b gains 15 to its share, team-a keeps 1 of its demand of 3: 1000 x 1,999,977 + 2
    assert "weighted shortfall 1,999,992,000 -> 1,999,977,002" in result.stdout
    assert "│ 1,999,977 " in result.stdout and "e+0" not in result.stdout


@pytest.mark.parametrize(("number", "text"), [
    (0, "0"), (-0.0, "0"), (0.0003, "0.0003"), (2.5, "2.5"), (12.345, "12.35"), (1000, "1,000"),
    (17_893_000, "17,893,000"), (-3.25, "-3.25"), (0.00001, "0.00001"), (1.5e-7, "0.00000015")])
def test_a_figure_is_written_out_with_thousands_separated(number: float, text: str) -> None:
    from gpuaas.phrases import figure

    assert figure(number) == text


def test_a_plan_with_stdout_closed_is_no_traceback(tmp_path: Path) -> None:
    """A cron job or daemon may start the command with file descriptor 1 closed: the solver's guard of stdout
    has nothing to guard then, and the plan is made all the same."""
    import os
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "gpuaas.cli.app", "plan", "quotas", str(EXAMPLE)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=300,
                          env={"GPUAAS_DATA_DIR": str(tmp_path)}, preexec_fn=lambda: os.close(1))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


def test_a_count_that_prints_as_one_is_singular() -> None:
    from gpuaas.phrases import counted

    assert counted(0.999, "GPU") == "1 GPU" and counted(2, "GPU") == "2 GPUs" and counted(1e6, "GPU") == "1,000,000 GPUs"


def test_a_narrow_terminal_moves_the_reasons_under_the_table() -> None:
    # At 64 columns the table with its reasons does not fit; without them it does: the reasons go under it,
    # each led by its queue (the reason names the flavor), rather than the table running past the terminal.
    result = runner.invoke(app, ["plan", "quotas", str(EXAMPLE)], env={"COLUMNS": "64"})
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.stdout.splitlines()) <= 64, result.stdout
    flat = " ".join(result.stdout.split())
    assert "team-b reason: team-b a100: 8 -> 12 (+4 from team-a)" in flat


def test_at_80_columns_the_reasons_go_under_the_table_rather_than_five_lines_to_a_row() -> None:
    # The table with its reasons fits 80 columns only with each reason folded into a 22-character column, five
    # or six lines to a row: that is a table that does not fit, and the reasons move under it like reclaim's.
    result = runner.invoke(app, ["plan", "quotas", str(EXAMPLE)], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    header = next(line for line in result.stdout.splitlines() if line.startswith("┃"))
    assert "reason" not in header, result.stdout
    rows = [line for line in result.stdout.splitlines() if line.startswith("│")]
    assert len(rows) == 2, result.stdout  # one line to a row
    flat = " ".join(result.stdout.split())
    assert "team-a reason: team-a a100: 16 -> 12 (-4 to team-b)" in flat
    assert "team-b reason: team-b a100: 8 -> 12 (+4 from team-a)" in flat
    # Where the reasons wrap to two lines in the table, they stay in it.
    wide = runner.invoke(app, ["plan", "quotas", str(EXAMPLE)], env={"COLUMNS": "120"})
    assert "reason" in next(line for line in wide.stdout.splitlines() if line.startswith("┃")), wide.stdout
    assert "team-b reason:" not in wide.stdout
