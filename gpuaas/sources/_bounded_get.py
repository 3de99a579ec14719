"""One HTTP GET whose whole answer is bounded: in time (a total deadline) and in size (a byte cap).

``httpx``'s timeout bounds each read, not the answer: a server that sends one byte every second never
times out, and the thread reading it never returns. A flow's task timeout cannot stop a thread, and a
worker thread that never returns keeps the process from exiting, as the interpreter joins it at exit.
So the answer is read as a stream, checked against the deadline and the cap as it comes, and a daemon
timer shuts the connection's socket down at the deadline: a read blocked on a server that drips its
headers, or goes silent mid-body, ends there too. The socket comes from ``httpx``'s documented ``trace``
request extension (the connection's ``connect_tcp`` and ``start_tls`` events). The timer is cancelled as
the request ends; no thread outlives the call.

* the whole answer did not arrive within the deadline: ``SourceUnavailable`` (``too_slow``)
* the answer is larger than the cap: ``MalformedResponse`` (no retry makes it smaller)
* anything else ``httpx`` raises: as it is, for the caller to map with its own words
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuaas.errors import MalformedResponse, SourceUnavailable

if TYPE_CHECKING:
    import ssl

    import httpx

__all__ = ["DEADLINE_FACTOR", "MAX_ANSWER_BYTES", "Answer", "bounded_get"]

MAX_ANSWER_BYTES = 512 * 2**20
"""The largest answer read (decoded), 512 MiB: a year of a large fleet's allocations is well within it, and a
server that sends more (a loop, a misrouted download) must not take the worker's memory with it."""
DEADLINE_FACTOR = 3
"""The whole answer's deadline, in request timeouts (``GPUAAS_REQUEST_TIMEOUT_SECONDS``): each read may take one,
the answer as a whole three (90 s by default), within the 120 s a source task is given."""


@dataclass(frozen=True)
class Answer:
    """What was read: the status, the headers, and the body (empty for a status of 300 or more: not read)."""

    status_code: int
    headers: httpx.Headers
    content: bytes


class _Cutoff:
    """The daemon timer that shuts the request's sockets down at the deadline, and whether it did."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.ends = time.monotonic() + seconds
        self.fired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.name = "gpuaas-answer-deadline"

    def __enter__(self) -> _Cutoff:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def trace(self, event: str, info: Mapping[str, Any]) -> None:
        """``httpx``'s ``trace`` callback: keep each socket the connection opens (and its TLS one)."""
        if not event.endswith((".connect_tcp.complete", ".start_tls.complete")):
            return
        sock = info["return_value"].get_extra_info("socket")
        if isinstance(sock, socket.socket):
            with self._lock:
                self._sockets.append(sock)
                if self.fired:  # the connection came after the deadline
                    _shut(sock)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for sock in self._sockets:
                _shut(sock)

    def check(self) -> None:
        if self.fired or time.monotonic() > self.ends:
            raise _TooSlow


class _TooSlow(Exception):
    pass


def _shut(sock: socket.socket) -> None:
    """End every read blocked on ``sock`` in another thread (``close`` would not wake it). The plain socket's
    ``shutdown``, also for a TLS one: ``SSLSocket.shutdown`` drops its TLS state under the reading thread."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:  # already closed, or detached into its TLS socket
        pass


def bounded_get(url: str, *, source: str, params: Mapping[str, str], headers: Mapping[str, str], timeout: float,
                verify: ssl.SSLContext | bool, max_bytes: int | None = None) -> Answer:
    """``GET url`` read within ``DEADLINE_FACTOR`` × ``timeout`` and ``max_bytes`` (``MAX_ANSWER_BYTES``).

    ``httpx``'s own errors are raised as they are, for the caller to map; the deadline and the cap are
    ``SourceUnavailable`` (too slow) and ``MalformedResponse``, naming ``source`` and ``url``.
    """
    import httpx

    limit = MAX_ANSWER_BYTES if max_bytes is None else max_bytes
    cutoff = _Cutoff(DEADLINE_FACTOR * timeout)
    try:
        with cutoff, httpx.Client(timeout=timeout, verify=verify) as client, client.stream(
                "GET", url, params=dict(params), headers=dict(headers), extensions={"trace": cutoff.trace}) as resp:
            length = resp.headers.get("Content-Length", "")
            if resp.status_code >= 300:
                return Answer(resp.status_code, resp.headers, b"")
            if length.isdigit() and int(length) > limit:
                raise _too_large(limit, source, url)
            body = bytearray()
            for chunk in resp.iter_bytes():
                body += chunk
                if len(body) > limit:
                    raise _too_large(limit, source, url)
                cutoff.check()
            cutoff.check()  # a body the cut-off ended early would read as a whole one
            return Answer(resp.status_code, resp.headers, bytes(body))
    except (_TooSlow, httpx.HTTPError) as exc:
        if not (isinstance(exc, _TooSlow) or cutoff.fired):
            raise
        raise SourceUnavailable(f"no whole answer within {cutoff.seconds:g} s ({DEADLINE_FACTOR} × "
                                "GPUAAS_REQUEST_TIMEOUT_SECONDS): it stopped, or arrives too slowly", source=source,
                                url=url, too_slow=True) from None


def _too_large(limit: int, source: str, url: str) -> MalformedResponse:
    return MalformedResponse(f"answer larger than {limit:,} bytes ({limit / 2**20:g} MiB), the most read; refused",
                             source=source, url=url)
