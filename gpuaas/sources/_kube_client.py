"""The one place gpuaas talks to the Kubernetes API for reading: client setup, paginated
lists; the client's exceptions become ``gpuaas.errors`` in ``_kube_errors`` (shared with the writer).

Lists ask for raw JSON so that custom resources and core objects are parsed by the same
dict-based code, and every request is counted so a test can hold the cycle to "a constant plus
one request per page". They are plain GETs through the ``ApiClient`` (its configuration, auth and
TLS) rather than calls of the generated ``CoreV1Api``/``AppsV1Api``: loading those classes imports
every model class they name, seconds of CPU for a list whose body is parsed as JSON anyway.
"""

from __future__ import annotations

import base64
import os
import threading
from pathlib import Path
from typing import Any

import orjson
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config import kube_config
from kubernetes.config.config_exception import ConfigException

from gpuaas.errors import ConfigError, KubeAPIError, MalformedResponse
from gpuaas.settings import GpuaasSettings, http_url_problem, token_problem
from gpuaas.sources._kube_errors import SOURCE, kube_request

__all__ = ["IDENTITY_NAMESPACE", "KubeLister", "kubeconfig_path", "make_api_client"]

IDENTITY_NAMESPACE = "kube-system"
"""The Namespace whose uid names the cluster: there from the cluster's creation to its end."""


def make_api_client(settings: GpuaasSettings) -> client.ApiClient:
    """An ``ApiClient`` from the kubeconfig (file and context from settings) or the pod's service account."""
    cfg = client.Configuration()
    file = kubeconfig_path(settings)
    if file is not None and os.pathsep not in file and not Path(file).expanduser().exists():
        raise ConfigError("cannot load Kubernetes credentials: no such file (set GPUAAS_KUBECONFIG to the "
                          "cluster's kubeconfig, or GPUAAS_IN_CLUSTER=true in a pod)", file=file, field="kubeconfig")
    if file is not None and os.pathsep not in file and Path(file).expanduser().is_dir():
        raise ConfigError("cannot load Kubernetes credentials: a directory, not a kubeconfig file (set "
                          "GPUAAS_KUBECONFIG to the cluster's kubeconfig file)", file=file, field="kubeconfig")
    try:
        if settings.in_cluster:
            config.load_incluster_config(client_configuration=cfg)
        else:
            config.load_kube_config(
                config_file=str(settings.kubeconfig) if settings.kubeconfig else None,
                context=settings.kube_context,
                client_configuration=cfg,
                persist_config=False,
            )
    except ConfigException as exc:
        raise ConfigError(f"cannot load Kubernetes credentials: {exc}", file=file,
                          field="kubeconfig") from exc
    except OSError as exc:  # in words, not ``[Errno 13] Permission denied: '...'``
        raise ConfigError(f"cannot load Kubernetes credentials: {(exc.strerror or str(exc)).lower()}", file=file,
                          field="kubeconfig") from exc
    except (TypeError, ValueError, AttributeError, KeyError) as exc:  # the file parsed, but not as a kubeconfig
        why = (_bad_value(file, settings.kube_context) if file else None) or (
            "not a kubeconfig (a YAML mapping of clusters, users and contexts)")
        raise ConfigError(f"cannot load Kubernetes credentials: {why}", file=file, field="kubeconfig") from exc
    header = next((str(v) for k, v in (cfg.api_key or {}).items() if k in ("BearerToken", "authorization")), None)
    problem = token_problem(header.removeprefix("Bearer ")) if header else None
    if problem is not None:  # sent as it is, the header is refused with the token quoted in the message
        raise ConfigError(f"cannot load Kubernetes credentials: {_token_owner(file, settings.kube_context)} {problem}",
                          file=file, field="kubeconfig")
    cfg.retries = 0  # retries belong to the calling task, which knows the error type
    return client.ApiClient(cfg)


def _token_owner(file: str | None, context: str | None) -> str:
    """Whose token it is, in words: ``the token of user 'u' in kubeconfig /path``; the token itself never."""
    if file is None:
        return "the service account's token"
    chosen = _selected(_kubeconfig_docs(file), context)
    user = chosen[1].get("user") if chosen else None
    return f"the token of user {str(user)!r} in kubeconfig {file}" if user else f"the token in kubeconfig {file}"


_BASE64_FIELDS = {"cluster": ("certificate-authority-data",), "user": ("client-certificate-data", "client-key-data")}


def _kubeconfig_docs(file: str) -> list[dict[str, Any]]:
    """The kubeconfig files ``file`` names (joined by ``os.pathsep``), each a mapping; unreadable ones left out."""
    docs = []
    for path in file.split(os.pathsep):
        try:
            doc = yaml.safe_load(Path(path).expanduser().read_text(encoding="utf-8")) if path else None
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        if isinstance(doc, dict):
            docs.append(doc)
    return docs


def _named(docs: list[dict[str, Any]], kind: str, name: object) -> tuple[str, dict[str, Any]] | None:
    """The first ``kind`` (cluster, user, context) of that name, as the client merges the files."""
    for doc in docs:
        items = doc.get(f"{kind}s")
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and item.get("name") == name and isinstance(item.get(kind), dict):
                return str(name), item[kind]
    return None


def _selected(docs: list[dict[str, Any]], context: str | None) -> tuple[str, dict[str, Any]] | None:
    """The context in use: ``context``, else the last ``current-context`` of the files."""
    current = context or next((d["current-context"] for d in reversed(docs) if d.get("current-context")), None)
    return _named(docs, "context", current)


def _bad_value(file: str, context: str | None) -> str | None:
    """Which value of the kubeconfig the client could not take, in words (``the server of cluster 'x': not a
    URL: Invalid IPv6 URL``); None when none of those it reads is wrong (the file is no kubeconfig at all).

    The client fails on one bad value of a well-formed file as it fails on a file of another shape (a
    ``ValueError`` from ``urlparse`` or ``base64``, naming neither field nor file), so the files are read
    again here, merged as the client merges them (the first of a name wins, the last ``current-context``),
    and the selected context's cluster and user are checked the way the client reads them.
    """
    docs = _kubeconfig_docs(file)
    chosen = _selected(docs, context)
    for kind in ("cluster", "user"):
        found = _named(docs, kind, chosen[1].get(kind)) if chosen else None
        if found is None:
            continue
        name, values = found
        server = values.get("server") if kind == "cluster" else None
        problem = http_url_problem(server) if isinstance(server, str) else None
        if problem is not None:
            return f"the server of cluster {name!r}: {problem}"
        for key in _BASE64_FIELDS[kind]:
            value = values.get(key)
            if value is None:
                continue
            try:
                base64.standard_b64decode(value)
            except (ValueError, TypeError):  # binascii.Error is a ValueError
                return f"the {key} of {kind} {name!r}: not base64"
    return None


class KubeLister:
    """Paginated lists through one ``ApiClient``, counting the requests it sends."""

    def __init__(self, api_client: client.ApiClient, settings: GpuaasSettings) -> None:
        self.api_client = api_client
        self.page_size = settings.kube_page_size
        self.timeout = settings.request_timeout_seconds
        self.url = str(api_client.configuration.host)
        self.requests = 0
        self._count = threading.Lock()

    def _get(self, path: str, query: list[tuple[str, Any]]) -> Any:
        """One GET of raw JSON, as the generated list methods send it (``_preload_content=False``); the urllib3 response."""
        request = self.api_client.param_serialize(
            method="GET", resource_path=path, query_params=query,
            header_params={"Accept": "application/json"}, auth_settings=["BearerToken"],
        )
        resp = self.api_client.call_api(*request, _request_timeout=self.timeout)
        if not 200 <= resp.status <= 299:
            resp.read()
            raise ApiException.from_response(http_resp=resp, body=None, data=None)
        return resp.response

    def _pages(self, path: str, what: str, **selectors: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            with self._count:  # lists of different kinds are read at once (``kube.LISTS_AT_ONCE``)
                self.requests += 1
            with kube_request(verb="listing", kind=what, url=self.url):
                query = [(k, v) for k, v in (("continue", token), *selectors.items()) if v is not None]
                resp = self._get(path, [*query, ("limit", self.page_size)])
                body = orjson.loads(resp.data)  # several times faster than json on 50,000 Workloads
            if not isinstance(body, dict) or not isinstance(body.get("items"), list):
                raise MalformedResponse(f"listing {what}: missing field 'items'", source=SOURCE, url=self.url)
            items.extend(body["items"])
            token = (body.get("metadata") or {}).get("continue") or None
            if not token:
                return items

    def cluster_uid(self) -> str | None:
        """The uid of the ``kube-system`` Namespace: the cluster's identity, as Kubernetes tools take it (it
        lives as long as the cluster). None where the role may not read it or it is not there."""
        with self._count:
            self.requests += 1
        try:
            with kube_request(verb="reading", kind="Namespace", name=IDENTITY_NAMESPACE, url=self.url):
                body = orjson.loads(self._get(f"/api/v1/namespaces/{IDENTITY_NAMESPACE}", []).data)
        except KubeAPIError as exc:
            if exc.status in (403, 404):
                return None
            raise
        uid = ((body if isinstance(body, dict) else {}).get("metadata") or {}).get("uid")
        return str(uid) if uid else None

    def custom_objects(self, group: str, version: str, plural: str) -> list[dict[str, Any]]:
        """Every object of a custom resource, across namespaces."""
        return self._pages(f"/apis/{group}/{version}/{plural}", f"{plural}.{group}/{version}")

    def deployments(self) -> list[dict[str, Any]]:
        return self._pages("/apis/apps/v1/deployments", "deployments.apps/v1")

    def stateful_sets(self) -> list[dict[str, Any]]:
        return self._pages("/apis/apps/v1/statefulsets", "statefulsets.apps/v1")

    def running_pods(self) -> list[dict[str, Any]]:
        return self._pages("/api/v1/pods", "pods/v1", fieldSelector="status.phase=Running")


def kubeconfig_path(settings: GpuaasSettings) -> str | None:
    """The kubeconfig credentials are read from, as written (for the errors that name it); None in a pod.

    Unset, it is the Kubernetes client's own default: ``$KUBECONFIG`` (one path, or several joined
    by ``os.pathsep``), else ``~/.kube/config``.
    """
    if settings.in_cluster:
        return None
    return str(settings.kubeconfig) if settings.kubeconfig else str(kube_config.KUBE_CONFIG_DEFAULT_LOCATION)
