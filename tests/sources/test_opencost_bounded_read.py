"""OpenCost's answer is read within a total deadline and a byte cap, and its reader never outlives it.

A raw loopback server answers each request in one of a few ways, every one bounded (at most
``DRIP_FOR`` seconds, then the connection is closed): dripping its body one byte at a time, dripping its
headers, or sending a body larger than the cap (with and without a
``Content-Length``). Each drip is a ``SourceUnavailable`` (too slow) within the deadline plus a margin,
each oversized body a ``MalformedResponse``, each one line; no thread is left behind. A process whose
non-daemon worker thread reads a dripping OpenCost exits within the deadline, where it waited on the
reader before (the interpreter joins such threads at exit).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuaas.errors import MalformedResponse, SourceError, SourceUnavailable
from gpuaas.settings import GpuaasSettings
from gpuaas.sources import _bounded_get
from gpuaas.sources.opencost import fetch_allocation

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 0.5
"""The request timeout the cases run with: the deadline is ``DEADLINE_FACTOR`` of it (1.5 s)."""
DRIP_FOR = 30.0
"""The longest the server keeps a connection: well past every deadline, so a reader that waits for the
server's end is told apart from one that stops at the deadline."""
EMPTY = b'{"code": 200, "status": "success", "data": []}'


def _serve(conn: socket.socket, mode: str) -> None:
    conn.settimeout(DRIP_FOR)
    ends = time.monotonic() + DRIP_FOR
    try:
        conn.recv(65536)  # the request: a GET, one segment on loopback
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        if mode == "body-drip":
            conn.sendall(head + b"Content-Length: 1000000\r\n\r\n" + EMPTY[:-1])
            while time.monotonic() < ends:
                conn.sendall(b" ")
                time.sleep(0.05)
        elif mode == "head-drip":
            for byte in head:
                if time.monotonic() >= ends:
                    break
                conn.sendall(bytes([byte]))
                time.sleep(0.05)
        elif mode == "large-length":
            conn.sendall(head + b"Content-Length: 5000\r\n\r\n" + b" " * 5000)
        elif mode == "large-chunked":
            conn.sendall(head + b"Transfer-Encoding: chunked\r\n\r\n"
                         + (b"3e8\r\n" + b" " * 1000 + b"\r\n") * 5 + b"0\r\n\r\n")
        elif mode == "fits":
            conn.sendall(head + b"Content-Length: %d\r\n\r\n" % len(EMPTY) + EMPTY)
            conn.recv(1)
    except OSError:  # the reader shut its end: the case is over
        pass
    finally:
        conn.close()


@pytest.fixture
def opencost(request: pytest.FixtureRequest) -> Iterator[str]:
    """A loopback server answering every connection in the case's ``mode``; its URL."""
    mode: str = request.param
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()
    served: list[threading.Thread] = []

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=_serve, args=(conn, mode), daemon=True)
            thread.start()
            served.append(thread)

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        acceptor.join(5)
        listener.close()


def _settings(url: str) -> GpuaasSettings:
    return GpuaasSettings(opencost_url=url, request_timeout_seconds=TIMEOUT)


def _non_daemon_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if not t.daemon}


@pytest.mark.parametrize("opencost", ["body-drip", "head-drip"], indirect=True)
def test_an_answer_that_does_not_arrive_whole_in_time_is_a_source_error_at_the_deadline(opencost: str) -> None:
    before = _non_daemon_threads()
    deadline = _bounded_get.DEADLINE_FACTOR * TIMEOUT
    started = time.monotonic()
    with pytest.raises(SourceUnavailable) as raised:
        fetch_allocation(_settings(opencost), {"window": "1h"})
    took = time.monotonic() - started
    assert deadline - 0.1 <= took < deadline + 2.0, took
    assert raised.value.too_slow
    assert str(raised.value) == (f"OpenCost at {opencost}/allocation: no whole answer within {deadline:g} s "
                                 f"({_bounded_get.DEADLINE_FACTOR} × GPUAAS_REQUEST_TIMEOUT_SECONDS): it stopped, or "
                                 "arrives too slowly")
    time.sleep(0.1)
    assert not [t for t in threading.enumerate() if t.name == "gpuaas-answer-deadline"]
    assert _non_daemon_threads() <= before


@pytest.mark.parametrize("opencost", ["large-length", "large-chunked"], indirect=True)
def test_an_answer_larger_than_the_cap_is_a_source_error(opencost: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_bounded_get, "MAX_ANSWER_BYTES", 4096)
    with pytest.raises(MalformedResponse) as raised:
        fetch_allocation(_settings(opencost), {"window": "1h"})
    assert str(raised.value) == (f"OpenCost at {opencost}/allocation: answer larger than 4,096 bytes "
                                 "(0.00390625 MiB), the most read; refused")


@pytest.mark.parametrize("opencost", ["fits"], indirect=True)
def test_an_answer_within_both_bounds_is_read(opencost: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_bounded_get, "MAX_ANSWER_BYTES", len(EMPTY))
    assert fetch_allocation(_settings(opencost), {"window": "1h"}).empty


def test_the_default_cap_and_deadline() -> None:
    assert _bounded_get.MAX_ANSWER_BYTES == 512 * 2**20
    assert _bounded_get.DEADLINE_FACTOR * GpuaasSettings().request_timeout_seconds < 120  # a source task's timeout


@pytest.mark.parametrize("opencost", ["body-drip"], indirect=True)
def test_a_process_whose_worker_thread_reads_a_dripping_opencost_exits(opencost: str) -> None:
    """The flow gave up on the task, and the process then waited at exit for the thread still reading."""
    script = textwrap.dedent(f"""
        from concurrent.futures import ThreadPoolExecutor, TimeoutError
        from gpuaas.errors import SourceError
        from gpuaas.settings import GpuaasSettings
        from gpuaas.sources.opencost import fetch_allocation

        def read():
            try:
                fetch_allocation(GpuaasSettings(opencost_url={opencost!r}, request_timeout_seconds={TIMEOUT}),
                                 {{"window": "1h"}})
            except SourceError as exc:
                print(exc, flush=True)

        pool = ThreadPoolExecutor(1)
        future = pool.submit(read)
        try:
            future.result(timeout=0.2)
        except TimeoutError:
            print("gave up", flush=True)
    """)
    started = time.monotonic()
    try:
        run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                             timeout=DRIP_FOR - 5)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the process did not exit within {DRIP_FOR - 5:g} s: its reader thread kept it alive")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0] == "gave up"
    assert "no whole answer within" in run.stdout
    assert time.monotonic() - started < 15
    assert issubclass(SourceUnavailable, SourceError)
