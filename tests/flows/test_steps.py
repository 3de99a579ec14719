"""``tasks._steps``: a flow body's steps, plain calls outside a Prefect flow run and Prefect tasks inside one.

Outside: results and states, a transient error retried and a permanent one not, ``submit`` futures, and no
Prefect imported. Inside a flow run (the session's test server): each step is a task run of that flow run.
Also the name a completed run takes in the runs list (``flows._outcome.run_name``).
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from flows._outcome import RUN_NAME_MAX, run_name
from gpuaas.errors import ActionRefused, ConfigError, MalformedResponse, SourceUnavailable, StoreError
from tasks._options import retry_transient_only, retry_unless_misconfigured
from tasks._steps import PlainState, step

calls: list[str] = []


@step(name="flaky", retries=2, retry_delay_seconds=0, retry_condition_fn=retry_transient_only)
def flaky(fail_times: int, error: type[Exception]) -> str:
    calls.append("flaky")
    if calls.count("flaky") <= fail_times:
        raise error("down", source="prometheus")  # type: ignore[call-arg]
    return "ok"


@step(name="store-step", retries=2, retry_delay_seconds=0, retry_condition_fn=retry_unless_misconfigured)
def store_step(error: Exception) -> str:
    calls.append("store")
    if calls.count("store") == 1:
        raise error
    return "stored"


@step(name="double")
def double(x: int) -> int:
    return 2 * x


@pytest.fixture(autouse=True)
def _fresh_calls() -> None:
    calls.clear()


def test_outside_a_flow_run_a_step_is_its_function_with_its_retries() -> None:
    assert double(3) == 6
    state = flaky(2, SourceUnavailable, return_state=True)
    assert isinstance(state, PlainState) and state.is_completed() and state.result() == "ok"
    assert calls == ["flaky"] * 3  # two transient failures retried, then success


def test_a_store_step_retries_a_database_error_but_not_a_configuration_one() -> None:
    assert store_step(StoreError("database is locked"), return_state=True).result() == "stored"
    calls.clear()
    state = store_step(ConfigError("this database holds the history of another cluster"), return_state=True)
    assert state.is_failed() and calls == ["store"]
    calls.clear()
    state = store_step(ActionRefused("snapshot 7 is not in the store"), return_state=True)
    assert state.is_failed() and calls == ["store"]


def test_a_permanent_error_is_not_retried_and_retries_stop_at_the_count() -> None:
    state = flaky(5, MalformedResponse, return_state=True)
    assert state.is_failed() and isinstance(state.result(raise_on_failure=False), MalformedResponse)
    assert calls == ["flaky"]
    calls.clear()
    with pytest.raises(SourceUnavailable):
        flaky(10, SourceUnavailable)
    assert calls == ["flaky"] * 3


def test_submit_gives_a_future_with_a_state() -> None:
    future = double.submit(21)
    future.wait(timeout=10)
    assert future.result() == 42 and future.state.is_completed() and future.state.name == "Completed"
    assert double.with_options(retries=1).options["retries"] == 1 and "retries" not in double.options


def test_the_steps_and_the_collect_body_import_no_prefect() -> None:
    code = "import sys, flows._collect, tasks._steps; print([m for m in sys.modules if m.split('.')[0] == 'prefect'])"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert proc.stdout.strip() == "[]"


def test_inside_a_flow_run_each_step_is_a_task_run(prefect_harness: None) -> None:
    from prefect import flow
    from prefect.context import FlowRunContext

    @flow
    def parent() -> dict[str, Any]:
        context = FlowRunContext.get()
        assert context is not None
        submitted = double.submit(2)
        return {"called": double(1), "submitted": submitted.result(), "kind": type(submitted).__name__,
                "state": type(double(1, return_state=True)).__name__}

    assert parent() == {"called": 2, "submitted": 4, "kind": "PrefectConcurrentFuture", "state": "State"}


@pytest.mark.parametrize(("headline", "name"), [
    ("Dry-run: 1 GPU would be freed by stopping 1 idle workload ($3.00 per hour); nothing was changed; to act: "
     "gpuaas reclaim --apply.", "Dry-run: 1 GPU would be freed by stopping 1 idle workload"),
    ("Snapshot 2: 4 workloads, 6 GPUs waiting, 1 with incomplete telemetry (never counted as idle), 1 idle "
     "candidate; next: gpuaas reclaim shows what would be stopped.",
     "Snapshot 2: 4 workloads, 6 GPUs waiting, 1 with incomplete telemetry, 1 idle candidate"),
    ("No GPU-hours allocated in the 24 h window: nothing to cost.",
     "No GPU-hours allocated in the 24 h window: nothing to cost"),
])
def test_a_completed_run_is_named_by_its_headlines_gist(headline: str, name: str) -> None:
    assert run_name(headline) == name


def test_a_long_gist_is_cut_at_a_word() -> None:
    headline = "Degraded: " + " ".join(f"word{i}" for i in range(40)) + "."
    name = run_name(headline)
    assert len(name) <= RUN_NAME_MAX and name.endswith("…") and headline.startswith(name.removesuffix("…"))
    assert name.removesuffix("…").split()[-1] in headline.split()
