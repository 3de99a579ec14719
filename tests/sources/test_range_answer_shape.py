"""A range answer (``/api/v1/query_range``) whose elements are not ``{"metric": {...}, "values": [[time, "number"], ...]}``
is one ``MalformedResponse`` naming Prometheus, as an instant answer's are: never a ``ValueError`` or an
``AssertionError`` from a reader that trusted it (the history pull, the cost report).

What Prometheus itself never sends, served by a stand-in on loopback (a proxy or another server at the URL).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from gpuaas.errors import MalformedResponse
from gpuaas.settings import GpuaasSettings
from gpuaas.sources.failures import describe_failure
from gpuaas.sources.history import pod_history
from tests.sources.helpers import NOW


class _Answer(BaseHTTPRequestHandler):
    body: bytes = b""

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def answering() -> Iterator[Callable[[Any], str]]:
    """An HTTP endpoint answering every query with ``result`` as a matrix."""
    handler: type[_Answer] = type("Handler", (_Answer,), {})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()

    def answer(result: Any) -> str:
        handler.body = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}).encode()
        return f"http://127.0.0.1:{httpd.server_address[1]}"

    yield answer
    httpd.shutdown()
    httpd.server_close()


POD = {"gpuaas_namespace": "team-a", "gpuaas_pod": "p"}
BAD = {
    "not-a-number": {"metric": POD, "values": [[NOW.timestamp(), "lots"]]},
    "no-value": {"metric": POD, "values": [[NOW.timestamp()]]},
    "null-point": {"metric": POD, "values": [None]},
    "metric-a-list": {"metric": ["gpuaas_pod"], "values": [[NOW.timestamp(), "0.5"]]},
}


@pytest.mark.parametrize("row", BAD.values(), ids=BAD.keys())
def test_a_range_answer_of_another_shape_is_one_error_naming_prometheus(answering: Callable[[Any], str],
                                                                       row: dict[str, Any]) -> None:
    settings = GpuaasSettings(prometheus_url=answering([row]))
    with pytest.raises(MalformedResponse, match=r"result element") as info:
        list(pod_history(settings, NOW - timedelta(minutes=10), NOW))
    assert describe_failure(settings, "prometheus", info.value).startswith(f"Prometheus at {settings.prometheus_url}: ")


def test_a_well_formed_range_answer_is_read(answering: Callable[[Any], str]) -> None:
    url = answering([{"metric": POD, "values": [[NOW.timestamp(), "0.5"], [NOW.timestamp() + 60, "NaN"]]}])
    (chunk,) = list(pod_history(GpuaasSettings(prometheus_url=url), NOW - timedelta(minutes=10), NOW))
    assert chunk.samples[["pod", "value"]].values.tolist() == [["p", 50.0]]
