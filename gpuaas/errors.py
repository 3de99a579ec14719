"""The one exception hierarchy of gpuaas.

Callers catch by meaning, not by library: foreign exceptions (``ApiException``, ``httpx``
errors, ``pydantic.ValidationError``) are translated where they enter, keeping the cause.
Whether a task retries is decided by the type alone: ``TransientError`` is worth another
attempt, ``PermanentError`` is not.

* GpuaasError
  x ConfigError            a settings value or policy file is wrong (names file and field)
  x StoreError             the audit/snapshot database refused or is out of date
    + SchemaMismatch       (permanent) its schema is not the one this gpuaas reads, and it may not migrate it
  x SourceError            a data source could not be read (names source and URL)
    + SourceUnavailable    (transient) timeout, refused connection, 5xx, 429
    + MalformedResponse    (permanent) the answer did not have the documented shape
    + StaleData            (permanent) the answer is older than the policy allows
    + RetriesSpent         (permanent) a transient failure outlasted the request's own retries
  x KubeAPIError           the Kubernetes API answered with an error status
    + Conflict             409: the object changed since it was read
    + NotFound             404
    + Forbidden            403: RBAC does not allow the verb
    + Invalid              422: the schema rejected the object
    + AdmissionDenied      an admission webhook or ValidatingAdmissionPolicy refused the write (whatever its status)
    + Expired              410: a list's continue token (or a resourceVersion) is older than etcd keeps
  x PolicyError            a policy cannot decide on this snapshot
  x ActionRefused          a safety rule stopped a write
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

__all__ = [
    "ActionRefused",
    "Admission",
    "AdmissionDenied",
    "ConfigError",
    "Conflict",
    "Expired",
    "Forbidden",
    "GpuaasError",
    "Invalid",
    "KubeAPIError",
    "MalformedResponse",
    "NotFound",
    "NotStored",
    "PermanentError",
    "PolicyError",
    "RetriesSpent",
    "SOURCE_NAMES",
    "SchemaMismatch",
    "SourceError",
    "SourceUnavailable",
    "StaleData",
    "StoreError",
    "TransientError",
    "error_line",
    "kube_error_for_status",
    "kube_target",
    "redact_endpoint",
    "scrub_secrets",
]


class GpuaasError(Exception):
    """Root of every error gpuaas raises on purpose."""


class TransientError(GpuaasError):
    """Marker: the same call may succeed later, so retries are worth it."""

    retry_after: float | None = None
    """Seconds the server asked us to wait (``Retry-After``) before the next attempt, if it said."""


class PermanentError(GpuaasError):
    """Marker: retrying cannot help; fix the input or the environment."""


class ConfigError(PermanentError):
    """A configuration value is wrong. ``str()`` reads ``FILE: FIELD.PATH: what was expected``."""

    def __init__(self, message: str, *, file: Path | str | None = None, field: str | None = None) -> None:
        self.file = str(file) if file is not None else None
        self.field = field
        prefix = ": ".join(p for p in (self.file, field) if p)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class StoreError(PermanentError):
    """The database could not be opened, migrated or written."""


class SchemaMismatch(StoreError):
    """The database's schema is not the one this gpuaas reads, and this process may not migrate it: newer (written by a
    newer gpuaas), or behind where only ``gpuaas db upgrade`` may migrate it. Asking again finds the same schema, so a
    step does not retry it; the message says what to run."""


class NotStored(StoreError):
    """The store answered, and does not hold what was asked for (a snapshot id, its rows): unlike a database that
    is busy or gone for a moment, asking again finds nothing more."""


_SECRET_PARAMS = ("token", "key", "secret", "password", "passwd", "sig", "signature", "auth", "credential")


def redact_endpoint(url: str) -> str:
    """``url`` without credentials: the userinfo password and secret-looking query values become ``***``.

    Endpoints are settings an operator may write as ``https://user:pass@prom/`` or with
    ``?access_token=...``; an error message, log line or artifact carries the URL (it says
    where), never what lets one in.
    """
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, host = netloc.rpartition("@")
            user = userinfo.split(":", 1)[0]
            netloc = f"{user}:***@{host}" if ":" in userinfo else f"***@{host}"
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            query = urlencode([(k, "***" if any(s in k.lower() for s in _SECRET_PARAMS) else v) for k, v in pairs],
                              safe="*")
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        return "<unparsable URL>"


def scrub_secrets(text: str, url: str) -> str:
    """``text`` with every credential of ``url`` (userinfo, secret query values, raw or
    percent-encoded) replaced by ``***``: library messages quote the URL they failed on."""
    from urllib.parse import parse_qsl, quote, unquote, urlsplit

    try:
        parts = urlsplit(url)
        secrets = [parts.password or "", parts.username or "" if parts.password is None else ""]
        secrets += [v for k, v in parse_qsl(parts.query) if any(s in k.lower() for s in _SECRET_PARAMS)]
    except ValueError:
        return text
    for secret in sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True):
        for form in sorted({secret, unquote(secret), quote(unquote(secret), safe="")}, key=len, reverse=True):
            text = text.replace(form, "***")
    return text


SOURCE_NAMES = {"kube": "Kubernetes API", "prometheus": "Prometheus", "opencost": "OpenCost", "nvml": "NVML",
                "pushgateway": "Pushgateway"}
"""Each source as a person names it, in every line that names one (``Prometheus at http://…: …``)."""


class SourceError(GpuaasError):
    """A data source failed. Carries the source name and the URL (never credentials); ``str()`` names the source as
    a degraded snapshot's headline does (``Prometheus at http://prometheus:9090: connection refused``)."""

    detail: str
    """What went wrong, without the source and URL that ``str()`` leads with: for a line that names them itself."""

    def __init__(self, message: str, *, source: str, url: str | None = None) -> None:
        self.source = source
        message = scrub_secrets(message, url) if url else message
        self.detail = message
        self.url = redact_endpoint(url) if url else url
        name = SOURCE_NAMES.get(source, source)
        where = f"{name} at {self.url}" if self.url else name
        super().__init__(f"{where}: {message}")


class SourceUnavailable(SourceError, TransientError):
    """Timeout, refused connection, 5xx or 429.

    ``too_slow``: the source took the request but did not answer in time (a read timeout, or
    Prometheus' own query timeout, a 503): a smaller question may get through where a retry won't.
    """

    def __init__(
        self, message: str, *, source: str, url: str | None = None, retry_after: float | None = None,
        too_slow: bool = False,
    ) -> None:
        super().__init__(message, source=source, url=url)
        self.retry_after = retry_after
        self.too_slow = too_slow


class MalformedResponse(SourceError, PermanentError):
    """The source answered, but not in the documented shape."""


class StaleData(SourceError, PermanentError):
    """The data is older than the policy accepts; acting on it would be unsafe."""


class RetriesSpent(SourceError, PermanentError):
    """A transient failure (429, 5xx, no answer) that came again on every retry of the one request
    (``GPUAAS_RETRIES``). The reader already waited and asked again, so the task does not repeat the whole read:
    that would send every request of it again, and retry each of them once more. The last failure is the cause."""


class KubeAPIError(GpuaasError):
    """The Kubernetes API answered with an error status.

    One line names what was asked and what came back:
    ``patching RayCluster team-a/train-7: 409 Conflict: the object has been modified``. The HTTP
    status and its phrase always; the ``Status`` body's reason in brackets where it says more
    than the phrase (``410 Gone (Expired)``), and its message when there is one.
    ``gpuaas.sources.kube.kube_api_error`` builds it from the client's exception.
    """

    def __init__(
        self,
        message: str = "",
        *,
        status: int,
        reason: str = "",
        kind: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        verb: str | None = None,
        status_reason: str | None = None,
    ) -> None:
        self.status = status
        self.reason = reason
        self.kind = kind
        self.namespace = namespace
        self.name = name
        self.verb = verb
        self.status_reason = status_reason
        self.url: str | None = None
        """The API server that answered, where the caller knows it: a command that ends on the error names it."""
        answer = f"{status} {reason}".strip() if status else ""
        if answer and status_reason and status_reason.lower() != reason.replace(" ", "").lower():
            answer += f" ({status_reason})"
        target = kube_target(verb, kind, namespace, name)
        super().__init__(": ".join(p for p in (target, answer, message) if p))


def kube_target(verb: str | None, kind: str | None, namespace: str | None = None, name: str | None = None) -> str:
    """``patching RayCluster team-a/train-7``: how every Kubernetes error names its request."""
    obj = "/".join(p for p in (namespace, name) if p)
    return " ".join(p for p in (verb, kind, obj) if p) or "request"


class Conflict(KubeAPIError, PermanentError):
    """409: the object changed since it was read; re-read and decide again, never force."""


class NotFound(KubeAPIError, PermanentError):
    """404: the object (or the API) does not exist."""


class Forbidden(KubeAPIError, PermanentError):
    """403: the service account's RBAC does not allow this verb."""


class Invalid(KubeAPIError, PermanentError):
    """422: the API server's schema rejected the object."""


class Expired(KubeAPIError, PermanentError):
    """410: what the request resumes from (a list's ``continue`` token) is older than the API server keeps
    (etcd compacts every 5 minutes by default). The same request fails again; a list starts over instead."""


class Admission(StrEnum):
    """What refused a write at admission, as the API server names it."""

    webhook = "admission webhook"
    policy = "ValidatingAdmissionPolicy"


class AdmissionDenied(KubeAPIError, PermanentError):
    """An admission webhook or a ``ValidatingAdmissionPolicy`` refused the write. Not RBAC, whatever status it chose
    (a webhook may answer 400, 403, 422 or even 500; a policy 403 or 422): no role to bind lets it through, the object
    is as it was, and the same write is refused again, so it is never retried. The line names what refused it, not
    the status: ``patching Deployment team-a/web: denied by admission webhook labels.example.com: <its message>``
    (``status`` keeps the status). ``gpuaas.sources.kube.kube_api_error`` builds it from the API server's message."""

    def __init__(self, message: str = "", *, by: Admission, controller: str, binding: str | None = None,
                 status: int, reason: str = "", kind: str | None = None, namespace: str | None = None,
                 name: str | None = None, verb: str | None = None, status_reason: str | None = None) -> None:
        named = f"{controller} (binding {binding})" if binding and binding != controller else controller
        super().__init__(f"denied by {by.value} {named}: {message}", status=0, kind=kind, namespace=namespace,
                         name=name, verb=verb, status_reason=status_reason)
        self.status, self.reason = status, reason  # after the line: a webhook's 403 must not read as RBAC's
        self.by = by
        self.controller = controller
        self.binding = binding
        """The ``ValidatingAdmissionPolicyBinding`` that applied the policy, where the message names one."""


class _KubeUnavailable(KubeAPIError, TransientError):
    """5xx or 429 from the API server."""


class PolicyError(PermanentError):
    """A policy cannot decide on this snapshot (e.g. a tenant names an unknown queue)."""


class ActionRefused(PermanentError):
    """A safety rule (dry-run, staleness, cap, opt-out) stopped a write."""


def error_line(error: BaseException, limit: int = 500) -> str:
    """``str(error)`` cut at ``limit``, as a result or a summary line shows an error; an ``AdmissionDenied`` whole,
    since which rule refused the write, and why, is its point (its controller's message is bounded where it is
    built, so the line fits an audit row's 2,000 characters)."""
    line = str(error)
    return line if isinstance(error, AdmissionDenied) else line[:limit]


def kube_error_for_status(status: int) -> type[KubeAPIError]:
    """The error class for an API status; the one place that mapping lives."""
    if status == 409:
        return Conflict
    if status == 404:
        return NotFound
    if status in (401, 403):
        return Forbidden
    if status == 422:
        return Invalid
    if status == 410:
        return Expired
    if status == 429 or status >= 500:
        return _KubeUnavailable
    return KubeAPIError
