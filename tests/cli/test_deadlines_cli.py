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


def test_table_says_how_many_gpus_to_add(tmp_path: Path) -> None:
    text = FIELD.replace("deadline: 120", "deadline: 100")
    result = runner.invoke(app, ["plan", "deadlines", str(write(tmp_path, text))])
    assert result.exit_code == 0, result.output
    # a, b and c must all be running during [40, 60): 6 GPUs, and r holds one until 20
    assert "1 deadline at risk. Extra GPUs needed: 2 nvidia.com/gpu; then every holdable deadline holds" in \
        " ".join(result.stdout.split())
    assert "1 deadline(s) at risk on 4 GPUs" in result.stdout


@pytest.mark.parametrize(("edit", "message"), [
    (("gpus: 1,", "gpus: -1,"), "jobs[3] (r).gpus: must be a whole number of GPUs from 1 to 10,000,000, got -1"),
    (("gpus: 1,", "gpus: 0.5,"), "jobs[3] (r).gpus: must be a whole number of GPUs from 1 to 10,000,000, got 0.5"),
    ((", deadline: 50", ""), "jobs[3] (r).deadline: missing"),
    (("name: b, gpus: 2", "name: b, resource: amd.com/gpu, gpus: 2"), "jobs[1] (b).resource: 'amd.com/gpu' is not in"),
    (("name: c, gpus: 2", "name: c, gpus: 6"), "jobs[2] (c).gpus: 6 GPUs is more than the 4"),
    (("name: c,", "name: a,"), "jobs[2] (a).name: duplicate job name"),
], ids=["negative", "fractional", "missing", "unknown-resource", "too-big", "duplicate"])
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
