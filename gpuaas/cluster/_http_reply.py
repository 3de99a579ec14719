"""One answer from an embedded loopback server: status, type, length and body, in that order.

The API server, OpenCost, the serving endpoint and the exporters all answer on kept-alive
connections, where a client reads exactly ``Content-Length`` bytes; writing the answer in one place
keeps every server from forgetting the length or sending it after the body.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any

__all__ = ["EXPOSITION", "reply", "reply_json"]

EXPOSITION = "text/plain; version=0.0.4; charset=utf-8"
"""Prometheus' text exposition format, as ``/metrics`` serves it."""


def reply(handler: BaseHTTPRequestHandler, status: int, data: bytes, content_type: str = "application/json") -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def reply_json(handler: BaseHTTPRequestHandler, status: int, body: Any) -> None:
    reply(handler, status, json.dumps(body).encode())
