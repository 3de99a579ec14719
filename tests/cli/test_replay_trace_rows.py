"""Trace rows the replays refuse, against the published traces, and what ``replay deadlines`` reports.

A job asking for no GPUs takes no quota: admitted at once, it would meet its deadline whatever the order
and inflate every figure, so the loaders refuse it (and a duration of 0) with the file, line and column.
The published traces must all still load, or the rule would refuse real jobs. ``met / feasible`` is
met over the deadlines that were not hopeless (docs/replays.md), not ElasticFlow's met over all.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app
from gpuaas.cluster.traces import read_itp, read_philly

runner = CliRunner()
ITP = "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration\n"
ITP_FILES = {"195job.csv": 195, "cluster01.csv": 1595, "cluster03.csv": 3011, "cluster05.csv": 3629,
             "cluster06.csv": 2396, "cluster10.csv": 260}
"""Jobs per published ITP file (the fixtures' SOURCES.md)."""


@pytest.mark.parametrize(("name", "jobs"), ITP_FILES.items(), ids=ITP_FILES.keys())
def test_every_published_itp_job_loads(shared_dir: Path, name: str, jobs: int) -> None:
    loaded = read_itp(shared_dir / "fixtures/traces/microsoft-itp-elasticflow" / name)
    assert len(loaded) == jobs and min(j.gpus for j in loaded) >= 1 and min(j.duration for j in loaded) > 0


def test_every_published_philly_job_loads(shared_dir: Path) -> None:
    loaded = read_philly(shared_dir / "fixtures/traces/philly/philly_jobs_pollux.csv")
    assert len(loaded) == 82_247 and min(j.gpus for j in loaded) >= 1 and min(j.duration for j in loaded) > 0


def test_a_zero_gpu_copy_of_a_real_trace_is_refused_at_its_first_row(shared_dir: Path, tmp_path: Path) -> None:
    lines = (shared_dir / "fixtures/traces/microsoft-itp-elasticflow/195job.csv").read_text().splitlines()[:21]
    header = lines[0].split(",")
    column = header.index("num_gpu")
    rows = [line.split(",") for line in lines[1:]]
    for row in rows:
        row[column] = "0"
    zero = tmp_path / "itpzero.csv"
    zero.write_text("\n".join([lines[0], *(",".join(r) for r in rows)]) + "\n")
    expected = f"error: {zero}: line 2: num_gpu: must be a whole number of GPUs above 0, at most 1,000,000, got '0'"
    for args in (["replay", "deadlines", "--gpus", "8", "--trace", str(zero)],
                 ["replay", "rebalance", "--trace", str(zero), "--trace-format", "itp"]):
        done = runner.invoke(app, args, env={"COLUMNS": "400"})
        assert done.exit_code == 1 and done.stdout == "", done.output
        assert done.stderr.strip() == expected


def test_satisfaction_is_met_over_the_deadlines_that_were_not_hopeless(tmp_path: Path) -> None:
    # One GPU, Kueue's order: a (0-10, deadline 100) is met; b needs 50 s for a 20 s deadline: hopeless; it runs
    # 10-60, so c (deadline 25, needs 10 s) ends at 70 and misses. 1 met of 2 feasible: 0.5 (ElasticFlow: 1 / 3).
    trace = tmp_path / "three.csv"
    trace.write_text(ITP + "a,0,1,m,100,1,1,10\nb,1,1,m,21,1,1,50\nc,2,1,m,25,1,1,10\n")
    done = runner.invoke(app, ["replay", "deadlines", "--trace", str(trace), "--gpus", "1", "--format", "json"])
    assert done.exit_code == 0, done.output
    fifo = json.loads(done.stdout)["fifo"]
    assert (fifo["deadline_jobs"], fifo["hopeless"], fifo["met"]) == (3, 1, 1)
    assert fifo["deadline_satisfaction"] == 0.5
    table = runner.invoke(app, ["replay", "deadlines", "--trace", str(trace), "--gpus", "1"], env={"COLUMNS": "400"})
    assert table.exit_code == 0, table.output
    assert "met / feasible" in table.stdout and "satisfaction" not in table.stdout
    fifo_row = next(line for line in table.stdout.splitlines() if "fifo" in line)
    assert "0.500" in fifo_row
