"""``flows.direct``: a flow run as plain calls, without a Prefect API (the command line's default).

Cases: task results and states, a transient error retried and a permanent one not, ``submit``
futures, a subflow, a flow that returns a state of its own, and that nothing starts a server
(ephemeral mode is off inside, so an API call would raise instead of waiting for one).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from prefect import flow, get_run_logger, task
from prefect.states import Completed

from flows.direct import DirectState, direct_runs
from gpuaas.errors import MalformedResponse, SourceUnavailable
from gpuaas.sources import RETRYING

calls: list[str] = []


def _transient_only(task: Any, task_run: Any, state: Any) -> bool:
    try:
        state.result()
    except SourceUnavailable:
        return True
    except Exception:  # noqa: BLE001
        return False
    return False


@task(retries=2, retry_delay_seconds=0, retry_condition_fn=_transient_only)
def flaky(fail_times: int, error: type[Exception]) -> str:
    calls.append("flaky")
    if calls.count("flaky") <= fail_times:
        raise error("down", source="prometheus") if issubclass(error, SourceUnavailable | MalformedResponse) \
            else error("down")
    return "ok"


@task
def double(x: int) -> int:
    return 2 * x


@flow
def child(x: int) -> int:
    return double(x)


@flow
def parent(x: int, fail_times: int = 0) -> dict[str, Any]:
    get_run_logger().info("a null logger here: no API, no error")
    future = double.submit(x)
    future.wait(timeout=10)
    state = flaky(fail_times, SourceUnavailable, return_state=True)
    return {"submitted": future.result(), "sub": child(x), "flaky": state.is_completed(),
            "state_name": future.state.name}


@flow
def busy() -> Any:
    return Completed(message="another run is writing", data={"writes_busy": "yes"})


@pytest.fixture(autouse=True)
def _fresh_calls() -> None:
    calls.clear()


def test_a_flow_with_tasks_submit_and_a_subflow_runs_without_an_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    with direct_runs():
        state = parent(3, fail_times=2, return_state=True)
    assert isinstance(state, DirectState) and state.is_completed(), state.result(raise_on_failure=False)
    assert state.result() == {"submitted": 6, "sub": 6, "flaky": True, "state_name": "Completed"}
    assert calls == ["flaky"] * 3  # two transient failures retried, then success


def test_a_permanent_error_is_not_retried_and_fails_the_call() -> None:
    with direct_runs():
        state = flaky(5, MalformedResponse, return_state=True)
        with pytest.raises(MalformedResponse):
            flaky(5, MalformedResponse)
    assert state.is_failed() and isinstance(state.result(raise_on_failure=False), MalformedResponse)
    assert "MalformedResponse" in (state.message or "")
    assert calls == ["flaky", "flaky"]


def test_retries_stop_after_the_tasks_count_each_said_before_its_wait(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING), direct_runs():
        state = flaky(10, SourceUnavailable, return_state=True)
    assert state.is_failed() and calls == ["flaky"] * 3
    said = [getattr(r, RETRYING) for r in caplog.records if hasattr(r, RETRYING)]
    assert [(attempt, retries) for _, attempt, retries, _ in said] == [(1, 2), (2, 2)]  # the command line shows these
    assert all("down" in failure for failure, *_ in said)


def test_a_returned_state_is_unwrapped_as_prefect_does() -> None:
    with direct_runs():
        state = busy(return_state=True)
    assert state.is_completed() and state.message == "another run is writing"
    assert state.result() == {"writes_busy": "yes"}


def test_nothing_may_start_an_api_server_inside() -> None:
    from prefect.settings import get_current_settings

    with direct_runs():
        assert get_current_settings().server.ephemeral.enabled is False
