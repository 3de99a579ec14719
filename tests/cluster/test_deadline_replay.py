"""The deadline replay through the embedded Kueue model: a hand-checked case where FIFO misses and
the plan's holds meet every deadline, a hopeless job that is counted and still run, the CLI's JSON
on a trace file and on the public 195-job ITP trace, and bad input as one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app
from gpuaas.cluster.deadline_replay import replay_deadlines
from gpuaas.cluster.traces import TraceJob

runner = CliRunner()
KEYS = {"jobs", "deadline_jobs", "met", "deadline_satisfaction", "hopeless", "avg_jct_s", "p95_queue_s",
        "gpu_allocation_ratio"}

# 4 GPUs. c runs 0-100. a (slack) arrives at 10, b (urgent: due 170) at 20, h is hopeless (runs 100, due in 50).
# FIFO: a 100-160, b 160-220 > 170: b misses. Plan: b 100-160, a 160-220 (due 1000): both hold.
JOBS = [
    TraceJob("t", 0, 100, 4, 1000),
    TraceJob("t", 10, 60, 4, 1000),
    TraceJob("t", 20, 60, 4, 170),
    TraceJob("t", 30, 100, 2, 80),
]


def test_fifo_misses_the_urgent_job_and_the_plan_meets_it() -> None:
    fifo = replay_deadlines(JOBS, 4, planned=False)
    planned = replay_deadlines(JOBS, 4, planned=True)
    assert (fifo.jobs, fifo.deadline_jobs, fifo.hopeless) == (4, 4, 1)
    assert fifo.met == 2 and fifo.deadline_satisfaction == pytest.approx(2 / 3)
    assert planned.met == 3 and planned.deadline_satisfaction == 1.0
    # Planned, by hand: c 0-100, b 100-160, a 160-220, then the hopeless h 220-320 (run, never dropped).
    assert planned.avg_jct_s == pytest.approx((100 + 210 + 140 + 290) / 4)
    assert planned.p95_queue_s == pytest.approx(190)  # h waited 190 s behind the deadlines
    assert planned.gpu_allocation_ratio == pytest.approx((400 + 240 + 240 + 200) / (4 * 320))
    assert fifo.avg_jct_s == pytest.approx((100 + 150 + 200 + 290) / 4)  # FIFO: a 100-160, b 160-220, h 220-320


def write_trace(tmp_path: Path, jobs: list[TraceJob]) -> Path:
    path = tmp_path / "itp.csv"
    lines = ["job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration"]
    lines += [f"j{i},{j.submit + 1000:g},1,m,{(j.deadline or 0) + 1000:g},1,{j.gpus},{j.duration:g}"
              for i, j in enumerate(jobs)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_cli_json_has_both_runs(tmp_path: Path) -> None:
    path = write_trace(tmp_path, JOBS)
    result = runner.invoke(app, ["replay", "deadlines", "--trace", str(path), "--trace-format", "itp", "--gpus", "4",
                                 "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert KEYS <= data["fifo"].keys() and KEYS <= data["planned"].keys()
    assert (data["fifo"]["met"], data["planned"]["met"]) == (2, 3)


def test_cli_bad_input_is_one_line(tmp_path: Path) -> None:
    path = write_trace(tmp_path, JOBS)
    result = runner.invoke(app, ["replay", "deadlines", "--trace", str(path), "--gpus", "2"])
    assert result.exit_code == 1 and result.stderr.strip().splitlines() == [
        "error: --gpus: 2 GPUs cannot run the trace's largest job (4 GPUs)"]
    path.write_text(path.read_text().replace(",60\n", ",sixty\n", 1))
    result = runner.invoke(app, ["replay", "deadlines", "--trace", str(path), "--gpus", "4"])
    assert result.exit_code == 1 and "duration: not a number: 'sixty'" in result.stderr


def test_the_public_195_job_trace_plan_meets_more_deadlines(shared_dir: Path) -> None:
    path = shared_dir / "fixtures" / "traces" / "microsoft-itp-elasticflow" / "195job.csv"
    result = runner.invoke(app, ["replay", "deadlines", "--trace", str(path), "--gpus", "24", "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["fifo"]["jobs"] == data["planned"]["jobs"] == 195
    assert data["fifo"]["hopeless"] == data["planned"]["hopeless"] > 0
    assert data["planned"]["met"] >= 1.3 * data["fifo"]["met"]
