"""A loopback relay in front of a real Prometheus that rewrites the answers to the queries it is told about.

For what a real Prometheus computes right but a proxy, a federation layer or a bad exporter can still hand gpuaas: a
sample time of ``1e308``, GPU-hours of ``1e308``, an OpenCost series gone or negative. The query is still asked of
the real Prometheus (its PromQL, its data), and only the answer is changed on the way back, so the test exercises
the queries gpuaas sends as well as how it reads what comes back. It listens on 127.0.0.1, on a port the system
picks; ``rewrite`` is ``(query, answer) -> answer``, the answer decoded (``{"status": ..., "data": {...}}``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from gpuaas.cluster.relay import LoopbackRelay, RelayHandler

__all__ = ["Rewrite", "each_point", "rewriting_prometheus"]

Rewrite = Callable[[str, dict[str, Any]], dict[str, Any]]


def _unchanged(_query: str, answer: dict[str, Any]) -> dict[str, Any]:
    return answer


class _Relay(LoopbackRelay):
    def __init__(self, upstream: str) -> None:
        self.rewrite: Rewrite = _unchanged
        super().__init__(upstream, _handler, "rewriting-prometheus")


def _handler(relay: _Relay) -> type[BaseHTTPRequestHandler]:
    class Handler(RelayHandler):
        def _relay(self) -> None:
            body = self.request_body()
            form = parse_qs(body.decode()) | parse_qs(urlsplit(self.path).query)  # POST, as gpuaas asks; or GET
            # uncompressed, to be read here: Prometheus gzips for a client that accepts it
            status, headers, data = self.forward(relay.upstream, body, 60.0, drop=frozenset({"accept-encoding"}))
            if status == 200 and "/api/v1/query" in self.path:
                data = json.dumps(relay.rewrite(form.get("query", [""])[0], json.loads(data))).encode()
            self.answer(status, data, headers)

        do_GET = do_POST = _relay  # noqa: N815 - http.server dispatches on these names

    return Handler


def each_point(answer: dict[str, Any], change: Callable[[dict[str, str], float, str], tuple[float, str] | None]
               ) -> dict[str, Any]:
    """``answer`` with each point (a vector's ``value``, each of a matrix's ``values``) replaced by
    ``change(labels, time, value)``, or left out of its series where that is None (a series left with no point is
    left out too)."""
    kept = []
    for series in answer["data"]["result"]:
        if "value" in series:
            point = change(series["metric"], *series["value"])
            if point is not None:
                kept.append({**series, "value": list(point)})
            continue
        values = [list(p) for t, v in series["values"] if (p := change(series["metric"], t, v)) is not None]
        if values:
            kept.append({**series, "values": values})
    answer["data"]["result"] = kept
    return answer


@contextmanager
def rewriting_prometheus(upstream: str) -> Iterator[Callable[[Rewrite], str]]:
    """Yields ``point(rewrite)``: from then on every answer passes through ``rewrite``; it returns the relay's URL."""
    relay = _Relay(upstream)
    relay.start()

    def point(rewrite: Rewrite) -> str:
        relay.rewrite = rewrite
        return relay.url

    try:
        yield point
    finally:
        relay.stop()
