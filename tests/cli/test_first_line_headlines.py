"""``gpuaas capacity``, ``gpuaas loadtest`` and ``gpuaas replay reclaim`` start with one sentence in numbers.

Covers: each headline function on hand-written results (the sentence written from the numbers, not read off
the program), every branch of the capacity sentence (a failing rate, a forecast, every rate held, no rate
held), the load test's sentence with and without a sweep that stopped early, the replay's fixed, adaptive and
empty cases; and ``gpuaas loadtest`` printing it first (stdout above the tables; stderr beside the JSON, which
carries it), with the flow's run replaced by a result written here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app
from reports.capacity import capacity_headline, load_test_headline
from reports.reclaim_replay import replay_headline

WIDE = {"COLUMNS": "400"}  # the headline on one line, as a terminal that wide shows it


def _step(rate: float, reason: str) -> dict[str, Any]:
    return {"rate_rps": rate, "replicas": 1.0, "gpus": 2.0, "latency_s": 0.5, "quality": 1.0,
            "passed": reason == "ok", "counted": reason == "ok", "reason": reason}


def _capacity(**changes: Any) -> dict[str, Any]:
    """One replica on two GPUs, measured at 2, 4 and 8 rps: 4 rps holds, 8 rps misses p95 <= 1 s."""
    capacity: dict[str, Any] = {
        "slo_quantile": "p95", "slo_seconds": 1.0, "min_quality": 0.99, "forecast_rps": None, "met": True,
        "sustainable_rate_rps": 4.0, "per_replica_rps": 4.0, "per_gpu_rps": 2.0, "replicas_needed": None,
        "gpus_needed": None, "knee_rate_rps": 8.0, "reason": "holds up to 4 rps; at 8 rps p95 1.6s > SLO 1s",
        "steps": [_step(2, "ok"), _step(4, "ok"), _step(8, "p95 1.6s > SLO 1s")]}
    return {**capacity, **changes}


def test_capacity_names_the_rate_the_first_failure_and_the_flag_that_sizes_a_demand() -> None:
    assert capacity_headline(_capacity()) == (
        "Capacity: 4 rps sustained at p95 <= 1 s and quality >= 0.99 (4 per replica, 2 per GPU); 8 rps was the "
        "first rate to miss it; the replicas a demand needs: the same command with --forecast-rps RPS.")


def test_capacity_with_a_forecast_ends_with_what_it_needs() -> None:
    capacity = _capacity(forecast_rps=10.0, replicas_needed=3, gpus_needed=6, min_quality=None)
    assert capacity_headline(capacity) == (
        "Capacity: 4 rps sustained at p95 <= 1 s (4 per replica, 2 per GPU); 8 rps was the first rate to miss it; "
        "10 rps of demand needs 3 replicas (6 GPUs).")


def test_capacity_of_one_rate_that_held_says_so_in_the_singular() -> None:
    capacity = _capacity(sustainable_rate_rps=2.0, per_replica_rps=2.0, per_gpu_rps=1.0, knee_rate_rps=None,
                         steps=[_step(2, "ok")])
    assert capacity_headline(capacity) == (
        "Capacity: 2 rps sustained at p95 <= 1 s and quality >= 0.99 (2 per replica, 1 per GPU), the one measured "
        "rate held: the limit is higher, measure faster rates.")


def test_capacity_where_every_rate_held_says_the_limit_is_higher() -> None:
    capacity = _capacity(sustainable_rate_rps=8.0, per_replica_rps=8.0, per_gpu_rps=4.0, knee_rate_rps=None,
                         steps=[_step(2, "ok"), _step(4, "ok"), _step(8, "ok")])
    assert capacity_headline(capacity) == (
        "Capacity: 8 rps sustained at p95 <= 1 s and quality >= 0.99 (8 per replica, 4 per GPU), every one of the "
        "3 measured rates held: the limit is higher, measure faster rates.")


def test_capacity_where_no_rate_held_names_the_lowest_and_why() -> None:
    capacity = _capacity(met=False, sustainable_rate_rps=None, per_replica_rps=None, per_gpu_rps=None,
                         knee_rate_rps=2.0, steps=[_step(2, "quality 0.9 < 0.99")])
    assert capacity_headline(capacity) == (
        "Capacity: no sustainable rate: the lowest measured rate, 2 rps, already misses p95 <= 1 s and quality "
        ">= 0.99 (quality 0.9 < 0.99); measure lower rates or relax --slo-seconds.")


def _load_test(out: Path, **changes: Any) -> dict[str, Any]:
    """What the load_test flow returns (``LoadTestResult.to_json``) for the sweep of ``_capacity``."""
    row = {"offered_rps": 2.0, "achieved_ratio": 1.0, "latency_growth": 1.0, "latency_p50_s": 0.3,
           "latency_p95_s": 0.5, "latency_p99_s": 0.6, "ttft_p95_s": 0.1, "itl_p95_s": 0.02,
           "output_tokens_per_s": 60.0, "quality": 1.0, "lateness_p99_s": 0.001, "client_limited": False}
    result: dict[str, Any] = {
        "capacity": _capacity(), "steps": [{**row, "rate_rps": r} for r in (2.0, 4.0, 8.0)], "stopped": "",
        "lateness_p99_s": 0.001, "client_limited_rates": [], "requests": 1540,
        "files": {"requests": str(out / "requests.csv"), "sweep": str(out / "sweep.csv"),
                  "plot": str(out / "latency.png"), "summary": str(out / "summary.json")},
        "audit_id": 7, "ignore_eos": True}
    return {**result, **changes}


def test_load_test_counts_the_requests_and_sizes_a_demand_from_its_sweep(tmp_path: Path) -> None:
    assert load_test_headline(_load_test(tmp_path)) == (
        "Load test: 1,540 requests at 3 measured rates; 4 rps sustained at p95 <= 1 s and quality >= 0.99 "
        "(4 per replica, 2 per GPU); 8 rps was the first rate to miss it; the replicas a demand needs: "
        f"gpuaas capacity {tmp_path}/sweep.csv --slo-quantile p95 --slo-seconds 1 --min-quality 0.99 "
        "--forecast-rps RPS.")


def test_a_load_test_that_stopped_early_with_no_rate_held_says_both(tmp_path: Path) -> None:
    capacity = _capacity(met=False, sustainable_rate_rps=None, per_replica_rps=None, per_gpu_rps=None,
                         knee_rate_rps=2.0, steps=[_step(2, "p95 1.5s > SLO 1s"), _step(4, "p95 2s > SLO 1s")])
    stopped = "stopped after 2 failing steps at 4 rps (1 higher rate not run)"
    assert load_test_headline(_load_test(tmp_path, capacity=capacity, requests=600, stopped=stopped)) == (
        "Load test: 600 requests at 2 measured rates, stopped after 2 failing steps at 4 rps (1 higher rate not "
        "run); no sustainable rate: the lowest measured rate, 2 rps, already misses p95 <= 1 s and quality >= 0.99 "
        "(p95 1.5s > SLO 1s); try lower --rates or relax --slo-seconds.")


def _replay(**changes: Any) -> dict[str, Any]:
    result: dict[str, Any] = {
        "policy": "fixed", "window_min": 30.0, "threshold_pct": 5.0, "pods": 3, "observed_gpu_hours": 72.0,
        "idle_runs": 4, "reclaims": 2, "reclaimed_gpu_hours": 7.5, "wakeups": 1, "gap_resumes": 0, "never_woke": 1,
        "bound_gpu_hours": 7.5, "qps_samples_while_down": None}
    return {**result, **changes}


def test_replay_of_the_fixed_window() -> None:
    assert replay_headline(_replay()) == (
        "Reclaim replay: the fixed 30-minute window would reclaim 7.5 of 72 observed GPU-hours on 3 pods (idle at "
        "duty cycle <= 5 %) for 1 wake-up; the trade at every window: the same command with --frontier.")


def test_replay_of_a_budget_is_weighed_against_the_fixed_window() -> None:
    adaptive = _replay(policy="adaptive", pods=40, observed_gpu_hours=10_000.2, reclaimed_gpu_hours=1234.4,
                       wakeups=12, threshold_pct=2.5)
    fixed = _replay(pods=40, observed_gpu_hours=10_000.2, reclaimed_gpu_hours=1000.6, wakeups=20, threshold_pct=2.5)
    assert replay_headline(adaptive, fixed, budget=2) == (
        "Reclaim replay: the window refit for --budget 2 wake-ups per workload per day (base 30 min) would reclaim "
        "1,234 of 10,000 observed GPU-hours on 40 pods (idle at duty cycle <= 2.5 %) for 12 wake-ups, against "
        "1,001 for 20 wake-ups with the fixed 30-minute window; the trade at every window: the same command with "
        "--frontier.")
    assert replay_headline(adaptive, fixed).startswith(
        "Reclaim replay: the adaptive window (base 30 min) would reclaim 1,234 of")


def test_replay_of_no_samples_says_so() -> None:
    empty = _replay(pods=0, observed_gpu_hours=0.0, reclaimed_gpu_hours=0.0, wakeups=0)
    assert replay_headline(empty) == (
        "Reclaim replay: nothing to replay, the input holds no duty-cycle samples; check the --utilization files "
        "(or the --since window with --from-prometheus).")


@pytest.fixture
def flow_result(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    """The load_test flow's run replaced by a result written here: the command's printing is what is tested."""
    import gpuaas.cli._flows

    result = _load_test(tmp_path / "out")
    monkeypatch.setattr(gpuaas.cli._flows, "run_flow", lambda flow, what, **kw: json.loads(json.dumps(result)))
    return result


def _loadtest_args(tmp_path: Path) -> list[str]:
    return ["loadtest", "--url", "http://127.0.0.1:8000/v1", "--model", "m", "--rates", "2,4,8",
            "--slo-seconds", "1", "--out", str(tmp_path / "out")]


def test_loadtest_prints_its_headline_first(flow_result: dict[str, Any], tmp_path: Path) -> None:
    expected = load_test_headline(flow_result)
    table = CliRunner().invoke(app, _loadtest_args(tmp_path), env=WIDE)
    assert table.exit_code == 0, table.output
    assert table.stdout.splitlines()[0] == expected
    assert expected.startswith("Load test: 1,540 requests at 3 measured rates; 4 rps sustained")
    as_json = CliRunner().invoke(app, [*_loadtest_args(tmp_path), "--format", "json"], env=WIDE)
    assert as_json.exit_code == 0, as_json.output
    assert as_json.stderr.splitlines()[0] == expected
    assert json.loads(as_json.stdout)["headline"] == expected


def test_the_load_test_table_fits_80_columns_and_names_what_it_leaves_out(flow_result: dict[str, Any],
                                                                           tmp_path: Path) -> None:
    table = CliRunner().invoke(app, _loadtest_args(tmp_path), env={"COLUMNS": "80"})
    assert table.exit_code == 0, table.output
    steps = table.stdout.split("Load test: one row per rate")[1].split("(not shown at 80 columns:")[0]
    assert max(len(line) for line in steps.splitlines()) <= 80
    assert "rate (rps)" in table.stdout and "p95 (s)" in table.stdout and "quality" in table.stdout
    assert "(not shown at 80 columns:" in table.stdout and "rate_rps" not in table.stdout


def test_a_narrow_load_test_table_keeps_the_slos_own_quantile() -> None:
    from gpuaas.cli.loadtest_cmd import step_optional

    assert "p99 (s)" not in step_optional("p99") and {"p50 (s)", "p95 (s)"} <= set(step_optional("p99"))
    assert "p95 (s)" not in step_optional("p95")


def test_a_knee_where_the_client_fell_behind_is_not_called_the_server_missing_the_slo(tmp_path: Path) -> None:
    """10 rps holds; at 20 and 30 rps p95 is 0.35-0.4 s, well under the 1 s SLO, but the load generator left its
    requests late (client-limited): the first line must say the client stopped the climb, not that 20 rps missed
    the SLO, or on-call sizes the service on a server limit that was never measured."""
    import pandas as pd

    from gpuaas.policies.cost import sustainable_capacity

    sweep = pd.DataFrame([
        {"rate_rps": 10, "replicas": 1, "gpus": 1, "latency_p95_s": 0.3, "quality": 1, "client_limited": False},
        {"rate_rps": 20, "replicas": 1, "gpus": 1, "latency_p95_s": 0.35, "quality": 1, "client_limited": True},
        {"rate_rps": 30, "replicas": 1, "gpus": 1, "latency_p95_s": 0.4, "quality": 1, "client_limited": True}])
    capacity = sustainable_capacity(sweep, slo_quantile="p95", slo_seconds=1.0, min_quality=0.99).to_dict()
    stopped = "stopped after 2 failing steps at 30 rps"
    headline = load_test_headline(_load_test(tmp_path, capacity=capacity, requests=4200, stopped=stopped))
    assert "20 rps was the first rate to miss it" not in headline
    assert headline.startswith(
        "Load test: 4,200 requests at 3 measured rates, stopped after 2 failing steps at 30 rps; 10 rps sustained at "
        "p95 <= 1 s and quality >= 0.99 (10 per replica, 10 per GPU); at 20 rps the load generator could not keep "
        "its schedule (a client limit, not the server's): the server's own limit is not measured;")
    assert "20 rps was the first rate to miss it" not in capacity_headline(capacity)
