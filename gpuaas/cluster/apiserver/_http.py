"""``ApiServer``: the store behind real HTTP, in the URL layout of the Kubernetes API.

The point is that production code cannot tell it from a real API server: it is reached with
the official ``kubernetes`` client through a kubeconfig, answers errors as ``kind: Status``
bodies, and counts every request by path template so tests can assert how many calls a
flow made (``server.requests["GET /apis/kueue.x-k8s.io/v1beta2/workloads"]``).

``disabled_versions`` (``{"kueue.x-k8s.io/v1beta2"}``) unserves group versions the way an
older cluster does not serve them: 404 on every path under them, absent from discovery. A
test of a Kueue that serves only ``v1beta1`` uses it.
"""

from __future__ import annotations

import collections
import hmac
import json
import logging
import os
import socket
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

import yaml

from gpuaas.cluster._http_reply import reply
from gpuaas.cluster._http_server import EmbeddedHTTPServer

from . import _core_events, _discovery
from ._errors import ApiError
from ._listing import list_body
from ._patch import CONTENT_TYPES
from ._rbac import RBACRules
from ._resources import Resource, convert, resource_for_plural
from ._store import ObjectStore
from ._tables import metadata_list_of, printed, table_of

__all__ = ["ApiServer", "Visibility"]

log = logging.getLogger(__name__)

Visibility = Callable[[str, str | None, str, int, int], dict[str, Any] | None]
_TOKEN = "gpuaas-embedded-token"


def _not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource")


@dataclass(frozen=True)
class _Target:
    """A parsed resource URL."""

    res: Resource
    version: str
    namespace: str | None
    name: str | None
    subresource: str | None
    template: str


def _parse_target(group: str, version: str, rest: list[str], prefix: str) -> _Target:
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        res = resource_for_plural(group, version, rest[2])
        if res is not None and res.namespaced:
            namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        raise _not_found()
    res = resource_for_plural(group, version, rest[0])
    if res is None or (namespace is None and res.namespaced and len(rest) > 1):
        raise _not_found()
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    parts = [prefix] + (["namespaces", "{namespace}"] if namespace else []) + [res.plural]
    parts += (["{name}"] if name else []) + ([sub] if sub else [])
    return _Target(res, version, namespace, name, sub, "/".join(parts))


class ApiServer:
    """Serve ``store`` over HTTP on ``host:port`` (0 = any free port) in a background thread."""

    def __init__(self, store: ObjectStore, host: str = "127.0.0.1", port: int = 0, rbac: RBACRules | None = None,
                 visibility: Visibility | None = None, disabled_versions: Collection[str] = (),
                 token: str | None = None) -> None:
        self.store = store
        self.token = token
        """When set, every request but the health probes needs ``Authorization: Bearer <token>`` (else 401)."""
        self.rbac = rbac
        self.visibility = visibility
        self.disabled_versions = frozenset(disabled_versions)
        self.requests: collections.Counter[str] = collections.Counter()
        self._count_lock = threading.Lock()
        self._httpd = EmbeddedHTTPServer((host, port), _make_handler(self))
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> None:
        if self._thread is None:
            # A short poll interval keeps stop() (and so every test's teardown) fast.
            self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                            name="gpuaas-apiserver", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def write_kubeconfig(self, path: Path, context: str = "gpuaas-embedded") -> Path:
        """A kubeconfig for the official client and kubectl: this server, a static token user."""
        config = {
            "apiVersion": "v1", "kind": "Config", "preferences": {}, "current-context": context,
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": f"{context}-user", "user": {"token": self.token or _TOKEN}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": f"{context}-user",
                                                        "namespace": "default"}}],
        }
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        # It carries a credential: readable by its owner only, from the moment it exists. Written
        # aside and renamed, so whoever waits for the file never reads it half-written.
        partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(yaml.safe_dump(config, sort_keys=False))
            os.chmod(partial, 0o600)
            os.replace(partial, path)
        except BaseException:
            partial.unlink(missing_ok=True)  # it holds the token: never left behind
            raise
        return path

    def count(self, key: str) -> None:
        with self._count_lock:
            self.requests[key] += 1

    # --- request handling (called from handler threads) ----------------------------------
    def handle(self, method: str, raw_path: str, headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        """Route one request; returns (HTTP status, JSON-able body or pre-encoded bytes)."""
        url = urlsplit(raw_path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        segments = [s for s in url.path.split("/") if s]
        try:
            return self._route(method, segments, query, headers, body)
        except ApiError as err:
            return err.status, err.to_status()

    def _route(self, method: str, seg: list[str], query: dict[str, str], headers: dict[str, str],
               body: bytes) -> tuple[int, Any]:
        if seg in (["healthz"], ["readyz"], ["livez"]):
            self.count(f"{method} /{seg[0]}")
            return 200, b"ok"
        self._authenticate(method, seg, headers)
        if seg == ["version"]:
            self.count(f"{method} /version")
            return 200, _discovery.version()
        if seg[:1] == ["api"] and len(seg) >= 2:
            group, version, rest, prefix = "", seg[1], seg[2:], f"/api/{seg[1]}"
        elif seg[:1] == ["apis"] and len(seg) >= 3:
            group, version, rest, prefix = seg[1], seg[2], seg[3:], f"/apis/{seg[1]}/{seg[2]}"
        else:
            self.count(f"{method} /{'/'.join(seg)}")
            if seg == ["api"]:
                return 200, _discovery.api_versions(self.url.partition("//")[2])
            if seg == ["apis"]:
                return 200, _discovery.api_group_list(self.disabled_versions)
            raise _not_found()
        if f"{group}/{version}" in self.disabled_versions:
            self.count(f"{method} {prefix}")
            raise _not_found()
        if not rest:
            self.count(f"{method} {prefix}")
            doc = _discovery.api_resource_list(group, version)
            if doc is None:
                raise _not_found()
            return 200, doc
        if group == _discovery.VISIBILITY_GROUP:
            return self._visibility(method, version, rest, query, prefix)
        if (group, version, rest) == ("authorization.k8s.io", "v1", ["selfsubjectaccessreviews"]):
            return self._access_review(method, body, prefix)
        if (group, version, rest) == ("authentication.k8s.io", "v1", ["selfsubjectreviews"]):
            return self._self_review(method, prefix)
        if (group, version) == ("", "v1") and (where := _core_events.parse_path(rest)) is not None:
            return self._core_events(method, *where, query, headers, prefix)
        target = _parse_target(group, version, rest, prefix)
        self.count(f"{method} {target.template}")
        _refuse_unsupported(query)
        return self._resource(method, target, query, headers, body)

    def _access_review(self, method: str, body: bytes, prefix: str) -> tuple[int, Any]:
        """``SelfSubjectAccessReview``: whether the caller may make an access, by the rules that answer 403."""
        self.count(f"{method} {prefix}/selfsubjectaccessreviews")
        if method != "POST":
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on selfsubjectaccessreviews")
        try:
            review = json.loads(body)
            attributes = review["spec"]["resourceAttributes"]
        except (ValueError, TypeError, KeyError) as exc:
            raise ApiError.bad_request(f"not a SelfSubjectAccessReview with spec.resourceAttributes: {exc}") from None
        resource = str(attributes.get("resource", ""))
        if attributes.get("subresource"):
            resource += f"/{attributes['subresource']}"
        verb, group = str(attributes.get("verb", "")), str(attributes.get("group", ""))
        allowed = self.rbac is None or self.rbac.allows(verb, group, resource)
        return 201, {**review, "status": {"allowed": allowed}}

    def _self_review(self, method: str, prefix: str) -> tuple[int, Any]:
        """``SelfSubjectReview``: whom the server takes the caller for: the RBAC rule set's user, else an admin (no
        rules: every access allowed, as a ``system:masters`` kubeconfig is)."""
        self.count(f"{method} {prefix}/selfsubjectreviews")
        if method != "POST":
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on selfsubjectreviews")
        user = ({"username": self.rbac.user, "groups": ["system:authenticated"]} if self.rbac is not None
                else {"username": "embedded-admin", "groups": ["system:masters", "system:authenticated"]})
        return 201, {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview",
                     "metadata": {"creationTimestamp": None}, "status": {"userInfo": user}}

    def _authenticate(self, method: str, seg: list[str], headers: dict[str, str]) -> None:
        """The real server's 401 for a missing or wrong bearer token (compared in constant time)."""
        if self.token is None:
            return
        scheme, _, given = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self.token.encode()):
            self.count(f"{method} 401")
            raise ApiError(401, "Unauthorized", "Unauthorized")

    def _authorize(self, verb: str, t: _Target) -> None:
        if self.rbac is not None:
            self.rbac.check(verb, t.res.group, t.res.plural, t.subresource, t.namespace, t.name)

    def _resource(self, method: str, t: _Target, query: dict[str, str], headers: dict[str, str],
                  body: bytes) -> tuple[int, Any]:
        res, store = t.res, self.store
        if t.name is None:
            if method == "GET":
                self._authorize("list", t)
                return 200, self._list(t, query, headers)
            if method == "POST":
                self._authorize("create", t)
                obj = self._body(body, t)
                created = store.create(obj, drop_status=True)
                return 201, convert(created, t.version)
            raise ApiError(405, "MethodNotAllowed", f"the server does not allow this method on {res.qualified}")
        if t.subresource not in (None, "status"):
            raise _not_found()
        if method == "GET":
            self._authorize("get", t)
            if t.subresource == "status" and not res.has_status:
                raise _not_found()
            table = table_of(headers, query, res.kind, t.version, store.now) if t.subresource is None else None
            return 200, printed(convert(store.get(res.kind, t.namespace, t.name), t.version), table)
        if method == "PUT":
            self._authorize("update", t)
            obj = self._body(body, t)
            meta = obj.get("metadata") or {}
            if meta.get("name") != t.name:
                raise ApiError.bad_request(f"the name of the object ({meta.get('name')}) does not match the URL")
            if res.namespaced:
                obj["metadata"] = {**meta, "namespace": t.namespace}
            return 200, convert(store.replace(obj, subresource=t.subresource), t.version)
        if method == "PATCH":
            self._authorize("patch", t)
            content_type = headers.get("content-type", "").split(";")[0].strip()
            patch_type = CONTENT_TYPES.get(content_type)
            if patch_type is None:
                raise ApiError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format: {content_type}")
            patched = store.patch(res.kind, t.namespace, t.name, _json(body), patch_type,
                                  subresource=t.subresource, version=t.version)
            return 200, convert(patched, t.version)
        if method == "DELETE" and t.subresource is None:
            self._authorize("delete", t)
            options = _json(body) if body.strip() else {}
            precondition = ((options or {}).get("preconditions") or {}).get("resourceVersion")
            return 200, convert(store.delete(res.kind, t.namespace, t.name, resource_version=precondition), t.version)
        raise ApiError(405, "MethodNotAllowed", f"the server does not allow this method on {res.qualified}")

    def _body(self, body: bytes, t: _Target) -> dict[str, Any]:
        obj = _json(body)
        if not isinstance(obj, dict):
            raise ApiError.bad_request("the request body must be a JSON object")
        expected = t.res.api_version(t.version)
        if obj.get("kind") != t.res.kind or obj.get("apiVersion", expected) != expected:
            raise ApiError.bad_request(
                f"the API version in the data ({obj.get('apiVersion')}) does not match the expected API version "
                f"({expected}) or the kind ({obj.get('kind')}) is not {t.res.kind}")
        obj["apiVersion"] = expected
        if t.res.namespaced and t.namespace:
            meta = obj.setdefault("metadata", {})
            if meta.get("namespace", t.namespace) != t.namespace:
                raise ApiError.bad_request("the namespace of the provided object does not match the namespace sent on the request")
            meta["namespace"] = t.namespace
        return obj

    def _list(self, t: _Target, query: dict[str, str], headers: dict[str, str]) -> bytes:
        table = table_of(headers, query, t.res.kind, t.version, self.store.now) or metadata_list_of(
            headers.get("accept", ""))
        return list_body(self.store, t.res.kind, t.namespace, query, query.get("fieldSelector"), f"{t.res.kind}List",
                         t.res.api_version(t.version), lambda obj: convert(obj, t.version), table)

    def _core_events(self, method: str, namespace: str | None, name: str | None, query: dict[str, str],
                     headers: dict[str, str], prefix: str) -> tuple[int, Any]:
        """core/v1 Events, where ``kubectl describe`` reads them: the stored events.k8s.io/v1 ones, read-only."""
        where = f"{prefix}/namespaces/{{namespace}}/events" if namespace is not None else f"{prefix}/events"
        self.count(f"{method} {where}" + ("/{name}" if name is not None else ""))
        _refuse_unsupported(query)
        if method != "GET":
            raise ApiError(405, "MethodNotAllowed", "the embedded API server serves core/v1 events read-only; "
                                                    "write them through events.k8s.io/v1")
        if self.rbac is not None:
            self.rbac.check("list" if name is None else "get", "", "events", None, namespace, name)
        table = table_of(headers, query, "Event", "v1", self.store.now)
        if namespace is not None and name is not None:
            return 200, printed(_core_events.get(self.store, namespace, name), table)
        selector = _core_events.field_selector(query.get("fieldSelector"))
        return 200, list_body(self.store, "Event", namespace, query, selector, "EventList", "v1", _core_events.to_core,
                              table)

    def _visibility(self, method: str, version: str, rest: list[str], query: dict[str, str],
                    prefix: str) -> tuple[int, Any]:
        if rest[:1] == ["namespaces"] and len(rest) == 5 and rest[2] == "localqueues" and rest[4] == "pendingworkloads":
            kind, namespace, name = "LocalQueue", rest[1], rest[3]
            template = f"{prefix}/namespaces/{{namespace}}/localqueues/{{name}}/pendingworkloads"
        elif len(rest) == 3 and rest[0] == "clusterqueues" and rest[2] == "pendingworkloads":
            kind, namespace, name = "ClusterQueue", None, rest[1]
            template = f"{prefix}/clusterqueues/{{name}}/pendingworkloads"
        else:
            self.count(f"{method} {prefix}/{'/'.join(rest)}")
            raise _not_found()
        self.count(f"{method} {template}")
        if method != "GET":
            raise ApiError(405, "MethodNotAllowed", "the visibility API only serves GET")
        if self.rbac is not None:
            plural = "localqueues" if namespace else "clusterqueues"
            self.rbac.check("get", _discovery.VISIBILITY_GROUP, plural, "pendingworkloads", namespace, name)
        try:
            limit = int(query.get("limit", "1000"))
            offset = int(query.get("offset", "0"))
        except ValueError as exc:
            raise ApiError.bad_request("limit and offset must be integers") from exc
        summary = self.visibility(kind, namespace, name, limit, offset) if self.visibility else None
        if summary is None:
            plural = "localqueues" if namespace else "clusterqueues"
            raise ApiError.not_found(f"{plural}.{_discovery.VISIBILITY_GROUP}", name,
                                     group=_discovery.VISIBILITY_GROUP, kind=plural)
        return 200, {**summary, "apiVersion": f"{_discovery.VISIBILITY_GROUP}/{version}"}


def _refuse_unsupported(query: dict[str, str]) -> None:
    """Refuse what the emulator does not do rather than answer as if it had."""
    if query.get("watch") in ("true", "1"):
        raise ApiError(405, "MethodNotAllowed", "watch is not supported by the embedded API server")
    if query.get("dryRun"):
        raise ApiError.bad_request("dryRun is not supported by the embedded API server")


def _json(body: bytes) -> Any:
    try:
        return json.loads(body or b"null")
    except ValueError as exc:
        raise ApiError.bad_request(f"the body of the request could not be decoded as JSON: {exc}") from exc


def _make_handler(server: ApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the client's connection pool reuses sockets

        def setup(self) -> None:
            super().setup()
            # Headers and body go out in two writes; without this, Nagle's algorithm and the
            # client's delayed ACK add ~40 ms to every request on a kept-alive connection.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                status, payload = server.handle(self.command, self.path, headers, body)
            except Exception as exc:
                log.exception("embedded API server failed on %s %s", self.command, self.path)
                status, payload = 500, ApiError(500, "InternalError", f"Internal error occurred: {exc}").to_status()
            data = payload if isinstance(payload, bytes) else json.dumps(payload, separators=(",", ":")).encode()
            reply(self, status, data, "application/json" if data[:1] in (b"{", b"[") else "text/plain")

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("apiserver: " + format, *args)

    return Handler
