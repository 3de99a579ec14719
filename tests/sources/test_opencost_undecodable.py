"""An OpenCost answer that cannot be read as sent (a body that does not decode as its ``Content-Encoding`` says,
as a broken proxy serves it) is one ``SourceError`` naming OpenCost, never httpx's own exception: the cost
report catches ``GpuaasError`` to fall back to OpenCost's metrics, and anything else ended it with a traceback.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from gpuaas.errors import SourceError
from gpuaas.settings import GpuaasSettings
from gpuaas.sources.failures import describe_failure
from gpuaas.sources.opencost import read_opencost
from tests.sources.helpers import NOW


class _BadGzip(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        body = b"this is not gzip at all"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def bad_gzip() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _BadGzip)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_an_answer_that_does_not_decode_is_one_source_error(bad_gzip: str) -> None:
    settings = GpuaasSettings(opencost_url=bad_gzip)
    with pytest.raises(SourceError) as info:
        read_opencost(settings, NOW, 60)
    line = describe_failure(settings, "opencost", info.value)
    assert line.startswith(f"OpenCost at {bad_gzip}: ") and "\n" not in line
