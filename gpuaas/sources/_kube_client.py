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

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config import kube_config
from kubernetes.config.config_exception import ConfigException

from gpuaas.errors import ConfigError, KubeAPIError, MalformedResponse, NotFound, PermanentError, SourceError
from gpuaas.settings import GpuaasSettings, http_url_problem, token_problem
from gpuaas.sources._json_answer import read_json
from gpuaas.sources._kube_errors import SOURCE, kube_request
from gpuaas.sources._kube_exec import loading_credentials
from gpuaas.sources.kube import KUEUE_GROUP

__all__ = ["IDENTITY_NAMESPACE", "KubeLister", "KueueNotServed", "credentials_owner", "exec_plugin_server",
           "kubeconfig_path", "make_api_client"]

IDENTITY_NAMESPACE = "kube-system"
"""The Namespace whose uid names the cluster: there from the cluster's creation to its end."""


class KueueNotServed(SourceError, PermanentError):
    """The API server serves no version of a Kueue resource: Kueue is not installed (or its CRDs are not).

    A source failure, not an empty cluster: every GPU workload gpuaas judges is a Kueue Workload, so without
    Kueue a collect would count no workload and a reclaim say nothing holds a GPU while pods hold every one.
    """


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
            with loading_credentials(settings.request_timeout_seconds) as plugin_errors:
                config.load_kube_config(
                    config_file=str(settings.kubeconfig) if settings.kubeconfig else None,
                    context=settings.kube_context,
                    client_configuration=cfg,
                    persist_config=False,
                )
            if plugin_errors:  # the client went on without a credential: every request would be anonymous
                raise ConfigError(f"cannot load Kubernetes credentials: {_plugin_owner(file, settings.kube_context)} "
                                  f"{_one_line(plugin_errors[0].removeprefix('exec: '))}", file=file,
                                  field="kubeconfig")
    except ConfigException as exc:
        why = (_missing_context(file, settings.kube_context) if file else None) or str(exc)
        raise ConfigError(f"cannot load Kubernetes credentials: {why}", file=file, field="kubeconfig") from exc
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


def _plugin_owner(file: str | None, context: str | None) -> str:
    """``the exec credential plugin of user 'u' in kubeconfig /path:``, for the line that says it failed."""
    chosen = _selected(_kubeconfig_docs(file), context) if file else None
    user = chosen[1].get("user") if chosen else None
    return (f"the exec credential plugin of user {str(user)!r} in kubeconfig {file}:" if user
            else f"the exec credential plugin in kubeconfig {file}:")


def _one_line(said: str, limit: int = 300) -> str:
    """A plugin's error on one line, cut at ``limit`` characters: it may quote the plugin's whole stderr."""
    said = " ".join(said.split())
    return said if len(said) <= limit else said[:limit - 1] + "…"


def exec_plugin_server(settings: GpuaasSettings) -> str | None:
    """The API server of the kubeconfig's context where its user is an exec credential plugin, read from the file
    alone (no credential is loaded, so the plugin does not run again); None for another kind of user, or where
    the file or the entry cannot be read."""
    file = kubeconfig_path(settings)
    docs = _kubeconfig_docs(file) if file else []
    chosen = _selected(docs, settings.kube_context)
    user = _named(docs, "user", chosen[1].get("user")) if chosen else None
    cluster = _named(docs, "cluster", chosen[1].get("cluster")) if chosen else None
    server = cluster[1].get("server") if cluster and user and "exec" in user[1] else None
    return str(server) if server else None


def _missing_context(file: str, context: str | None) -> str | None:
    """``context 'prod' is not in the kubeconfig (it has: dev, staging): ...`` where the context asked for (the
    setting's, else the file's ``current-context``) is not among the file's; the client's own words name a path
    that does not exist (``.../config/contexts list``) and neither the contexts there nor the setting."""
    docs = _kubeconfig_docs(file)
    if not docs or _selected(docs, context) is not None:
        return None
    current = context or next((d["current-context"] for d in reversed(docs) if d.get("current-context")), None)
    listed = [d["contexts"] for d in docs if isinstance(d.get("contexts"), list)]
    names = [str(c["name"]) for contexts in listed for c in contexts if isinstance(c, dict) and c.get("name")]
    has = f"it has: {', '.join(dict.fromkeys(names))}" if names else "it has none"
    if current is None:
        return f"the kubeconfig names no current-context ({has}): set GPUAAS_KUBE_CONTEXT to one of them"
    if context:
        return f"context {context!r} of GPUAAS_KUBE_CONTEXT is not in the kubeconfig ({has})"
    return (f"its current-context {str(current)!r} is not among its contexts ({has}): set GPUAAS_KUBE_CONTEXT to one "
            "of them, or run kubectl config use-context")


def credentials_owner(settings: GpuaasSettings) -> str:
    """Whose credentials the API server was sent, in words: ``user 'gpuaas' of kubeconfig /path``, for a refusal
    (401) to say which entry to renew; the credential itself never."""
    if settings.in_cluster:
        return "the pod's service account token"
    file = kubeconfig_path(settings)
    chosen = _selected(_kubeconfig_docs(file), settings.kube_context) if file else None
    user = chosen[1].get("user") if chosen else None
    return f"user {str(user)!r} of kubeconfig {file}" if user else f"kubeconfig {file}"


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
                body = read_json(resp.data)  # orjson: several times faster than json on 50,000 Workloads
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
                body = read_json(self._get(f"/api/v1/namespaces/{IDENTITY_NAMESPACE}", []).data)
        except KubeAPIError as exc:
            if exc.status in (403, 404):
                return None
            raise
        uid = ((body if isinstance(body, dict) else {}).get("metadata") or {}).get("uid")
        return str(uid) if uid else None

    def custom_objects(self, group: str, version: str, plural: str) -> list[dict[str, Any]]:
        """Every object of a custom resource, across namespaces.

        A Kueue resource that is not there (404) is told apart: another version of it served (v1beta1 on
        Kueue v0.14) leaves the ``NotFound`` for the caller's fallback; none served raises ``KueueNotServed``.
        """
        try:
            return self._pages(f"/apis/{group}/{version}/{plural}", f"{plural}.{group}/{version}")
        except NotFound:
            if group == KUEUE_GROUP and not self._served_versions(group, plural):
                raise KueueNotServed(f"Kueue is not installed: no version of {plural}.{group} is served (install "
                                     "Kueue v0.15 or newer)",
                                     source=SOURCE, url=self.url) from None
            raise

    def _discovery(self, path: str) -> dict[str, Any]:
        """A discovery document (``/apis``, ``/apis/<group>/<version>``); empty where it is not served."""
        with self._count:
            self.requests += 1
        try:
            with kube_request(verb="reading", kind="API discovery", name=path, url=self.url):
                body = read_json(self._get(path, []).data)
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

    def deployments(self) -> list[dict[str, Any]]:
        return self._pages("/apis/apps/v1/deployments", "deployments.apps/v1")

    def stateful_sets(self) -> list[dict[str, Any]]:
        return self._pages("/apis/apps/v1/statefulsets", "statefulsets.apps/v1")

    def namespace_labels(self) -> dict[str, dict[str, str]] | None:
        """Every Namespace's labels, by name: what a ClusterQueue's ``namespaceSelector`` is matched against.
        None where the role may not list Namespaces (an older ``gpuaas`` role): the selectors then go unchecked,
        and the collect says so, rather than the whole read failing."""
        try:
            items = self._pages("/api/v1/namespaces", "namespaces/v1")
        except KubeAPIError as exc:
            if exc.status == 403:
                return None
            raise
        out: dict[str, dict[str, str]] = {}
        for item in items:
            meta = (item.get("metadata") if isinstance(item, dict) else None) or {}
            labels = meta.get("labels") or {}
            if isinstance(meta.get("name"), str) and isinstance(labels, dict):
                out[meta["name"]] = {str(k): str(v) for k, v in labels.items()}
        return out

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
