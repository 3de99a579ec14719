"""A loopback HTTPS front for a plain-HTTP server, as an auth proxy stands before a cluster's Prometheus.

OpenShift's thanos-querier and kube-rbac-proxy serve a source over TLS, with a certificate of the
cluster's own CA, and let through only a bearer token they accept. This front does the same on
127.0.0.1: TLS with a certificate of a CA made for the test (``Pki``), then 401 unless the request
carries ``Authorization: Bearer <token>`` (when a token is set) and, with a tenant set, that
``X-Scope-OrgID`` (as a multi-tenant Mimir or Cortex asks), then the request relayed to the real
server behind it. The client side is not mocked: gpuaas's own HTTP clients talk to it.
"""

from __future__ import annotations

import ssl
from http.server import BaseHTTPRequestHandler

from gpuaas.cluster.real._pki import Pki
from gpuaas.cluster.relay import LoopbackRelay, RelayHandler

__all__ = ["TlsFront"]


class TlsFront(LoopbackRelay):
    """``https://127.0.0.1:<port>`` -> ``upstream``; ``token`` (when set) is the one bearer token let through."""

    def __init__(self, upstream: str, pki: Pki, name: str, token: str | None = None,
                 tenant: str | None = None) -> None:
        super().__init__(upstream, _handler, name=f"tls-front-{name}")
        crt, key = pki.issue(name)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(crt, key)
        self._httpd.socket = context.wrap_socket(self._httpd.socket, server_side=True)
        self.token = token
        self.tenant = tenant
        """The ``X-Scope-OrgID`` a request must carry, as a multi-tenant Mimir or Cortex asks (when set)."""
        self.relayed: list[str] = []
        """``METHOD path`` of every request let through."""
        self.refused = 0

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"https://{host!s}:{port}"

    def _admit(self, method: str, path: str, authorization: str | None, tenant: str | None) -> bool:
        with self.lock:
            if (self.token is not None and authorization != f"Bearer {self.token}") or (
                    self.tenant is not None and tenant != self.tenant):
                self.refused += 1
                return False
            self.relayed.append(f"{method} {path}")
            return True


def _handler(front: TlsFront) -> type[BaseHTTPRequestHandler]:
    class Handler(RelayHandler):
        def _relay(self) -> None:
            body = self.request_body()
            if front._admit(self.command, self.path, self.headers.get("Authorization"),
                            self.headers.get("X-Scope-OrgID")):
                status, headers, data = self.forward(front.upstream, body, 30, drop=frozenset({"authorization"}))
            else:
                status, headers, data = 401, {"Content-Type": "text/plain"}, b"Unauthorized\n"
            self.answer(status, data, headers)

        do_GET = do_POST = do_PUT = do_DELETE = _relay  # noqa: N815 - the stdlib's names

    return Handler
