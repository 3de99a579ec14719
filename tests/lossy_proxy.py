"""A loopback HTTP relay in front of the embedded API that loses chosen responses.

It forwards every request to the real server and relays the answer, except that it can be
told to drop the response of the next request with a given method: the request reaches the
server and is applied there, then the client's connection is reset before any byte of the
answer — a lost response, as a flaky network or a load balancer timing out produces one.
It can also refuse the requests that follow (the network stays down for a while). Nothing
about the client is mocked: the official ``kubernetes`` client talks to this relay over TCP.
"""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler

from gpuaas.cluster.relay import LoopbackRelay, RelayHandler

__all__ = ["LossyProxy", "lossy_proxy"]


class LossyProxy(LoopbackRelay):
    """Relay ``127.0.0.1:<port>`` -> ``upstream``; ``drop_response`` arms a loss."""

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream, _handler, name="lossy-proxy")
        self._drop: dict[str, int] = {}
        self._refuse_after_drop = 0
        self.refusing = 0
        self.dropped: list[str] = []

    def drop_response(self, method: str, *, then_refuse: int = 0) -> None:
        """Lose the answer of the next ``method`` request, then reset the next ``then_refuse`` requests."""
        with self.lock:
            self._drop[method] = self._drop.get(method, 0) + 1
            self._refuse_after_drop = then_refuse

    def _verdict(self, method: str, path: str) -> str:
        """``relay``, ``drop`` (forward, lose the answer) or ``refuse`` (reset, forward nothing)."""
        with self.lock:
            if self.refusing > 0:
                self.refusing -= 1
                return "refuse"
            if self._drop.get(method, 0) > 0:
                self._drop[method] -= 1
                self.dropped.append(f"{method} {path}")
                self.refusing = self._refuse_after_drop
                return "drop"
            return "relay"


def _handler(proxy: LossyProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(RelayHandler):
        def _relay(self) -> None:
            body = self.request_body()
            verdict = proxy._verdict(self.command, self.path)
            if verdict == "refuse":
                self.reset()
                return
            status, headers, data = self.forward(proxy.upstream, body, 10)
            if verdict == "drop":  # the server has applied the request; its answer never arrives
                self.reset()
                return
            self.answer(status, data, headers)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _relay

    return Handler


def lossy_proxy(upstream: str) -> LossyProxy:
    """A lossy proxy to ``upstream``, started and stopped by ``with``."""
    return LossyProxy(upstream)
