"""A run stopped by bad input is named after what stopped it, as a run that completes is named after its headline.

The Prefect UI's runs list shows run names, not state messages: a run left with Prefect's generated
name ("crafty-panda") says nothing until a person opens it. Real runs on the Prefect test server, no
cluster: each input here is refused before anything is read (a snapshot id the store lacks, a policy
file with a bad value, a parameter of the wrong type, a window out of range), and the failure
notification (a real HTTP receiver) carries the new name too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flows._outcome import failure_name, run_name
from tests.flows.conftest import Received

pytestmark = [pytest.mark.flow]


def _name(state: Any) -> str:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return str(client.read_flow_run(state.state_details.flow_run_id).name)


@pytest.fixture()
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUAAS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("GPUAAS_POLICY_FILE", raising=False)
    return tmp_path / "data"


@pytest.mark.usefixtures("prefect_harness", "data_dir")
def test_a_reclaim_given_a_missing_snapshot_is_named_after_it(webhook: Received) -> None:
    from flows.reclaim import reclaim

    state = reclaim(snapshot_id=999999, return_state=True)
    assert state.is_failed(), state.message
    assert _name(state) == "snapshot 999999 is not in the store"
    [sent] = [r["body"] for r in webhook if r["body"]["status"] == "failed"]
    assert sent["flow_run"] == "snapshot 999999 is not in the store"


@pytest.mark.usefixtures("prefect_harness", "data_dir")
def test_a_bad_policy_file_names_the_run_by_file_and_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.rebalance import rebalance

    policy = tmp_path / "deep" / "folder" / "policy.yaml"
    policy.parent.mkdir(parents=True)
    policy.write_text("rebalance:\n  max_step_percent: lots\n")
    monkeypatch.setenv("GPUAAS_POLICY_FILE", str(policy))
    state = rebalance(return_state=True)
    assert state.is_failed(), state.message
    assert str(policy) in str(state.message)  # the run page keeps the whole path
    name = _name(state)
    assert name.startswith("policy.yaml: rebalance.max_step_percent: ") and "folder" not in name, name


@pytest.mark.usefixtures("prefect_harness", "data_dir")
def test_a_parameter_out_of_range_names_the_run_after_the_parameter() -> None:
    from flows.rebalance import rebalance

    state = rebalance(history_days=-3, return_state=True)
    assert state.is_failed(), state.message
    assert _name(state) == "history_days: must be above 0 and at most 366 days, got -3"


@pytest.mark.usefixtures("prefect_harness", "data_dir")
def test_a_parameter_prefect_refuses_names_the_run_after_the_parameter() -> None:
    """Prefect's own parameter validation fails the run before the flow's code (and its run context) starts."""
    from flows.reclaim import reclaim

    state = reclaim(snapshot_id="latest", return_state=True)
    assert state.is_failed(), state.message
    name = _name(state)
    assert name.startswith("invalid parameter snapshot_id: Input should be a valid integer"), name


def test_a_fault_keeps_prefects_name_and_a_verdict_keeps_its_own() -> None:
    """A fault's message is no gist of what the run did (its bug report needs the traceback, not a name); a run
    that ``failed`` ended on what it found is named by its headline already."""
    from flows import RunFailed
    from gpuaas.errors import ConfigError

    assert failure_name(KeyError("cohort")) is None
    assert failure_name(RunFailed("1 failed", {})) is None
    assert failure_name(None) is None
    long = ConfigError("/etc/gpuaas/policy.yaml: tenants[3].cluster_queues: " + "x" * 200)
    assert failure_name(long) == run_name("policy.yaml: tenants[3].cluster_queues: " + "x" * 200)
    url = ConfigError("GPUAAS_PROMETHEUS_URL: http://prom.monitoring:9090/api/v1/query is no Prometheus")
    assert failure_name(url) == str(url)  # a URL is no file: said whole


@pytest.mark.usefixtures("prefect_harness", "data_dir")
def test_a_collect_told_to_look_ahead_is_refused_before_anything_is_stored(data_dir: Path) -> None:
    """``prefect deployment run collect/collect --param at=…`` with a later instant: the run fails on the parameter
    (named after it in the runs list) and the store, whose pruning counts back from the run's instant, is never
    opened."""
    from datetime import UTC, datetime, timedelta

    from flows.collect import collect

    ahead = (datetime.now(UTC) + timedelta(days=30)).replace(microsecond=0)
    state = collect(at=ahead.isoformat(), return_state=True)
    assert state.is_failed(), state.message
    assert f"at: {ahead:%Y-%m-%dT%H:%M:%S}Z is in the future (" in str(state.message)
    assert _name(state).startswith(f"at: {ahead:%Y-%m-%dT%H:%M:%S}Z is in the future")
    assert not data_dir.exists()
