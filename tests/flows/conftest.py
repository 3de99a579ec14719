"""Fixtures of the operations tests: a real HTTP receiver for the notification webhook."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


class Received(list[dict[str, Any]]):
    """The JSON bodies POSTed to the receiver, in order; ``url`` is where to send them."""

    url: str


@pytest.fixture()
def webhook(monkeypatch: pytest.MonkeyPatch) -> Iterator[Received]:
    """An HTTP server on 127.0.0.1 (free port) that records POSTs; GPUAAS_NOTIFY_WEBHOOK_URL points at it."""
    received = Received()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            length = int(self.headers.get("Content-Length") or 0)
            received.append({"content_type": self.headers.get("Content-Type"),
                             "body": json.loads(self.rfile.read(length))})
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    received.url = f"http://127.0.0.1:{server.server_address[1]}/hook?token=s3cret-hook-token"
    monkeypatch.setenv("GPUAAS_NOTIFY_WEBHOOK_URL", received.url)
    try:
        yield received
    finally:
        server.shutdown()
        server.server_close()
