"""A history chunk that Prometheus is too slow to answer is asked again in halves.

A real Prometheus (backfilled) stands behind a loopback proxy that answers any range query of more
than ``MAX_STEPS`` steps as Prometheus answers a query past its timeout (503, ``errorType: timeout``),
or as a backend refuses one over its query limits (Prometheus' ``--query.max-samples``, Mimir's
``err-mimir-max-*``, VictoriaMetrics' ``-search.max*``): asked again in halves too. A refusal that
names no limit, or one a shorter range cannot help (VictoriaMetrics' ``-search.maxQueryLen``), is not.
The real Prometheus refuses a range of more than 11,000 points itself, and is asked again in halves;
no history chunk asks for more.
The halved reading must hold exactly the samples of one direct query; a server that refuses
connections is not asked again, and one that is always too slow is given up after a bounded number
of halvings, with the source named. The history reader asks for the next chunk while the caller
reads the one before, two queries in flight at most, and still yields its chunks in order, each
with the queries it took.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import pairwise
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from gpuaas.cluster.prometheus import PrometheusServer
from gpuaas.errors import SourceError, SourceUnavailable
from gpuaas.settings import GpuaasSettings
from gpuaas.sources import PromClient
from gpuaas.sources._prom_client import OverQueryLimit
from gpuaas.sources.history import MAX_HALVINGS, MAX_POINTS, history_chunks, pod_history, query_range_halving
from tests.sources.helpers import NOW, Sample, series

Factory = Callable[[list[Sample]], PrometheusServer]
EXPR = "DCGM_FI_DEV_GPU_UTIL"
STEP = 60.0
START, END = NOW - timedelta(minutes=59), NOW  # 60 steps


class _SlowProxy(BaseHTTPRequestHandler):
    upstream = ""
    max_steps = 0
    seen: list[int]
    refusal: tuple[int, dict[str, str]] = (503, {"status": "error", "errorType": "timeout",
                                                 "error": "query timed out in expression evaluation"})

    def _answer(self, query: dict[str, list[str]]) -> None:
        steps = round((float(query["end"][0]) - float(query["start"][0])) / float(query["step"][0].rstrip("s"))) + 1
        self.seen.append(steps)
        if steps > self.max_steps:
            status, refusal = self.refusal
            body = json.dumps(refusal).encode()
        else:
            answer = httpx.get(f"{self.upstream}{urlsplit(self.path).path}",
                               params={k: v[0] for k, v in query.items()}, timeout=10)
            body, status = answer.content, answer.status_code
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._answer(parse_qs(urlsplit(self.path).query))

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = parse_qs(self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode())
        self._answer({**parse_qs(urlsplit(self.path).query), **body})

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def prometheus(prometheus_factory: Factory) -> PrometheusServer:
    capture = [(EXPR, {"gpu": str(i), "UUID": f"GPU-{i}", "Hostname": "node-1", "namespace": "team-a",
                       "pod": f"p{i}"}, 10.0 * i) for i in range(3)]
    return prometheus_factory(series(capture, minutes=70, value=lambda _n, _l, v, i: v + i % 7))


@pytest.fixture()
def slow_proxy(prometheus: PrometheusServer) -> Iterator[Callable[..., tuple[str, list[int]]]]:
    servers: list[ThreadingHTTPServer] = []

    def start(max_steps: int, refusal: tuple[int, dict[str, str]] = _SlowProxy.refusal) -> tuple[str, list[int]]:
        seen: list[int] = []
        handler = type("Handler", (_SlowProxy,), {"upstream": prometheus.url, "max_steps": max_steps, "seen": seen,
                                                  "refusal": refusal})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}", seen

    yield start
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


def _samples(result: list[dict[str, Any]]) -> list[tuple[str, float, str]]:
    return sorted((row["metric"]["pod"], float(t), v) for row in result for t, v in row["values"])


def _client(url: str) -> PromClient:
    return PromClient(GpuaasSettings(prometheus_url=url, request_timeout_seconds=10))


def test_a_chunk_too_slow_to_answer_is_read_in_halves_with_the_same_samples(
        prometheus: PrometheusServer, slow_proxy: Callable[[int], tuple[str, list[int]]]) -> None:
    direct = _client(prometheus.url).query_range(EXPR, START, END, STEP)
    assert len(_samples(direct)) == 3 * 60
    url, seen = slow_proxy(20)
    halved = query_range_halving(_client(url), EXPR, START, END, STEP)
    assert _samples(halved) == _samples(direct)
    # 60 refused, then 30 + 30 refused, then four pieces of 15 answered.
    assert seen == [60, 30, 15, 15, 30, 15, 15]


LIMITS = {  # a backend's refusal of a query over one of its limits, as it words it
    "prometheus-max-samples": (422, "execution", "query processing would load too many samples into memory in query "
                                                 "execution"),
    "prometheus-11000-points": (400, "bad_data", "exceeded maximum resolution of 11,000 points per timeseries. Try "
                                                 "decreasing the query resolution (?step=XX)"),
    "mimir-max-chunks": (422, "execution", "the query exceeded the maximum number of chunks (limit: 2000000 chunks) "
                                           "(err-mimir-max-chunks-per-query). Consider reducing the time range"),
    "victoriametrics-max-series": (422, "422", 'error when executing query="max by (pod) (x)" on the time range '
                                               "(start=1, end=2, step=60000): cannot fetch query results: the number "
                                               "of matching timeseries exceeds 300000; either narrow down the search "
                                               "or increase -search.maxUniqueTimeseries command-line flag value"),
}


@pytest.mark.parametrize(("status", "kind", "error"), LIMITS.values(), ids=LIMITS.keys())
def test_a_chunk_refused_as_over_a_query_limit_is_read_in_halves_with_the_same_samples(
        prometheus: PrometheusServer, slow_proxy: Callable[..., tuple[str, list[int]]], status: int, kind: str,
        error: str) -> None:
    direct = _client(prometheus.url).query_range(EXPR, START, END, STEP)
    url, seen = slow_proxy(20, (status, {"status": "error", "errorType": kind, "error": error}))
    client = _client(url)
    halved = query_range_halving(client, EXPR, START, END, STEP)
    assert _samples(halved) == _samples(direct)
    assert seen == [60, 30, 15, 15, 30, 15, 15]
    assert client.queries == len(seen)


NOT_LIMITS = {
    "parse-error": (400, "bad_data", "1:5: parse error: unexpected end of input"),
    "victoriametrics-query-length": (422, "422", "too long query; got 20000 bytes; mustn't exceed "
                                                 "`-search.maxQueryLen=16384` bytes"),
}


@pytest.mark.parametrize(("status", "kind", "error"), NOT_LIMITS.values(), ids=NOT_LIMITS.keys())
def test_a_refusal_a_shorter_range_cannot_help_is_not_asked_again(
        slow_proxy: Callable[..., tuple[str, list[int]]], status: int, kind: str, error: str) -> None:
    url, seen = slow_proxy(0, (status, {"status": "error", "errorType": kind, "error": error}))
    with pytest.raises(SourceError) as caught:
        query_range_halving(_client(url), EXPR, START, END, STEP)
    assert not isinstance(caught.value, SourceUnavailable) and seen == [60]
    assert str(caught.value).endswith(f"HTTP {status} from /api/v1/query_range: {error}")


def test_a_range_past_prometheus_own_11000_points_is_read_in_halves(prometheus: PrometheusServer) -> None:
    """A real Prometheus refuses 12,000 one-minute points (HTTP 400); two halves of 6,000 answer."""
    end = START + timedelta(minutes=11_999)
    client = _client(prometheus.url)
    with pytest.raises(OverQueryLimit, match="exceeded maximum resolution of 11,000 points"):
        client.query_range(EXPR, START, end, STEP)
    halved = query_range_halving(client, EXPR, START, end, STEP)
    most = client.query_range(EXPR, START, START + timedelta(minutes=MAX_POINTS - 1), STEP)  # every sample there is
    assert _samples(halved) == _samples(most)
    assert client.queries == 1 + 3 + 1


def test_no_history_chunk_asks_for_more_points_than_a_range_query_may_hold() -> None:
    """31 days a chunk (``--chunk-hours 744``) at one-minute steps is 44,640 points: it is read in pieces."""
    chunks = history_chunks(NOW - timedelta(days=31), NOW, STEP, 31 * 24 * 3600.0)
    assert [round((b - a).total_seconds() / STEP) + 1 for a, b in chunks] == [MAX_POINTS] * 4 + [641]
    assert all(b + timedelta(seconds=STEP) == c for (_, b), (c, _) in pairwise(chunks))  # no gap, no overlap


def test_a_server_that_stays_too_slow_is_given_up_after_the_last_halving(
        slow_proxy: Callable[[int], tuple[str, list[int]]]) -> None:
    url, seen = slow_proxy(0)
    with pytest.raises(SourceUnavailable, match=r"Prometheus at http://127\.0\.0\.1:\d+: HTTP 503"):
        query_range_halving(_client(url), EXPR, START, END, STEP)
    assert len(seen) == MAX_HALVINGS + 1  # down one branch, then the first refusal at the last depth is final


def test_a_refused_connection_is_not_asked_again_in_pieces() -> None:
    client = _client("http://127.0.0.1:9")
    with pytest.raises(SourceUnavailable) as caught:
        query_range_halving(client, EXPR, START, END, STEP)
    assert not caught.value.too_slow and client.queries == 1
    # In words, as every source failure is put, not the HTTP library's exception with the query's URL.
    assert str(caught.value) == "Prometheus at http://127.0.0.1:9: connection refused (nothing listens on that port)"


def _settings(url: str) -> GpuaasSettings:
    return GpuaasSettings(prometheus_url=url, request_timeout_seconds=10)


def test_the_history_reads_ahead_yet_yields_its_chunks_in_order_each_with_its_own_queries(
        prometheus: PrometheusServer, slow_proxy: Callable[[int], tuple[str, list[int]]]) -> None:
    """Two 30-step chunks: the second is asked for while the first is being read, and each is
    halved once on the slow server (30 refused, 15 + 15 answered), so each counts three queries."""
    direct = list(pod_history(_settings(prometheus.url), START, END, chunk_s=1800))
    url, seen = slow_proxy(20)
    halved = list(pod_history(_settings(url), START, END, chunk_s=1800))
    assert [(c.index, c.start, c.queries) for c in direct] == [(1, START, 1), (2, START + timedelta(minutes=30), 2)]
    assert [(c.index, c.start, c.queries) for c in halved] == [(1, START, 3), (2, START + timedelta(minutes=30), 6)]
    assert sorted(seen) == [15, 15, 15, 15, 30, 30]
    for plain, pieces in zip(direct, halved, strict=True):
        assert len(plain.samples) == 3 * 30
        key = ["pod", "t"]
        assert pieces.samples.sort_values(key).reset_index(drop=True).equals(
            plain.samples.sort_values(key).reset_index(drop=True))


class _Overlap(_SlowProxy):
    """Holds each answer 0.2 s and records how many queries were in flight at once."""

    lock = threading.Lock()
    now = 0
    most: list[int]

    def _answer(self, query: dict[str, list[str]]) -> None:
        with self.lock:
            type(self).now += 1
            self.most.append(type(self).now)
        time.sleep(0.2)
        try:
            super()._answer(query)
        finally:
            with self.lock:
                type(self).now -= 1


def test_the_history_has_at_most_two_queries_in_flight(prometheus: PrometheusServer) -> None:
    most: list[int] = []
    handler = type("Handler", (_Overlap,), {"upstream": prometheus.url, "max_steps": 10**6, "seen": [], "most": most})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        chunks = list(pod_history(_settings(f"http://127.0.0.1:{httpd.server_address[1]}"), START, END,
                                  chunk_s=600))
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert [c.index for c in chunks] == [1, 2, 3, 4, 5, 6] and len(most) == 6
    assert max(most) == 2


def test_a_history_chunk_that_fails_raises_in_its_turn_naming_the_source(
        slow_proxy: Callable[[int], tuple[str, list[int]]]) -> None:
    url, _ = slow_proxy(0)
    with pytest.raises(SourceUnavailable, match=r"Prometheus at http://127\.0\.0\.1:\d+: HTTP 503"):
        list(pod_history(_settings(url), START, END, chunk_s=1800))
