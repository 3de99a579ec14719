"""Summary metrics pushed to a Prometheus Pushgateway, for Grafana and KEDA.

A batch job cannot be scraped while it is not running, so each flow run pushes its figures
under its own job name; the Pushgateway keeps the latest set until the next run replaces it,
forever if none does, so a run that cannot vouch for a signal withdraws it (``delete_metrics``).

KEDA scales workloads on what is pushed, so whoever can push can scale them: a Pushgateway behind
basic auth (its ``--web.config.file``) or a bearer-token proxy is sent its credentials from the URL's
``user:password@`` (the password may come from ``GPUAAS_PUSHGATEWAY_PASSWORD`` instead) or from
``GPUAAS_PUSHGATEWAY_TOKEN``/``_TOKEN_FILE``, the way Prometheus's token is (``gpuaas._https``). The
credentials travel in the ``Authorization`` header only: the URL the request goes to, and every line
that names it, carries none.
"""

from __future__ import annotations

from base64 import b64encode
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.error import HTTPError, URLError
from urllib.parse import unquote, urlsplit, urlunsplit
from urllib.request import BaseHandler, HTTPRedirectHandler, HTTPSHandler, Request, build_opener

from pydantic import SecretStr

from gpuaas._https import bearer_token, ssl_context
from gpuaas.errors import ConfigError, SourceError, SourceUnavailable
from gpuaas.settings import GpuaasSettings

__all__ = ["MetricFamily", "auth_headers", "auth_problem", "base_url", "delete_metrics", "push_metrics"]

SOURCE: Literal["pushgateway"] = "pushgateway"


@dataclass
class MetricFamily:
    """One gauge family: name, help, label names and ``(label values, value)`` samples."""

    name: str
    help: str
    labels: tuple[str, ...] = ()
    samples: list[tuple[tuple[str, ...], float]] = field(default_factory=list)

    def add(self, value: float, *label_values: str) -> MetricFamily:
        self.samples.append((tuple(label_values), float(value)))
        return self


def push_metrics(settings: GpuaasSettings, job: str, families: Iterable[MetricFamily]) -> int:
    """Replace the job's metric group on the Pushgateway; returns how many samples were pushed."""
    from prometheus_client import CollectorRegistry, Gauge, push_to_gateway  # here: most runs push nothing

    url, handler = _gateway(settings), _handler(settings)
    registry = CollectorRegistry()
    count = 0
    for family in families:
        gauge = Gauge(family.name, family.help, list(family.labels), registry=registry)
        for label_values, value in family.samples:
            (gauge.labels(*label_values) if family.labels else gauge).set(value)
            count += 1
    try:
        push_to_gateway(_without_userinfo(url), job=job, registry=registry, timeout=settings.request_timeout_seconds,
                        handler=handler)
    except (URLError, OSError) as exc:
        raise _failure("push", exc, url) from exc
    return count


def delete_metrics(settings: GpuaasSettings, job: str) -> None:
    """Withdraw the job's whole metric group: a run that cannot vouch for its signal must not leave the last one up."""
    from prometheus_client import delete_from_gateway

    url, handler = _gateway(settings), _handler(settings)
    try:
        delete_from_gateway(_without_userinfo(url), job=job, timeout=settings.request_timeout_seconds, handler=handler)
    except (URLError, OSError) as exc:
        raise _failure("withdraw", exc, url) from exc


def auth_problem(url: str | None, password: SecretStr | None, token: SecretStr | None,
                 token_file: Path | None) -> str | None:
    """Why the Pushgateway's credentials cannot be sent together, naming the variables; None when they can.

    One ``Authorization`` header carries either basic auth or a bearer token: with both set, which one is sent
    would be the code's choice. A password needs a user name (the URL's) to go with it, and one that differs from
    the URL's own would leave the sent one to the order of the code, as for the database's password.
    """
    parts = urlsplit(url or "")
    if token is not None and token_file is not None:
        return "GPUAAS_PUSHGATEWAY_TOKEN and GPUAAS_PUSHGATEWAY_TOKEN_FILE are both set: set one of them"
    if password is not None and parts.username is None:
        return ("GPUAAS_PUSHGATEWAY_PASSWORD is set, but GPUAAS_PUSHGATEWAY_URL names no user for it: write the "
                "user into the URL (http://gpuaas@pushgateway.monitoring.svc:9091)")
    if password is not None and parts.password is not None and unquote(parts.password) != password.get_secret_value():
        return ("GPUAAS_PUSHGATEWAY_PASSWORD differs from the password in GPUAAS_PUSHGATEWAY_URL: keep the password "
                "in one of them")
    if parts.username is not None and (token is not None or token_file is not None):
        return ("GPUAAS_PUSHGATEWAY_URL names a user (basic auth), and GPUAAS_PUSHGATEWAY_TOKEN or its file is set "
                "(a bearer token): the Pushgateway takes one of them")
    return None


def _gateway(settings: GpuaasSettings) -> str:
    if not settings.pushgateway_url:
        raise ConfigError("not set: set it to the Pushgateway's URL, e.g. http://pushgateway.monitoring.svc:9091",
                          field="GPUAAS_PUSHGATEWAY_URL")
    return settings.pushgateway_url


def base_url(settings: GpuaasSettings) -> str:
    """The Pushgateway's URL as requested, without the user-info its credentials come from (``auth_headers``)."""
    return _without_userinfo(_gateway(settings))


def _without_userinfo(url: str) -> str:
    """``url`` as requested: ``urllib`` would read ``user:password@host`` as a host name (``Name or service not
    known``), the password would ride in every URL the request's errors print, and a client that reads it as basic
    auth itself (``httpx``) would send it without ``GPUAAS_PUSHGATEWAY_PASSWORD``."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, parts.query, parts.fragment))


def _authorization(settings: GpuaasSettings) -> str | None:
    """The ``Authorization`` header's value: basic auth from the URL's user (and its or the setting's password),
    or the bearer token (read from its file at each push: a rotated token is picked up); None for neither."""
    parts = urlsplit(_gateway(settings))
    if parts.username is not None:
        password = (settings.pushgateway_password.get_secret_value() if settings.pushgateway_password is not None
                    else unquote(parts.password or ""))
        pair = f"{unquote(parts.username)}:{password}".encode()
        return f"Basic {b64encode(pair).decode('ascii')}"
    token = bearer_token(settings, SOURCE)
    return None if token is None else f"Bearer {token}"


def auth_headers(settings: GpuaasSettings) -> dict[str, str]:
    """The headers every request to the Pushgateway carries (its ``Authorization``, where credentials are set), also
    for a request other than a push (a readiness probe, to ``base_url``: basic auth guards every path)."""
    authorization = _authorization(settings)
    return {} if authorization is None else {"Authorization": authorization}


def _failure(what: str, exc: BaseException, url: str) -> SourceError:
    """One line naming the Pushgateway, its URL without credentials (``SourceError`` redacts it) and what went
    wrong. A refusal (401, 403, any 4xx but 429) is permanent: a retry sends the same credentials."""
    if isinstance(exc, HTTPError):
        detail = f"{what} refused: HTTP {exc.code} {exc.reason}"
        if exc.code in (401, 403):
            detail += (" (check the credentials: the user and password of GPUAAS_PUSHGATEWAY_URL, "
                       "GPUAAS_PUSHGATEWAY_PASSWORD, GPUAAS_PUSHGATEWAY_TOKEN or its file)")
        if 300 <= exc.code < 400:
            detail = f"{what} refused: HTTP {exc.code}, a redirect, not followed (the credentials are for this URL)"
        if exc.code < 500 and exc.code != 429:
            return SourceError(detail, source=SOURCE, url=url)
        return SourceUnavailable(detail, source=SOURCE, url=url)
    reason = exc.reason if isinstance(exc, URLError) else exc
    return SourceUnavailable(f"{what} failed: {reason}", source=SOURCE, url=url)


class _NoRedirect(HTTPRedirectHandler):
    """A redirect is an error, never followed: the credentials are for the configured Pushgateway alone."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


Handler = Callable[[str, str, float | None, list[tuple[str, str]], bytes], Callable[[], None]]


def _handler(settings: GpuaasSettings) -> Handler:
    """``prometheus_client``'s request, with the ``Authorization`` header where credentials are set, over HTTPS
    trusting ``ca_file`` when one is set. The credentials are read here, before anything is sent: a token file
    that cannot be read is a ``ConfigError`` naming it."""
    credentials = auth_headers(settings)
    context = ssl_context(settings)
    handlers: list[BaseHandler] = [_NoRedirect()]
    if context is not None:
        handlers.append(HTTPSHandler(context=context))

    def handler(url: str, method: str, timeout: float | None, headers: list[tuple[str, str]],
                data: bytes) -> Callable[[], None]:
        def send() -> None:
            request = Request(url, data=data, method=method, headers={**dict(headers), **credentials})
            with build_opener(*handlers).open(request, timeout=timeout) as answer:
                if answer.status >= 400:  # urllib raises on most; kept as the library's own handler has it
                    raise OSError(f"error talking to pushgateway: {answer.status} {answer.reason}")

        return send

    return handler
