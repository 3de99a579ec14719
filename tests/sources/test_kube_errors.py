"""Every answer the Kubernetes API can give, as the one error reader and writer raise.

A real HTTP server on 127.0.0.1 answers each request once, as told; the reader lists
RayClusters and the writer PATCHes one, through the real ``kubernetes`` client. Cases: 400, 401,
403, 404, 409 with and without a ``Status`` body, 410, 422, 429 (with ``Retry-After``), 500, 503
(a proxy's HTML page, not a Status), no answer in time, and a connection reset. Each pins the
exact one-line message (verb, kind, object, status, the Status reason and message), the error
class, whether it is worth a retry, and for a write whether it may have landed (``INDEFINITE``).
Each case sends exactly one request: the client does not retry behind the task's back (the reader's own
retries of one request, ``GPUAAS_RETRIES``, are off here: ``test_kube_list_retries`` covers them).
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from kubernetes import client

from gpuaas.actions._kube_writer import INDEFINITE, KubeWriter
from gpuaas.errors import (
    Conflict,
    Expired,
    Forbidden,
    GpuaasError,
    Invalid,
    KubeAPIError,
    NotFound,
    PermanentError,
    SourceUnavailable,
    TransientError,
    kube_error_for_status,
)
from gpuaas.settings import GpuaasSettings
from gpuaas.sources import KubeLister

TIMEOUT_S = 0.5
RV = {"metadata": {"resourceVersion": "7"}}


@dataclass
class Answer:
    """What the server does with the next request: answer ``status``, or ``hang``, or ``reset``."""

    status: int = 200
    phrase: str = "OK"
    body: bytes = b"{}"
    headers: dict[str, str] = field(default_factory=dict)
    mode: str = "answer"


@dataclass
class Server:
    url: str
    answer: Answer
    requests: list[str]


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    state = Server(url="", answer=Answer(), requests=[])

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _any(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            state.requests.append(f"{self.command} {self.path.split('?')[0]}")
            answer = state.answer
            if answer.mode == "hang":
                time.sleep(TIMEOUT_S * 3)  # bounded: the client has given up long before
                return
            if answer.mode == "reset":  # RST instead of an answer (SO_LINGER 0)
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.close_connection = True
                self.rfile.close()  # the file objects hold the socket open; closed, the close is real
                self.wfile.close()
                self.connection.close()
                return
            self.send_response(answer.status, answer.phrase)
            for key, value in {"Content-Type": "application/json", **answer.headers}.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(answer.body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(answer.body)

        do_GET = do_PATCH = _any  # noqa: N815 - the stdlib's names

        def log_message(self, *args: Any) -> None:
            pass

        def handle(self) -> None:
            try:
                super().handle()
            except (OSError, ValueError):  # the reset case closed the socket and its files under the handler
                pass

        def finish(self) -> None:
            if not self.wfile.closed:  # the reset case closed them already
                super().finish()

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()


def _status(code: int, reason: str, message: str) -> bytes:
    return json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                       "message": message, "reason": reason, "code": code}).encode()


FORBIDDEN = ('rayclusters.ray.io "train-7" is forbidden: User "system:serviceaccount:gpuaas:gpuaas" cannot patch '
             'resource "rayclusters" in API group "ray.io" in the namespace "team-a"')
CONFLICT = ('Operation cannot be fulfilled on rayclusters.ray.io "train-7": the object has been modified; please '
            "apply your changes to the latest version and try again")
HTML_503 = b"<html><body><h1>503 Service Temporarily Unavailable</h1></body></html>"

UNAVAILABLE = kube_error_for_status(503)
"""429 and 5xx: a ``KubeAPIError`` that is a ``TransientError``."""

# (id, answer, error class, the message after "<verb> <kind>[ <object>]: ")
CASES: list[tuple[str, Answer, type[GpuaasError], str]] = [
    ("400", Answer(400, "Bad Request", _status(400, "BadRequest", "the body of the request was in an unknown format")),
     KubeAPIError, "400 Bad Request: the body of the request was in an unknown format"),
    ("401", Answer(401, "Unauthorized", _status(401, "Unauthorized", "Unauthorized")),
     Forbidden, "401 Unauthorized: Unauthorized"),
    ("403", Answer(403, "Forbidden", _status(403, "Forbidden", FORBIDDEN)), Forbidden, f"403 Forbidden: {FORBIDDEN}"),
    ("404", Answer(404, "Not Found", _status(404, "NotFound", 'rayclusters.ray.io "train-7" not found')),
     NotFound, '404 Not Found: rayclusters.ray.io "train-7" not found'),
    ("409-status", Answer(409, "Conflict", _status(409, "Conflict", CONFLICT)), Conflict, f"409 Conflict: {CONFLICT}"),
    ("409-no-body", Answer(409, "Conflict", b""), Conflict, "409 Conflict"),
    ("410", Answer(410, "Gone", _status(410, "Expired", "too old resource version: 7 (4711)")),
     Expired, "410 Gone (Expired): too old resource version: 7 (4711)"),
    ("422", Answer(422, "Unprocessable Entity", _status(
        422, "Invalid", 'RayCluster.ray.io "train-7" is invalid: spec.suspend: Invalid value: "yes": must be boolean')),
     Invalid, '422 Unprocessable Entity (Invalid): RayCluster.ray.io "train-7" is invalid: spec.suspend: '
     'Invalid value: "yes": must be boolean'),
    ("429", Answer(429, "Too Many Requests", _status(429, "TooManyRequests", "storage is (re)initializing"),
                   {"Retry-After": "3"}),
     UNAVAILABLE, "429 Too Many Requests: storage is (re)initializing"),
    ("500", Answer(500, "Internal Server Error", _status(500, "InternalError",
                                                         "Internal error occurred: etcdserver: leader changed")),
     UNAVAILABLE, "500 Internal Server Error (InternalError): Internal error occurred: etcdserver: leader changed"),
    ("503-html", Answer(503, "Service Unavailable", HTML_503, {"Content-Type": "text/html"}),
     UNAVAILABLE, "503 Service Unavailable"),
    ("timeout", Answer(mode="hang"), SourceUnavailable, "no answer in time (timed out)"),
    ("reset", Answer(mode="reset"), SourceUnavailable, "connection dropped by the server"),
]
TRANSIENT = {"429", "500", "503-html", "timeout", "reset"}
PERMANENT = {"401", "403", "404", "409-status", "409-no-body", "410", "422"}
"""400 is neither: a plain ``KubeAPIError``, not retried (only a TransientError is)."""


def _api(url: str) -> client.ApiClient:
    cfg = client.Configuration()
    cfg.host = url
    cfg.retries = 0  # as make_api_client: retries belong to the task
    return client.ApiClient(cfg)


def _raised(server: Server, answer: Answer, call: Any) -> GpuaasError:
    server.answer = answer
    server.requests.clear()
    with pytest.raises(GpuaasError) as caught:
        call()
    assert len(server.requests) == 1, server.requests
    return caught.value


def _check(error: GpuaasError, case: str, cls: type[GpuaasError], line: str) -> None:
    assert type(error) is cls
    assert str(error) == line and "\n" not in str(error)
    assert isinstance(error, TransientError) is (case in TRANSIENT)
    assert isinstance(error, PermanentError) is (case in PERMANENT)
    assert error.__cause__ is not None  # the client's own error stays attached
    if case == "429":
        assert error.retry_after == 3.0  # type: ignore[attr-defined]


@pytest.mark.parametrize(("case", "answer", "cls", "tail"), CASES, ids=[c[0] for c in CASES])
def test_the_writer_raises_one_error_naming_the_request(server: Server, case: str, answer: Answer,
                                                         cls: type[GpuaasError], tail: str) -> None:
    settings = GpuaasSettings(request_timeout_seconds=TIMEOUT_S)
    with KubeWriter(settings, api_client=_api(server.url)) as writer:
        error = _raised(server, answer, lambda: writer.patch("RayCluster", "team-a", "train-7", RV))
    where = f"Kubernetes API at {server.url}: " if cls is SourceUnavailable else ""
    _check(error, case, cls, f"{where}patching RayCluster team-a/train-7: {tail}")
    assert server.requests == ["PATCH /apis/ray.io/v1/namespaces/team-a/rayclusters/train-7"]
    assert isinstance(error, INDEFINITE) is (case in TRANSIENT)  # no answer: the write may have landed


@pytest.mark.parametrize(("case", "answer", "cls", "tail"), CASES, ids=[c[0] for c in CASES])
def test_the_reader_raises_the_same_error(server: Server, case: str, answer: Answer, cls: type[GpuaasError],
                                          tail: str) -> None:
    settings = GpuaasSettings(request_timeout_seconds=TIMEOUT_S, retries=0)
    lister = KubeLister(_api(server.url), settings)
    error = _raised(server, answer, lambda: lister.custom_objects("ray.io", "v1", "rayclusters"))
    where = f"Kubernetes API at {server.url}: " if cls is SourceUnavailable else ""
    _check(error, case, cls, f"{where}listing rayclusters.ray.io/v1: {tail}")
    assert server.requests == ["GET /apis/ray.io/v1/rayclusters"]
