"""What the loopback relays share: a threaded HTTP server on 127.0.0.1 that can reset.

``tests/lossy_proxy.py`` (a lost response) and ``gpuaas/cluster/fault_proxy.py`` (the fault matrix) both
relay to one upstream and differ only in what their handler does to a request; the socket, the
thread, the kubeconfig pointing at the relay and the RST on close live here once.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import struct
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlsplit

import yaml

from gpuaas.cluster._http_server import EmbeddedHTTPServer

__all__ = ["HOP_BY_HOP", "LoopbackRelay", "RelayHandler", "ResettingServer"]

HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}


class ResettingServer(EmbeddedHTTPServer):
    """Closes the connections a handler marked with RST (no FIN first): 'connection reset by peer'."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.resets: set[int] = set()

    def shutdown_request(self, request: Any) -> None:
        if request.fileno() in self.resets:
            self.resets.discard(request.fileno())
            request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_request(request)
        else:
            super().shutdown_request(request)


class RelayHandler(BaseHTTPRequestHandler):
    """What every relay's handler does alike: HTTP/1.1, no access log, forward upstream, reset."""

    protocol_version = "HTTP/1.1"

    def forward(self, upstream: tuple[str, int], body: bytes, timeout_s: float,
                drop: frozenset[str] = frozenset(),
                tls: ssl.SSLContext | None = None) -> tuple[int, dict[str, str], bytes]:
        """This request sent to ``upstream`` (less the hop-by-hop headers and ``drop``); its answer read whole.
        With ``tls``, over HTTPS, the upstream's certificate checked by that context."""
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP | drop}
        connection = (http.client.HTTPSConnection(*upstream, timeout=timeout_s, context=tls) if tls is not None
                      else http.client.HTTPConnection(*upstream, timeout=timeout_s))
        try:
            connection.request(self.command, self.path, body=body or None, headers=headers)
            response = connection.getresponse()
            data = response.read()
        finally:
            connection.close()
        out = {k: v for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP | {"content-length"}}
        return response.status, out, data

    def request_body(self) -> bytes:
        """This request's body, read whole (``Content-Length``; none without one)."""
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def answer(self, status: int, body: bytes, headers: dict[str, str], length: int | None = None) -> None:
        """Send ``status``, ``headers`` and ``body``; ``length`` announces another size (a truncated answer)."""
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        self.wfile.write(body)

    def reset(self) -> None:
        """Close this connection with RST (``ResettingServer``): the client sees 'connection reset by peer'."""
        self.server.resets.add(self.connection.fileno())  # type: ignore[attr-defined]
        self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        return


class LoopbackRelay:
    """``127.0.0.1:<free port>`` -> ``upstream``, served by the handler class ``handler(self)`` builds."""

    def __init__(self, upstream: str, handler: Callable[[Any], type[BaseHTTPRequestHandler]], name: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", int(parts.port or 80))
        self.lock = threading.Lock()
        self._httpd = ResettingServer(("127.0.0.1", 0), handler(self))
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        name=name, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def kubeconfig(self, original: Path, path: Path) -> Path:
        """``original`` with its server replaced by this relay (same credentials)."""
        config: dict[str, Any] = yaml.safe_load(original.read_text())
        for cluster in config["clusters"]:
            cluster["cluster"]["server"] = self.url
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    def start(self) -> None:
        self._thread.start()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._thread.join()
        self._httpd.server_close()
