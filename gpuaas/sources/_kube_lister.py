"""Paginated lists of the Kubernetes API for the reader: one ``KubeLister`` per read, counting its requests.

Lists ask for raw JSON so that custom resources and core objects are parsed by the same
dict-based code, and every request is counted so a test can hold the cycle to "a constant plus
one request per page". They are plain GETs through the ``ApiClient`` (its configuration, auth and
TLS) rather than calls of the generated ``CoreV1Api``/``AppsV1Api``: loading those classes imports
every model class they name, seconds of CPU for a list whose body is parsed as JSON anyway.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar, overload

from kubernetes.client.exceptions import ApiException

from gpuaas.errors import (
    Expired,
    KubeAPIError,
    MalformedResponse,
    NotFound,
    PermanentError,
    RetriesSpent,
    SourceError,
    TransientError,
    kube_target,
)
from gpuaas.settings import GpuaasSettings
from gpuaas.sources._json_answer import read_json
from gpuaas.sources._kube_errors import SOURCE, kube_request
from gpuaas.sources._retry_after import MAX_RETRY_AFTER_S, RETRYING
from gpuaas.sources.kube import KUEUE_GROUP

if TYPE_CHECKING:
    from kubernetes import client

__all__ = ["IDENTITY_NAMESPACE", "METADATA_ONLY", "Keep", "KubeLister", "KueueNotServed"]

log = logging.getLogger(__name__)
T = TypeVar("T")

IDENTITY_NAMESPACE = "kube-system"
"""The Namespace whose uid names the cluster: there from the cluster's creation to its end."""


class KueueNotServed(SourceError, PermanentError):
    """The API server serves no version of a Kueue resource: Kueue is not installed (or its CRDs are not).

    A source failure, not an empty cluster: every GPU workload gpuaas judges is a Kueue Workload, so without
    Kueue a collect would count no workload and a reclaim say nothing holds a GPU while pods hold every one.
    """


Keep = Callable[[list[dict[str, Any]]], Iterable[T]]
"""What a list keeps of each page's items, as the page arrives: the raw page is dropped then, so a list of
100,000 pods never sits in memory whole when a few thousand of them are what a snapshot reads."""

METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json"
"""A list of the objects' ``metadata`` alone (client-go's metadata client asks the same way), for a reader of
annotations: a batch Job's pod template and status are most of its bytes. Served for built-in kinds and custom
resources alike; a server that does not serve it answers the plain list, which the reader reads the same way."""


def _kept(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return items


class KubeLister:
    """Paginated lists through one ``ApiClient``, counting the requests it sends.

    Each request is retried on its own when it fails for a while (429, 5xx, no answer): up to ``GPUAAS_RETRIES``
    more times, waiting what the server asked (``Retry-After``) or an exponential backoff. A failed page of one
    list then costs one request more, not the whole read again; a failure that outlasts the retries is
    ``RetriesSpent``, which the task does not repeat. A list whose ``continue`` token expired (410: it took
    longer than etcd keeps a version, 5 minutes by default) starts over once, from the first page.
    """

    def __init__(self, api_client: client.ApiClient, settings: GpuaasSettings) -> None:
        self.api_client = api_client
        self.page_size = settings.kube_page_size
        self.timeout = settings.request_timeout_seconds
        self.retries = settings.retries
        self.backoff_s = settings.retry_backoff_seconds
        self.url = str(api_client.configuration.host)
        self.requests = 0
        self.versions: dict[str, str] = {}
        """Each complete list's ``metadata.resourceVersion``, by what was listed (``pods/v1``): the version of
        the cluster each list saw."""
        self._count = threading.Lock()

    def _get(self, path: str, query: list[tuple[str, Any]], accept: str = "application/json") -> Any:
        """One GET of raw JSON, as the generated list methods send it (``_preload_content=False``); the urllib3 response."""
        request = self.api_client.param_serialize(
            method="GET", resource_path=path, query_params=query,
            header_params={"Accept": accept}, auth_settings=["BearerToken"],
        )
        resp = self.api_client.call_api(*request, _request_timeout=self.timeout)
        if not 200 <= resp.status <= 299:
            resp.read()
            raise ApiException.from_response(http_resp=resp, body=None, data=None)
        return resp.response

    def _read(self, path: str, query: list[tuple[str, Any]], *, verb: str, kind: str, name: str | None = None,
              accept: str = "application/json") -> Any:
        """One request's decoded JSON, retried on its own while it fails for a while (class docstring)."""
        started = time.monotonic()
        for attempt in range(1, self.retries + 2):
            with self._count:  # lists of different kinds are read at once (``kube.LISTS_AT_ONCE``)
                self.requests += 1
            try:
                with kube_request(verb=verb, kind=kind, name=name, url=self.url):
                    # orjson: several times faster than json on 50,000 Workloads
                    return read_json(self._get(path, query, accept).data)
            except TransientError as exc:
                if attempt > self.retries:
                    if not self.retries:
                        raise  # no retry asked for: the error as it came
                    said = exc.detail if isinstance(exc, SourceError) else str(exc)
                    raise RetriesSpent(f"{said} (asked {attempt} times over {time.monotonic() - started:.0f} s)",
                                       source=SOURCE, url=self.url) from exc
                delay = exc.retry_after if exc.retry_after is not None else _backoff(self.backoff_s, attempt)
                log.warning("%s: retry #%d/%d in %.1f s: %s", kube_target(verb, kind, None, name), attempt,
                            self.retries, delay, exc, extra={RETRYING: (str(exc), attempt, self.retries, delay)})
                time.sleep(delay)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _pages(self, path: str, what: str, keep: Keep[T], *, accept: str = "application/json",
               **selectors: str) -> list[T]:
        """What ``keep`` takes of every page of one list, in order.

        A ``continue`` token that expired (410) restarts the list once from its first page, the pages read
        dropped: a list is one version of the cluster, never two joined (the token the 410 offers to go on
        with is that: an inconsistent rest). Expired again, the read fails naming how long the list took.
        """
        started = time.monotonic()
        for restarted in (False, True):
            kept: list[T] = []
            token: str | None = None
            pages = 0
            try:
                while True:
                    query = [(k, v) for k, v in (("continue", token), *selectors.items()) if v is not None]
                    body = self._read(path, [*query, ("limit", self.page_size)], verb="listing", kind=what,
                                      accept=accept)
                    if isinstance(body, dict) and body.get("items") is None and (
                            "items" in body or body.get("kind") == "PartialObjectMetadataList"):
                        body["items"] = []  # an empty metadata list: the API server writes Go's nil slice as null
                    if not isinstance(body, dict) or not isinstance(body.get("items"), list):
                        raise MalformedResponse(f"listing {what}: missing field 'items'", source=SOURCE, url=self.url)
                    kept.extend(keep(body["items"]))
                    pages += 1
                    meta: dict[str, Any] = body["metadata"] if isinstance(body.get("metadata"), dict) else {}
                    del body  # the page is read: not alive while the next one is decoded
                    token = meta.get("continue") or None
                    if not token:
                        if meta.get("resourceVersion"):
                            self.versions[what] = str(meta["resourceVersion"])
                        return kept
            except Expired as exc:
                if token is None:
                    raise  # not a continued list's: starting over asks the same
                took = time.monotonic() - started
                if restarted:
                    error = Expired(
                        f"the list expired again after starting over: {_duration(took)} for {pages} "
                        f"page{'' if pages == 1 else 's'} of {self.page_size} objects (a continue token lives as long "
                        "as etcd keeps the list's version, 5 minutes by default): raise GPUAAS_KUBE_PAGE_SIZE, or give "
                        "the reader a larger share of the API server",
                        status=exc.status, reason=exc.reason, kind=what, verb="listing", status_reason=exc.status_reason)
                    error.url = exc.url
                    raise error from exc
                log.warning("listing %s: the continue token expired after %s and %d pages; starting the list over",
                            what, _duration(took), pages)
                started = time.monotonic()
        raise AssertionError("unreachable: the second try returns or raises")

    def cluster_uid(self) -> str | None:
        """The uid of the ``kube-system`` Namespace: the cluster's identity, as Kubernetes tools take it (it
        lives as long as the cluster). None where the role may not read it or it is not there."""
        try:
            body = self._read(f"/api/v1/namespaces/{IDENTITY_NAMESPACE}", [], verb="reading", kind="Namespace",
                              name=IDENTITY_NAMESPACE)
        except KubeAPIError as exc:
            if exc.status in (403, 404):
                return None
            raise
        uid = ((body if isinstance(body, dict) else {}).get("metadata") or {}).get("uid")
        return str(uid) if uid else None

    @overload
    def custom_objects(self, group: str, version: str, plural: str) -> list[dict[str, Any]]: ...

    @overload
    def custom_objects(self, group: str, version: str, plural: str, keep: Keep[T], *,
                       metadata_only: bool = False) -> list[T]: ...

    def custom_objects(self, group: str, version: str, plural: str, keep: Keep[Any] = _kept, *,
                       metadata_only: bool = False) -> list[Any]:
        """Every object of a custom resource, across namespaces (what ``keep`` takes of each page; with
        ``metadata_only``, of their metadata alone).

        A Kueue resource that is not there (404) is told apart: another version of it served (v1beta1 on
        Kueue v0.14) leaves the ``NotFound`` for the caller's fallback; none served raises ``KueueNotServed``.
        """
        try:
            return self._pages(f"/apis/{group}/{version}/{plural}", f"{plural}.{group}/{version}", keep,
                               accept=METADATA_ONLY if metadata_only else "application/json")
        except NotFound:
            if group == KUEUE_GROUP and not self._served_versions(group, plural):
                raise KueueNotServed(f"Kueue is not installed: no version of {plural}.{group} is served (install "
                                     "Kueue v0.15 or newer)",
                                     source=SOURCE, url=self.url) from None
            raise

    def _discovery(self, path: str) -> dict[str, Any]:
        """A discovery document (``/apis``, ``/apis/<group>/<version>``); empty where it is not served."""
        try:
            body = self._read(path, [], verb="reading", kind="API discovery", name=path)
        except NotFound:
            return {}
        return body if isinstance(body, dict) else {}

    def _served_versions(self, group: str, plural: str) -> list[str]:
        """The versions of ``group`` whose discovery lists ``plural``: a few requests, only after a 404."""
        groups = self._discovery("/apis").get("groups") or []
        versions = [str(v.get("version")) for g in groups if isinstance(g, dict) and g.get("name") == group
                    for v in g.get("versions") or [] if isinstance(v, dict)]
        return [v for v in versions
                if any(isinstance(r, dict) and r.get("name") == plural
                       for r in self._discovery(f"/apis/{group}/{v}").get("resources") or [])]

    def deployments(self, keep: Keep[Any] = _kept) -> list[Any]:
        return self._pages("/apis/apps/v1/deployments", "deployments.apps/v1", keep)

    def stateful_sets(self, keep: Keep[Any] = _kept) -> list[Any]:
        return self._pages("/apis/apps/v1/statefulsets", "statefulsets.apps/v1", keep)

    def namespace_labels(self) -> dict[str, dict[str, str]] | None:
        """Every Namespace's labels, by name: what a ClusterQueue's ``namespaceSelector`` is matched against.
        None where the role may not list Namespaces (an older ``gpuaas`` role): the selectors then go unchecked,
        and the collect says so, rather than the whole read failing."""
        def labels(items: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, str]]]:
            for item in items:
                meta = (item.get("metadata") if isinstance(item, dict) else None) or {}
                found = meta.get("labels") or {}
                if isinstance(meta.get("name"), str) and isinstance(found, dict):
                    yield meta["name"], {str(k): str(v) for k, v in found.items()}

        try:
            return dict(self._pages("/api/v1/namespaces", "namespaces/v1", labels, accept=METADATA_ONLY))
        except KubeAPIError as exc:
            if exc.status == 403:
                return None
            raise

    def running_pods(self, keep: Keep[Any] = _kept) -> list[Any]:
        """Running pods (what ``keep`` takes of each page)."""
        return self._pages("/api/v1/pods", "pods/v1", keep, fieldSelector="status.phase=Running")


def _backoff(factor_s: float, attempt: int) -> float:
    """The wait before retry ``attempt`` where the server named none: ``factor * 2**(attempt-1)``, up to half that
    again at random (as the tasks' retries), each at most ``MAX_RETRY_AFTER_S``."""
    base = factor_s * 2 ** (attempt - 1)
    return float(min(base * (1 + random.uniform(0, 0.5)), MAX_RETRY_AFTER_S))  # noqa: S311 - jitter, not a secret


def _duration(seconds: float) -> str:
    """``6m12s``, ``41s``: how long a list took, as a person reads it."""
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
