"""Bad quota problem files through ``gpuaas plan quotas``: exit 1 and exactly one line naming file and field.

The table holds the mistakes a hand-written problem invites: text or NaN where a number of GPUs belongs, a
fraction where a whole number does, a limit past what the policy file allows, keys left out. A field's path
is the file's own (``queues[0].demand.a100``), never a branch of the schema, and keys missing from one
mapping are named together so that none hides another. A problem file's limits accept exactly what the
policy's ``rebalance`` settings accept.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app
from gpuaas.errors import ConfigError
from gpuaas.policy import parse_policy

runner = CliRunner()
LIMITS = "limits: {max_step_gpus: 8, max_step_percent: 50, max_total_moved_gpus: 32, hysteresis_gpus: 1}\n"


def _queue(extra: str = "") -> str:
    return LIMITS + "queues:\n  - {name: team-a, nominal: {a100: 16}" + (f", {extra}" if extra else "") + "}\n"


def _limits(text: str) -> str:
    return f"limits: {{{text}}}\nqueues:\n  - {{name: team-a, nominal: {{a100: 16}}}}\n"


GPUS = "must be a whole number of GPUs from 0 to 10,000,000"
DEMAND = "must be a finite number of GPUs from 0 to 10,000,000"
CASES = {
    "demand text": (_queue("demand: {a100: abc}"), f"queues[0].demand.a100 (queue team-a): {DEMAND}, got 'abc'"),
    "demand NaN": (_queue("demand: {a100: .nan}"), f"queues[0].demand.a100 (queue team-a): {DEMAND}, got nan"),
    "demand infinite": (_queue("demand: {a100: .inf}"), f"queues[0].demand.a100 (queue team-a): {DEMAND}, got inf"),
    "demand negative": (_queue("demand: {a100: -2}"), f"queues[0].demand.a100 (queue team-a): {DEMAND}, got -2"),
    "demand a boolean": (_queue("demand: {a100: yes}"), f"queues[0].demand.a100 (queue team-a): {DEMAND}, got True"),
    "nominal a fraction": (LIMITS + "queues:\n  - {name: team-a, nominal: {a100: 4.5}}\n",
                           f"queues[0].nominal.a100 (queue team-a): {GPUS}, got 4.5"),
    "guarantee text": (_queue("guaranteed: {a100: four}"),
                       f"queues[0].guaranteed.a100 (queue team-a): {GPUS}, got 'four'"),
    "weight zero": (_queue("weight: 0"),
                    "queues[0].weight (queue team-a): must be a finite number from 0.000001 to 1,000,000, got 0"),
    "step percent above the policy's bound": (
        _limits("max_step_gpus: 8, max_step_percent: 10001, max_total_moved_gpus: 32"),
        "limits.max_step_percent: must be a finite number from 0 to 10,000, got 10001"),
    "step percent NaN": (_limits("max_step_gpus: 8, max_step_percent: .nan, max_total_moved_gpus: 32"),
                         "limits.max_step_percent: must be a finite number from 0 to 10,000, got nan"),
    "step percent quoted": (_limits("max_step_gpus: 8, max_step_percent: '50', max_total_moved_gpus: 32"),
                            "limits.max_step_percent: must be a finite number from 0 to 10,000, got '50'"),
    "step GPUs absurd": (_limits("max_step_gpus: 10000001, max_step_percent: 50, max_total_moved_gpus: 32"),
                         f"limits.max_step_gpus: {GPUS}, got 10000001"),
    "hysteresis negative": (_limits("max_step_gpus: 8, max_step_percent: 50, max_total_moved_gpus: 32, "
                                    "hysteresis_gpus: -1"), f"limits.hysteresis_gpus: {GPUS}, got -1"),
    "one limit missing": (_limits("max_step_gpus: 8, max_step_percent: 50, hysteresis_gpus: 1"),
                          "limits: missing max_total_moved_gpus"),
    "first limit missing": (_limits("max_step_percent: 50, max_total_moved_gpus: 32, hysteresis_gpus: 1"),
                            "limits: missing max_step_gpus"),
    "two limits missing": (_limits("max_total_moved_gpus: 32, hysteresis_gpus: 1"),
                           "limits: missing max_step_gpus, max_step_percent"),
    "a limit misspelt": (_limits("max_step_gpu: 8, max_step_percent: 50, max_total_moved_gpus: 32, hysteresis_gpus: 1"),
                         "limits: missing max_step_gpus; unknown field max_step_gpu"),
    "a missing limit and a bad demand": (
        "limits: {max_step_percent: 50, max_total_moved_gpus: 32}\n"
        "queues:\n  - {name: team-a, nominal: {a100: 16}, demand: {a100: abc}}\n",
        "limits: missing max_step_gpus (and 1 more)"),
    "queue without name and nominal": (LIMITS + "queues:\n  - {demand: {a100: 2}}\n", "queues[0]: missing name, nominal"),
    "no limits": ("queues:\n  - {name: team-a, nominal: {a100: 16}}\n", "missing limits"),
    # A key YAML reads as a number, a boolean or null: said as the deadline problem says it, at the file's path.
    "a flavor key that is a number": (LIMITS + "queues:\n  - {name: team-a, nominal: {1: 16}}\n",
                                      "queues[0].nominal.1 (queue team-a): key must be text, got 1 (quote it: '1')"),
    "a queue key that is a number": (_queue("3: x"), "queues[0].3 (queue team-a): key must be text, got 3 (quote it: '3')"),
    "a limit key that is a boolean": (_limits("max_step_gpus: 8, max_step_percent: 50, max_total_moved_gpus: 32, "
                                              "true: 1"), "limits.true: key must be text, got true (quote it: 'true')"),
    "a null key at the top": (_queue() + "null: 3\n", "null: key must be text, got null (quote it: 'null')"),
    "a number key after a bad value": (_queue("demand: {a100: abc, 2: 1}"),
                                       "queues[0].demand.2 (queue team-a): key must be text, got 2 (quote it: '2')"),
}


@pytest.mark.parametrize(("text", "line"), CASES.values(), ids=CASES.keys())
def test_a_bad_problem_file_is_one_line_and_exit_1(tmp_path: Path, text: str, line: str) -> None:
    problem = tmp_path / "fq.yaml"
    problem.write_text(text)
    done = runner.invoke(app, ["plan", "quotas", str(problem)], env={"COLUMNS": "400"})
    assert done.exit_code == 1 and done.stdout == "", done.output
    assert done.stderr.strip() == f"error: {problem}: {line}"
    assert "Traceback" not in done.output


def _plan(tmp_path: Path, percent: object) -> dict[str, object] | None:
    problem = tmp_path / "fq.yaml"
    problem.write_text(f"limits: {{max_step_gpus: 8, max_step_percent: {percent}, max_total_moved_gpus: 32}}\n"
                       "queues:\n  - {name: team-a, nominal: {a100: 16}, demand: {a100: 3}}\n"
                       "  - {name: team-b, nominal: {a100: 4}, demand: {a100: 30}}\n")
    done = runner.invoke(app, ["plan", "quotas", str(problem), "--format", "json"])
    if done.exit_code == 1:
        return None
    assert done.exit_code == 0, done.output
    result: dict[str, object] = json.loads(done.stdout)
    return result


def _policy_accepts(percent: object) -> bool:
    try:
        parse_policy({"rebalance": {"max_step_percent": percent}})
    except ConfigError:
        return False
    return True


@pytest.mark.parametrize("percent", [0, 0.5, 500, 10_000, 10_001, -1])
def test_the_step_percent_is_accepted_exactly_where_the_policy_accepts_it(tmp_path: Path, percent: float) -> None:
    assert (_plan(tmp_path, percent) is not None) == _policy_accepts(percent)


def test_a_step_percent_of_500_lets_a_small_queue_grow_past_its_size_up_to_the_gpu_cap(tmp_path: Path) -> None:
    # team-b holds 4 and needs 30. At 500 % its step would be 20 GPUs: max_step_gpus (8) is what bounds the move.
    # At 50 % (2 GPUs) it gets less: back to its weighted share (10) the step is no limit, past it the step holds.
    at_50, at_500 = _plan(tmp_path, 50), _plan(tmp_path, 500)
    assert at_50 is not None and at_500 is not None
    assert isinstance(at_50["moved_gpus"], int) and at_50["moved_gpus"] < 8 and at_500["moved_gpus"] == 8


@pytest.mark.parametrize(("command", "text", "field"), [
    ("deadlines", "capacity: {1: 4}\njobs: []\n", "capacity.1"),
    ("quotas", LIMITS + "queues:\n  - {name: team-a, nominal: {1: 16}}\n", "queues[0].nominal.1 (queue team-a)"),
], ids=["deadline-problem", "quota-problem"])
def test_both_planner_problems_refuse_a_key_that_is_not_text_in_one_wording(tmp_path: Path, command: str, text: str,
                                                                            field: str) -> None:
    problem = tmp_path / "p.yaml"
    problem.write_text(text)
    done = runner.invoke(app, ["plan", command, str(problem)], env={"COLUMNS": "400"})
    assert done.exit_code == 1 and done.stdout == "", done.output
    assert done.stderr.strip() == f"error: {problem}: {field}: key must be text, got 1 (quote it: '1')"
