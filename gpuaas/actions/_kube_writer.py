"""The only code that writes to the Kubernetes API: a GET and a merge PATCH per object.

Every kind gpuaas stops lives in a named API group, so one ``CustomObjectsApi`` path serves
them all (``/apis/<group>/<version>/namespaces/<ns>/<plural>/<name>``). Errors are built by
the reader's ``kube_request`` (``gpuaas.sources.kube``), named by verb, kind and object: a 409 is ``Conflict`` (re-read, decide again, never
force), a 404 ``NotFound`` (the object was deleted), a 5xx/429 or no answer transient, an
answer that is not JSON ``MalformedResponse``. After a write, those last two are no answer
at all: the write may have landed, and the caller reads the object back (``INDEFINITE``).

Kueue objects are written at the API version the reader negotiated: a caller passes the
snapshot's (``version=``); without one (undo, recovery) the writer asks discovery once which
of ``v1beta2``/``v1beta1`` the cluster serves, in the reader's order of preference.

Every patch names gpuaas as its field manager (``fieldManager=gpuaas``: ``metadata.managedFields`` then
says which fields gpuaas set, and a GitOps controller's own entries stay told apart from it) and asks for
strict field validation (``fieldValidation=Strict``): a field the object's schema does not know (a
RayCluster CRD older than ``spec.suspend``) is refused with a 4xx naming it, rather than dropped
while the answer says 200. The ``Warning`` headers of the last patch's answer are kept in
``last_warnings``: an answer can be 200 and still say that something was not done.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kubernetes import client

from gpuaas.actions._events import EventReason, controller_of, event_body
from gpuaas.actions._patches import KIND_RESOURCES
from gpuaas.errors import GpuaasError, Invalid, KubeAPIError, MalformedResponse, NotFound, TransientError
from gpuaas.settings import GpuaasSettings
from gpuaas.sources import UnreadableJSON, make_api_client, read_json
from gpuaas.sources.kube import KUEUE_GROUP, KUEUE_VERSIONS, kube_request

__all__ = ["FIELD_MANAGER", "INDEFINITE", "KubeWriter", "unknown_fields"]

_MERGE_PATCH = "application/merge-patch+json"
FIELD_MANAGER = "gpuaas"
"""The ``fieldManager`` of every write: the name ``metadata.managedFields`` shows for what gpuaas set."""
_WRITE_OPTIONS = {"field_manager": FIELD_MANAGER, "field_validation": "Strict"}
_UNKNOWN_FIELD = re.compile(r'unknown field "([^"]{1,200})"')
_WARNING_TEXT = re.compile(r'^\s*\d{3}\s+\S+\s+"(.*)"\s*$', re.DOTALL)
INDEFINITE = (TransientError, MalformedResponse)
"""Errors of a write that say nothing about whether it was applied."""


class KubeWriter:
    """GET, LIST and merge-PATCH of the kinds in ``KIND_RESOURCES``."""

    def __init__(self, settings: GpuaasSettings, api_client: client.ApiClient | None = None,
                 guard: Callable[[], str | None] | None = None) -> None:
        self._settings = settings
        self._own = api_client is None
        self._client = api_client
        self._guard = guard
        """Asked before every patch: a reason not to write (the run lost its writes lock), or None."""
        self._timeout = settings.request_timeout_seconds
        self._kueue_version: str | None = None
        self.unrecorded_events: list[str] = []
        """Why each Event that could not be recorded was not: the acting task warns of them once the run acts."""
        self.last_warnings: tuple[str, ...] = ()
        """The ``Warning`` headers of the last patch's answer, as text (``unknown field "spec.suspend"``)."""

    @property
    def _api(self) -> client.ApiClient:
        """The API client, made at the first request (or by :meth:`connect`): a deciding run that writes nothing
        (dry-run, a degraded snapshot) needs no credentials, and one the kubeconfig cannot give is the snapshot's
        failure, said once."""
        if self._client is None:
            self._client = make_api_client(self._settings)
        return self._client

    def connect(self) -> KubeWriter:
        """Load the credentials now: for a task that always asks the cluster (an undo, a recovery, a release
        sweep), a kubeconfig that cannot give them must end it before it records anything."""
        self._api  # noqa: B018 - made for its error
        return self

    def cluster_uid(self) -> str | None:
        """The cluster this writer writes to, named as a collect names it (its ``kube-system`` Namespace's uid; None
        where the role may not read it): an acting task compares it with the store's before it records anything."""
        from gpuaas.sources import KubeLister

        return KubeLister(self._api, self._settings).cluster_uid()

    @property
    def _custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self._api)

    @property
    def _url(self) -> str:
        return str(self._api.configuration.host)

    def close(self) -> None:
        if self._own and self._client is not None:
            self._client.close()

    def __enter__(self) -> KubeWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def kueue_version(self) -> str:
        """The Kueue API version this writer reads and writes (negotiated once): for callers that list too."""
        return self._served_kueue_version()

    def _served_kueue_version(self) -> str:
        """The first of ``KUEUE_VERSIONS`` that discovery lists (asked once per writer)."""
        if self._kueue_version is None:
            for version in KUEUE_VERSIONS:
                try:
                    with kube_request(verb="discovering", kind=f"{KUEUE_GROUP}/{version}", url=self._url):
                        self._custom.get_api_resources(KUEUE_GROUP, version, _preload_content=False,
                                                       _request_timeout=self._timeout)
                except NotFound:
                    continue
                self._kueue_version = version
                break
            else:
                raise NotFound(f"the cluster serves none of {KUEUE_GROUP}/{', '.join(KUEUE_VERSIONS)}",
                               status=404, reason="Not Found", kind=KUEUE_GROUP, verb="discovering")
        return self._kueue_version

    def _resource(self, kind: str, version: str | None) -> tuple[str, str, str]:
        """(group, version, plural) of ``kind``: the caller's version, Kueue's negotiated one, or the kind's own."""
        group, default_version, plural = KIND_RESOURCES[kind]
        if version:
            version = version.rpartition("/")[2]  # "kueue.x-k8s.io/v1beta1" or "v1beta1"
        elif group == KUEUE_GROUP:
            version = self._served_kueue_version()
        else:
            version = default_version
        return group, version, plural

    def _call(self, what: str, kind: str, namespace: str, name: str, fn: Any, version: str | None,
              **kwargs: Any) -> dict[str, Any]:
        group, version, plural = self._resource(kind, version)
        with kube_request(verb=what, kind=kind, namespace=namespace, name=name, url=self._url):
            resp = fn(group, version, namespace, plural, name, _preload_content=False,
                      _request_timeout=self._timeout, **kwargs)
            if what == "patching":
                self.last_warnings = _warnings(resp)
            return _object(resp.data)

    def _patch(self, kind: str, namespace: str, name: str, fn: Any, version: str | None,
               body: dict[str, Any]) -> dict[str, Any]:
        """One merge patch as gpuaas, strictly validated; a refused unknown field is said by its name (the
        API server's own message puts it after the whole object, past what an error keeps)."""
        self.last_warnings = ()
        try:
            return self._call("patching", kind, namespace, name, fn, version, body=body, _content_type=_MERGE_PATCH,
                              **_WRITE_OPTIONS)
        except Invalid as exc:
            fields = unknown_fields(exc)
            if not fields:
                raise
            raise Invalid(f"the schema of {kind} on this cluster has no field {', '.join(fields)} (strict field "
                          "validation): an older version of its CRD?", status=exc.status, reason=exc.reason,
                          kind=kind, namespace=namespace or None, name=name, verb="patching",
                          status_reason=exc.status_reason) from exc

    def get(self, kind: str, namespace: str, name: str, *, version: str | None = None) -> dict[str, Any]:
        """The live object; raises ``NotFound`` when it is gone."""
        return self._call("reading", kind, namespace, name, self._custom.get_namespaced_custom_object, version)

    def patch(self, kind: str, namespace: str, name: str, body: dict[str, Any], *,
              version: str | None = None) -> dict[str, Any]:
        """A merge patch; ``body`` should carry ``metadata.resourceVersion`` (409 when it changed)."""
        self._may_patch(kind, namespace, name, body)
        return self._patch(kind, namespace, name, self._custom.patch_namespaced_custom_object, version, body)

    def list(self, kind: str, namespace: str, *, label_selector: str) -> list[dict[str, Any]]:
        """The objects of ``kind`` in ``namespace`` that match ``label_selector`` (one page: a selector that
        names one owner's objects returns a handful)."""
        group, version, plural = self._resource(kind, None)
        with kube_request(verb="listing", kind=kind, namespace=namespace, url=self._url):
            resp = self._custom.list_namespaced_custom_object(group, version, namespace, plural,
                                                              label_selector=label_selector, _preload_content=False,
                                                              _request_timeout=self._timeout)
            items = _object(resp.data).get("items") or []
            if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
                raise UnreadableJSON("not a list of objects (its items)")
            return items

    def get_cluster_scoped(self, kind: str, name: str, *, version: str | None = None) -> dict[str, Any]:
        """A cluster-scoped object (a ClusterQueue); raises ``NotFound`` when it is gone."""
        return self._call("reading", kind, "", name, _cluster(self._custom.get_cluster_custom_object), version)

    def patch_cluster_scoped(self, kind: str, name: str, body: dict[str, Any], *,
                             version: str | None = None) -> dict[str, Any]:
        """A merge patch of a cluster-scoped object, with the same resourceVersion precondition."""
        self._may_patch(kind, "", name, body)
        return self._patch(kind, "", name, _cluster(self._custom.patch_cluster_custom_object), version, body)

    def _may_patch(self, kind: str, namespace: str, name: str, body: dict[str, Any]) -> None:
        """Refuse a patch without a resourceVersion precondition, or once the guard says this run may no
        longer write: a write that races another writer is worse than one not made."""
        why = None if (body.get("metadata") or {}).get("resourceVersion") else \
            "refusing a patch without a resourceVersion precondition"
        if why is None and self._guard is not None and (stop := self._guard()) is not None:
            why = f"refusing a patch: {stop}"
        if why is not None:
            raise KubeAPIError(why, status=0, kind=kind, namespace=namespace or None, name=name, verb="patching")

    def record_event(self, obj: dict[str, Any], reason: EventReason, note: str) -> bool:
        """An Event on ``obj`` (``gpuaas.actions._events``) and, for a Kueue Workload, the same on the object that
        controls it (the RayCluster a team describes), with the Workload as ``related``; never raises: a failure
        is kept in ``unrecorded_events``."""
        recorded = self._record(event_body(obj, reason, note), reason)
        owner = controller_of(obj)
        if recorded and owner is not None:  # one refusal per changed object is enough to say
            name = (obj.get("metadata") or {}).get("name")
            recorded = self._record(event_body(owner, reason, f"Through its Kueue Workload {name}: {note}",
                                               related=obj), reason)
        return recorded

    def _record(self, body: dict[str, Any], reason: EventReason) -> bool:
        regarding = body["regarding"]
        try:
            with kube_request(verb="recording an Event on", kind=str(regarding.get("kind")), url=self._url,
                              namespace=regarding.get("namespace"), name=regarding["name"]):
                client.EventsV1Api(self._api).create_namespaced_event(body["metadata"]["namespace"], body,
                                                                      field_manager=FIELD_MANAGER,
                                                                      _preload_content=False,
                                                                      _request_timeout=self._timeout)
        except GpuaasError as exc:
            self.unrecorded_events.append(f"{reason.value}: {exc}")
            return False
        return True


def _cluster(fn: Any) -> Any:
    """Adapt a cluster-scoped client call to ``_call``'s (group, version, namespace, plural, name) order."""
    return lambda group, version, _namespace, plural, name, **kwargs: fn(group, version, plural, name, **kwargs)


def _object(data: bytes) -> dict[str, Any]:
    """The API server's answer, an object: anything else (not JSON, nested too deeply, a list) is an
    ``UnreadableJSON`` that ``kube_request`` words as a malformed answer naming the object."""
    value = read_json(data)
    if not isinstance(value, dict):
        raise UnreadableJSON(f"not a JSON object (a {type(value).__name__})")
    return value


def unknown_fields(exc: BaseException) -> tuple[str, ...]:
    """The fields a strict-validation refusal (``exc`` or an error it was raised from) names as unknown: the
    API server's ``strict decoding error: unknown field "spec.suspend"``. Empty for any other error."""
    seen: BaseException | None = exc
    for _ in range(4):  # our Invalid, kube_request's, the client's ApiException
        if seen is None:
            break
        body = getattr(seen, "body", None)
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body or seen)
        if found := _UNKNOWN_FIELD.findall(text.replace('\\"', '"')):
            return tuple(dict.fromkeys(found))
        seen = seen.__cause__
    return ()


def _warnings(resp: Any) -> tuple[str, ...]:
    """The text of each ``Warning: 299 - "..."`` header of an answer (RFC 7234; the API server's warnings)."""
    headers = getattr(resp, "headers", None)
    if headers is None:
        return ()
    values = headers.getlist("Warning") if hasattr(headers, "getlist") else [headers.get("Warning")]
    out = []
    for value in values:
        if value:
            found = _WARNING_TEXT.match(str(value))
            out.append((found.group(1).replace('\\"', '"') if found else str(value))[:300])
    return tuple(out)
