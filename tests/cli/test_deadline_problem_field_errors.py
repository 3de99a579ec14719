"""A deadline problem written by hand: the mistakes whose error named the wrong thing, or nothing to fix.

A template filled by a script writes ``resource: null`` for "none given"; the loader said "capacity names
several resources" of a capacity that names one, sending the reader after a problem the file does not have.
A misspelt field (``gpu:``) was reported only as the real one missing, and an empty name as ``jobs[1] ()``.
"""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from gpuaas.cli.app import app

JOB = "  - {name: a, gpus: 2, duration: 60, deadline: 120, resource: null}\n"


def test_a_null_resource_is_the_only_one(tmp_path: Path) -> None:
    path = tmp_path / "problem.yaml"
    path.write_text("capacity: {a100: 4}\njobs:\n" + JOB)
    result = CliRunner().invoke(app, ["plan", "deadlines", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert '"feasible": true' in result.stdout
    # among several, it is missing: which one is meant cannot be guessed
    path.write_text("capacity: {a100: 4, h100: 2}\njobs:\n" + JOB)
    result = CliRunner().invoke(app, ["plan", "deadlines", str(path)])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [f"error: {path}: jobs[0] (a).resource: missing: capacity names several "
                                          "resources"]


def test_a_misspelt_job_field_is_named_beside_the_missing_one(tmp_path: Path) -> None:
    """``gpu: 2`` for ``gpus: 2``: "gpus: missing" alone sent the reader looking for a key they wrote."""
    path = tmp_path / "problem.yaml"
    path.write_text("capacity: {a100: 4}\njobs:\n  - {name: a, gpu: 2, duration: 60, deadline: 120}\n")
    result = CliRunner().invoke(app, ["plan", "deadlines", str(path)])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [f"error: {path}: jobs[0] (a).gpus: missing; unknown field gpu"]


def test_a_job_with_an_empty_name_is_named_by_its_place(tmp_path: Path) -> None:
    """Not ``jobs[1] ().name``: an empty name says nothing in the parentheses."""
    path = tmp_path / "problem.yaml"
    path.write_text("capacity: {a100: 4}\njobs:\n  - {name: a, gpus: 2, duration: 60, deadline: 120}\n"
                    "  - {name: '', gpus: 2, duration: 60, deadline: 120}\n")
    result = CliRunner().invoke(app, ["plan", "deadlines", str(path)])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [f"error: {path}: jobs[1].name: must be a non-empty string"]
