"""A loopback relay in front of a Kubernetes API server that loses chosen responses.

It forwards every request to the real server and relays the answer, except that it can be
told to drop the response of the next request with a given method (and, optionally, to a given
object): the request reaches the server and is applied there, then the client's connection is
reset before any byte of the answer — a lost response, as a flaky network or a load balancer
timing out produces one. It can also refuse the requests that follow (the network stays down for
a while), run a callback once the server has applied the request (someone else writes in that
moment), or hold the lost answer until the test lets go of it (the client is killed while it
waits). Nothing about the client is mocked: the official ``kubernetes`` client talks to this
relay over TCP.

In front of the embedded API it speaks plain HTTP on both sides. In front of the real
kube-apiserver (HTTPS only) it terminates TLS with a certificate of a CA made for the test
(``pki``) and forwards over HTTPS, checking the API server's certificate with the cluster's CA
(``upstream_ca``); its ``kubeconfig`` then names the relay and the test CA, with the same token.
"""

from __future__ import annotations

import base64
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import yaml

from gpuaas.cluster.real._pki import Pki
from gpuaas.cluster.relay import LoopbackRelay, RelayHandler

__all__ = ["HOLD_LIMIT_S", "Held", "LossyProxy", "lossy_proxy"]

HOLD_LIMIT_S = 120.0
"""The longest a held answer waits for its release before the connection is reset anyway."""


@dataclass
class Held:
    """A request whose answer is held: ``landed`` is set once the server has answered it (it applied the
    request); the relay resets the client's connection when ``release`` is set (or after ``HOLD_LIMIT_S``)."""

    landed: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)


@dataclass
class _Loss:
    method: str
    name: str | None
    then_refuse: int
    after: Callable[[], None] | None
    held: Held | None

    def matches(self, method: str, path: str) -> bool:
        return method == self.method and (self.name is None or path.split("?", 1)[0].endswith(f"/{self.name}"))


class LossyProxy(LoopbackRelay):
    """Relay ``127.0.0.1:<port>`` -> ``upstream``; ``drop_response`` and ``hold_response`` arm a loss."""

    def __init__(self, upstream: str, *, pki: Pki | None = None, upstream_ca: Path | None = None) -> None:
        super().__init__(upstream, _handler, name="lossy-proxy")
        self.upstream_tls = ssl.create_default_context(cafile=str(upstream_ca)) if upstream_ca else None
        self._ca_pem: bytes | None = None
        if pki is not None:
            crt, key = pki.issue("lossy-proxy")
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(crt, key)
            self._httpd.socket = context.wrap_socket(self._httpd.socket, server_side=True)
            self._ca_pem = pki.ca_pem
        self._armed: list[_Loss] = []
        self.refusing = 0
        self.dropped: list[str] = []
        """``METHOD path`` of each request whose answer was lost."""
        self.refused: list[str] = []
        """``METHOD path`` of each request reset without being forwarded."""

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"{'https' if self._ca_pem is not None else 'http'}://{host!s}:{port}"

    def kubeconfig(self, original: Path, path: Path) -> Path:
        """``original`` with its server replaced by this relay (same credentials; with TLS, the test CA)."""
        super().kubeconfig(original, path)
        if self._ca_pem is None:
            return path
        config: dict[str, Any] = yaml.safe_load(path.read_text())
        for cluster in config["clusters"]:
            cluster["cluster"].pop("certificate-authority", None)
            cluster["cluster"]["certificate-authority-data"] = base64.b64encode(self._ca_pem).decode()
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    def drop_response(self, method: str, *, name: str | None = None, then_refuse: int = 0,
                      after: Callable[[], None] | None = None) -> None:
        """Lose the answer of the next ``method`` request (to the object ``name``, when given), then reset the next
        ``then_refuse`` requests; ``after`` runs once the server has applied it, before the reset."""
        with self.lock:
            self._armed.append(_Loss(method, name, then_refuse, after, None))

    def hold_response(self, method: str, *, name: str | None = None) -> Held:
        """Hold the answer of the next ``method`` request (to ``name``, when given) until ``release``, then lose it."""
        held = Held()
        with self.lock:
            self._armed.append(_Loss(method, name, 0, None, held))
        return held

    def _verdict(self, method: str, path: str) -> _Loss | str:
        """``relay``, ``refuse`` (reset, forward nothing), or the loss to play (forward, lose the answer); ``dropped``
        and ``refused`` name each request by its path without the query (a writer's ``fieldManager``...)."""
        seen = f"{method} {path.split('?', 1)[0]}"
        with self.lock:
            if self.refusing > 0:
                self.refusing -= 1
                self.refused.append(seen)
                return "refuse"
            loss = next((x for x in self._armed if x.matches(method, path)), None)
            if loss is None:
                return "relay"
            self._armed.remove(loss)
            self.dropped.append(seen)
            self.refusing = loss.then_refuse
            return loss


def _handler(proxy: LossyProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(RelayHandler):
        def _relay(self) -> None:
            body = self.request_body()
            verdict = proxy._verdict(self.command, self.path)
            if verdict == "refuse":
                self.reset()
                return
            status, headers, data = self.forward(proxy.upstream, body, 10, tls=proxy.upstream_tls)
            if isinstance(verdict, _Loss):  # the server has applied the request; its answer never arrives
                if verdict.after is not None:
                    verdict.after()
                if verdict.held is not None:
                    verdict.held.landed.set()
                    verdict.held.release.wait(HOLD_LIMIT_S)
                self.reset()
                return
            self.answer(status, data, headers)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _relay

    return Handler


def lossy_proxy(upstream: str, *, pki: Pki | None = None, upstream_ca: Path | None = None) -> LossyProxy:
    """A lossy proxy to ``upstream``, started and stopped by ``with`` (TLS on both sides with ``pki`` and
    ``upstream_ca``: see the module docstring)."""
    return LossyProxy(upstream, pki=pki, upstream_ca=upstream_ca)
