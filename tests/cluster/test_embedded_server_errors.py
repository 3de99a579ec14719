"""The embedded cluster's HTTP servers never print a traceback on the terminal of ``gpuaas cluster up``.

A client that resets its connection mid-request is silent, and the server goes on answering; a
handler that fails for any other reason is one log line, without a traceback. Every server is
started for real on 127.0.0.1 and reached over a real socket; the reset is a real RST
(``SO_LINGER`` with a zero timeout, then close).
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gpuaas.cluster.apiserver import ApiServer, ObjectStore
from gpuaas.cluster.metrics_server import MetricsServer
from gpuaas.cluster.opencost import CostLedger, OpenCostServer
from gpuaas.cluster.telemetry import Sample

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
DEADLINE_S = 10.0

# (base URL, a path the server answers 200 on, stop)
Started = tuple[str, str, Callable[[], None]]


def _api_server() -> Started:
    server = ApiServer(ObjectStore(clock=lambda: NOW))
    server.start()
    return server.url, "/version", server.stop


def _opencost() -> Started:
    server = OpenCostServer(CostLedger(), lambda: NOW)
    server.start()
    return server.url, "/allocation?window=1h", server.stop


def _metrics(samples: Callable[[], list[Sample]] = list) -> tuple[str, str, Callable[[], None]]:
    server = MetricsServer(samples)
    server.start()
    return f"http://{server.target}", "/metrics", server.stop


SERVERS: dict[str, Callable[[], Started]] = {"api server": _api_server, "opencost": _opencost, "metrics": _metrics}


def _request_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.endswith("(process_request_thread)")}


@contextmanager
def _requests_finish() -> Iterator[None]:
    """Wait (bounded) until every request thread started inside the block has ended: its error is handled."""
    before = _request_threads()
    yield
    deadline = time.monotonic() + DEADLINE_S
    while (_request_threads() - before) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not (_request_threads() - before), "a request thread did not end in time"


def _reset_mid_request(url: str) -> None:
    """Send a request line and half a header, then close with RST instead of FIN."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=DEADLINE_S) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Half")
        time.sleep(0.05)  # let the server read the request line and block on the rest of the headers
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _get(url: str) -> int:
    with urllib.request.urlopen(url, timeout=DEADLINE_S) as response:  # noqa: S310 - loopback http only
        response.read()
        return int(response.status)


@pytest.mark.parametrize("start", SERVERS.values(), ids=SERVERS.keys())
def test_a_client_resetting_its_connection_prints_nothing_and_the_server_keeps_answering(
        start: Callable[[], Started], capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    url, path, stop = start()
    try:
        capfd.readouterr()
        with _requests_finish():
            _reset_mid_request(url)
            assert _get(url + path) == 200
        assert capfd.readouterr().err == ""
        assert [r for r in caplog.records if r.name.startswith("gpuaas.cluster")] == []
        with _requests_finish():
            assert _get(url + path) == 200
    finally:
        stop()


def test_the_reset_does_make_a_stock_server_print_a_traceback(capfd: pytest.CaptureFixture[str]) -> None:
    """The control for the test above: the same reset is an error a server must handle, not a no-op."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            self.send_response(204)
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        capfd.readouterr()
        with _requests_finish():
            _reset_mid_request(f"http://127.0.0.1:{server.server_address[1]}")
            # Accepted in order: once this is answered, the reset connection has its thread.
            assert _get(f"http://127.0.0.1:{server.server_address[1]}/") == 204
        err = capfd.readouterr().err
        assert "Traceback" in err and "ConnectionResetError" in err
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=DEADLINE_S)


def test_a_handler_failing_unexpectedly_is_one_log_line_without_a_traceback(
        capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> list[Sample]:
        raise RuntimeError("samples went wrong\non two lines")

    url, path, stop = _metrics(broken)
    try:
        capfd.readouterr()
        with caplog.at_level(logging.DEBUG), _requests_finish():
            with pytest.raises((urllib.error.URLError, ConnectionError)):  # the answer never came
                _get(url + path)
        ours = [r for r in caplog.records if r.name.startswith("gpuaas.cluster")]
        assert len(ours) == 1
        record = ours[0]
        assert record.levelno >= logging.WARNING and record.exc_info is None
        message = record.getMessage()
        assert "\n" not in message
        assert "RuntimeError: samples went wrong on two lines" in message
        assert url.removeprefix("http://") in message  # which server it was
        assert "Traceback" not in capfd.readouterr().err
    finally:
        stop()
