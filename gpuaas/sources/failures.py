"""A failed source in one line an operator can act on: which source, where it points, what went wrong in words.

``Prometheus at http://prometheus.monitoring.svc:9090: name does not resolve``, not a urllib3
``MaxRetryError`` with URL-encoded PromQL in it. The line leads every degraded command's output,
each flow run's state message and the snapshot's data-quality table, so it must say enough to
fix the setting without a log: the URL is the configured one (credentials scrubbed), the cause a
phrase from a short list that covers what real deployments hit first.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from gpuaas.errors import SOURCE_NAMES, ConfigError, KubeAPIError, SourceError, redact_endpoint

if TYPE_CHECKING:
    from gpuaas.settings import GpuaasSettings

__all__ = ["HTTPS_SOURCES", "SOURCE_NAMES", "describe_failure", "endpoint_of", "in_words", "mask_credentials"]

HTTPS_SOURCES = frozenset({"prometheus", "opencost", "pushgateway"})
"""The sources ``GPUAAS_CA_FILE`` is trusted for (the Kubernetes API's CA is the kubeconfig's)."""

_HTTP_WORDS = {
    400: "bad request (is this the right kind of server?)",
    401: "unauthorized: the credentials were refused (check the token)",
    403: "forbidden: the credentials lack permission (RBAC or the proxy's rules)",
    404: "not found: nothing answers at this path (check the URL's path)",
    405: "method not allowed (is this the right kind of server?)",
    429: "too many requests (rate limited)",
}
_UNTRUSTED = "TLS failed: the certificate is not signed by a trusted CA"
_PATTERNS = [  # (regular expression on the error text, words); the first that matches wins
    (r"Name or service not known|Failed to resolve|nodename nor servname|Temporary failure in name resolution|"
     r"No address associated with hostname|getaddrinfo failed|NameResolutionError", "name does not resolve"),
    (r"Connection refused|Errno 111|ECONNREFUSED", "connection refused (nothing listens on that port)"),
    (r"No route to host|Network is unreachable|EHOSTUNREACH", "host unreachable (no route)"),
    (r"timed out|Timeout|ReadTimeout|ConnectTimeout", "no answer in time (timed out)"),
    (r"Hostname mismatch|IP address mismatch", "TLS failed: the certificate is not for this host name"),
    (r"CERTIFICATE_VERIFY_FAILED|certificate verify failed", _UNTRUSTED),
    # A TLS connection closed under a request (an answer lost on the way) is a dropped connection, not a TLS fault.
    (r"UNEXPECTED_EOF_WHILE_READING|EOF occurred in violation of protocol|SSLEOFError|SSLZeroReturnError",
     "connection dropped by the server"),
    (r"SSLError|SSL:", "TLS failed (certificate or protocol)"),
    (r"Connection reset|RemoteDisconnected|Connection aborted|closed connection", "connection dropped by the server"),
    (r"No host specified|Invalid URL|InvalidURL|MissingSchema|InvalidSchema", "not a valid URL (scheme and host?)"),
    (r"InvalidHeader|Invalid header value|Illegal header value|Invalid leading whitespace|in header value",
     "a request header could not be sent: the token or a header value holds a line break or another character "
     "a header cannot carry"),
    # Before "not JSON": the cause it chains is a decoder's JSONDecodeError. The second form is the decoder's own
    # RecursionError, where one reaches a caller that did not decode through ``_json_answer.read_json``.
    (r"nested too deeply|recursion depth exceeded while decoding", "answered JSON nested too deeply to read"),
    (r"is not JSON|JSONDecodeError|Expecting value", "answered, but not JSON (is this the right server?)"),
]
_REASON = re.compile(r"HTTP \d{3} from \S+: (.+)", re.DOTALL)
"""A refusal's detail as the Prometheus client writes it, the server's own reason last."""
_STATUS = re.compile(r"\bHTTP (\d{3})\b|\b(\d{3}) (?:Unauthorized|Forbidden|Not Found)|status(?: code)?[ =:]+(\d{3})")


_CREDENTIALS = [  # (what leads a credential in a library's message, the credential); each kept, the credential masked
    # ``Invalid header value b'Bearer <token>'``: the token runs to the quote that closes the value, or to the end.
    re.compile(r"(\bBearer\s+)[^'\"]+"),
    # ``{'Authorization': '<value>'}``, ``Authorization: <value>``
    re.compile(r"(?i)(\b(?:Proxy-)?Authorization\b['\"]?\s*[:=]\s*(?:b?['\"])?)[^'\"]+"),
    # ``in header value: '<value>'`` (an extra header's value: a tenant, an API key)
    re.compile(r"(?i)(\bheader value:?\s*b?['\"])[^'\"]+"),
]


def mask_credentials(text: str) -> str:
    """``text`` with whatever follows ``Bearer ``, ``Authorization:`` or ``header value:`` as ``***``: a library
    that refuses a header quotes its whole value, and the value of ``Authorization`` is the token. The
    settings refuse such a token when they load; this is the second line, for what they cannot see."""
    for pattern in _CREDENTIALS:
        text = pattern.sub(lambda m: f"{m.group(1)}***", text)
    return text


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        # ``raise ... from None`` says the error it replaced is no part of it, as a traceback would not show it
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return seen


def _status(exc: BaseException, text: str) -> int | None:
    for e in _chain(exc):
        if isinstance(e, KubeAPIError) and e.status:
            return e.status
        status = getattr(e, "status", None) or getattr(getattr(e, "response", None), "status_code", None)
        if isinstance(status, int) and 100 <= status < 600:
            return status
    match = _STATUS.search(text)
    return int(next(g for g in match.groups() if g)) if match else None


def _servers_reason(exc: BaseException) -> str | None:
    """The server's own words for a refusal (``err-mimir-max-series-per-query ...``, a PromQL parse error), kept
    after the status's: the status alone does not say which limit was hit or which part of a query is wrong."""
    for e in _chain(exc):
        if isinstance(e, SourceError) and (match := _REASON.fullmatch(e.detail)):
            return match.group(1)
    return None


def in_words(exc: BaseException) -> str:
    """What went wrong, as a short phrase: ``name does not resolve``, ``HTTP 401: unauthorized: ...``; never
    a credential a library quoted (``mask_credentials``)."""
    return mask_credentials(_in_words(exc))


def _in_words(exc: BaseException) -> str:
    text = " ".join(f"{type(e).__name__}: {e}" for e in _chain(exc))
    if isinstance(exc, ConfigError):
        return str(exc)
    status = _status(exc, text)
    if status is not None and status >= 400:
        words = _HTTP_WORDS.get(status) or ("server error" if status >= 500 else "refused")
        reason = _servers_reason(exc)
        if reason:  # a server that says why in Prometheus' own ``error`` field is the right kind
            words = f"{words.removesuffix(' (is this the right kind of server?)')}: {reason}"
        return f"HTTP {status}: {words}"
    for pattern, words in _PATTERNS:
        if re.search(pattern, text):
            return words
    # A SourceError's own words: its ``str()`` leads with the source and URL, which the caller names already.
    first = exc.detail if isinstance(exc, SourceError) else str(exc).split(" (Caused by")[0]
    return re.sub(r"\?\S+", "", first)[:300] or type(exc).__name__  # no URL-encoded queries


def _unset(settings: GpuaasSettings, name: str) -> str | None:
    """Which variable says where the source is, when none does: there is nothing to reach."""
    if name == "prometheus" and not settings.prometheus_url:
        return "GPUAAS_PROMETHEUS_URL is not set"
    if name == "opencost" and not (settings.opencost_url or settings.prometheus_url):
        return "neither GPUAAS_OPENCOST_URL nor GPUAAS_PROMETHEUS_URL is set"
    if name == "pushgateway" and not settings.pushgateway_url:
        return "GPUAAS_PUSHGATEWAY_URL is not set"
    return None


def _kube_endpoint(settings: GpuaasSettings) -> str:
    if settings.in_cluster:
        return "the in-cluster service account"
    from gpuaas.sources._kube_client import exec_plugin_server, kubeconfig_path

    path = kubeconfig_path(settings)
    server = exec_plugin_server(settings)  # read from the file: naming the server must not run the plugin again
    if server is not None:
        return redact_endpoint(server)
    try:
        from kubernetes import client, config

        cfg = client.Configuration()
        config.load_kube_config(config_file=str(settings.kubeconfig) if settings.kubeconfig else None,
                                context=settings.kube_context, client_configuration=cfg, persist_config=False)
        return redact_endpoint(str(cfg.host))
    except Exception:  # noqa: BLE001 - an unreadable kubeconfig: name the file instead
        return f"kubeconfig {path}"


def endpoint_of(settings: GpuaasSettings, name: str) -> str:
    """Where source ``name`` points, as configured (credentials scrubbed)."""
    if name == "prometheus":
        return redact_endpoint(settings.prometheus_url) if settings.prometheus_url else "(GPUAAS_PROMETHEUS_URL unset)"
    if name == "opencost":
        url = settings.opencost_url or settings.prometheus_url
        return redact_endpoint(url) if url else "(GPUAAS_OPENCOST_URL unset)"
    if name == "kube":
        return _kube_endpoint(settings)
    if name == "pushgateway":
        url = settings.pushgateway_url
        return redact_endpoint(url) if url else "(GPUAAS_PUSHGATEWAY_URL unset)"
    return "this host"


def _refused_read(exc: BaseException) -> str | None:
    """``; list jobs.batch is refused: bind gpuaas-reader (kubectl apply -f …/rbac.yaml)`` when a list the
    reader role grants was refused (403): the role bound lacks that rule of ``rbac.yaml``, and "forbidden"
    alone would not say which of two dozen reads to look for, nor the file that grants it."""
    from gpuaas.permissions import READS, ROLES, Access, bind_command

    for e in _chain(exc):
        if isinstance(e, KubeAPIError) and e.status == 403 and e.verb == "listing" and e.kind:
            resource, _, group = e.kind.rsplit("/", 1)[0].partition(".")  # jobs.batch/v1, pods/v1
            access = Access("list", group, resource)
            if access in READS:
                return f"; {access} is refused: {bind_command(ROLES['reads'])}"
    return None


def _the_request(exc: BaseException) -> str | None:
    """`` (listing resourceflavors.kueue.x-k8s.io/v1beta1: 500 Internal Server Error: conversion webhook ...
    failed: ...)`` for an error status of the API server other than 401 and 403 (said on their own): "HTTP 500:
    server error" alone names neither the request nor what the server (or a webhook behind it) said."""
    for e in _chain(exc):
        if isinstance(e, KubeAPIError) and e.status not in (401, 403):
            return f" ({e})"
    return None


def _unauthorized(settings: GpuaasSettings) -> str:
    """``HTTP 401: unauthorized: the credentials of user 'gpuaas' of kubeconfig /k were refused ...``: which
    kubeconfig entry to renew. A service account token from ``kubectl create token`` expires (its ``--duration``),
    and the API server says no more than 401 for an expired, a revoked or another cluster's token."""
    from gpuaas.sources._kube_client import credentials_owner

    return (f"HTTP 401: unauthorized: the credentials of {credentials_owner(settings)} were refused (a token "
            "expired, revoked or of another cluster: issue a new one with kubectl create token)")


def describe_failure(settings: GpuaasSettings, name: str, exc: BaseException) -> str:
    """``Prometheus at http://prometheus:9090: name does not resolve``."""
    if isinstance(exc, ConfigError) and name == "kube":
        words = str(exc).split("cannot load Kubernetes credentials: ")[-1]
        return mask_credentials(
            f"{SOURCE_NAMES['kube']} at {_kube_endpoint(settings)}: cannot load the credentials: {words}")[:500]
    unset = _unset(settings, name)
    if unset is not None:
        return f"{SOURCE_NAMES.get(name, name)}: {unset}"
    words = in_words(exc) + ((_refused_read(exc) or _the_request(exc) or "") if name == "kube" else "")
    if name == "kube" and _status(exc, "") == 401:
        words = _unauthorized(settings)
    if words == _UNTRUSTED and name in HTTPS_SOURCES:  # the one setting that fixes it is ours, not the system's
        words += (f" (not by one in GPUAAS_CA_FILE {settings.ca_file})" if settings.ca_file
                  else " (set GPUAAS_CA_FILE to the CA bundle that signs it)")
    return mask_credentials(f"{SOURCE_NAMES.get(name, name)} at {endpoint_of(settings, name)}: {words}")[:500]
