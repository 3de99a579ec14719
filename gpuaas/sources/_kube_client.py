"""The one place gpuaas talks to the Kubernetes API for reading: client setup (the kubeconfig, or the pod's
service account), and the paginated lists of ``_kube_lister`` re-exported; the client's exceptions become
``gpuaas.errors`` in ``_kube_errors`` (shared with the writer).
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.config import kube_config
from kubernetes.config.config_exception import ConfigException

from gpuaas.errors import ConfigError
from gpuaas.settings import GpuaasSettings, http_url_problem, token_problem
from gpuaas.sources._kube_exec import loading_credentials
from gpuaas.sources._kube_lister import IDENTITY_NAMESPACE, METADATA_ONLY, Keep, KubeLister, KueueNotServed

__all__ = ["IDENTITY_NAMESPACE", "METADATA_ONLY", "Keep", "KubeLister", "KueueNotServed", "credentials_owner",
           "exec_plugin_server", "kubeconfig_path", "make_api_client"]


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
    cfg.retries = 0  # retries belong to ``KubeLister`` (and the calling task), which know the error type
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


def kubeconfig_path(settings: GpuaasSettings) -> str | None:
    """The kubeconfig credentials are read from, as written (for the errors that name it); None in a pod.

    Unset, it is the Kubernetes client's own default: ``$KUBECONFIG`` (one path, or several joined
    by ``os.pathsep``), else ``~/.kube/config``.
    """
    if settings.in_cluster:
        return None
    return str(settings.kubeconfig) if settings.kubeconfig else str(kube_config.KUBE_CONFIG_DEFAULT_LOCATION)
