"""The Prometheus client behind Prometheus-compatible backends and the proxies in front of them.

Covered, each against a loopback server (127.0.0.1, bounded in time) that answers as the backend does:

* an nginx that refuses a request line over 8 KB (414): every query of a collect travels in the POST body,
  with the URL its path alone, and a 20 KB query is answered (a real Prometheus behind it);
* every query carries ``nocache=1`` (VictoriaMetrics' latency offset and range alignment) and
  ``max_source_resolution=0s`` (Thanos' auto-downsampling);
* a query frontend that floors a range's start and end to its step: one error naming the likely cause, not
  points moved by up to a step; a start already on the step's grid reads as asked;
* ``warnings``: Prometheus' ``PromQL info:`` annotations are no partial answer; Thanos' ``No StoreAPIs matched``
  is one error that no retry passes; any other warning is a partial answer, worth another attempt;
* a server sending a byte at a time fails within the total deadline, and an answer over the size cap fails
  as malformed, whether its length is announced or not.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from gpuaas.cluster.prometheus import PrometheusServer
from gpuaas.cluster.relay import LoopbackRelay, RelayHandler
from gpuaas.errors import MalformedResponse, SourceError, SourceUnavailable
from gpuaas.settings import GpuaasSettings
from gpuaas.sources import _prom_client
from gpuaas.sources._prom_client import DEADLINE_FACTOR, PromClient
from gpuaas.sources.failures import describe_failure
from gpuaas.sources.prometheus import queries_per_cycle, read_prometheus
from tests.sources.helpers import NOW, Sample, fixture_path, parse_exposition, series

NGINX_LINE_LIMIT = 8192
DAY_S = 86400.0


class _Nginx(LoopbackRelay):
    """A front with nginx's default 8 KB request-line buffer: 414 past it; every request seen is recorded."""

    def __init__(self, upstream: str) -> None:
        self.seen: list[dict[str, Any]] = []
        super().__init__(upstream, _nginx_handler, "nginx-8k")


def _nginx_handler(front: _Nginx) -> type[BaseHTTPRequestHandler]:
    class Handler(RelayHandler):
        def _relay(self) -> None:
            body = self.request_body()
            front.seen.append({"method": self.command, "line": len(self.requestline), "path": self.path,
                               "type": self.headers.get("Content-Type", ""),
                               "form": {k: v[0] for k, v in parse_qs(body.decode()).items()}})
            if len(self.requestline) > NGINX_LINE_LIMIT:
                self.answer(414, b"<html><head><title>414 Request-URI Too Large</title></head></html>\r\n",
                            {"Content-Type": "text/html"})
                return
            status, headers, data = self.forward(front.upstream, body, 30.0)
            self.answer(status, data, headers)

        do_GET = do_POST = _relay  # noqa: N815 - http.server dispatches on these names

    return Handler


@pytest.fixture
def nginx(prometheus_factory: Callable[[list[Sample]], PrometheusServer]) -> Iterator[_Nginx]:
    capture = parse_exposition(fixture_path("telemetry", "dcgm", "metrics-h100x8-k8s-podmapped.aicr.prom"))
    front = _Nginx(prometheus_factory(series(capture, minutes=40)).url)
    front.start()
    try:
        yield front
    finally:
        front.stop()


def test_every_query_of_a_collect_travels_in_the_body_past_an_nginx_line_limit(nginx: _Nginx) -> None:
    settings = GpuaasSettings(prometheus_url=nginx.url, request_timeout_seconds=30)
    reading = read_prometheus(settings, NOW, [30, 60])
    assert reading.gpus["gpu"].nunique() == 8 and not reading.gpus["activity_avg"].isna().any()
    assert len(nginx.seen) == reading.queries == queries_per_cycle([30, 60])  # none refused, none asked again
    client = PromClient(settings)
    long = " + ".join(["sum(DCGM_FI_DEV_GPU_UTIL)"] * 800)  # 20 KB of PromQL, over the line limit in any form
    try:
        assert len(client.query(long, NOW)) == 1
        client.query_range("sum(DCGM_FI_DEV_GPU_UTIL)", NOW - timedelta(minutes=10), NOW, 60.0)
    finally:
        client.close()
    assert nginx.seen and all(r["method"] == "POST" for r in nginx.seen)
    assert {r["path"] for r in nginx.seen} == {"/api/v1/query", "/api/v1/query_range"}  # nothing after the path
    assert max(r["line"] for r in nginx.seen) < 100
    assert all(r["type"] == "application/x-www-form-urlencoded" for r in nginx.seen)
    assert max(len(r["form"]["query"]) for r in nginx.seen) > NGINX_LINE_LIMIT
    assert all(r["form"]["nocache"] == "1" and r["form"]["max_source_resolution"] == "0s" for r in nginx.seen)


class _Fake(BaseHTTPRequestHandler):
    """Answers each query with ``answer(form)``: (status, JSON body)."""

    protocol_version = "HTTP/1.1"
    answer: Callable[[dict[str, str]], tuple[int, Any]]

    def do_POST(self) -> None:  # noqa: N802 - http.server dispatches on this name
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        form = {k: v[0] for k, v in (parse_qs(urlsplit(self.path).query) | parse_qs(body)).items()}
        status, answer = type(self).answer(form)
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def fake() -> Iterator[Callable[[Callable[[dict[str, str]], tuple[int, Any]]], PromClient]]:
    servers: list[ThreadingHTTPServer] = []
    clients: list[PromClient] = []

    def start(answer: Callable[[dict[str, str]], tuple[int, Any]]) -> PromClient:
        server = ThreadingHTTPServer(("127.0.0.1", 0), type("Fake", (_Fake,), {"answer": staticmethod(answer)}))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        clients.append(PromClient(GpuaasSettings(prometheus_url=f"http://127.0.0.1:{server.server_address[1]}",
                                                 request_timeout_seconds=5, retries=0)))
        return clients[-1]

    yield start
    for client in clients:
        client.close()
    for server in servers:
        server.shutdown()
        server.server_close()


def _step_aligned(form: dict[str, str]) -> tuple[int, Any]:
    """As Thanos' query-frontend (and Cortex/Mimir with ``align_queries_with_step``): start and end floored to the
    step, then evaluated there."""
    step = float(form["step"].removesuffix("s"))
    t, end = float(form["start"]) // step * step, float(form["end"]) // step * step
    values = []
    while t <= end:
        values.append([t, "24"])
        t += step
    return 200, {"status": "success", "data": {"resultType": "matrix",
                                               "result": [{"metric": {"gpuaas_stat": "observed_h"}, "values": values}]}}


def test_a_range_a_query_frontend_aligned_to_its_step_fails_naming_the_frontend(fake: Any) -> None:
    """Two day-steps ending 14:37: a frontend answers at midnight, where each day's figure would land a day off."""
    client = fake(_step_aligned)
    end = datetime(2026, 3, 10, 14, 37, tzinfo=UTC)
    with pytest.raises(MalformedResponse) as caught:
        client.query_range("x", end - timedelta(days=2), end, DAY_S)
    assert str(caught.value).endswith(
        "field 'data.result[0].values[0]': time 2026-03-08 00:00:00 UTC is not on the step grid asked "
        "(2026-03-08 14:37:00 UTC + k x 86400s): a query frontend aligning queries to the step? "
        "(Thanos query-frontend, Mimir align_queries_with_step)"), caught.value
    midnight = datetime(2026, 3, 10, tzinfo=UTC)  # already on the grid: the frontend changes nothing
    (row,) = client.query_range("x", midnight - timedelta(days=2), midnight, DAY_S)
    assert [t for t, _ in row["values"]] == [(midnight - timedelta(days=k)).timestamp() for k in (2, 1, 0)]


def _warning(text: str) -> Callable[[dict[str, str]], tuple[int, Any]]:
    return lambda form: (200, {"status": "success", "warnings": [text], "data": {"resultType": "vector", "result": [
        {"metric": {"pod": "p"}, "value": [float(form["time"]), "1"]}]}})


def test_a_promql_info_annotation_in_warnings_is_no_partial_answer(fake: Any) -> None:
    client = fake(_warning('PromQL info: metric might not be a counter, name does not end in _total/_sum/_count/'
                           '_bucket: "DCGM_FI_PROF_GR_ENGINE_ACTIVE"'))
    assert [r["metric"] for r in client.query("rate(DCGM_FI_PROF_GR_ENGINE_ACTIVE[5m])", NOW)] == [{"pod": "p"}]


def test_no_store_matched_is_one_error_no_retry_passes(fake: Any) -> None:
    client = fake(_warning("No StoreAPIs matched for this query"))
    with pytest.raises(SourceError) as caught:
        client.query("up", NOW)
    assert not isinstance(caught.value, SourceUnavailable)  # not transient: the tasks do not retry it
    line = describe_failure(GpuaasSettings(prometheus_url=client.url), "prometheus", caught.value)
    assert line == (f"Prometheus at {client.url}: no store holds this range: older than the backend keeps? "
                    "(Thanos, /api/v1/query: No StoreAPIs matched for this query)")


def test_any_other_warning_is_a_partial_answer_worth_another_attempt(fake: Any) -> None:
    client = fake(_warning("receive series from Addr: store-1:10901: rpc error: code = Unavailable"))
    with pytest.raises(SourceUnavailable, match=r"partial answer from /api/v1/query: receive series from Addr"):
        client.query("up", NOW)


class _Drip(BaseHTTPRequestHandler):
    """Announces a 100-byte answer, then sends one byte every 0.1 s (10 s at most, then closes)."""

    def do_POST(self) -> None:  # noqa: N802 - http.server dispatches on this name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "100")
        self.end_headers()
        try:
            for _ in range(100):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.1)
        except OSError:
            return  # the client gave up

    def log_message(self, *args: Any) -> None:
        pass


def test_a_server_sending_a_byte_at_a_time_fails_within_the_deadline() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Drip)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    timeout = 0.5
    client = PromClient(GpuaasSettings(prometheus_url=f"http://127.0.0.1:{server.server_address[1]}",
                                       request_timeout_seconds=timeout, retries=0))
    began = time.monotonic()
    try:
        with pytest.raises(SourceUnavailable) as caught:
            client.query("up", NOW)
    finally:
        client.close()
        server.shutdown()
        server.server_close()
    took = time.monotonic() - began
    assert DEADLINE_FACTOR * timeout <= took < DEADLINE_FACTOR * timeout + 1.0, took
    assert caught.value.too_slow  # a smaller question may get through
    assert str(caught.value).endswith(": answer still incomplete after 3 x 0.5 s (GPUAAS_REQUEST_TIMEOUT_SECONDS): "
                                      "the server sends too slowly"), caught.value


class _Big(BaseHTTPRequestHandler):
    """2 MiB of JSON, its length announced or sent in chunks (``chunked``)."""

    protocol_version = "HTTP/1.1"
    chunked = False

    def do_POST(self) -> None:  # noqa: N802 - http.server dispatches on this name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        data = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [],
                                                         "pad": "x" * 2**21}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Connection", "close")
        if type(self).chunked:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for at in range(0, len(data), 2**16):
                    piece = data[at:at + 2**16]
                    self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                return  # the client stopped reading
        else:
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize("chunked", [False, True], ids=["length-announced", "chunked"])
def test_an_answer_over_the_size_cap_is_malformed(monkeypatch: pytest.MonkeyPatch, chunked: bool) -> None:
    monkeypatch.setattr(_prom_client, "MAX_ANSWER_BYTES", 2**20)
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Big", (_Big,), {"chunked": chunked}))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    client = PromClient(GpuaasSettings(prometheus_url=url, request_timeout_seconds=5, retries=0))
    try:
        with pytest.raises(MalformedResponse) as caught:
            client.query("up", NOW)
    finally:
        client.close()
        server.shutdown()
        server.server_close()
    assert str(caught.value) == f"Prometheus at {url}: answer over 1 MiB: not read further"
    assert client.bytes_received == 0
