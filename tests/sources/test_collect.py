"""``gpuaas.operations.collect.read_snapshot`` end to end: the embedded API server, a real Prometheus holding the H100
capture, and an OpenCost endpoint that fails in each way a real one can (a loopback server
that accepts and never answers, HTTP 500, a body that is not JSON). One failing source
degrades the snapshot; only every source failing is an error.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpuaas.cluster.apiserver import ApiServer, ObjectStore
from gpuaas.cluster.prometheus import PrometheusServer, free_port
from gpuaas.errors import SourceUnavailable
from gpuaas.operations.collect import read_snapshot
from gpuaas.settings import GpuaasSettings
from tests.fixed_answer import token_kubeconfig
from tests.sources.helpers import NOW, Sample, fixture_path, parse_exposition, series
from tests.sources.test_kube import cluster_queue, workload

VLLM_POD = "vllm-agg-0-vllmdecodeworker-s65j5"


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback socket that accepts connections and never answers."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield int(sock.getsockname()[1])
    finally:
        sock.close()


def _http(status: int, body: bytes) -> tuple[ThreadingHTTPServer, str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_GET  # noqa: N815 - PromQL queries are POSTed, in the body (test_prom_backends.py)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def fleet(tmp_path: Path, prometheus_factory: Callable[[list[Sample]], PrometheusServer]) -> Iterator[dict[str, object]]:
    store = ObjectStore()
    store.create(cluster_queue("cq-a", "all", "8"))
    store.create({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                  "metadata": {"name": "lq-a", "namespace": "dynamo-workload"}, "spec": {"clusterQueue": "cq-a"}})
    store.create(workload("wl-vllm", "dynamo-workload", {"Admitted": "True", "QuotaReserved": "True"}, count=1,
                          gpus="1", owner=("Pod", VLLM_POD)))
    store.create(workload("wl-pending", "dynamo-workload", {}, count=2, gpus="2"))
    store.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": VLLM_POD, "namespace": "dynamo-workload"},
                  "spec": {"nodeName": "gpu-node-1", "containers": [{"name": "main", "image": "x", "resources": {
                      "requests": {"nvidia.com/gpu": "1"}}}]}, "status": {"phase": "Running"}})
    api = ApiServer(store)
    api.start()
    prom = prometheus_factory(series(parse_exposition(fixture_path("telemetry", "dcgm",
                                                                  "metrics-h100x8-k8s-podmapped.aicr.prom")), minutes=40))
    try:
        yield {"kubeconfig": api.write_kubeconfig(tmp_path / "kc"), "prometheus_url": prom.url}
    finally:
        api.stop()


def test_healthy_sources_join(fleet: dict[str, object]) -> None:
    snap = read_snapshot(GpuaasSettings(**fleet), NOW)  # type: ignore[arg-type]
    assert snap.sources["kube"].ok and snap.sources["prometheus"].ok
    assert snap.sources["opencost"].ok  # no OpenCost URL: computed from its metrics (none here: empty)
    assert not snap.sources["nvml"].ok
    summary = snap.summary()
    assert summary["queues"] == [{"name": "cq-a", "cohort": "all", "pending_workloads": 1, "pending_gpus": 4.0,
                                  "oldest_pending_seconds": summary["queues"][0]["oldest_pending_seconds"],
                                  "admitted_gpus": 4.0, "nominal_gpus": 8.0}]
    assert summary["workloads"] == 2 and summary["unknown_telemetry"] == 0


@pytest.mark.parametrize("failure", ["timeout", "http-500", "malformed-json"])
def test_failing_opencost_degrades_the_snapshot(fleet: dict[str, object], silent_port: int, failure: str) -> None:
    server = None
    if failure == "timeout":
        url = f"http://127.0.0.1:{silent_port}"
    else:
        server, url = _http(500, b'{"code":500}') if failure == "http-500" else _http(200, b"{not json")
    try:
        settings = GpuaasSettings(**fleet, opencost_url=url, request_timeout_seconds=0.5)  # type: ignore[arg-type]
        snap = read_snapshot(settings, NOW)
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
    status = snap.sources["opencost"]
    assert not status.ok and snap.degraded
    expected = {"timeout": "no answer in time", "http-500": "HTTP 500", "malformed-json": "not JSON"}[failure]
    assert expected in (status.error or "")
    assert snap.sources["kube"].ok and snap.sources["prometheus"].ok and len(snap.workloads) == 2


def test_malformed_prometheus_marks_telemetry_unknown(fleet: dict[str, object]) -> None:
    server, url = _http(200, json.dumps({"status": "success"}).encode())
    try:
        snap = read_snapshot(GpuaasSettings(kubeconfig=fleet["kubeconfig"], prometheus_url=url), NOW)  # type: ignore[arg-type]
    finally:
        server.shutdown()
        server.server_close()
    assert snap.sources["prometheus"].error == f"Prometheus at {url}: query answer: 'data' is missing"
    wl = snap.workloads.set_index("name")
    assert wl.loc["wl-vllm", "telemetry"] == "unknown"  # no telemetry is never idle
    assert snap.summary()["unknown_telemetry"] == 1


MIMIR_MAX_SERIES = ("the query exceeded the maximum number of series (limit: 100000 series) "
                    "(err-mimir-max-series-per-query). Consider reducing the time range and/or number of series "
                    "selected by the query. One way to reduce the number of selected series is to add more label "
                    "matchers to the query. Otherwise, to adjust the related per-tenant limit, configure "
                    "-querier.max-fetched-series-per-query, or contact your service administrator.")


@pytest.mark.parametrize(("status", "error", "words"), [
    (422, MIMIR_MAX_SERIES, "HTTP 422: refused: the query exceeded the maximum number of series (limit: 100000 "
                            "series) (err-mimir-max-series-per-query). Consider reducing"),
    (400, "partial response disabled; receive series from Addr: store-1:10901: rpc error: code = Unavailable",
     "HTTP 400: bad request: partial response disabled; receive series from Addr: store-1:10901: rpc error: code = "
     "Unavailable"),
], ids=["mimir-422", "thanos-400"])
def test_a_refused_query_keeps_the_servers_reason_in_the_source_error(
        fleet: dict[str, object], status: int, error: str, words: str) -> None:
    """The status's words alone ("HTTP 422: refused") say neither which limit was hit nor where to raise it."""
    server, url = _http(status, json.dumps({"status": "error", "errorType": "execution", "error": error}).encode())
    try:
        snap = read_snapshot(GpuaasSettings(kubeconfig=fleet["kubeconfig"], prometheus_url=url), NOW)  # type: ignore[arg-type]
    finally:
        server.shutdown()
        server.server_close()
    line = snap.sources["prometheus"].error or ""
    assert line.startswith(f"Prometheus at {url}: {words}"), line
    assert len(line) <= 500 and "\n" not in line


def test_every_source_failing_is_an_error(tmp_path: Path, silent_port: int) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    kubeconfig = token_kubeconfig(tmp_path / "kc", dead)
    settings = GpuaasSettings(kubeconfig=kubeconfig, prometheus_url=dead,
                              opencost_url=f"http://127.0.0.1:{silent_port}", request_timeout_seconds=0.5)
    with pytest.raises(SourceUnavailable, match="every source failed"):
        read_snapshot(settings, NOW)
