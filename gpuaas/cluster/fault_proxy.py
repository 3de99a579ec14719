"""A loopback HTTP fault proxy: real faults on real sockets, for the fault tests and the benchmarks.

It relays every request to one upstream (the embedded API, Prometheus, OpenCost or the
Pushgateway) except those matched by an armed fault, which it answers itself or damages:
a held request (``hold``: answered by a reset once released, ``pause``: relayed once released),
an HTTP 500, a hang past the client's timeout, a TCP reset (RST, no answer), a slow answer,
429 with ``Retry-After``, a 409 storm on PATCH, the API server's 410 for a list's expired ``continue`` token, a truncated or malformed body, Prometheus's
``status: error``, or a partial Prometheus result with ``warnings``. Every fault is bounded
(``times``), every hang is bounded (``hang_s``), and it listens on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from gpuaas.cluster.relay import LoopbackRelay, RelayHandler

__all__ = ["FAULTS", "Fault", "FaultProxy", "Hit", "fault_proxy"]

FAULTS = ("hold", "pause", "500", "timeout", "reset", "slow", "429", "409", "410", "truncated", "malformed", "prom_error",
          "prom_warnings", "down")


@dataclass
class Fault:
    """``kind`` on the next ``times`` requests whose method and path match."""

    kind: str
    times: int = 1
    method: str | None = None
    path: str | None = None
    hang_s: float = 3.0
    retry_after: int = 1
    forward: bool = False
    """``hold``: forward the request before holding (the write lands, its answer never comes)."""

    def matches(self, method: str, path: str) -> bool:
        return (self.method is None or self.method == method) and (self.path is None or self.path in path)


@dataclass
class Hit:
    kind: str
    method: str
    path: str
    at: float = field(default_factory=time.monotonic)
    body: bytes = b""
    size: int = 0
    """Bytes of the answer relayed (the bench counts what a cycle receives)."""


UPSTREAM_TIMEOUT_S = 30.0
"""How long the relay waits for its upstream; the fleet-size bench raises it (a 16,000-GPU query takes minutes)."""


class FaultProxy(LoopbackRelay):
    """Relay ``127.0.0.1:<port>`` -> ``upstream``; ``arm`` queues a fault."""

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream, _handler, name="fault-proxy")
        self.faults: list[Fault] = []
        self.hits: list[Hit] = []
        self.relayed: list[Hit] = []
        self._local = threading.local()  # the handler thread's own Hit, to record the answer's size
        self.held = threading.Event()  # a ``hold`` fault has the request (and, if forwarded, the write is done)
        self.release = threading.Event()

    def arm(self, kind: str, times: int = 1, **match: Any) -> None:
        if kind not in FAULTS:
            raise ValueError(f"unknown fault {kind!r}")
        with self.lock:
            self.faults.append(Fault(kind, times, **match))

    def clear(self) -> None:
        with self.lock:
            self.faults.clear()
            self.hits.clear()
            self.relayed.clear()
            self.held.clear()
            self.release.clear()

    def _take(self, method: str, path: str, body: bytes = b"") -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.times > 0 and fault.matches(method, path):
                    fault.times -= 1
                    self.hits.append(Hit(fault.kind, method, path))
                    return fault
            self.relayed.append(Hit("relay", method, path, body=body))
            self._local.hit = self.relayed[-1]
            return None


_EXPIRED = json.dumps({
    "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired", "code": 410,
    # what kube-apiserver 1.35 answers, an inconsistent rest offered to go on with included
    "metadata": {"continue": "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6LTEsInN0YXJ0IjoieCJ9"},
    "message": "The provided continue parameter is too old to display a consistent list result. You can start a new "
               "list without the continue parameter, or use the continue token in this response to retrieve the "
               "remainder of the results. Continuing with the provided token results in an inconsistent list - "
               "objects that were created, modified, or deleted between the time the first chunk was returned and "
               "now may show up in the list.",
}).encode()
"""The API server's answer to a page whose ``continue`` token is older than etcd keeps (``410``)."""


def _prom_partial(data: bytes) -> bytes:
    """Half the series of a Prometheus answer, with the ``warnings`` a partial answer carries."""
    body = json.loads(data)
    result = body.get("data", {}).get("result")
    if isinstance(result, list):
        body["data"]["result"] = result[: len(result) // 2]
    body["warnings"] = ["partial response: a store did not answer in time"]
    return json.dumps(body).encode()


def _handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(RelayHandler):
        def _answer(self, status: int, body: bytes, headers: dict[str, str] | None = None,
                    length: int | None = None) -> None:
            self.answer(status, body, headers or {"Content-Type": "application/json"}, length)

        def _relay(self) -> None:
            body = self.request_body()
            fault = proxy._take(self.command, self.path, body)
            kind = fault.kind if fault else "relay"
            if kind == "hold" and fault is not None:  # the caller kills the client meanwhile
                if fault.forward:
                    self._forward(body)
                proxy.held.set()
                proxy.release.wait(timeout=30)
                self.reset()
                return
            if kind == "pause":  # the caller does something (restarts the database) meanwhile
                proxy.held.set()
                proxy.release.wait(timeout=30)
            if kind in ("reset", "down"):
                self.reset()
                return
            if kind == "timeout":
                time.sleep(fault.hang_s if fault else 0)
                self.reset()
                return
            if kind == "500":
                self._answer(500, b'{"kind":"Status","status":"Failure","message":"injected","code":500}')
                return
            if kind == "429":
                retry = str(fault.retry_after if fault else 1)
                self._answer(429, b'{"kind":"Status","status":"Failure","message":"slow down","code":429}',
                             {"Content-Type": "application/json", "Retry-After": retry})
                return
            if kind == "409":
                self._answer(409, b'{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Conflict",'
                                  b'"message":"the object has been modified","code":409}')
                return
            if kind == "410":
                self._answer(410, _EXPIRED)
                return
            if kind == "prom_error":
                self._answer(422, b'{"status":"error","errorType":"execution","error":"query timed out"}')
                return
            if kind == "slow":
                time.sleep(fault.hang_s if fault else 0)
            status, out, data = self._forward(body)
            if kind == "malformed":
                self._answer(200, data[: len(data) // 2] + b"<html>", out)
            elif kind == "truncated":  # promises the whole body, sends half, then closes
                self._answer(status, data[: len(data) // 2], out, length=len(data))
                self.close_connection = True
            elif kind == "prom_warnings" and status == 200:
                self._answer(200, _prom_partial(data), out)
            else:
                if fault is None:
                    proxy._local.hit.size = len(data)
                self._answer(status, data, out)

        def _forward(self, body: bytes) -> tuple[int, dict[str, str], bytes]:
            # Identity encoding from the upstream, so that a damaged body is damaged JSON, not damaged gzip.
            return self.forward(proxy.upstream, body, UPSTREAM_TIMEOUT_S, drop=frozenset({"accept-encoding"}))

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _relay

    return Handler


def fault_proxy(upstream: str) -> FaultProxy:
    """A fault proxy to ``upstream``, started and stopped by ``with``."""
    return FaultProxy(upstream)
