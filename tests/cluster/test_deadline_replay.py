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
                                 "--format", "json", "--loop", "event", "--runtime-estimate", "exact"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert KEYS <= data["fifo"].keys() and KEYS <= data["planned"].keys()
    assert (data["fifo"]["met"], data["planned"]["met"], data["loop"]) == (2, 3, "event")


def test_cli_says_what_the_plan_met_first_and_how_far_the_replay_has_come(tmp_path: Path) -> None:
    # The hand-made jobs above: FIFO meets 2 of the 3 feasible deadlines, the plan all 3.
    path = write_trace(tmp_path, JOBS)
    args = ["replay", "deadlines", "--trace", str(path), "--gpus", "4", "--loop", "event", "--runtime-estimate", "exact"]
    table = runner.invoke(app, args)
    assert table.exit_code == 0, table.output
    first = " ".join(table.stdout.split("Deadline replay of")[0].split())
    assert first == ("The event-driven planner met 3 of 3 feasible deadlines on 4 GPUs, Kueue's own order 2 (1.50x); "
                     "p95 queueing delay 3m against 3m."), first
    assert "fifo: 4 of 4 jobs done" in table.stderr and "plan: 4 of 4 jobs done" in table.stderr, table.stderr
    as_json = runner.invoke(app, [*args, "--format", "json"])
    assert json.loads(as_json.stdout)["headline"] == first  # beside the JSON, the same line on stderr
    assert first in " ".join(as_json.stderr.split())


def test_by_default_the_planner_is_told_estimates_not_the_true_run_times(tmp_path: Path) -> None:
    # A flow reads the run time users expect: the default replay tells the planner lognormal estimates
    # (median right), and on these jobs the plan made on them meets fewer deadlines than one made on the truth.
    path = write_trace(tmp_path, JOBS)
    base = ["replay", "deadlines", "--trace", str(path), "--trace-format", "itp", "--gpus", "4", "--format", "json",
            "--loop", "event"]
    default, told = (runner.invoke(app, base + extra) for extra in ([], ["--runtime-estimate", "lognormal:0.5"]))
    exact = runner.invoke(app, base + ["--runtime-estimate", "exact"])
    assert default.exit_code == told.exit_code == exact.exit_code == 0, default.output
    assert json.loads(default.stdout) == json.loads(told.stdout)
    assert json.loads(default.stdout)["planned"]["met"] < json.loads(exact.stdout)["planned"]["met"]


def test_cli_runs_the_flow_by_default_and_its_cadence_cannot_act_on_jobs_of_seconds(tmp_path: Path) -> None:
    # Every job here ends within 320 s: the flow, every 15 minutes, finds nothing pending, so FIFO's order stays.
    path = write_trace(tmp_path, JOBS)
    result = runner.invoke(app, ["replay", "deadlines", "--trace", str(path), "--gpus", "4", "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["loop"], data["fifo"]["met"], data["planned"]["met"], data["planned"]["replans"]) == ("flow", 2, 2, 0)


def test_cli_bad_input_is_one_line(tmp_path: Path) -> None:
    path = write_trace(tmp_path, JOBS)
    result = runner.invoke(app, ["replay", "deadlines", "--trace", str(path), "--gpus", "2"])
    assert result.exit_code == 2 and result.stderr.strip().splitlines() == [  # --gpus refused: a usage error
        "error: Invalid value for '--gpus': 2 GPUs cannot run the trace's largest job (4 GPUs) (got '2'); "
        "see gpuaas replay deadlines --help"]
    path.write_text(path.read_text().replace(",60\n", ",sixty\n", 1))
    result = runner.invoke(app, ["replay", "deadlines", "--trace", str(path), "--gpus", "4"])
    assert result.exit_code == 1 and "duration: not a number: 'sixty'" in result.stderr


def test_the_public_195_job_trace_plan_meets_more_deadlines(shared_dir: Path) -> None:
    path = shared_dir / "fixtures" / "traces" / "microsoft-itp-elasticflow" / "195job.csv"
    result = runner.invoke(app, ["replay", "deadlines", "--trace", str(path), "--gpus", "24", "--format", "json",
                                 "--loop", "event"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["fifo"]["jobs"] == data["planned"]["jobs"] == 195
    assert data["fifo"]["hopeless"] == data["planned"]["hopeless"] > 0
    assert data["planned"]["met"] >= 1.3 * data["fifo"]["met"]


def test_estimates_are_what_the_planner_is_told() -> None:
    from gpuaas.cluster.deadline_replay import estimate_runtimes
    from gpuaas.errors import ConfigError

    assert estimate_runtimes(JOBS, "exact", 0) == [100, 60, 60, 100]
    assert estimate_runtimes(JOBS, "factor:2", 0) == [200, 120, 120, 200]
    noisy = estimate_runtimes(JOBS * 500, "lognormal:0.5", 7)
    assert noisy == estimate_runtimes(JOBS * 500, "lognormal:0.5", 7)  # the seed decides
    ratios = sorted(e / j.duration for e, j in zip(noisy, JOBS * 500))
    assert 0.9 < ratios[len(ratios) // 2] < 1.1 and ratios[0] < 0.5 and ratios[-1] > 2  # median right, wide tails
    for bad in ("factor:0", "lognormal:-1", "guess", "exact:2", "factor:x"):
        with pytest.raises(ConfigError, match="--runtime-estimate"):
            estimate_runtimes(JOBS, bad, 0)


def test_with_run_times_estimated_twice_too_long_the_plan_meets_what_fifo_meets() -> None:
    # Told a, b take 120 s and c 200: at b's arrival (t=20) c is expected to end at 200, so b (due 170) cannot
    # be planned in time and runs as best effort behind a, as in FIFO (re-planned when c ends at 100: still so).
    planned = replay_deadlines(JOBS, 4, planned=True, estimates=[200, 120, 120, 200])
    assert planned.met == replay_deadlines(JOBS, 4, planned=False).met == 2


def test_the_job_given_up_to_best_effort_is_the_longest_by_its_estimate_not_by_its_true_run_time() -> None:
    from gpuaas.cluster.deadline_replay import _Planner

    # 1 GPU, all due at 100. Told a 50 s (truly 30), b 40 s (truly 60), c 20 s. EDF: a 0-50, b 50-90, then c
    # would end at 110. The longest accepted job by its estimate is a (by the truth, b), longer than c: a moves
    # to best effort, c fits at 0-20 before b, and a runs once the gaps are too short for it (at 90).
    jobs = [TraceJob("t", 0, 30, 1, 100), TraceJob("t", 0, 60, 1, 100), TraceJob("t", 0, 20, 1, 100)]
    told = [50.0, 40.0, 20.0]
    plan = _Planner(jobs, 1, told).plan(0.0, {}, [0, 1, 2])
    assert plan == {0: 90.0, 1: 50.0, 2: 0.0}
    # The planner sees only the estimates: the same plan as for jobs that run exactly as long as they are told.
    assert plan == _Planner([TraceJob("t", 0, e, 1, 100) for e in told], 1, told).plan(0.0, {}, [0, 1, 2])


@pytest.mark.parametrize("spec", ["factor:zero", "lognormal:1e308", "factor:inf"])
def test_cli_names_a_bad_runtime_estimate(tmp_path: Path, spec: str) -> None:
    path = write_trace(tmp_path, JOBS)
    result = runner.invoke(app, ["replay", "deadlines", "--trace", str(path), "--gpus", "4",
                                 "--runtime-estimate", spec])
    assert result.exit_code == 2 and result.stderr.strip().splitlines() == [
        "error: Invalid value for '--runtime-estimate': expected exact, factor:F (0 < F <= 1000) or lognormal:SIGMA "
        f"(0 <= SIGMA <= 10) (got {spec!r}); see gpuaas replay deadlines --help"]


def test_cli_replays_the_flow_under_a_policy_file(tmp_path: Path) -> None:
    # 2 GPUs busy for 30 min; an older job whose deadline is lost even at half its run time; a younger one
    # that FIFO makes miss. The give-up rule (on by default) meets the younger one; a policy file turns it off.
    h = 3600.0
    jobs = [TraceJob("t", 0, h / 2, 2, 10 * h), TraceJob("t", 1, 3 * h, 2, 1 + h),
            TraceJob("t", 2, h, 2, 2 + 1.5 * h + h / 3)]
    path = write_trace(tmp_path, jobs)
    policy = tmp_path / "policy.yaml"
    policy.write_text("deadlines:\n  give_up_lost: false\n")
    runs = {}
    for extra in ([], ["--policy", str(policy)]):
        result = runner.invoke(app, ["replay", "deadlines", "--trace", str(path), "--gpus", "2", "--format", "json",
                                     *extra])
        assert result.exit_code == 0, result.output
        runs[bool(extra)] = json.loads(result.stdout)
    assert runs[True]["fifo"]["met"] == runs[True]["planned"]["met"] == 1  # the first job only
    assert runs[False]["planned"]["met"] == 2
    policy.write_text("deadlines:\n  runtime_estimate_error: 0.5\n")
    result = runner.invoke(app, ["replay", "deadlines", "--trace", str(path), "--gpus", "2", "--policy", str(policy)])
    assert result.exit_code == 1 and len(result.stderr.strip().splitlines()) == 1
    assert str(policy) in result.stderr and "deadlines.runtime_estimate_error" in result.stderr
