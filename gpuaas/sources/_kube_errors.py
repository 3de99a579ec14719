"""The one translation of a failed Kubernetes request into ``gpuaas.errors``, for reader and writer.

``kube_request(verb=..., kind=..., namespace=..., name=..., url=...)`` wraps a client call:

* an HTTP error status: ``kube_error_for_status``'s class (``Conflict``, ``NotFound``, …), built
  from the status, its phrase and, when the body is a ``kind: Status``, its reason and message
  (cut to one line of 256 characters: a body can quote anything, kopf does the same);
* no answer (timeout, reset, refused): ``SourceUnavailable``, the cause in words (``in_words``);
* an answer that is not JSON, or JSON nested too deeply to read (the standard decoder's ``RecursionError``,
  from a caller that decodes with it): ``MalformedResponse``.

Each names the request the same way (``patching RayCluster team-a/train-7``), so an error never
has to be rebuilt from another one's message, and ``raise ... from exc`` keeps the client's error.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from http import HTTPStatus
from typing import TYPE_CHECKING

import urllib3

from gpuaas.errors import (
    KubeAPIError,
    MalformedResponse,
    SourceUnavailable,
    TransientError,
    kube_error_for_status,
    kube_target,
    redact_endpoint,
)
from gpuaas.sources._json_answer import NESTED_TOO_DEEPLY, UnreadableJSON, read_json
from gpuaas.sources._retry_after import retry_after_seconds
from gpuaas.sources.failures import in_words

if TYPE_CHECKING:
    from kubernetes.client.exceptions import ApiException

__all__ = ["SOURCE", "kube_api_error", "kube_request"]

SOURCE = "kube"
_BODY_CHARS = 256


def _status_body(body: object) -> tuple[str | None, str]:
    """The ``reason`` and ``message`` of a ``kind: Status`` body; nothing from any other body (an HTML
    page of a proxy, a truncated answer) since only a Status is written to be shown."""
    try:
        parsed = read_json(body or "{}")  # type: ignore[arg-type]
    except UnreadableJSON:
        return None, ""
    if not isinstance(parsed, dict) or parsed.get("kind") != "Status":
        return None, ""
    message = " ".join(str(parsed.get("message") or "").split())[:_BODY_CHARS]
    return str(parsed.get("reason") or "") or None, message


def _phrase(status: int, said: object) -> str:
    if said:
        return str(said)
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def kube_api_error(exc: ApiException, *, verb: str, kind: str, namespace: str | None = None,
                   name: str | None = None) -> KubeAPIError:
    """The typed error for an error status; a transient one carries the server's ``Retry-After``."""
    status = int(exc.status or 0)
    status_reason, message = _status_body(exc.body)
    error = kube_error_for_status(status)(
        message, status=status, reason=_phrase(status, exc.reason), kind=kind, namespace=namespace, name=name,
        verb=verb, status_reason=status_reason)
    if isinstance(error, TransientError):
        error.retry_after = retry_after_seconds((exc.headers or {}).get("Retry-After"))
    return error


@contextmanager
def kube_request(*, verb: str, kind: str, url: str, namespace: str | None = None,
                 name: str | None = None) -> Iterator[None]:
    """Run one API call; whatever goes wrong leaves as the one error that names it (module docstring)."""
    from kubernetes.client.exceptions import ApiException  # here: importing ``kubernetes`` costs a fraction of a second

    try:
        yield
    except ApiException as exc:
        error = kube_api_error(exc, verb=verb, kind=kind, namespace=namespace, name=name)
        error.url = redact_endpoint(url) if url else None
        raise error from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        target = kube_target(verb, kind, namespace, name)
        raise SourceUnavailable(f"{target}: {in_words(exc)}", source=SOURCE, url=url) from exc
    except UnreadableJSON as exc:  # ``read_json``'s own words: not JSON, or nested too deeply
        target = kube_target(verb, kind, namespace, name)
        raise MalformedResponse(f"{target}: the answer is {exc}", source=SOURCE, url=url) from exc
    except ValueError as exc:
        target = kube_target(verb, kind, namespace, name)
        raise MalformedResponse(f"{target}: the answer is not JSON", source=SOURCE, url=url) from exc
    except RecursionError as exc:  # a caller's own decoder recursing out on a deeply nested answer
        target = kube_target(verb, kind, namespace, name)
        raise MalformedResponse(f"{target}: the answer is {NESTED_TOO_DEEPLY}", source=SOURCE, url=url) from exc
