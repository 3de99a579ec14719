"""The Prometheus fixture is real: a capture from dcgm-exporter, backfilled with promtool, queried
with prometheus-api-client exactly as the collect flow will query it."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from prometheus_api_client import PrometheusConnect
from prometheus_client.parser import text_string_to_metric_families

from gpuaas.cluster.prometheus import PrometheusServer, free_port, to_openmetrics
from gpuaas.errors import GpuaasError

CAPTURE = "fixtures/telemetry/dcgm/metrics-h100x8-k8s-podmapped.aicr.prom"


def _capture_as_history(text: str, now: float, minutes: int) -> tuple[str, dict[tuple[str, str], float]]:
    """Replay each captured sample once a minute for ``minutes`` minutes ending a minute before now."""
    samples = []
    util: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            for step in range(minutes):
                samples.append((sample.name, dict(sample.labels), float(sample.value), now - 60 * (minutes - step)))
            if sample.name == "DCGM_FI_DEV_GPU_UTIL":
                util[(sample.labels["Hostname"], sample.labels["gpu"])] = float(sample.value)
    return to_openmetrics(samples), util


def test_backfilled_dcgm_capture_is_queryable(
    shared_dir: Path, prometheus_factory: Callable[[str], PrometheusServer]
) -> None:
    now = time.time()
    history, util = _capture_as_history((shared_dir / CAPTURE).read_text(), now, minutes=90)
    prom = prometheus_factory(history)
    client = PrometheusConnect(url=prom.url, disable_ssl=True)

    result = client.custom_query(
        "avg_over_time(DCGM_FI_DEV_GPU_UTIL[1h])", params={"time": now}
    )
    got = {(r["metric"]["Hostname"], r["metric"]["gpu"]): float(r["value"][1]) for r in result}
    assert got == util and len(got) == 8

    per_pod = client.custom_query(
        'sum by (namespace, pod) (count_over_time(DCGM_FI_DEV_GPU_UTIL{pod!=""}[30m]))', params={"time": now}
    )
    assert [(r["metric"]["namespace"], r["metric"]["pod"], r["value"][1]) for r in per_pod] == [
        ("dynamo-workload", "vllm-agg-0-vllmdecodeworker-s65j5", "30")
    ]


def _listening_on(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


def test_a_port_of_its_own_choice_taken_before_the_start_is_chosen_again(tmp_path: Path) -> None:
    server = PrometheusServer(tmp_path / "prometheus")
    chosen = server.port
    with _listening_on(chosen):  # another worker's server took it in between
        with server:
            assert server.port != chosen
            assert httpx.get(f"{server.url}/-/ready", timeout=5).status_code == 200


def test_a_port_the_caller_gave_is_not_changed_behind_its_back(tmp_path: Path) -> None:
    port = free_port()
    server = PrometheusServer(tmp_path / "prometheus", port=port)
    with _listening_on(port), pytest.raises(GpuaasError, match="address already in use"):
        server.start()
    assert server.port == port


def test_free_ports_lie_below_the_ports_the_kernel_hands_out_itself() -> None:
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = {free_port() for _ in range(20)}
    assert all(20000 <= port < low for port in ports)
    assert len(ports) > 1  # chosen at random, so two workers rarely try the same one


def test_a_server_its_killed_owner_left_running_is_stopped_by_the_next_start_and_no_other_process(
        tmp_path: Path) -> None:
    """The server runs in a session of its own, so ``kill -9`` of its owner (``gpuaas cluster up``) leaves it
    serving: the next start on the same directory stops it first. A pid file naming another process is ignored."""
    orphaned = PrometheusServer(tmp_path / "prometheus")
    orphaned.start()
    left = orphaned._proc
    assert left is not None
    orphaned._proc = None  # its owner died: nothing will stop it
    try:
        with PrometheusServer(tmp_path / "prometheus") as again:
            assert left.wait(timeout=20) is not None  # stopped before the new one started
            assert httpx.get(f"{again.url}/-/ready", timeout=5).status_code == 200
            assert (tmp_path / "prometheus" / "prometheus.pid").read_text().strip() == str(again._proc.pid)  # type: ignore[union-attr]
        assert not (tmp_path / "prometheus" / "prometheus.pid").exists()  # stopped cleanly: nothing to stop next time
    finally:
        if left.poll() is None:
            left.kill()
    bystander = subprocess.Popen(["sleep", "30"])
    try:
        (tmp_path / "other").mkdir()
        (tmp_path / "other" / "prometheus.pid").write_text(f"{bystander.pid}\n")
        with PrometheusServer(tmp_path / "other"):
            assert bystander.poll() is None  # not a Prometheus of this directory: left alone
    finally:
        bystander.kill()
        bystander.wait()
