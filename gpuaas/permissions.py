"""What gpuaas asks of the Kubernetes API, per flow, and whether the credentials in use may ask it.

The shipped roles (``deployments/kubernetes/rbac.yaml``) grant exactly these accesses: the reader
what every flow reads, the reclaimer what the reclaim flow patches, the deadlines role what the
deadline holds patch, the rebalancer what the rebalance flow patches; a test holds these lists and the manifest to each other.
``rbac.yaml`` binds the reader; each writer role is bound by a file of its own (``BINDINGS``),
applied when its flow is switched to apply. A flow switched to ``apply`` without its role bound
fails at its first write with a 403; ``allowed`` asks the API server beforehand
(``SelfSubjectAccessReview``, one request per access), so a preflight can say which role to bind
before a scheduled run finds out.

RBAC cannot limit a ``patch`` to fields; the kit's ``admission-policy.yaml`` (a ``ValidatingAdmissionPolicy``
and its binding, both named ``ADMISSION_POLICY``) does. ``admission_policy`` reads the two, so a preflight can say
whether the writer roles are guarded: the reader role grants ``get`` on those two objects alone (``ADMISSION_READS``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gpuaas.models import JOB_OWNERS
from gpuaas.settings import GpuaasSettings

__all__ = ["ADMISSION_POLICY", "ADMISSION_READS", "BINDINGS", "CANARIES", "FLOW_READS", "READS", "ROLES", "WRITES",
           "WRITTEN_KINDS", "Access", "AdmissionPolicy", "Found", "admission_policy", "allowed", "allowed_as",
           "bind_command", "unbind_command", "whoami"]


@dataclass(frozen=True, order=True)
class Access:
    """One verb on one resource, or on one object of it: ``patch rayclusters.ray.io``, ``get namespaces/kube-system``."""

    verb: str
    group: str
    resource: str
    name: str = ""
    """Where the role grants the verb on this object alone (``resourceNames``)."""

    def __str__(self) -> str:
        return (f"{self.verb} {self.resource}" + (f".{self.group}" if self.group else "")
                + (f"/{self.name}" if self.name else ""))


def _accesses(verbs: Sequence[str], group: str, resources: Sequence[str]) -> tuple[Access, ...]:
    return tuple(Access(v, group, r) for r in resources for v in verbs)


_KINDS = (("ray.io", "rayclusters"), ("serving.kserve.io", "inferenceservices"), ("kubeflow.org", "notebooks"),
          ("apps", "deployments"), ("apps", "statefulsets"))

FLOW_READS: tuple[Access, ...] = (
    *_accesses(["list"], "kueue.x-k8s.io", ["clusterqueues", "localqueues", "workloads", "cohorts",
                                             "resourceflavors"]),
    Access("get", "kueue.x-k8s.io", "workloads"),
    *(a for group, resource in _KINDS for a in _accesses(["get", "list"], group, [resource])),
    *(Access("list", kind.group, kind.plural) for kind in JOB_OWNERS),
    Access("list", "", "pods"),
    Access("list", "", "namespaces"),
    Access("get", "", "namespaces", "kube-system"),
)
"""What every flow reads (the collect), ``get`` on the kinds re-read before a stop or an undo, the batch jobs'
deadlines, the Namespaces' labels (which a ClusterQueue's ``namespaceSelector`` selects), and the ``kube-system``
Namespace, whose uid tells one cluster's history from another's in the store."""

ADMISSION_POLICY = "gpuaas-write-fields"
"""The name of the kit's ``ValidatingAdmissionPolicy`` and of its binding (``admission-policy.yaml``)."""

_ADMISSION = "admissionregistration.k8s.io"
_ADMISSION_KINDS = ("validatingadmissionpolicies", "validatingadmissionpolicybindings")

ADMISSION_READS: tuple[Access, ...] = tuple(Access("get", _ADMISSION, r, ADMISSION_POLICY) for r in _ADMISSION_KINDS)
"""What the preflight alone reads besides ``FLOW_READS``: the admission policy and its binding, by name. No flow
needs them, so a refusal is the admission check's warning, never a failed permissions check."""

READS: tuple[Access, ...] = (*FLOW_READS, *ADMISSION_READS)
"""Everything the reader role grants (``gpuaas-reader`` in ``rbac.yaml``)."""

_EVENTS = Access("create", "events.k8s.io", "events")

WRITES: dict[str, tuple[Access, ...]] = {
    "reclaim": (Access("patch", "kueue.x-k8s.io", "workloads"),
                *(Access("patch", group, resource) for group, resource in _KINDS), _EVENTS),
    "rebalance": (*_accesses(["get", "patch"], "kueue.x-k8s.io", ["clusterqueues"]), _EVENTS),
    "deadlines": (Access("patch", "kueue.x-k8s.io", "workloads"), _EVENTS),
}
"""What each flow writes in ``apply`` mode (every patch carries the resourceVersion it read), and the Event it
records on each object it changed."""

WRITTEN_KINDS: tuple[tuple[str, str], ...] = tuple(dict.fromkeys(
    (a.group, a.resource) for accesses in WRITES.values() for a in accesses if a.verb == "patch"))
"""(group, resource) of every kind a flow patches."""

CANARIES: tuple[Access, ...] = (
    Access("get", "", "secrets"),
    Access("create", "", "pods"),
    Access("*", "*", "*"),
    *(Access("patch", group, resource) for group, resource in WRITTEN_KINDS),
    *(Access("delete", group, resource) for group, resource in WRITTEN_KINDS),
)
"""Accesses the preflight asks about to find credentials broader than gpuaas needs: no shipped role grants the
first three or a ``delete``, and a ``patch`` is needed only while a flow that writes the kind applies. A fixed
list (17 reviews), whatever the policy says: the answers are judged against it afterwards."""

ROLES: dict[str, str] = {"reads": "gpuaas-reader", "reclaim": "gpuaas-reclaimer", "rebalance": "gpuaas-rebalancer",
                         "deadlines": "gpuaas-deadlines"}
"""The shipped role that grants each set."""

BINDINGS: dict[str, str] = {"gpuaas-reader": "rbac.yaml", "gpuaas-reclaimer": "rbac-apply-reclaim.yaml",
                            "gpuaas-rebalancer": "rbac-apply-rebalance.yaml",
                            "gpuaas-deadlines": "rbac-apply-deadlines.yaml"}
"""The file of ``deployments/kubernetes/`` that binds each role to the service account."""


def bind_command(role: str) -> str:
    """``bind gpuaas-reclaimer (kubectl apply -f deployments/kubernetes/rbac-apply-reclaim.yaml)``: what a refusal
    of the API server tells the operator to do, wherever it is reported."""
    return f"bind {role} (kubectl apply -f deployments/kubernetes/{BINDINGS[role]})"


def unbind_command(role: str) -> str:
    """``unbind gpuaas-reclaimer (kubectl delete -f deployments/kubernetes/rbac-apply-reclaim.yaml)``: how to take
    a writer role back from the service account while its flow does not apply."""
    return f"unbind {role} (kubectl delete -f deployments/kubernetes/{BINDINGS[role]})"


@contextmanager
def _api(settings: GpuaasSettings) -> Iterator[Any]:
    from gpuaas.sources import make_api_client

    api = make_api_client(settings)
    try:
        yield api
    finally:
        api.close()


def _reviews(api: Any, accesses: Sequence[Access], timeout: float) -> dict[Access, bool]:
    from kubernetes import client

    authz = client.AuthorizationV1Api(api)
    answers: dict[Access, bool] = {}
    for access in dict.fromkeys(accesses):
        review: Any = authz.create_self_subject_access_review(client.V1SelfSubjectAccessReview(
            spec=client.V1SelfSubjectAccessReviewSpec(resource_attributes=client.V1ResourceAttributes(
                verb=access.verb, group=access.group, resource=access.resource, name=access.name or None))),
            _request_timeout=timeout)
        answers[access] = bool(review.status and review.status.allowed)
    return answers


def _identity(api: Any, timeout: float) -> str | None:
    from kubernetes import client

    try:
        review: Any = client.AuthenticationV1Api(api).create_self_subject_review(
            client.V1SelfSubjectReview(), _request_timeout=timeout)
    except Exception:  # noqa: BLE001 - an older server or a refusal: the answers stand without a name
        return None
    user = review.status.user_info if review.status else None
    return str(user.username) if user is not None and user.username else None


def allowed(settings: GpuaasSettings, accesses: Sequence[Access]) -> dict[Access, bool]:
    """Whether the API server lets the configured credentials make each access, cluster-wide.

    Raises what the Kubernetes client raises (mapped like any source error by the caller) when the
    review itself cannot be made.
    """
    with _api(settings) as api:
        return _reviews(api, accesses, settings.request_timeout_seconds)


def whoami(settings: GpuaasSettings) -> str | None:
    """The user the API server takes the configured credentials for (``SelfSubjectReview``, Kubernetes 1.28 and
    newer), or None where it does not say: whose permissions a preflight checked, so that an operator running
    it with an admin kubeconfig sees the answers are not the service account's."""
    with _api(settings) as api:
        return _identity(api, settings.request_timeout_seconds)


def allowed_as(settings: GpuaasSettings, accesses: Sequence[Access]) -> tuple[dict[Access, bool], str | None]:
    """``allowed`` and ``whoami`` over one client: the answers, and whose they are."""
    with _api(settings) as api:
        answers = _reviews(api, accesses, settings.request_timeout_seconds)
        return answers, _identity(api, settings.request_timeout_seconds)


class Found(StrEnum):
    """How the read of one object of the admission policy went."""

    there = "there"
    absent = "absent"
    """404 naming the object: the kind is served, the object was never applied (or was deleted)."""
    unserved = "unserved"
    """404 on the resource itself: the API server does not serve the kind (Kubernetes older than 1.30)."""
    refused = "refused"
    """403: the credentials may not read it."""


@dataclass(frozen=True)
class AdmissionPolicy:
    """What the API server holds of ``admission-policy.yaml``: each of its two objects as read, and what the
    binding says (a binding that only warns or audits lets every write through)."""

    policy: Found
    binding: Found
    validation_actions: tuple[str, ...] = ()
    """The binding's ``validationActions`` (``Deny``, ``Warn``, ``Audit``); empty where it was not read."""
    bound_policy: str = ""
    """The binding's ``policyName``."""


def admission_policy(settings: GpuaasSettings) -> AdmissionPolicy:
    """The ``ValidatingAdmissionPolicy`` and the ``ValidatingAdmissionPolicyBinding`` named ``ADMISSION_POLICY``:
    one GET each, whatever the first answers (a fixed two requests). A 404 or a 403 is an answer (``Found``); any
    other failure (a 401, a 5xx, no answer) raises what the Kubernetes client raises, mapped by the caller."""
    with _api(settings) as api:
        policy, _ = _get(api, "validating_admission_policy", settings.request_timeout_seconds)
        binding, spec = _get(api, "validating_admission_policy_binding", settings.request_timeout_seconds)
    actions = spec.get("validationActions")
    return AdmissionPolicy(policy, binding, tuple(str(a) for a in actions) if isinstance(actions, list) else (),
                           str(spec.get("policyName") or ""))


def _get(api: Any, kind: str, timeout: float) -> tuple[Found, dict[str, Any]]:
    """How the GET of ``kind`` went, and the object's ``spec`` where it is there."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from gpuaas.sources import read_json

    read = getattr(client.AdmissionregistrationV1Api(api), f"read_{kind}")
    try:
        response = read(ADMISSION_POLICY, _request_timeout=timeout, _preload_content=False)
    except ApiException as exc:
        if exc.status == 403:
            return Found.refused, {}
        if exc.status == 404:
            return (Found.absent if _names_the_object(exc.body) else Found.unserved), {}
        raise
    body = read_json(response.data)
    spec = body.get("spec") if isinstance(body, dict) else None
    return Found.there, spec if isinstance(spec, dict) else {}


def _names_the_object(body: object) -> bool:
    """A 404 ``Status`` whose details name the object (``... "gpuaas-write-fields" not found``), not the one a
    server answers for a resource it does not serve (no details, or a plain ``404 page not found``)."""
    from gpuaas.sources import UnreadableJSON, read_json

    try:
        status = read_json(body or b"{}")  # type: ignore[arg-type]
    except UnreadableJSON:
        return False
    details = status.get("details") if isinstance(status, dict) else None
    return isinstance(details, dict) and details.get("name") == ADMISSION_POLICY
