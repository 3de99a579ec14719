"""What the loopback relays share: a threaded HTTP server on 127.0.0.1 that can reset.

``tests/lossy_proxy.py`` (a lost response) and ``gpuaas/cluster/fault_proxy.py`` (the fault matrix) both
relay to one upstream and differ only in what their handler does to a request; the socket, the
thread, the kubeconfig pointing at the relay and the RST on close live here once.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

__all__ = ["HOP_BY_HOP", "LoopbackRelay", "ResettingServer"]

HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}


class ResettingServer(ThreadingHTTPServer):
    """Closes the connections a handler marked with RST (no FIN first): 'connection reset by peer'."""

    daemon_threads = True

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

    def stop(self) -> None:
        self._httpd.shutdown()
        self._thread.join()
        self._httpd.server_close()
