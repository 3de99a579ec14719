"""Test servers that give every request the same answer, for what a real source never sends.

``fixed_answer_server`` listens on 127.0.0.1 (a port the system picks) and answers GET, POST and PATCH with the
body, status and extra headers last set; ``token_kubeconfig`` is a kubeconfig whose only cluster is such a server.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class _Answer(BaseHTTPRequestHandler):
    status = 200
    body = b""
    extra: dict[str, str] = {}

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(self.status)
        for name, value in self.extra.items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    do_GET = do_POST = do_PATCH = _answer  # http.server dispatches on these names

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def fixed_answer_server() -> Iterator[Callable[..., str]]:
    """Yields ``answer(body, status, headers)``: every request from then on gets that answer; it returns the
    server's URL."""
    handler: type[_Answer] = type("Handler", (_Answer,), {})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()

    def answer(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> str:
        handler.body, handler.status, handler.extra = body, status, dict(headers or {})
        return f"http://127.0.0.1:{httpd.server_address[1]}"

    try:
        yield answer
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def token_kubeconfig(path: Path, server: str) -> Path:
    """A kubeconfig at ``path`` whose one context reaches ``server`` with a bearer token."""
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "x", "cluster": {"server": server}}],
        "users": [{"name": "x", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}]}))
    return path
