"""``KubeHTTP`` shared by threads, as the real backend's pod stand-in, its caller and the differential
cases (two dozen threads at once) share it, against a loopback HTTPS server with a certificate of a
test CA.

In one shared connection pool a thread's request could close a connection another thread had just been
handed, under that thread's request (``[Errno 9] Bad file descriptor``): the server here sees which
connection served which thread, and a connection must only ever serve one. Covers: a thread never
reuses another thread's connection (even one left idle), two dozen threads at once all answered,
the connections of finished threads and, on ``close``, of every thread closed.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpuaas.cluster.real import KubeHTTP
from gpuaas.cluster.real._pki import Pki

THREADS = 24  # as many as the differential cases run at once: more than httpcore's 20 kept-alive connections
DEADLINE_S = 10.0


class Server:
    """``https://127.0.0.1:<port>``: answers every GET with an empty list, and records which request
    paths each connection (the client's port) carried and which connections the client has closed."""

    def __init__(self, pki: Pki) -> None:
        self.paths: dict[int, list[str]] = defaultdict(list)
        self.ended: set[int] = set()
        self._lock = threading.Lock()
        crt, key = pki.issue("kubeapi")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(crt, key)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._httpd.socket = context.wrap_socket(self._httpd.socket, server_side=True, do_handshake_on_connect=False)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="kubeapi-test", daemon=True)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self._httpd.server_address[1]}"

    def record(self, port: int, path: str) -> None:
        with self._lock:
            self.paths[port].append(path)

    def end(self, port: int) -> None:
        with self._lock:
            self.ended.add(port)

    def connections_of(self, thread: str) -> set[int]:
        """The client ports whose requests named ``thread``."""
        with self._lock:
            return {port for port, paths in self.paths.items() if any(p.endswith(f"/{thread}") for p in paths)}

    def threads_per_connection(self) -> dict[int, set[str]]:
        with self._lock:
            return {port: {p.rsplit("/", 1)[-1] for p in paths} for port, paths in self.paths.items()}

    def __enter__(self) -> Server:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def _handler(server: Server) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: a connection carries request after request

        def handle(self) -> None:
            try:
                super().handle()
            except OSError:
                pass
            finally:
                server.end(self.client_address[1])

        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            server.record(self.client_address[1], self.path)
            body = json.dumps({"kind": "PodList", "items": []}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the stdlib's name
            pass

    return Handler


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[Server]:
    with Server(Pki(tmp_path / "pki")) as running:
        yield running


@pytest.fixture()
def api(server: Server, tmp_path: Path) -> Iterator[KubeHTTP]:
    client = KubeHTTP(server.url, tmp_path / "pki" / "ca.crt", "token")
    yield client
    client.close()


def _as(thread: str, call: Callable[[], object]) -> None:
    """Run ``call`` in a new thread named ``thread`` and wait for it; its exception is raised here."""
    failures: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller
            failures.append(exc)

    worker = threading.Thread(target=run, name=thread)
    worker.start()
    worker.join(DEADLINE_S)
    if failures:
        raise failures[0]


def _wait_until(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {DEADLINE_S:.0f} s: {what}")
        time.sleep(0.02)


def test_a_thread_never_gets_a_connection_another_thread_left_idle(server: Server, api: KubeHTTP) -> None:
    # The first thread's connection stays open and idle (keep-alive) while the second sends.
    running = threading.Event()
    release = threading.Event()

    def first() -> None:
        api.get("Pod", "one", "ns")
        running.set()
        release.wait(DEADLINE_S)  # alive, so its client is its own and kept

    holder = threading.Thread(target=first, name="one")
    holder.start()
    try:
        assert running.wait(DEADLINE_S)
        _as("two", lambda: api.get("Pod", "two", "ns"))
    finally:
        release.set()
        holder.join(DEADLINE_S)
    assert server.connections_of("one") and server.connections_of("two")
    assert server.connections_of("one").isdisjoint(server.connections_of("two"))


def test_two_dozen_threads_at_once_are_all_answered_each_on_its_own_connections(server: Server,
                                                                                api: KubeHTTP) -> None:
    start = threading.Barrier(THREADS)

    def one(i: int) -> list[str]:
        start.wait(DEADLINE_S)
        failed = []
        for _ in range(20):
            try:
                api.get("Pod", f"t{i}", "ns")
            except Exception as exc:  # noqa: BLE001 - each one counted, none lost
                failed.append(f"{type(exc).__name__}: {exc}")
        return failed

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        failures = [f for failed in pool.map(one, range(THREADS)) for f in failed]
    assert failures == []
    shared = {port: threads for port, threads in server.threads_per_connection().items() if len(threads) > 1}
    assert shared == {}, f"connections that served several threads: {shared}"
    assert sum(len(p) for p in server.paths.values()) == THREADS * 20


def test_the_connections_of_finished_threads_and_on_close_of_all_are_closed(server: Server, api: KubeHTTP) -> None:
    _as("gone", lambda: api.get("Pod", "gone", "ns"))
    [gone] = server.connections_of("gone")
    assert gone not in server.ended  # kept alive until a thread that comes later cleans up
    _as("later", lambda: api.get("Pod", "later", "ns"))
    _wait_until("the finished thread's connection is closed", lambda: gone in server.ended)

    api.get("Pod", "main", "ns")
    api.close()
    everyone = set(server.paths)
    _wait_until("every connection is closed", lambda: everyone <= server.ended)
    with pytest.raises(RuntimeError, match="closed"):
        api.get("Pod", "main", "ns")
