"""The example deadline problem's comment invites two changes that each put a deadline at risk: both do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gpuaas.cli.app import app

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "deadline_problem.yaml"


def _bigger_job(doc: dict) -> None:  # type: ignore[type-arg]
    doc["jobs"][0]["gpus"] = 4


def _three_deadlines_pulled_in(doc: dict) -> None:  # type: ignore[type-arg]
    for job in doc["jobs"][:3]:
        job["deadline"] = 90


@pytest.mark.parametrize("change", [_bigger_job, _three_deadlines_pulled_in], ids=["gpus-4", "three-at-90"])
def test_each_change_the_example_suggests_puts_one_deadline_at_risk_and_two_gpus_save_it(
        tmp_path: Path, change: object) -> None:
    doc = yaml.safe_load(EXAMPLE.read_text())
    assert "Raise a job's `gpus` to 4, or\n# pull three deadlines in to 90" in EXAMPLE.read_text()
    change(doc)  # type: ignore[operator]
    changed = tmp_path / "problem.yaml"
    changed.write_text(yaml.safe_dump(doc))
    result = CliRunner().invoke(app, ["plan", "deadlines", str(changed), "--format", "json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert (len(plan["at_risk"]), plan["extra_gpus"]) == (1, {"a100": 2}), plan
