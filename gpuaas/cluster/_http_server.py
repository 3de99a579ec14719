"""The threaded HTTP server every embedded loopback server is built on.

The stdlib's ``socketserver.BaseServer.handle_error`` prints a full traceback to stderr for any
exception a request raises, including a client that simply went away (a load test ending, a
scraper stopping, a kubernetes client dropping a pooled connection). On ``gpuaas cluster up``
that buried the terminal under tracebacks that were no fault of the cluster. Here a client
that hung up is silent, and anything else is one log line through this module's logger, so a
real handler bug is still seen, without a traceback.
"""

from __future__ import annotations

import logging
import sys
from http.server import ThreadingHTTPServer
from typing import Any

__all__ = ["CLIENT_GONE", "EmbeddedHTTPServer"]

log = logging.getLogger(__name__)

CLIENT_GONE: tuple[type[BaseException], ...] = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError,
                                                TimeoutError)
"""What a request raises when its client hung up or stopped talking: nothing the server did wrong."""


class EmbeddedHTTPServer(ThreadingHTTPServer):
    """A ``ThreadingHTTPServer`` whose request threads never hold up exit and never print a traceback."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Called by ``socketserver`` inside the ``except`` of a failed request, so ``sys.exc_info`` is its error."""
        error = sys.exc_info()[1]
        if error is None or isinstance(error, CLIENT_GONE):
            return
        text = " ".join(str(error).split())  # one line, whatever the exception's text holds
        host, port = self.server_address[:2]
        log.error("embedded server on %s:%s: a request from %s failed: %s%s", host, port, client_address,
                  type(error).__name__, f": {text}" if text else "")
