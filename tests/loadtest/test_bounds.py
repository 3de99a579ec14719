"""The load generator against a real endpoint on loopback: its bounds, its stop rule, its quality check.

Cases: a request that outlives its timeout is cut and recorded; the climb stops after two failing steps (the higher rates are never sent); the chat
API streams and the expected-substring check decides quality; a non-loopback URL, and an output
directory that cannot be written, are refused by the CLI before anything is sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app
from gpuaas.cluster._engine import EngineModel
from gpuaas.cluster._scenario_models import Serving
from gpuaas.cluster.serving import ServingEndpoint
from gpuaas.loadtest import LoadTestConfig, run_sweep
from gpuaas.operations.load_test import LoadTestResult, plan
from reports.capacity import load_test_headline


def _endpoint(model: EngineModel) -> ServingEndpoint:
    serving = Serving.model_validate({"model_name": "m", "requests_per_second": {"profile": "constant", "value": 0},
                                      "engine": model.model_dump()})
    ep = ServingEndpoint("ns", "svc", serving)
    ep.engine.set_pods(["svc-0"])
    ep.start()
    return ep


@pytest.fixture
def slow() -> Iterator[ServingEndpoint]:
    ep = _endpoint(EngineModel(max_num_seqs=4, decode_seconds_per_token=0.5))
    yield ep
    ep.stop()


@pytest.fixture
def fast() -> Iterator[ServingEndpoint]:
    ep = _endpoint(EngineModel(max_num_seqs=16, decode_seconds_per_token=0.002, prefill_seconds_per_token=0.0))
    yield ep
    ep.stop()


def test_caps_timeouts_and_the_stop_after_two_failing_steps(slow: ServingEndpoint) -> None:
    # 4 output tokens at 0.5 s: every request outlives its 0.3 s timeout, so every step fails
    config = LoadTestConfig(url=slow.url, model="m", rates=(20.0, 40.0, 80.0, 160.0), slo_quantile="p95",
                            slo_seconds=5, output_tokens=4, prompt_tokens=4, max_requests_per_step=80,
                            step_seconds=0.5, warmup_seconds=0.0, request_timeout_seconds=0.3)
    run = run_sweep(config)
    assert [s["rate_rps"] for s in run.steps] == [20.0, 40.0]  # two failing steps, then stop
    assert "stopped after 2 failing steps at 40 rps (2 higher rates not run)" == run.stopped
    assert [s["requests"] for s in run.steps] == [10, 20]  # the whole step: rate x seconds
    # each cut at its timeout, or (sent late on a loaded machine) at the step's hard stop: none runs on
    assert {r.error for r in run.requests} <= {"timed out after 0.3s", "cancelled at the step's time limit (0.8s)"}
    assert not any(r.ok for r in run.requests)
    assert run.steps[0]["offered_rps"] == pytest.approx(20.0)
    assert run.unreached is None  # up and too slow: its requests connected


def test_a_url_nothing_listens_on_is_said_before_any_latency() -> None:
    config = LoadTestConfig(url="http://127.0.0.1:9/v1", model="m", rates=(4.0,), slo_quantile="p95",
                            slo_seconds=5, max_requests_per_step=8, step_seconds=1.0, warmup_seconds=0.0,
                            request_timeout_seconds=2.0)
    run = run_sweep(config)
    assert run.unreached is not None and run.unreached.startswith("ConnectError")
    reason = plan(run).capacity.reason
    assert reason.startswith(f"no request reached the server ({run.unreached}): is it up at http://127.0.0.1:9/v1? "
                             "never meets the SLO: at the lowest rate 4 rps, no answer to measure its p95 latency by")
    # the command's first line leads with it too, not with advice about rates and SLOs
    result = LoadTestResult(plan(run), {}, 0).to_json()
    assert load_test_headline(result) == (
        f"Load test: none of {len(run.requests)} requests at 1 measured rate reached the server ({run.unreached}); "
        "is it up at http://127.0.0.1:9/v1?")


def test_chat_stream_and_quality_check(fast: ServingEndpoint) -> None:
    base = {"url": fast.url, "model": "m", "rates": (5.0,), "slo_quantile": "p95", "slo_seconds": 2.0,
            "output_tokens": 3, "prompt_tokens": 4, "step_seconds": 0.6, "warmup_seconds": 0.0, "api": "chat"}
    good = run_sweep(LoadTestConfig(**base, expect_substring="Hello from"))  # type: ignore[arg-type]
    assert good.steps[0]["quality"] == 1.0 and good.steps[0]["requests"] == 3
    assert all(r.ok and r.output_tokens == 3 and r.finish_reason == "length" and r.ttft_s is not None
               for r in good.requests)
    bad = run_sweep(LoadTestConfig(**base, expect_substring="Goodbye"))  # type: ignore[arg-type]
    assert bad.steps[0]["quality"] == 0.0 and bad.steps[0]["success_ratio"] == 1.0
    assert bad.requests[0].error == "quality: answer lacks 'Goodbye'"
    strict = run_sweep(LoadTestConfig(**base, finish_reasons=("stop",)))  # type: ignore[arg-type]
    assert strict.requests[0].error == "quality: finish_reason 'length'"


def test_cli_refuses_a_remote_url_before_sending(tmp_path: object) -> None:
    result = CliRunner().invoke(app, ["loadtest", "--url", "http://10.1.2.3:8000/v1", "--model", "m", "--rates",
                                      "1,2", "--slo-seconds", "1", "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert "not a loopback address" in result.stderr and "--allow-remote" in result.stderr
    bad = CliRunner().invoke(app, ["loadtest", "--url", "http://127.0.0.1:9/v1", "--model", "m", "--rates", "2,1",
                                   "--slo-seconds", "1", "--out", str(tmp_path)])
    assert bad.exit_code == 2 and bad.stderr.strip().splitlines() == [
        "error: Invalid value for '--rates': rates must increase without repeats (got '2,1'); "
        "see gpuaas loadtest --help"]


def test_cli_refuses_an_output_it_cannot_write_before_sending(tmp_path: Path) -> None:
    """A load test takes minutes: an ``--out`` that is a file, or under one, is refused before the first request."""
    taken = tmp_path / "results.csv"
    taken.write_text("x\n")
    args = ["loadtest", "--url", "http://127.0.0.1:9/v1", "--model", "m", "--rates", "1,2", "--slo-seconds", "1"]
    for out, words, flag in [(taken, f"--out: {taken} exists and is not a directory", "--out"),
                             (taken / "run", f"--out: cannot create {taken / 'run'}", "--output"),
                             (taken, f"--out: {taken} exists and is not a directory", "-o")]:
        result = CliRunner().invoke(app, [*args, flag, str(out)])
        assert result.exit_code == 1
        assert result.stderr.strip().splitlines()[0].startswith(f"error: {words}"), result.stderr
        assert "load test:" not in result.output  # the flow never started
