"""The only code that writes to the Kubernetes API: a GET and a merge PATCH per object.

Every kind gpuaas stops lives in a named API group, so one ``CustomObjectsApi`` path serves
them all (``/apis/<group>/<version>/namespaces/<ns>/<plural>/<name>``). Errors are mapped by
the same function the readers use: a 409 is ``Conflict`` (re-read, decide again, never
force), a 404 ``NotFound`` (the object was deleted), a 5xx/429 transient.
"""

from __future__ import annotations

import json
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpuaas.actions._patches import KIND_RESOURCES
from gpuaas.errors import KubeAPIError, SourceUnavailable
from gpuaas.settings import GpuaasSettings
from gpuaas.sources._kube_client import _api_error, make_api_client

__all__ = ["KubeWriter"]

_MERGE_PATCH = "application/merge-patch+json"


class KubeWriter:
    """GET and merge-PATCH of the kinds in ``KIND_RESOURCES``."""

    def __init__(self, settings: GpuaasSettings, api_client: client.ApiClient | None = None) -> None:
        self._own = api_client is None
        self._api = api_client or make_api_client(settings)
        self._custom = client.CustomObjectsApi(self._api)
        self._timeout = settings.request_timeout_seconds

    def close(self) -> None:
        if self._own:
            self._api.close()

    def __enter__(self) -> KubeWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, what: str, kind: str, namespace: str, name: str, fn: Any, **kwargs: Any) -> dict[str, Any]:
        group, version, plural = KIND_RESOURCES[kind]
        try:
            resp = fn(group, version, namespace, plural, name, _preload_content=False,
                      _request_timeout=self._timeout, **kwargs)
            return dict(json.loads(resp.data))
        except ApiException as exc:
            error = _api_error(exc, f"{what} {plural}.{group}")
            message = str(error).split(f"{error.status} {error.reason}: ", 1)[-1]
            raise type(error)(message, status=error.status, reason=error.reason,
                              kind=kind, namespace=namespace, name=name) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise SourceUnavailable(f"{what} {kind} {namespace}/{name}: {exc}", source="kube") from exc

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        """The live object; raises ``NotFound`` when it is gone."""
        return self._call("reading", kind, namespace, name, self._custom.get_namespaced_custom_object)

    def patch(self, kind: str, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """A merge patch; ``body`` should carry ``metadata.resourceVersion`` (409 when it changed)."""
        if not (body.get("metadata") or {}).get("resourceVersion"):
            raise KubeAPIError("refusing a patch without a resourceVersion precondition", status=0,
                               kind=kind, namespace=namespace, name=name)
        return self._call("patching", kind, namespace, name, self._custom.patch_namespaced_custom_object,
                          body=body, _content_type=_MERGE_PATCH)
