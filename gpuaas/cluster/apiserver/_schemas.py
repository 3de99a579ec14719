"""Compact structural validation of the objects the emulator stores.

The real API server validates Kueue objects against the CRDs' OpenAPI schemas (plus a few
CEL rules and Kueue's webhook). We may not ship those schemas, so this module describes,
in a few lines per kind, the fields gpuaas and the emulated controller use: types, required
fields, enums, patterns, minimums and list lengths. The test suite checks this against the
real CRDs, so a divergence shows up there rather than against a real cluster.

Errors are collected as ``causes`` in the shape the API server returns them
(``{"reason": "FieldValueRequired", "message": "Required value", "field": "spec.podSets"}``).
Unknown fields are accepted: the schema only constrains what it names.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ._errors import ApiError, Cause
from ._resources import RESOURCES, Resource

__all__ = ["validate"]

DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_QUANTITY = re.compile(
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")

Check = Callable[[Any, str, list[Cause]], None]
_TYPE_NAMES = {str: "string", int: "integer", bool: "boolean", dict: "object", list: "array"}


def _cause(causes: list[Cause], reason: str, field: str, message: str) -> None:
    causes.append({"reason": reason, "message": message, "field": field})


def _typed(value: Any, typ: type, path: str, causes: list[Cause]) -> bool:
    ok = isinstance(value, typ) and not (typ is int and isinstance(value, bool))
    if not ok:
        shown = f'"{value}"' if isinstance(value, str) else repr(value)
        _cause(causes, "FieldValueTypeInvalid", path,
               f"Invalid value: {shown}: {path} in body must be of type {_TYPE_NAMES[typ]}: {shown}")
    return ok


def S(enum: tuple[str, ...] = (), pattern: str | None = None, max_len: int | None = None,
      min_len: int | None = None, datetime: bool = False) -> Check:
    """A string field."""
    regex = re.compile(pattern) if pattern else None

    def check(value: Any, path: str, causes: list[Cause]) -> None:
        if not _typed(value, str, path, causes):
            return
        if enum and value not in enum:
            allowed = ", ".join(f'"{e}"' for e in enum)
            _cause(causes, "FieldValueNotSupported", path, f'Unsupported value: "{value}": supported values: {allowed}')
        elif max_len is not None and len(value) > max_len:
            _cause(causes, "FieldValueTooLong", path, f"Too long: may not be more than {max_len} bytes")
        elif min_len is not None and len(value) < min_len:
            _cause(causes, "FieldValueInvalid", path,
                   f'Invalid value: "{value}": {path} in body should be at least {min_len} chars long')
        elif regex is not None and not regex.match(value):
            _cause(causes, "FieldValueInvalid", path, f'Invalid value: "{value}": {path} in body should match \'{pattern}\'')
        elif datetime and not _DATETIME.match(value):
            _cause(causes, "FieldValueInvalid", path, f'Invalid value: "{value}": {path} in body must be of type date-time')

    return check


def I(minimum: int | None = None) -> Check:
    """An integer field."""

    def check(value: Any, path: str, causes: list[Cause]) -> None:
        if _typed(value, int, path, causes) and minimum is not None and value < minimum:
            _cause(causes, "FieldValueInvalid", path,
                   f"Invalid value: {value}: {path} in body should be greater than or equal to {minimum}")

    return check


def B() -> Check:
    """A boolean field."""

    def check(value: Any, path: str, causes: list[Cause]) -> None:
        _typed(value, bool, path, causes)

    return check


def Q(nonneg: bool = False) -> Check:
    """A Kubernetes quantity: an integer or a string such as ``"8"``, ``"500m"``, ``"16Gi"``."""

    def check(value: Any, path: str, causes: list[Cause]) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            _cause(causes, "FieldValueTypeInvalid", path, f"Invalid value: {value!r}: {path} must be a quantity")
        elif isinstance(value, str) and not _QUANTITY.match(value):
            _cause(causes, "FieldValueInvalid", path,
                   f'Invalid value: "{value}": quantities must match the regular expression '
                   "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
        elif nonneg and (str(value).startswith("-") and str(value).strip("-0.") != ""):
            _cause(causes, "FieldValueInvalid", path, f'Invalid value: "{value}": must be greater than or equal to 0')

    return check


def A(item: Check, max_items: int | None = None, min_items: int | None = None) -> Check:
    """An array of ``item``."""

    def check(value: Any, path: str, causes: list[Cause]) -> None:
        if not _typed(value, list, path, causes):
            return
        if max_items is not None and len(value) > max_items:
            _cause(causes, "FieldValueTooMany", path, f"Too many: {len(value)}: must have at most {max_items} items")
            return
        if min_items is not None and len(value) < min_items:
            _cause(causes, "FieldValueInvalid", path,
                   f"Invalid value: {len(value)}: {path} in body should have at least {min_items} items")
        for i, elem in enumerate(value):
            item(elem, f"{path}[{i}]", causes)

    return check


def M(value_check: Check) -> Check:
    """A map from string keys to ``value_check``."""

    def check(value: Any, path: str, causes: list[Cause]) -> None:
        if _typed(value, dict, path, causes):
            for key, elem in value.items():
                value_check(elem, f"{path}.{key}", causes)

    return check


def O(props: Mapping[str, Check], required: tuple[str, ...] = (),
      rules: tuple[Callable[[dict[str, Any], str, list[Cause]], None], ...] = ()) -> Check:
    """An object with named fields; ``None`` counts as absent (the server prunes nulls)."""

    def check(value: Any, path: str, causes: list[Cause]) -> None:
        if not _typed(value, dict, path, causes):
            return
        prefix = f"{path}." if path else ""
        for name in required:
            if value.get(name) is None:
                _cause(causes, "FieldValueRequired", prefix + name, "Required value")
        for name, sub in props.items():
            if value.get(name) is not None:
                sub(value[name], prefix + name, causes)
        for rule in rules:
            rule(value, path, causes)

    return check


# --- shared pieces -----------------------------------------------------------------------
_SUB = S(pattern=DNS_SUBDOMAIN, max_len=253)
_LABEL = S(pattern=DNS_LABEL, max_len=63)
_TIME = S(datetime=True)
_CONDITIONS = A(O({
    "type": S(max_len=316), "status": S(enum=("True", "False", "Unknown")),
    "reason": S(pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$", max_len=1024, min_len=1),
    "message": S(max_len=32768), "lastTransitionTime": _TIME, "observedGeneration": I(0),
}, required=("lastTransitionTime", "message", "reason", "status", "type")), max_items=16)
_USAGE = A(O({"name": _SUB, "resources": A(O({"name": S(), "total": Q(), "borrowed": Q()}, ("name",)), 64)},
             ("name", "resources")), 64)
_FAIR_WEIGHT = O({"weight": Q(nonneg=True)})
_STOP = S(enum=("None", "Hold", "HoldAndDrain"))


def _same_resource_count(group: dict[str, Any], path: str, causes: list[Cause]) -> None:
    covered = group.get("coveredResources") or []
    for flavor in group.get("flavors") or []:
        if isinstance(flavor, dict) and len(flavor.get("resources") or []) != len(covered):
            _cause(causes, "FieldValueInvalid", path,
                   "Invalid value: \"object\": flavors must have the same number of resources as the coveredResources")
            return


_RESOURCE_GROUPS = A(O({
    "coveredResources": A(S(), max_items=64, min_items=1),
    "flavors": A(O({
        "name": _SUB,
        "resources": A(O({"name": S(), "nominalQuota": Q(nonneg=True), "borrowingLimit": Q(nonneg=True),
                          "lendingLimit": Q(nonneg=True)}, ("name", "nominalQuota")), max_items=64, min_items=1),
    }, ("name", "resources")), max_items=64, min_items=1),
}, ("coveredResources", "flavors"), rules=(_same_resource_count,)), max_items=16)


def _no_borrowing_without_cohort(spec: dict[str, Any], path: str, causes: list[Cause]) -> None:
    if spec.get("cohortName"):
        return
    for group in spec.get("resourceGroups") or []:
        for flavor in (group or {}).get("flavors") or []:
            for res in (flavor or {}).get("resources") or []:
                if isinstance(res, dict) and res.get("borrowingLimit") is not None:
                    _cause(causes, "FieldValueInvalid", path,
                           'Invalid value: "object": borrowingLimit must be nil when cohort is empty')
                    return


_CQ = O({
    "spec": O({
        "cohortName": _SUB, "queueingStrategy": S(enum=("StrictFIFO", "BestEffortFIFO")),
        "namespaceSelector": O({"matchLabels": M(S()), "matchExpressions": A(O(
            {"key": S(), "operator": S(), "values": A(S())}, ("key", "operator")))}),
        "resourceGroups": _RESOURCE_GROUPS,
        "preemption": O({
            "withinClusterQueue": S(enum=("Never", "LowerPriority", "LowerOrNewerEqualPriority")),
            "reclaimWithinCohort": S(enum=("Never", "LowerPriority", "Any")),
            "borrowWithinCohort": O({"policy": S(enum=("Never", "LowerPriority")), "maxPriorityThreshold": I()}),
        }),
        "flavorFungibility": O({
            "whenCanBorrow": S(enum=("MayStopSearch", "TryNextFlavor")),
            "whenCanPreempt": S(enum=("MayStopSearch", "TryNextFlavor")),
            "preference": S(enum=("BorrowingOverPreemption", "PreemptionOverBorrowing")),
        }),
        "fairSharing": _FAIR_WEIGHT, "stopPolicy": _STOP,
        "admissionChecksStrategy": O({"admissionChecks": A(O(
            {"name": S(max_len=316, min_len=1), "onFlavors": A(_SUB, 64)}, ("name",)), 64, 1)},
            ("admissionChecks",)),
        "admissionScope": O({"admissionMode": S(enum=("UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing"))},
                            ("admissionMode",)),
    }, rules=(_no_borrowing_without_cohort,)),
    "status": O({
        "admittedWorkloads": I(), "pendingWorkloads": I(), "reservingWorkloads": I(), "conditions": _CONDITIONS,
        "flavorsReservation": _USAGE, "flavorsUsage": _USAGE,
        "fairSharing": O({"weightedShare": I()}, ("weightedShare",)),
    }),
})

_LQ = O({
    "spec": O({"clusterQueue": _SUB, "stopPolicy": _STOP, "fairSharing": _FAIR_WEIGHT}),
    "status": O({
        "admittedWorkloads": I(), "pendingWorkloads": I(), "reservingWorkloads": I(), "conditions": _CONDITIONS,
        "flavorsReservation": _USAGE, "flavorsUsage": _USAGE,
        "fairSharing": O({"weightedShare": I(), "admissionFairSharingStatus": O(
            {"consumedResources": M(Q()), "lastUpdate": _TIME}, ("consumedResources", "lastUpdate"))},
            ("weightedShare",)),
    }),
})


def _assignments_match_podsets(wl: dict[str, Any], path: str, causes: list[Cause]) -> None:
    status, spec = wl.get("status") or {}, wl.get("spec") or {}
    reserved = any(c.get("type") == "QuotaReserved" and c.get("status") == "True"
                   for c in status.get("conditions") or [] if isinstance(c, dict))
    admission = status.get("admission")
    if (reserved and isinstance(admission, dict)
            and len(spec.get("podSets") or []) != len(admission.get("podSetAssignments") or [])):
        _cause(causes, "FieldValueInvalid", "status.admission.podSetAssignments",
               "Invalid value: \"object\": podSetAssignments must have the same number of podSets as the spec")


_POD_TEMPLATE = O({"spec": O({"containers": A(O({"name": S()}, ("name",)))}, ("containers",))})
_WORKLOAD = O({
    "spec": O({
        "active": B(), "maximumExecutionTimeSeconds": I(1), "priority": I(), "queueName": _SUB,
        "podSets": A(O({"name": _LABEL, "count": I(0), "minCount": I(1), "template": _POD_TEMPLATE},
                       ("template",)), max_items=18, min_items=1),
        "priorityClassRef": O({
            "group": S(enum=("kueue.x-k8s.io", "scheduling.k8s.io")),
            "kind": S(enum=("WorkloadPriorityClass", "PriorityClass")),
            "name": S(pattern=DNS_SUBDOMAIN, max_len=253, min_len=1),
        }, ("group", "kind", "name")),
        "preemptionGates": A(O({"name": S(max_len=63, min_len=1)}, ("name",)), 8),
    }),
    "status": O({
        "conditions": _CONDITIONS, "accumulatedPastExecutionTimeSeconds": I(), "clusterName": S(max_len=256),
        "admission": O({"clusterQueue": _SUB, "podSetAssignments": A(O({
            "name": _LABEL, "count": I(0), "flavors": M(_SUB), "resourceUsage": M(Q())}), 18)}),
        "requeueState": O({"count": I(0), "requeueAt": _TIME}),
        "reclaimablePods": A(O({"name": _LABEL, "count": I(0)}, ("count", "name")), 18),
        "resourceRequests": A(O({"name": _LABEL, "resources": M(Q())}, ("name",)), 18),
        "admissionChecks": A(O({
            "name": S(max_len=316, min_len=1), "state": S(enum=("Pending", "Ready", "Retry", "Rejected")),
            "lastTransitionTime": _TIME, "message": S(max_len=32768)},
            ("lastTransitionTime", "message", "name", "state")), 8),
    }),
}, rules=(_assignments_match_podsets,))

_COHORT = O({
    "spec": O({"parentName": _SUB, "resourceGroups": _RESOURCE_GROUPS, "fairSharing": _FAIR_WEIGHT}),
    "status": O({"fairSharing": O({"weightedShare": I()}, ("weightedShare",))}),
})
_FLAVOR = O({"spec": O({
    "nodeLabels": M(S()), "topologyName": _SUB,
    "nodeTaints": A(O({"key": S(), "value": S(), "effect": S(), "timeAdded": _TIME}, ("effect", "key")), 8),
    "tolerations": A(O({"key": S(), "operator": S(), "value": S(), "effect": S(), "tolerationSeconds": I()}), 8),
})})
_WPC = O({"value": I(), "description": S()}, ("value",))

_BY_KIND: dict[str, Check] = {
    "ClusterQueue": _CQ, "LocalQueue": _LQ, "Workload": _WORKLOAD,
    "Cohort": _COHORT, "ResourceFlavor": _FLAVOR, "WorkloadPriorityClass": _WPC,
}
_METADATA = O({"labels": M(S()), "annotations": M(S()), "finalizers": A(S())})


def validate(obj: dict[str, Any], resource: Resource | None = None) -> None:
    """Raise ``ApiError`` 422 naming every field of ``obj`` (storage version) that is invalid."""
    resource = resource or RESOURCES[obj["kind"]]
    meta = obj.get("metadata") or {}
    name = meta.get("name") or ""
    causes: list[Cause] = []
    if not name:
        _cause(causes, "FieldValueRequired", "metadata.name", "Required value: name or generateName is required")
    else:
        S(pattern=DNS_LABEL if resource.kind == "Namespace" else DNS_SUBDOMAIN,
          max_len=63 if resource.kind == "Namespace" else 253)(name, "metadata.name", causes)
    if resource.namespaced and not meta.get("namespace"):
        _cause(causes, "FieldValueRequired", "metadata.namespace", "Required value")
    _METADATA(meta, "metadata", causes)
    if resource.kind in _BY_KIND:
        _BY_KIND[resource.kind](obj, "", causes)
    if causes:
        raise ApiError.invalid(resource.kind, resource.group, name, causes)
