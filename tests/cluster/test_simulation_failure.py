"""The live simulation thread never dies with a traceback: what it raises stops the cluster with one line.

A clock past the last date a datetime can have (an absurd ``--speed``), or any bug in a step, would otherwise end
the ``simulation`` thread with a traceback on stderr while the API server went on serving a cluster frozen at its
last step. ``wait`` (the foreground loop of ``gpuaas cluster up``) raises ``SimulationFailed`` instead, which the
command prints as one line before it stops everything. Prometheus and the history replay are left out: the
thread is what is tested.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpuaas.cluster.clock import ManualClock
from gpuaas.cluster.prometheus import PrometheusServer
from gpuaas.cluster.runner import EmbeddedCluster, SimulationFailed
from gpuaas.cluster.scenario import parse_scenario
from gpuaas.errors import GpuaasError
from tests.scenarios import HAND_CHECKED

EPOCH = datetime(2026, 11, 1, tzinfo=UTC)


def test_a_failing_simulation_step_stops_the_cluster_with_one_line(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(EmbeddedCluster, "_backfill", lambda self: None)
    monkeypatch.setattr(PrometheusServer, "start", lambda self: None)
    monkeypatch.setattr(PrometheusServer, "stop", lambda self: None)
    uncaught: list[object] = []
    monkeypatch.setattr(threading, "excepthook", uncaught.append)  # what would print the thread's traceback
    cluster = EmbeddedCluster(parse_scenario(HAND_CHECKED), tmp_path, history=timedelta(0), clock=ManualClock(EPOCH),
                              live_interval=0.01)

    def overflow() -> list[object]:
        raise OverflowError("cannot convert float infinity to integer")

    monkeypatch.setattr(cluster.sim, "tick", overflow)
    try:
        cluster.start()
        cluster.clock.advance(timedelta(minutes=1))  # the next live step ticks, and fails
        loop = cluster._loop
        assert loop is not None
        loop.join(timeout=10)
        assert not loop.is_alive(), "the simulation thread went on"
        assert uncaught == []
        with pytest.raises(SimulationFailed) as failed:
            cluster.wait(threading.Event())
    finally:
        cluster.stop()
    assert isinstance(failed.value, GpuaasError)  # what `cluster up` prints as one line, exit 1
    assert str(failed.value) == ("the simulation stopped at 2026-11-01 00:00:00 simulated time: OverflowError: "
                                 "cannot convert float infinity to integer")
    assert cluster.failure is failed.value


def test_a_cluster_stopped_on_request_has_no_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(EmbeddedCluster, "_backfill", lambda self: None)
    monkeypatch.setattr(PrometheusServer, "start", lambda self: None)
    monkeypatch.setattr(PrometheusServer, "stop", lambda self: None)
    cluster = EmbeddedCluster(parse_scenario(HAND_CHECKED), tmp_path, history=timedelta(0), clock=ManualClock(EPOCH),
                              live_interval=0.01)
    stop = threading.Event()
    try:
        cluster.start()
        cluster.clock.advance(timedelta(minutes=1))
        stop.set()
        cluster.wait(stop)  # returns: stopped, not failed
    finally:
        cluster.stop()
    assert cluster.failure is None
