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
from gpuaas.cluster.traces import MAX_REPLAY_SECONDS, read_itp, read_philly
from gpuaas.errors import ConfigError

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


def test_a_lognormal_estimate_of_the_advertised_sigma_runs_on_a_real_trace(shared_dir: Path) -> None:
    # SIGMA 10 draws estimates e^30 off the truth; the planner is told at most some two years, never a job error
    # blamed on a flag that does not exist.
    trace = shared_dir / "fixtures/traces/microsoft-itp-elasticflow/195job.csv"
    for loop in ("flow", "event"):
        done = runner.invoke(app, ["replay", "deadlines", "--trace", str(trace), "--gpus", "64", "--runtime-estimate",
                                   "lognormal:10", "--loop", loop, "--format", "json"])
        assert done.exit_code == 0, done.output
        assert json.loads(done.stdout)["planned"]["jobs"] == 195
    # the nightly quota plan's deadline need is told the same estimates
    done = runner.invoke(app, ["replay", "rebalance", "--trace", str(trace), "--trace-format", "itp", "--days", "3",
                               "--runtime-estimate", "lognormal:10", "--format", "json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["meta"]["runtime_estimate"] == "lognormal:10"


def test_every_published_trace_is_within_what_a_replay_holds(shared_dir: Path) -> None:
    # The readers refuse a trace past the span (the two tests above load every published file through them);
    # here, how far inside it the published ITP files are.
    for name in ITP_FILES:
        jobs = read_itp(shared_dir / "fixtures/traces/microsoft-itp-elasticflow" / name)
        assert max(max(j.submit, j.deadline or 0.0, j.duration) for j in jobs) <= MAX_REPLAY_SECONDS / 2


PHILLY = "timestamp,duration,num_gpus,gpu_time,cluster\n"


@pytest.mark.parametrize(("layout", "text", "field"), [
    ("itp", ITP + "j,0,1,m,10,1,1,1e12\n", "line 2: duration: a replay holds runs of at most 63,072,000 s"),
    ("itp", ITP + "j,0,1,m,10,1,1,1e10\n", "line 2: duration: a replay holds runs of at most 63,072,000 s"),
    ("itp", ITP + "j,0,1,m,10,1,1,10\nk,3e8,1,m,3e8,1,1,10\n", "line 3: submission_time: a replay holds times up to"),
    ("itp", ITP + "j,0,1,m,1e12,1,1,10\n", "line 2: deadline: a replay holds times up to 63,072,000 s"),
    ("philly", PHILLY + "2017-09-04 10:30:41,1e12,1,1,vc\n", "line 2: duration: a replay holds runs of at most"),
    ("philly", PHILLY + "2017-09-04 10:30:41,10,1,1,vc\n2027-09-04 10:30:41,10,1,1,vc\n",
     "line 3: timestamp: a replay holds times up to 63,072,000 s"),
], ids=["itp-1e12", "itp-1e10", "itp-late-submission", "itp-late-deadline", "philly-1e12", "philly-late"])
def test_a_time_past_what_a_replay_holds_is_refused_naming_file_row_and_column(tmp_path: Path, layout: str,
                                                                               text: str, field: str) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text(text)
    commands = [["replay", "rebalance", "--trace", str(trace), "--trace-format", layout]]
    if layout == "itp":
        commands.append(["replay", "deadlines", "--trace", str(trace), "--gpus", "8"])
    for args in commands:
        done = runner.invoke(app, args, env={"COLUMNS": "400"})
        assert done.exit_code == 1 and done.stdout == "", (args, done.output)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {trace}: {field}"), (args, done.stderr)


@pytest.mark.parametrize(("layout", "text", "field"), [
    ("itp", ITP + "j,0,1,m,10,1,1,1e10\n", "line 2: duration: a replay holds runs of at most 63,072,000 s"),
    ("itp", ITP + "j,5,1,m,10,1,1,10\nk,5,1,m,9,1,1,10\nl,63072006,1,m,63072010,1,1,10\n",
     "line 4: submission_time: a replay holds times up to 63,072,000 s (two years) after the trace's first "
     "submission, got '63072006'"),
    ("philly", PHILLY + "2017-09-04 10:30:41,10,1,1,vc\n2019-09-04 10:30:42,10,1,1,vc\n",
     "line 3: timestamp: a replay holds times up to"),
], ids=["itp-long-run", "itp-late-submission", "philly-late"])
def test_the_readers_hold_the_replay_span_so_every_caller_does(tmp_path: Path, layout: str, text: str,
                                                               field: str) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text(text)
    with pytest.raises(ConfigError) as caught:
        (read_itp if layout == "itp" else read_philly)(trace)
    assert str(caught.value).startswith(f"{trace}: {field}")


def test_a_trace_at_the_edge_of_the_span_loads(tmp_path: Path) -> None:
    # Two years after the first submission, not before the trace's start or its first line, is the limit.
    trace = tmp_path / "edge.csv"
    trace.write_text(ITP + "a,100,1,m,200,1,1,10\nb,5,1,m,63072005,1,1,63072000\n")
    jobs = read_itp(trace)
    assert [(j.submit, j.deadline) for j in jobs] == [(0.0, 63072000.0), (95.0, 195.0)]


@pytest.mark.parametrize(("layout", "text", "line"), [
    ("itp", ITP + "late,3e8,1,m,3e8,1,1,10\na,5,1,m,50,1,1,10\nb,0,1,m,40,1,1,10\n", "line 2: submission_time"),
    ("itp", ITP + "a,5,1,m,50,1,1,10\nlong,9,1,m,90,1,1,1e10\nb,0,1,m,40,1,1,10\n", "line 3: duration"),
    ("philly", PHILLY + "2027-09-04 10:30:41,10,1,1,vc\n2017-09-04 10:30:45,10,1,1,vc\n2017-09-04 10:30:41,10,1,1,vc\n",
     "line 2: timestamp"),
], ids=["itp-late-submission", "itp-long-run", "philly-late"])
def test_a_row_past_the_span_that_max_jobs_cuts_is_not_a_reason_to_refuse(tmp_path: Path, layout: str, text: str,
                                                                           line: str) -> None:
    """``cluster up --trace`` replays the first 2,000 jobs (by submission): the readers refused a trace for a row
    it would never replay. Checked are the jobs kept; the whole trace, without ``max_jobs``."""
    trace = tmp_path / "trace.csv"
    trace.write_text(text)
    read = read_itp if layout == "itp" else read_philly
    jobs = read(trace, max_jobs=2)
    assert [j.submit for j in jobs] == [0.0, 4.0 if layout == "philly" else 5.0]
    with pytest.raises(ConfigError) as caught:
        read(trace)
    assert str(caught.value).startswith(f"{trace}: {line}: a replay holds")


def test_a_kept_row_past_the_span_is_named_by_its_line_in_the_file(tmp_path: Path) -> None:
    """Among the jobs kept, the first in the file that is past the span is named: line 4, not the sort's order."""
    trace = tmp_path / "trace.csv"
    trace.write_text(ITP + "late,9e8,1,m,9e8,1,1,10\na,5,1,m,50,1,1,1e10\nb,0,1,m,7e8,1,1,10\nc,1,1,m,9,1,1,9\n")
    with pytest.raises(ConfigError) as caught:
        read_itp(trace, max_jobs=3)
    assert str(caught.value).startswith(f"{trace}: line 3: duration: a replay holds runs of at most")
    with pytest.raises(ConfigError) as caught:
        read_itp(trace, max_jobs=2)  # b (line 4) and c kept: b's deadline
    assert str(caught.value).startswith(f"{trace}: line 4: deadline: a replay holds times up to")
