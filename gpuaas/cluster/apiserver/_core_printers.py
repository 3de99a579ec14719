"""The columns and cells kube-apiserver prints for the built-in kinds the emulator serves.

Why: for a built-in kind kubectl prints what the server's own printers put in the Table
(``pkg/printers/internalversion/printers.go`` of Kubernetes v1.35.4, ported here). The server runs them wide
(every column; kubectl hides those of priority 1 without ``-o wide``), and so does this module. Events print
from their core/v1 form at either path, as on a real server, where both groups share one printer.

Pods print Name and Age only: upstream's other Pod columns (Ready, Status, Restarts, IP, ...) are worked out
from container statuses the kubelet writes, which the emulator's pods do not have. Where the emulator stores an
object without a default a real server writes on create (a Namespace's ``Active`` phase, the one replica of a
Deployment or StatefulSet, the completions of a Job), the printer assumes that default.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ._core_events import to_core

__all__ = ["AGE", "AGE_DESCRIPTION", "NAME", "PRINTERS", "Cells", "Column", "human_duration", "parse_time", "since"]

Column = dict[str, Any]
Cells = Callable[[dict[str, Any], datetime], list[Any]]


def _col(name: str, description: str, priority: int = 0, fmt: str = "") -> Column:
    return {"name": name, "type": "string", "format": fmt, "description": description, "priority": priority}


NAME = _col("Name", "Name must be unique within a namespace. Is required when creating resources, although some "
            "resources may allow a client to request the generation of an appropriate name automatically. Name is "
            "primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: "
            "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names", fmt="name")
AGE_DESCRIPTION = (
    "CreationTimestamp is a timestamp representing the server time when this object was created. It is not "
    "guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It "
    "is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata")
AGE = _col("Age", AGE_DESCRIPTION)
_CONTAINERS = [_col("Containers", "Names of each container in the template.", 1),
               _col("Images", "Images referenced by each container in the template.", 1)]
_READY = _col("Ready", "Number of the pod with ready state")
_ADDRESSES = (
    "List of addresses reachable to the node. Queried from cloud provider, if available. More info: "
    "https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, "
    "but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers "
    "should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should "
    "assume that addresses can change during the lifetime of a Node. However, there are some exceptions where "
    "this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the "
    "downward API (status.hostIP).")
_SUBOBJECT = (
    "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go "
    "field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is "
    "to a container within a pod, this would take on a value like: \"spec.containers{name}\" (where \"name\" refers "
    "to the name of the container that triggered the event) or if no container name is specified "
    "\"spec.containers[2]\" (container with index 2 in this pod). This syntax is chosen only to have some "
    "well-defined way of referencing a part of an object.")


def parse_time(stamp: str) -> datetime | None:
    """An RFC 3339 time (seconds or microseconds), in UTC; None when it is not one."""
    try:
        parsed = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed


def human_duration(seconds: float) -> str:
    """Upstream's ``duration.HumanDuration``: two significant units at most, coarser as time passes."""
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes, hours = whole // 60, whole // 3600
    if minutes < 10:
        return f"{minutes}m{whole % 60}s" if whole % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if hours < 24 * 365 * 2:
        return f"{days}d"
    if hours < 24 * 365 * 8:
        return f"{days // 365}y{days % 365}d" if days % 365 else f"{days // 365}y"
    return f"{days // 365}y"


def since(stamp: Any, now: datetime) -> str:
    """``translateTimestampSince``: the age of a timestamp, ``<unknown>`` for none."""
    if not stamp:
        return "<unknown>"
    parsed = parse_time(stamp) if isinstance(stamp, str) else None
    return "<invalid>" if parsed is None else human_duration((now - parsed).total_seconds())


def _get(obj: dict[str, Any], *path: str) -> Any:
    value: Any = obj
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _containers(obj: dict[str, Any]) -> list[str]:
    """``layoutContainerCells``: the template's container names and images, comma-separated."""
    containers = _get(obj, "spec", "template", "spec", "containers") or []
    return [",".join(str(c.get("name", "")) for c in containers), ",".join(str(c.get("image", "")) for c in containers)]


def _selector(selector: Any) -> str | None:
    """``LabelSelectorAsSelector(...).String()``: requirements by key, values sorted; None for a bad operator."""
    if not isinstance(selector, dict):
        return ""
    reqs = [(str(k), f"{k}={v}") for k, v in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator"), ",".join(sorted(expr.get("values") or []))
        shown = {"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})", "Exists": key,
                 "DoesNotExist": f"!{key}"}.get(op)
        if shown is None:
            return None
        reqs.append((key, shown))
    return ",".join(text for _, text in sorted(reqs, key=lambda r: r[0]))


def _event(obj: dict[str, Any], now: datetime) -> list[Any]:
    ev = obj if obj.get("apiVersion") == "v1" else to_core(obj)
    first = since(ev["firstTimestamp"], now) if ev.get("firstTimestamp") else since(ev.get("eventTime"), now)
    last = since(ev["lastTimestamp"], now) if ev.get("lastTimestamp") else first
    count = ev.get("count") or 1
    if ev.get("series"):
        last, count = since(ev["series"].get("lastObservedTime"), now), ev["series"].get("count") or 0
    involved, source = ev.get("involvedObject") or {}, ev.get("source") or {}
    kind = str(involved.get("kind", "")).lower()
    component = source.get("component") or ev.get("reportingComponent") or ""
    instance = source.get("host") or ev.get("reportingInstance") or ""
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source_text = f"{component}, {instance}" if instance else component
    return [last, ev.get("type", ""), ev.get("reason", ""), target, involved.get("fieldPath", ""), source_text,
            str(ev.get("message", "")).strip(), first, int(count), _get(ev, "metadata", "name")]


def _node(obj: dict[str, Any], now: datetime) -> list[Any]:
    ready = next((c for c in _get(obj, "status", "conditions") or [] if c.get("type") == "Ready"), None)
    status = ["Unknown" if ready is None else "Ready" if ready.get("status") == "True" else "NotReady"]
    status += ["SchedulingDisabled"] if _get(obj, "spec", "unschedulable") else []
    labels = _get(obj, "metadata", "labels") or {}
    roles = {k.removeprefix("node-role.kubernetes.io/") for k in labels
             if k.startswith("node-role.kubernetes.io/") and k != "node-role.kubernetes.io/"}
    roles |= {labels["kubernetes.io/role"]} if labels.get("kubernetes.io/role") else set()
    info = _get(obj, "status", "nodeInfo") or {}
    addresses = _get(obj, "status", "addresses") or []

    def address(kind: str) -> str:
        return next((a.get("address", "") for a in addresses if a.get("type") == kind), "<none>")

    return [_get(obj, "metadata", "name"), ",".join(status), ",".join(sorted(roles)) or "<none>",
            since(_get(obj, "metadata", "creationTimestamp"), now), info.get("kubeletVersion", ""),
            address("InternalIP"), address("ExternalIP"), info.get("osImage") or "<unknown>",
            info.get("kernelVersion") or "<unknown>", info.get("containerRuntimeVersion") or "<unknown>"]


def _replicas(obj: dict[str, Any]) -> str:
    desired = _get(obj, "spec", "replicas")
    return f"{_get(obj, 'status', 'readyReplicas') or 0}/{1 if desired is None else desired}"


def _deployment(obj: dict[str, Any], now: datetime) -> list[Any]:
    selector = _selector(_get(obj, "spec", "selector"))
    return [_get(obj, "metadata", "name"), _replicas(obj), _get(obj, "status", "updatedReplicas") or 0,
            _get(obj, "status", "availableReplicas") or 0, since(_get(obj, "metadata", "creationTimestamp"), now),
            *_containers(obj), "<invalid>" if selector is None else selector]


def _job(obj: dict[str, Any], now: datetime) -> list[Any]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    succeeded, completions, parallelism = status.get("succeeded") or 0, spec.get("completions"), spec.get("parallelism")
    if completions is None and parallelism is None:
        completions = 1  # the server's default for a Job that sets neither
    if completions is not None:
        shown = f"{succeeded}/{completions}"
    else:
        shown = f"{succeeded}/1 of {parallelism}" if (parallelism or 0) > 1 else f"{succeeded}/1"
    start, end = (parse_time(t) if isinstance(t, str) else None
                  for t in (status.get("startTime"), status.get("completionTime")))
    took = "" if start is None else human_duration(((end or now) - start).total_seconds())
    conditions: dict[str, bool] = {}
    for cond in status.get("conditions") or []:
        conditions.setdefault(cond.get("type"), cond.get("status") == "True")
    state = ("Complete" if conditions.get("Complete") else "Failed" if conditions.get("Failed")
             else "Terminating" if _get(obj, "metadata", "deletionTimestamp")
             else next((c for c in ("Suspended", "FailureTarget", "SuccessCriteriaMet") if conditions.get(c)),
                       "Running"))
    selector = _selector(spec.get("selector"))
    return [_get(obj, "metadata", "name"), state, shown, took, since(_get(obj, "metadata", "creationTimestamp"), now),
            *_containers(obj), "<error>" if selector is None else selector or "<none>"]


def _name_age(obj: dict[str, Any], now: datetime) -> list[Any]:
    return [_get(obj, "metadata", "name"), since(_get(obj, "metadata", "creationTimestamp"), now)]


PRINTERS: dict[str, tuple[list[Column], Cells]] = {
    "Event": ([_col("Last Seen", "The time at which the most recent occurrence of this event was recorded."),
               _col("Type", "Type of this event (Normal, Warning), new types could be added in the future"),
               _col("Reason", "This should be a short, machine understandable string that gives the reason for "
                              "the transition into the object's current status."),
               _col("Object", "The object that this event is about."),
               _col("Subobject", _SUBOBJECT, 1),
               _col("Source", "The component reporting this event. Should be a short machine understandable "
                              "string.", 1),
               _col("Message", "A human-readable description of the status of this operation."),
               _col("First Seen", "The time at which the event was first recorded. (Time of server receipt is in "
                                  "TypeMeta.)", 1),
               _col("Count", "The number of times this event has occurred.", 1),
               {**NAME, "priority": 1}], _event),
    "Namespace": ([NAME, _col("Status", "The status of the namespace"), AGE],
                  lambda obj, now: [_get(obj, "metadata", "name"), _get(obj, "status", "phase") or "Active",
                                    since(_get(obj, "metadata", "creationTimestamp"), now)]),
    "Node": ([NAME, _col("Status", "The status of the node"), _col("Roles", "The roles of the node"), AGE,
              _col("Version", "Kubelet Version reported by the node."), _col("Internal-IP", _ADDRESSES, 1),
              _col("External-IP", _ADDRESSES, 1),
              _col("OS-Image", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 "
                               "(wheezy)).", 1),
              _col("Kernel-Version", "Kernel Version reported by the node from 'uname -r' (e.g. "
                                     "3.16.0-0.bpo.4-amd64).", 1),
              _col("Container-Runtime", "ContainerRuntime Version reported by the node through runtime remote API "
                                        "(e.g. containerd://1.4.2).", 1)], _node),
    "Pod": ([NAME, AGE], _name_age),
    "Deployment": ([NAME, _READY,
                    _col("Up-to-date", "Total number of non-terminating pods targeted by this deployment that have "
                                       "the desired template spec."),
                    _col("Available", "Total number of available non-terminating pods (ready for at least "
                                      "minReadySeconds) targeted by this deployment."), AGE, *_CONTAINERS,
                    _col("Selector", "Label selector for pods. Existing ReplicaSets whose pods are selected by this "
                                     "will be the ones affected by this deployment.", 1)], _deployment),
    "StatefulSet": ([NAME, _READY, AGE, *_CONTAINERS],
                    lambda obj, now: [_get(obj, "metadata", "name"), _replicas(obj),
                                      since(_get(obj, "metadata", "creationTimestamp"), now), *_containers(obj)]),
    "Job": ([NAME, _col("Status", "Status of the job."),
             _col("Completions", "The number of pods which reached phase Succeeded. The value increases "
                                 "monotonically for a given spec. However, it may decrease in reaction to scale "
                                 "down of elastic indexed jobs."),
             _col("Duration", "Time required to complete the job."), AGE, *_CONTAINERS,
             _col("Selector", "A label query over pods that should match the pod count. Normally, the system sets "
                              "this field for you. More info: "
                              "https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/"
                              "#label-selectors", 1)], _job),
}
"""Kind -> (column definitions, cells of one object at a time ``now``), for the built-in kinds served."""
