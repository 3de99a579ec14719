"""The one translation of a failed Kubernetes request into ``gpuaas.errors``, for reader and writer.

``kube_request(verb=..., kind=..., namespace=..., name=..., url=...)`` wraps a client call:

* an HTTP error status: ``kube_error_for_status``'s class (``Conflict``, ``NotFound``, …), built
  from the status, its phrase and, when the body is a ``kind: Status``, its reason and message
  (cut to one line of 256 characters: a body can quote anything, kopf does the same);
* an admission denial, whatever its status: ``AdmissionDenied``, naming the webhook or the
  ``ValidatingAdmissionPolicy`` the message names and keeping up to 1,000 characters of what it said
  (``admission_denial``), since that is what tells the operator which rule refused the write; for the kit's
  own policy, what that means;
* no answer (timeout, reset, refused): ``SourceUnavailable``, the cause in words (``in_words``);
* an answer that is not JSON, or JSON nested too deeply to read (the standard decoder's ``RecursionError``,
  from a caller that decodes with it): ``MalformedResponse``.

Each names the request the same way (``patching RayCluster team-a/train-7``), so an error never
has to be rebuilt from another one's message, and ``raise ... from exc`` keeps the client's error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from http import HTTPStatus
from typing import TYPE_CHECKING, NamedTuple

import urllib3

from gpuaas.errors import (
    Admission,
    AdmissionDenied,
    KubeAPIError,
    MalformedResponse,
    SourceUnavailable,
    TransientError,
    kube_error_for_status,
    kube_target,
    redact_endpoint,
)
from gpuaas.phrases import printable
from gpuaas.sources._json_answer import NESTED_TOO_DEEPLY, UnreadableJSON, read_json
from gpuaas.sources._retry_after import retry_after_seconds
from gpuaas.sources.failures import in_words

if TYPE_CHECKING:
    from kubernetes.client.exceptions import ApiException

__all__ = ["SOURCE", "Denial", "admission_denial", "kube_api_error", "kube_request"]

SOURCE = "kube"
_BODY_CHARS = 256
_DENIAL_CHARS = 1000
"""What an admission denial keeps of its controller's message: a Kyverno or Gatekeeper message names the policy,
the rule and the field past 256 characters; 1,000 keeps that and leaves the line within an audit row's 2,000."""

# The API server's own words (k8s.io/apiserver, pkg/admission/plugin): a webhook's denial is
# ``admission webhook %q denied the request: <message>`` (or ``... without explanation``, webhook/errors/
# statuserror.go), a policy's ``ValidatingAdmissionPolicy '%s' with binding '%s' denied request: <message>`` (or
# without the binding, policy/validating/dispatcher.go) behind ``<resource> "<name>" is forbidden: ``. Some versions
# put that prefix (or ``Internal error occurred: ``, for a webhook's 500) before a webhook's words too.
_PREFIX = r'(?:[\w.-]+(?: "[^"]*")? is forbidden: |Internal error occurred: )?'
_WEBHOOK = re.compile(_PREFIX + r'admission webhook "(?P<name>[^"]+)" denied the request'
                      r"(?:: (?P<said>.*)| without explanation)$")
_POLICY = re.compile(_PREFIX + r"ValidatingAdmissionPolicy '(?P<name>[^']+)'(?: with binding '(?P<binding>[^']+)')?"
                     r" denied request:(?: (?P<said>.*))?$")


def _status_body(body: object) -> tuple[str | None, str]:
    """The ``reason`` and ``message`` of a ``kind: Status`` body, the message on one line with its control characters
    escaped and not cut; nothing from any other body (an HTML page of a proxy, a truncated answer) since only a Status
    is written to be shown."""
    try:
        parsed = read_json(body or "{}")  # type: ignore[arg-type]
    except UnreadableJSON:
        return None, ""
    if not isinstance(parsed, dict) or parsed.get("kind") != "Status":
        return None, ""
    message = printable(" ".join(str(parsed.get("message") or "").split()))
    return str(parsed.get("reason") or "") or None, message


class Denial(NamedTuple):
    """An admission denial as the API server's message states it."""

    by: Admission
    controller: str
    """The webhook's or the policy's name."""
    binding: str | None
    """The policy's binding, where the message names one."""
    said: str
    """What it said, in at most 1,000 characters."""


def admission_denial(message: str) -> Denial | None:
    """The denial the API server's ``message`` (one line) states, an admission webhook's or a
    ``ValidatingAdmissionPolicy``'s; else None (a failed call to a webhook, ``failed calling webhook ...``, is no
    denial: it is worth another try)."""
    found = _WEBHOOK.match(message)
    by = Admission.webhook
    if found is None:
        found, by = _POLICY.match(message), Admission.policy
    if found is None:
        return None
    said = found["said"] or "(no message)"
    if len(said) > _DENIAL_CHARS:
        said = said[:_DENIAL_CHARS - 1] + "…"
    return Denial(by, found["name"], found.groupdict().get("binding"), said)


def _kit_policy_note(by: Admission, name: str) -> str:
    """What a denial by the kit's own policy means: gpuaas wrote a field the policy does not let it change."""
    from gpuaas.permissions import ADMISSION_POLICY  # here: the permissions module loads the settings

    if by is not Admission.policy or name != ADMISSION_POLICY:
        return ""
    return ("; that is the kit's own admission policy: gpuaas tried to change a field the policy does not allow, a "
            "gpuaas bug to report, or a policy out of date with this gpuaas version (kubectl apply -f "
            "deployments/kubernetes/admission-policy.yaml of this version)")


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
    denial = admission_denial(message)
    if denial is not None:  # permanent whatever its status: no retry, no Retry-After
        return AdmissionDenied(denial.said + _kit_policy_note(denial.by, denial.controller), by=denial.by,
                               controller=denial.controller, binding=denial.binding, status=status,
                               reason=_phrase(status, exc.reason), kind=kind, namespace=namespace, name=name,
                               verb=verb, status_reason=status_reason)
    error = kube_error_for_status(status)(
        message[:_BODY_CHARS], status=status, reason=_phrase(status, exc.reason), kind=kind, namespace=namespace,
        name=name, verb=verb, status_reason=status_reason)
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
