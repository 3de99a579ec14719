"""A worker whose clock is not Prometheus's acts on nothing, and says which clock.

Every window and age of a cycle is counted on the worker's clock while Prometheus evaluates on its own. A worker 16
minutes behind would read the telemetry of 16 minutes ago as current, fresh by every age it computes: a workload busy
since then reads idle. One ahead reads every sample as old. A loopback relay in front of the embedded cluster's real
Prometheus changes nothing but the ``Date`` header of each answer, as a Prometheus on a clock 16 minutes off would
write it; the same relay with its clock right is the control, so what the tests see comes from the clock alone.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app
from gpuaas.cluster.relay import LoopbackRelay, RelayHandler
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.testbed import write_policy
from gpuaas.settings import GpuaasSettings
from gpuaas.sources._prom_client import PromClient
from tests.actions.reclaim_scenario import IDLE_TARGETS, OPTED_OUT, target_of, writes
from tests.scenarios import point_at
from tests.sources.helpers import NOW

pytestmark = [pytest.mark.integration, pytest.mark.flow]
OFF_S = 16 * 60


class _ShiftedClock(LoopbackRelay):
    """Answers as Prometheus does, with a ``Date`` header ``shift_s`` seconds from this machine's clock."""

    def __init__(self, upstream: str) -> None:
        self.shift_s = 0.0
        super().__init__(upstream, _handler, "shifted-clock")


def _handler(relay: _ShiftedClock) -> type[BaseHTTPRequestHandler]:
    class Handler(RelayHandler):
        def date_time_string(self, timestamp: float | None = None) -> str:
            return formatdate(time.time() + relay.shift_s, usegmt=True)

        def _relay(self) -> None:
            status, headers, data = self.forward(relay.upstream, self.request_body(), 60.0)
            self.answer(status, data, {k: v for k, v in headers.items() if k.lower() != "date"})

        do_GET = do_POST = _relay  # noqa: N815 - http.server dispatches on these names

    return Handler


@pytest.fixture(scope="module")
def shifted(reclaim_fleet: EmbeddedCluster) -> Iterator[_ShiftedClock]:
    with _ShiftedClock(reclaim_fleet.prometheus_url) as relay:
        yield relay


@pytest.fixture()
def pointed_at(reclaim_fleet: EmbeddedCluster, shifted: _ShiftedClock, tmp_path: Path,
               monkeypatch: pytest.MonkeyPatch) -> EmbeddedCluster:
    return point_at(reclaim_fleet, monkeypatch, policy_file=write_policy(tmp_path / "policy.yaml"),
                    prometheus_url=shifted.url, retries=0)


def test_the_clock_is_bounded_by_each_answers_date_header(shifted: _ShiftedClock) -> None:
    shifted.shift_s = -OFF_S
    client = PromClient(GpuaasSettings(prometheus_url=shifted.url))
    try:
        assert client.clock_ahead_s is None  # nothing asked yet: not known, not 0
        client.query("vector(1)", NOW)
        client.query("vector(1)", NOW)
        low, high = client.clock_ahead_s or (0.0, 0.0)
    finally:
        client.close()
    assert low <= OFF_S <= high and high - low < 5, (low, high)  # whole seconds, and the time an answer takes


@pytest.mark.parametrize(("shift_s", "says"), [
    (-OFF_S, "this worker's clock runs about 16m ahead of Prometheus's (its Date header)"),
    (OFF_S, "this worker's clock runs about 16m behind Prometheus's (its Date header): it would read the "
            "telemetry of 16m ago as current"),
], ids=["worker-ahead", "worker-behind"])
def test_a_reclaim_on_a_clock_far_from_prometheuss_writes_nothing_and_names_the_clock(
        pointed_at: EmbeddedCluster, shifted: _ShiftedClock, prefect_harness: None, shift_s: float,
        says: str) -> None:
    runner = CliRunner()
    shifted.shift_s = 0.0  # the control: through the same relay, on a clock that agrees, the idle are found
    dry = runner.invoke(app, ["reclaim", "--format", "json"])
    assert dry.exit_code == 0, dry.output
    assert {target_of(d) for d in json.loads(dry.stdout)["decisions"]} == IDLE_TARGETS | {OPTED_OUT}

    shifted.shift_s = shift_s
    before = writes(pointed_at)
    applied = runner.invoke(app, ["reclaim", "--apply", "--format", "json"])
    assert applied.exit_code == 3, applied.output  # degraded: a source could not be used
    assert writes(pointed_at) == before
    doc = json.loads(applied.stdout)
    assert not [d for d in doc["decisions"] if d["result"] == "applied"]
    assert says in applied.output and "put both clocks right (NTP)" in applied.output, applied.output
    assert f"Prometheus at {shifted.url}" in applied.output
    assert "Traceback" not in applied.output


def test_preflight_fails_prometheus_on_a_clock_far_from_its_own(pointed_at: EmbeddedCluster,
                                                                 shifted: _ShiftedClock) -> None:
    shifted.shift_s = OFF_S
    result = CliRunner().invoke(app, ["config", "preflight", "--format", "json"])
    assert result.exit_code != 0, result.output
    [check] = [c for c in json.loads(result.stdout)["checks"] if c["check"] == "Prometheus"]
    assert check["verdict"] == "failed" and "behind Prometheus's (its Date header)" in check["detail"], check
