"""An admission webhook's or a ValidatingAdmissionPolicy's denial, as the one error reader and writer raise.

The messages are the API server's own (k8s.io/apiserver, pkg/admission/plugin): a webhook's denial is
``admission webhook %q denied the request: <its message>`` or ``... without explanation``
(webhook/errors/statuserror.go; a status under 400 becomes 400, so a webhook that sets no code answers 400, and
some versions put ``<resource> "<name>" is forbidden: `` or, for a 500, ``Internal error occurred: `` before it);
a policy's is ``<resource> "<name>" is forbidden: ValidatingAdmissionPolicy '%s' with binding '%s' denied request:
<its message>`` (or without the binding, policy/validating/dispatcher.go), 403 or 422 as its reason says.

Covers: each shape is an ``AdmissionDenied`` naming what refused the write and keeping its message (one line, its
control characters escaped, up to 1,000 characters where any other message keeps 256), permanent whatever its
status (never retried, never read back as a write that may have landed), and never worded as RBAC: no status phrase
in the line, no role to bind in the rebalance's refusal. The kit's own policy adds what its denial means. A failed
call to a webhook and RBAC's own 403 are not denials. Through the real ``kubernetes`` client, one request each.
"""

from __future__ import annotations

import json

import pytest
from kubernetes.client.exceptions import ApiException

from gpuaas.actions._kube_writer import INDEFINITE, KubeWriter
from gpuaas.actions._quota_moves import refused
from gpuaas.errors import (
    Admission,
    AdmissionDenied,
    Forbidden,
    KubeAPIError,
    PermanentError,
    TransientError,
    error_line,
)
from gpuaas.settings import GpuaasSettings
from gpuaas.sources.kube import kube_api_error
from tests.sources.test_kube_errors import RV, TIMEOUT_S, Answer, Server, _api, _raised, server  # noqa: F401

KYVERNO = ("\n\nresource Deployment/team-a/web was blocked due to the following policies \n\n"
           "require-team-label-and-cost-center-on-every-gpu-workload:\n  check-for-labels: 'validation error: the "
           "label `team.example.com/cost-center` is required on every object that requests nvidia.com/gpu. rule "
           "check-for-labels failed at path /metadata/labels/team.example.com/cost-center/'\n")
"""A Kyverno-style message: many lines, and which label and rule only past 256 characters."""
KYVERNO_LINE = " ".join(KYVERNO.split())
SA = "system:serviceaccount:gpuaas:gpuaas"
KIT = (f"refused: {SA} may change only spec.replicas of deployments team-a/web, no other spec field (RBAC cannot "
       "limit a patch to fields: policy gpuaas-write-fields)")
KIT_NOTE = ("; that is the kit's own admission policy: gpuaas tried to change a field the policy does not allow, a "
            "gpuaas bug to report, or a policy out of date with this gpuaas version (kubectl apply -f "
            "deployments/kubernetes/admission-policy.yaml of this version)")
BIND = "bind gpuaas-rebalancer"
TARGET = "patching Deployment team-a/web: "


def _status(code: int, reason: str, message: str) -> str:
    return json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
                       "reason": reason, "code": code})


def api_error(code: int, reason: str, message: str, *, kind: str = "Deployment", namespace: str | None = "team-a",
              name: str = "web") -> KubeAPIError:
    """The error ``kube_request`` raises for this answer to a PATCH of ``kind namespace/name``."""
    exc = ApiException(status=code, reason=reason)
    exc.body = _status(code, reason, message)
    return kube_api_error(exc, verb="patching", kind=kind, namespace=namespace, name=name)


# (id, status, Status reason, the API server's message, what refused it, its name, the binding, the line's tail)
DENIALS = [
    ("webhook-no-code", 400, "BadRequest", f'admission webhook "kyverno.example.com" denied the request: {KYVERNO}',
     Admission.webhook, "kyverno.example.com", None,
     f"denied by admission webhook kyverno.example.com: {KYVERNO_LINE}"),
    ("webhook-403", 403, "Forbidden", f'admission webhook "deny403.example.com" denied the request: {KYVERNO}',
     Admission.webhook, "deny403.example.com", None, f"denied by admission webhook deny403.example.com: {KYVERNO_LINE}"),
    ("webhook-without-explanation", 400, "", 'admission webhook "quiet.example.com" denied the request without '
     "explanation", Admission.webhook, "quiet.example.com", None,
     "denied by admission webhook quiet.example.com: (no message)"),
    ("webhook-forbidden-prefix", 403, "Forbidden", 'deployments.apps "web" is forbidden: admission webhook '
     '"gatekeeper.example.com" denied the request: [must-have-owner] you must provide labels: {"owner"}',
     Admission.webhook, "gatekeeper.example.com", None,
     'denied by admission webhook gatekeeper.example.com: [must-have-owner] you must provide labels: {"owner"}'),
    ("webhook-500", 500, "InternalError", 'Internal error occurred: admission webhook "odd.example.com" denied the '
     "request: quota frozen during the audit", Admission.webhook, "odd.example.com", None,
     "denied by admission webhook odd.example.com: quota frozen during the audit"),
    ("kit-policy-403", 403, "Forbidden", 'deployments.apps "web" is forbidden: ValidatingAdmissionPolicy '
     f"'gpuaas-write-fields' with binding 'gpuaas-write-fields' denied request: {KIT}",
     Admission.policy, "gpuaas-write-fields", "gpuaas-write-fields",
     f"denied by ValidatingAdmissionPolicy gpuaas-write-fields: {KIT}{KIT_NOTE}"),
    ("other-policy-422", 422, "Invalid", 'deployments.apps "web" is forbidden: ValidatingAdmissionPolicy '
     "'replica-floor' with binding 'replica-floor-prod' denied request: failed expression: object.spec.replicas >= 1",
     Admission.policy, "replica-floor", "replica-floor-prod",
     "denied by ValidatingAdmissionPolicy replica-floor (binding replica-floor-prod): failed expression: "
     "object.spec.replicas >= 1"),
    ("policy-without-binding", 422, "Invalid", 'deployments.apps "web" is forbidden: ValidatingAdmissionPolicy '
     "'replica-floor' denied request: failed to configure policy: paramKind not found",
     Admission.policy, "replica-floor", None,
     "denied by ValidatingAdmissionPolicy replica-floor: failed to configure policy: paramKind not found"),
]


@pytest.mark.parametrize(("case", "code", "reason", "message", "by", "controller", "binding", "tail"), DENIALS,
                         ids=[d[0] for d in DENIALS])
def test_a_denial_names_what_refused_the_write_and_keeps_its_message(
        case: str, code: int, reason: str, message: str, by: Admission, controller: str, binding: str | None,
        tail: str) -> None:
    error = api_error(code, reason, message)
    assert type(error) is AdmissionDenied
    assert (error.by, error.controller, error.binding, error.status) == (by, controller, binding, code)
    assert str(error) == TARGET + tail
    assert isinstance(error, PermanentError) and not isinstance(error, TransientError | Forbidden)
    assert not isinstance(error, INDEFINITE)  # refused: the write did not land, nothing to read back
    words = refused(error)
    assert words == str(error) and BIND not in words  # whole, and no RBAC advice


def test_the_kyverno_message_keeps_which_label_and_rule_past_256_characters() -> None:
    error = api_error(403, "Forbidden", f'admission webhook "deny403.example.com" denied the request: {KYVERNO}')
    assert KYVERNO_LINE.index("rule check-for-labels") > 256  # where any other message is cut
    assert str(error).endswith("rule check-for-labels failed at path /metadata/labels/team.example.com/cost-center/'")


def test_a_result_line_keeps_a_denial_whole_where_it_cuts_any_other_error_at_500() -> None:
    twice = f'admission webhook "deny403.example.com" denied the request: {KYVERNO} {KYVERNO}'
    error = api_error(403, "Forbidden", twice)
    assert 500 < len(str(error)) and error_line(error) == str(error)
    other = api_error(409, "Conflict", "x" * 600)
    assert error_line(other) == str(other)[:500]


def test_a_long_denial_is_cut_at_1000_characters_on_one_line_with_its_control_characters_escaped() -> None:
    said = "\x1b[31mred\x1b[0m\r\nline two\x00 " + "x" * 2000
    error = api_error(400, "", f'admission webhook "long.example.com" denied the request: {said}')
    kept = str(error).removeprefix(TARGET + "denied by admission webhook long.example.com: ")
    assert kept.startswith("\\x1b[31mred\\x1b[0m line two\\x00 xxx")
    assert len(kept) == 1000 and kept.endswith("x…")
    assert str(error).isprintable()


@pytest.mark.parametrize(("code", "reason", "message", "cls"), [
    (500, "InternalError", 'Internal error occurred: failed calling webhook "slow.example.com": failed to call '
     'webhook: Post "https://127.0.0.1:48443/slow?timeout=2s": context deadline exceeded', TransientError),
    (403, "Forbidden", f'deployments.apps "web" is forbidden: User "{SA}" cannot patch resource "deployments" in '
     'API group "apps" in the namespace "team-a"', Forbidden),
], ids=["failed-calling-webhook", "rbac-403"])
def test_what_is_no_denial_keeps_its_class(code: int, reason: str, message: str, cls: type[Exception]) -> None:
    error = api_error(code, reason, message)
    assert isinstance(error, cls) and not isinstance(error, AdmissionDenied)
    if cls is Forbidden:
        assert refused(error).endswith("; bind gpuaas-rebalancer (kubectl apply -f "
                                       "deployments/kubernetes/rbac-apply-rebalance.yaml)")


def test_a_message_that_only_quotes_a_denial_is_none() -> None:
    """Only the API server's own opening is a denial: an Invalid that quotes one in a field value is not."""
    error = api_error(422, "Invalid", 'Deployment.apps "web" is invalid: metadata.annotations: Invalid value: '
                                   '"admission webhook \\"x\\" denied the request: no": too long')
    assert type(error) is not AdmissionDenied


def test_the_writer_raises_it_through_the_real_client(server: Server) -> None:  # noqa: F811 - the fixture
    settings = GpuaasSettings(request_timeout_seconds=TIMEOUT_S)
    body = _status(403, "Forbidden", f'admission webhook "deny403.example.com" denied the request: {KYVERNO}')
    with KubeWriter(settings, api_client=_api(server.url)) as writer:
        error = _raised(server, Answer(403, "Forbidden", body.encode()),
                        lambda: writer.patch("RayCluster", "team-a", "train-7", RV))
    assert type(error) is AdmissionDenied and error.__cause__ is not None
    assert str(error) == f"patching RayCluster team-a/train-7: denied by admission webhook deny403.example.com: " \
                         f"{KYVERNO_LINE}"
