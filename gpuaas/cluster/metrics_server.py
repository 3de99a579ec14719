"""A loopback ``/metrics`` in Prometheus' text format, for the cluster's own Prometheus to scrape.

One server for both backends: the embedded cluster serves its simulation's latest samples, the
real backend serves dcgm-exporter series for the stand-in's pods. Each passes the function that
computes the samples at scrape time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from gpuaas.cluster._http_reply import EXPOSITION, reply
from gpuaas.cluster._http_server import EmbeddedHTTPServer
from gpuaas.cluster.telemetry import Sample, format_exposition

__all__ = ["MetricsServer"]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        if self.path.split("?")[0] != "/metrics":
            self.send_error(404)
            return
        with self.server.lock:
            body = format_exposition(self.server.samples()).encode()
        reply(self, 200, body, EXPOSITION)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        return


class _Server(EmbeddedHTTPServer):
    lock: threading.Lock
    samples: Callable[[], list[Sample]]


class MetricsServer:
    """Serves ``samples()`` (taken under ``lock``) on a free loopback port, in a daemon thread."""

    def __init__(self, samples: Callable[[], list[Sample]], lock: threading.Lock | None = None,
                 name: str = "metrics") -> None:
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.lock = lock or threading.Lock()
        self._httpd.samples = samples
        self._thread = threading.Thread(target=self._httpd.serve_forever, name=name, daemon=True)

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        if self._thread.is_alive():  # shutdown() of a server that never served would wait forever
            self._httpd.shutdown()
        self._httpd.server_close()
