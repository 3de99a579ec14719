"""What the Prometheus client sends and what it says when Prometheus refuses it.

Durations: Prometheus parses ``<integer><unit>`` and nothing else, so a step or a range of a
million seconds or more (14 days is 1,209,600 s) must not be written in exponent form, and a
fraction of a second must not be rounded away. A query_range with a 14-day step over eight
weeks, on a real Prometheus, answers. A refused query names Prometheus' own reason (a real
Prometheus answers invalid PromQL with HTTP 400 and an ``error`` text), bounded and with its
control characters written out, whatever a server puts there.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from gpuaas.cluster.prometheus import PrometheusServer, free_port
from gpuaas.errors import SourceError, SourceUnavailable
from gpuaas.settings import GpuaasSettings
from gpuaas.sources._prom_client import ERROR_CHARS, PromClient
from gpuaas.sources._promql import duration
from tests.sources.helpers import NOW

DAY_S = 86400


@pytest.mark.parametrize(("seconds", "text"), [
    (999_999, "999999s"),
    (1_000_000, "1000000s"),  # where ``:g`` turns to 1e+06
    (1_000_000.0, "1000000s"),
    (1_209_600, "1209600s"),  # 14 days
    (14 * DAY_S * 26.0, "31449600s"),  # a year of 14-day steps, as a float
    (60.0, "60s"),
    (59, "59s"),
    (0.5, "500ms"),  # half a second is not 0s
    (1.5, "1500ms"),
    (1_000_000.25, "1000000250ms"),
    (0.001, "1ms"),
])
def test_durations_are_whole_digits_and_one_unit(seconds: float, text: str) -> None:
    assert duration(seconds) == text


@pytest.mark.integration
def test_a_14_day_step_over_eight_weeks_answers(prometheus_factory: Callable[[Any], PrometheusServer]) -> None:
    """One sample at each 14-day step of the last 56 days (value k at NOW - 14 d x (4 - k)): the range query
    at a 14-day step reads exactly those five points."""
    step = 14 * DAY_S
    points = [NOW - timedelta(seconds=step * (4 - k)) for k in range(5)]
    server = prometheus_factory([("gpuaas_test_marker", {"job": "t"}, float(k), t.timestamp())
                                 for k, t in enumerate(points)])
    client = PromClient(GpuaasSettings(prometheus_url=server.url))
    try:
        rows = client.query_range("gpuaas_test_marker", points[0], points[-1], float(step))
    finally:
        client.close()
    assert len(rows) == 1
    assert [(float(ts), float(v)) for ts, v in rows[0]["values"]] == [(t.timestamp(), float(k))
                                                                     for k, t in enumerate(points)]


@pytest.mark.integration
def test_a_refused_query_says_what_prometheus_said(prometheus_factory: Callable[[Any], PrometheusServer]) -> None:
    server = prometheus_factory([("gpuaas_test_marker", {"job": "t"}, 1.0, NOW.timestamp())])
    client = PromClient(GpuaasSettings(prometheus_url=server.url))
    try:
        with pytest.raises(SourceError) as instant:
            client.query("sum(gpuaas_test_marker", NOW)
        with pytest.raises(SourceError) as ranged:
            client.query_range("rate(gpuaas_test_marker)", NOW - timedelta(hours=1), NOW, 60.0)
    finally:
        client.close()
    assert not isinstance(instant.value, SourceUnavailable)  # a 400 is not retried
    text = str(instant.value)
    assert text.startswith(f"Prometheus at {server.url}: HTTP 400 from /api/v1/query: "), text
    assert "parse error" in text  # Prometheus' own words, from its JSON body
    text = str(ranged.value)
    assert text.startswith(f"Prometheus at {server.url}: HTTP 400 from /api/v1/query_range: "), text
    assert "expected type range vector" in text  # rate() of an instant vector


class _Refusing(BaseHTTPRequestHandler):
    """Answers every request with HTTP 400 and the JSON body in ``server.body``."""

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        body = json.dumps(self.server.body).encode()  # type: ignore[attr-defined]
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture()
def refusing() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_the_error_text_is_one_bounded_line_with_control_characters_written_out(
        refusing: ThreadingHTTPServer) -> None:
    refusing.body = {"status": "error", "errorType": "bad_data",  # type: ignore[attr-defined]
                     "error": "bad\x1b[2J\nquery\x00 " + "x" * 1000}
    url = f"http://127.0.0.1:{refusing.server_address[1]}"
    client = PromClient(GpuaasSettings(prometheus_url=url))
    try:
        with pytest.raises(SourceError) as refused:
            client.query("up", NOW)
    finally:
        client.close()
    text = str(refused.value)
    prefix = f"Prometheus at {url}: HTTP 400 from /api/v1/query: "
    assert text.startswith(prefix + "bad\\x1b[2J query\\x00 xxx"), text  # the newline is a space, the rest escaped
    assert "\x1b" not in text and "\x00" not in text and "\n" not in text
    assert len(text) == len(prefix) + ERROR_CHARS and text.endswith("x…")


def test_an_error_without_a_json_body_keeps_the_status(refusing: ThreadingHTTPServer) -> None:
    refusing.body = "not an object"  # type: ignore[attr-defined]
    url = f"http://127.0.0.1:{refusing.server_address[1]}"
    client = PromClient(GpuaasSettings(prometheus_url=url))
    try:
        with pytest.raises(SourceError) as refused:
            client.query_range("up", NOW - timedelta(hours=1), NOW, 60.0)
    finally:
        client.close()
    assert str(refused.value) == f"Prometheus at {url}: HTTP 400 from /api/v1/query_range"


class _Redirect(BaseHTTPRequestHandler):
    """A proxy in front of Prometheus that sends every query elsewhere (a login page, another port)."""

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(302)
        self.send_header("Location", f"http://127.0.0.1:{free_port()}/login")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = _answer  # http.server dispatches on these names

    def log_message(self, *args: Any) -> None:
        pass


def test_a_failure_behind_a_redirect_names_where_it_was_sent() -> None:
    """Before, a query redirected to a port nothing listens on read as the configured URL refusing: the one port
    that was answering."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Redirect)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    client = PromClient(GpuaasSettings(prometheus_url=url, request_timeout_seconds=5, retries=0))
    try:
        with pytest.raises(SourceUnavailable) as refused:
            client.query("up", NOW)
    finally:
        client.close()
        httpd.shutdown()
        httpd.server_close()
    text = str(refused.value)
    assert text.startswith(f"Prometheus at {url}: redirected to http://127.0.0.1:"), text
    assert text.endswith(": connection refused (nothing listens on that port)"), text


class _SendsElsewhere(BaseHTTPRequestHandler):
    """A front that sends every query on to ``target`` with a 307 (the method and body kept)."""

    target = ""

    def do_POST(self) -> None:  # noqa: N802 - http.server dispatches on this name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(307)
        self.send_header("Location", f"{self.target}{self.path}")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


class _Recorder(BaseHTTPRequestHandler):
    """Where a redirect lands: records each request's headers, answers an empty vector."""

    seen: list[dict[str, str]] = []

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).seen.append({k.lower(): v for k, v in self.headers.items()})
        body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer  # http.server dispatches on these names

    def log_message(self, *args: Any) -> None:
        pass


def test_a_redirect_to_another_server_carries_neither_the_token_nor_the_extra_headers() -> None:
    """``requests`` drops ``Authorization`` on a redirect to another server; an API key in
    ``GPUAAS_PROMETHEUS_HEADERS`` is as much a credential, and is dropped there too."""
    recorder = type("Recorder", (_Recorder,), {"seen": []})
    landing = ThreadingHTTPServer(("127.0.0.1", 0), recorder)
    target = f"http://127.0.0.1:{landing.server_address[1]}"
    redirect = type("SendsThere", (_SendsElsewhere,), {"target": target})
    front = ThreadingHTTPServer(("127.0.0.1", 0), redirect)
    servers = [landing, front]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    settings = GpuaasSettings(prometheus_url=f"http://127.0.0.1:{front.server_address[1]}", retries=0,
                              prometheus_token="t0ken", prometheus_headers={"X-Api-Key": "k3y", "X-Scope-OrgID": "a"})
    client = PromClient(settings)
    try:
        assert client.query("up", NOW) == []
    finally:
        client.close()
        for server in servers:
            server.shutdown()
            server.server_close()
    [landed] = recorder.seen
    assert not {"authorization", "x-api-key", "x-scope-orgid"} & set(landed), landed


def test_a_figure_out_of_bounds_names_its_series_with_the_servers_label_values_quoted_and_escaped() -> None:
    """The label values are the server's: one holding a newline and an escape sequence must neither end the error's
    line (a log would read the rest as a line of its own) nor move a terminal's cursor, nor read as another label."""
    client = PromClient(GpuaasSettings(prometheus_url="http://127.0.0.1:9"))
    rows = [{"metric": {"gpuaas_stat": "observed_h", "pod": 'p", namespace="prod\nerror: \x1b[2Jall clear'},
             "values": [[1_700_000_000, "1e308"]]}]
    with pytest.raises(SourceError) as raised:
        client.check_bounded(rows, 100.0, "GPU-hours")
    text = str(raised.value)
    assert "\n" not in text and "\x1b" not in text
    assert 'observed_h of {pod="p\\", namespace=\\"prod\\nerror: \\u001b[2Jall clear"}' in text, text
    client.close()
