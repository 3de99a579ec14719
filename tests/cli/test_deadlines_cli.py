"""``gpuaas plan deadlines FILE`` in-process: the documented JSON keys, the table, bad input naming job and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app

runner = CliRunner()

FIELD = """\
capacity: {nvidia.com/gpu: 4}
jobs:
  - {name: a, gpus: 2, duration: 60, deadline: 120}
  - {name: b, gpus: 2, duration: 60, deadline: 120}
  - {name: c, gpus: 2, duration: 60, deadline: 120}
  - {name: r, gpus: 1, duration: 30, deadline: 50, running_for: 10}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "problem.yaml"
    path.write_text(text)
    return path


def test_json_has_the_documented_keys_and_a_valid_plan(tmp_path: Path) -> None:
    result = runner.invoke(app, ["plan", "deadlines", str(write(tmp_path, FIELD)), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert {"feasible", "extra_gpus", "schedule", "missed", "exact"} <= data.keys()
    assert data["feasible"] is True and data["extra_gpus"] == {"nvidia.com/gpu": 0} and data["exact"] is True
    by_name = {s["name"]: s for s in data["schedule"]}
    assert by_name["r"]["start"] == -10 and by_name["r"]["end"] == 20  # running: 20 minutes left
    assert sorted(by_name[n]["start"] for n in "abc") == [0, 20, 60]


def test_a_job_with_an_earliest_start_starts_no_sooner(tmp_path: Path) -> None:
    """c may start only at 70 (a requeue backoff, say): a and b share the GPUs first, c ends at 130, past its 120."""
    text = FIELD.replace("name: c, gpus: 2", "name: c, earliest_start: 70, gpus: 2")
    result = runner.invoke(app, ["plan", "deadlines", str(write(tmp_path, text)), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["missed"] == ["c"] and data["feasible"] is True
    table = runner.invoke(app, ["plan", "deadlines", str(write(tmp_path, text))]).stdout
    assert "missed by 10" in table


def test_table_says_how_many_gpus_to_add(tmp_path: Path) -> None:
    text = FIELD.replace("deadline: 120", "deadline: 100")
    result = runner.invoke(app, ["plan", "deadlines", str(write(tmp_path, text))])
    assert result.exit_code == 0, result.output
    # a, b and c must all be running during [40, 60): 6 GPUs, and r holds one until 20
    assert "1 deadline at risk. Extra GPUs needed: 2 nvidia.com/gpu; then every holdable deadline holds" in \
        " ".join(result.stdout.split())
    assert "1 deadline at risk on 4 GPUs" in result.stdout


def test_a_plan_that_needs_extra_gpus_says_its_schedule_runs_on_them(tmp_path: Path) -> None:
    """Raise one job of the example to 4 GPUs: the schedule starts a and b at once on 6 GPUs, 2 more than the
    file's 4, and the table's title and the JSON say so; a plan on today's GPUs says only those."""
    example = Path(__file__).resolve().parents[2] / "examples" / "deadline_problem.yaml"
    text = example.read_text().replace("name: train-a, gpus: 2", "name: train-a, gpus: 4")
    assert text != example.read_text()
    path = write(tmp_path, text)
    result = runner.invoke(app, ["plan", "deadlines", str(path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "Deadline plan on 6 GPUs (4 + 2 extra), minutes from now" in result.stdout, result.stdout
    data = json.loads(runner.invoke(app, ["plan", "deadlines", str(path), "--format", "json"]).stdout)
    assert (data["capacity"], data["extra_gpus"], data["schedule_gpus"]) == ({"a100": 4}, {"a100": 2}, {"a100": 6})
    at_zero = sum(s["gpus"] for s in data["schedule"] if s["start"] == 0)
    assert at_zero == data["schedule_gpus"]["a100"] == 6  # the schedule uses the extra GPUs, as its title says

    plain = runner.invoke(app, ["plan", "deadlines", str(example)], env={"COLUMNS": "200"})
    assert "Deadline plan on 4 GPUs, minutes from now" in plain.stdout, plain.stdout
    data = json.loads(runner.invoke(app, ["plan", "deadlines", str(example), "--format", "json"]).stdout)
    assert data["schedule_gpus"] == data["capacity"] == {"a100": 4}


def test_the_title_of_a_plan_on_several_resources_names_each() -> None:
    from gpuaas.policies.deadlines import DeadlinePlan
    from reports.deadlines import plan_title

    plan = DeadlinePlan(feasible=False, extra_gpus={"a100": 2, "h100": 0}, schedule=[], missed=[], inexact=(),
                        messages=[])
    assert plan_title({"a100": 4, "h100": 8}, plan) == \
        "Deadline plan on a100: 6 GPUs (4 + 2 extra); h100: 8 GPUs, minutes from now"


@pytest.mark.parametrize(("edit", "message"), [
    (("gpus: 1,", "gpus: -1,"), "jobs[3] (r).gpus: must be a whole number of GPUs from 1 to 10,000,000, got -1"),
    (("gpus: 1,", "gpus: 0.5,"), "jobs[3] (r).gpus: must be a whole number of GPUs from 1 to 10,000,000, got 0.5"),
    ((", deadline: 50", ""), "jobs[3] (r).deadline: missing"),
    (("name: b, gpus: 2", "name: b, resource: amd.com/gpu, gpus: 2"), "jobs[1] (b).resource: 'amd.com/gpu' is not in"),
    (("name: c, gpus: 2", "name: c, gpus: 6"), "jobs[2] (c).gpus: 6 GPUs is more than the 4"),
    (("name: c,", "name: a,"), "jobs[2] (a).name: duplicate job name"),
    (("name: c, gpus: 2", "name: c, earliest_start: soon, gpus: 2"),
     "jobs[2] (c).earliest_start: must be a number of minutes from now, 0 to 100,000,000, got 'soon'"),
    (("running_for: 10", "running_for: 10, earliest_start: 5"),
     "jobs[3] (r).earliest_start: a running job has started: only a pending one has an earliest start"),
], ids=["negative", "fractional", "missing", "unknown-resource", "too-big", "duplicate", "earliest-text",
        "earliest-running"])
def test_bad_input_is_one_line_naming_job_and_field(tmp_path: Path, edit: tuple[str, str], message: str) -> None:
    path = write(tmp_path, FIELD.replace(*edit, 1))
    result = runner.invoke(app, ["plan", "deadlines", str(path)])
    assert result.exit_code == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert lines[0].startswith(f"error: {path}: ") and message in lines[0]


def test_several_resources_require_resource_per_job(tmp_path: Path) -> None:
    path = write(tmp_path, "capacity: {a100: 2, h100: 2}\njobs:\n  - {name: x, gpus: 1, duration: 5, deadline: 9}\n")
    result = runner.invoke(app, ["plan", "deadlines", str(path)])
    assert result.exit_code == 1 and "jobs[0] (x).resource: missing" in result.stderr


@pytest.mark.parametrize(("text", "message"), [
    ("capacity: {a100: 4}\njobs: [{name: a, gpus: 2, duration: 60, deadline: 120, 1: x, z: y}]\n",
     "jobs[0] (a).1: key must be text, got 1"),
    ("capacity: {a100: 4}\njobs: []\n1: x\nz: y\n", "1: key must be text, got 1"),
    ('capacity: {a100: 4, "1": 3, 1: 5}\njobs: []\n', "capacity.1: key must be text, got 1"),
    ("capacity: {null: 4}\njobs: [{name: a, gpus: 2, duration: 60, deadline: 120}]\n",
     "capacity.null: key must be text, got null (quote it: 'null')"),
], ids=["job-key", "top-key", "capacity-merged", "capacity-null"])
def test_a_key_that_is_not_text_is_named_not_sorted_or_merged(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    result = runner.invoke(app, ["plan", "deadlines", str(path)])
    assert result.exit_code == 1 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: ") and message in lines[0], result.stderr


def row(stdout: str, name: str) -> str:
    """The table row of job ``name``, each cell's lines joined by single spaces (a narrow table wraps a cell at spaces)."""
    lines = [line for line in stdout.splitlines() if line.startswith("│")]
    [k] = [k for k, line in enumerate(lines) if line.split("│")[1].strip() == name]
    block = [lines[k]]
    for line in lines[k + 1:]:
        if line.split("│")[1].strip():
            break  # the next row
        block.append(line)
    cells = zip(*(line.strip("│").split("│") for line in block), strict=True)
    return " ".join(" ".join(text.strip() for text in cell if text.strip()) for cell in cells)


# Both running jobs are past their estimate. The rule of the cluster path: a job past its estimate holds
# its GPUs half its estimate more, at least 30 minutes: "long" (estimate 100) until 50, "short" (20) until 30.
OVERRUN = """\
capacity: {nvidia.com/gpu: 4}
jobs:
  - {name: long, gpus: 2, duration: 100, deadline: null, running_for: 120}
  - {name: short, gpus: 2, duration: 20, deadline: null, running_for: 25}
  - {name: urgent, gpus: 2, duration: 10, deadline: 40}
"""


def test_a_running_job_past_its_estimate_still_holds_its_gpus(tmp_path: Path) -> None:
    path = write(tmp_path, OVERRUN)
    result = runner.invoke(app, ["plan", "deadlines", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    by_name = {s["name"]: s for s in json.loads(result.stdout)["schedule"]}
    assert (by_name["long"]["start"], by_name["long"]["end"]) == (-120, 50)
    assert (by_name["short"]["start"], by_name["short"]["end"]) == (-25, 30)
    assert by_name["urgent"]["start"] == 30  # not at 0: all four GPUs are still held until "short" ends
    table = runner.invoke(app, ["plan", "deadlines", str(path)])
    assert table.exit_code == 0, table.output
    for name in ("long", "short"):
        assert "past its estimate" in row(table.stdout, name)
    assert "past its estimate" not in row(table.stdout, "urgent")


def test_a_job_past_its_estimate_can_put_a_deadline_at_risk(tmp_path: Path) -> None:
    text = OVERRUN.replace("deadline: 40", "deadline: 20")  # "short" holds its GPUs until 30
    result = runner.invoke(app, ["plan", "deadlines", str(write(tmp_path, text))])
    assert result.exit_code == 0, result.output
    assert "1 deadline at risk. Extra GPUs needed: 2 nvidia.com/gpu" in " ".join(result.stdout.split())


MISSED = """\
capacity: {nvidia.com/gpu: 3}
jobs:
  - {name: ok, gpus: 2, duration: 30, deadline: 60}
  - {name: hopeless, gpus: 1, duration: 90, deadline: 45}
  - {name: slow, gpus: 1, duration: 60, deadline: 20, running_for: 10}
"""


def test_every_job_of_the_file_is_in_the_table_a_missed_one_with_by_how_much(tmp_path: Path) -> None:
    result = runner.invoke(app, ["plan", "deadlines", str(write(tmp_path, MISSED))])
    assert result.exit_code == 0, result.output
    assert "holds" in row(result.stdout, "ok")
    assert "missed by 45" in row(result.stdout, "hopeless")  # runs 90, due in 45: late by 45 at the earliest
    assert "missed by 30" in row(result.stdout, "slow")  # 50 minutes left, due in 20


def _cut_short(status: int, answer: bool) -> object:
    """SciPy's ``milp`` as if HiGHS stopped with ``status`` (1: time limit; 4: gave up), keeping its answer or not."""
    from scipy.optimize import milp

    def solve(*args: object, **kwargs: object) -> object:
        result = milp(*args, **kwargs)
        result.status = status
        if not answer:
            result.x = None
        return result
    return solve


# On 3 GPUs earliest-deadline-first misses a deadline and no bound settles it: only the exact search can.
EDF_MISSES = """\
capacity: {nvidia.com/gpu: 3}
jobs:
  - {name: w, gpus: 1, duration: 30, deadline: 60}
  - {name: y, gpus: 1, duration: 60, deadline: 90}
  - {name: x, gpus: 3, duration: 30, deadline: 90}
"""


# On 4 GPUs two of these four can never meet their deadline: the fewest on time is for the exact search to prove.
TWO_AT_RISK = """\
capacity: {nvidia.com/gpu: 4}
jobs:
""" + "".join(f"  - {{name: {n}, gpus: 2, duration: 60, deadline: 100}}\n" for n in "abcd")


@pytest.mark.parametrize(("problem", "status", "answer", "reason"), [
    (TWO_AT_RISK, 1, True, "the exact search hit its time limit"),
    (EDF_MISSES, 1, False, "the exact search hit its time limit"),
    (EDF_MISSES, 4, False, "the exact solver gave up"),
], ids=["time-limit", "time-limit-no-answer", "gave-up"])
def test_an_inexact_plan_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, problem: str, status: int,
                                  answer: bool, reason: str) -> None:
    monkeypatch.setattr("gpuaas.policies.deadlines._milp.milp", _cut_short(status, answer))
    result = runner.invoke(app, ["plan", "deadlines", str(write(tmp_path, problem))])
    assert result.exit_code == 0, result.output
    flat = " ".join(result.stdout.split())
    assert f"(heuristic plan: {reason})" in flat
    assert "past the size" not in flat


def test_a_search_cut_short_whose_answer_meets_every_deadline_is_an_exact_plan(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every deadline met on today's GPUs: nothing can do better, however the search ended."""
    monkeypatch.setattr("gpuaas.policies.deadlines._milp.milp", _cut_short(1, True))
    result = runner.invoke(app, ["plan", "deadlines", str(write(tmp_path, EDF_MISSES))])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "All 3 deadlines hold on current GPUs (exact plan)."


def test_a_plan_where_every_deadline_holds_says_how_many(tmp_path: Path) -> None:
    """The example file's four deadlines all hold (its comment says why): the first line counts them."""
    example = Path(__file__).resolve().parents[2] / "examples" / "deadline_problem.yaml"
    result = runner.invoke(app, ["plan", "deadlines", str(example)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "All 4 deadlines hold on current GPUs (exact plan)."


def test_the_verdict_of_one_deadline_and_of_none() -> None:
    from reports.deadlines import verdict_sentence

    assert verdict_sentence({}, 0, 0, [], deadlines=1) == "The one deadline holds on current GPUs (exact plan)."
    assert verdict_sentence({}, 0, 0, [], deadlines=0) == "No job has a deadline: nothing can be late (exact plan)."
    assert verdict_sentence({}, 0, 0, []) == "Every deadline holds on current GPUs (exact plan)."


def test_the_flows_headline_counts_the_deadlines_of_every_pool() -> None:
    from reports.deadlines import deadlines_headline

    def pool(*deadlines: float | None) -> dict[str, object]:
        return {"schedule": [{"deadline": d} for d in deadlines], "unscheduled": [], "at_risk": [], "missed": [],
                "extra_gpus": {}, "inexact": []}

    assert deadlines_headline([pool(None, 3600.0), pool(7200.0)]) == (
        "2 pools planned. All 2 deadlines hold on current GPUs (exact plan).")
    assert deadlines_headline([pool(None)]) == "1 pool planned. No job has a deadline: nothing can be late (exact plan)."
