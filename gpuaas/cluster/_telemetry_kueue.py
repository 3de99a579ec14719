"""Kueue's own Prometheus metrics, read off ClusterQueue objects as the controller wrote them.

Names and labels follow Kueue v0.19's metrics (``kueue_pending_workloads{cluster_queue,status}``,
``kueue_cluster_queue_resource_usage{cohort,cluster_queue,flavor,resource}``, ...), each with
``replica_role`` as every Kueue metric since v0.16 carries. Reading the ClusterQueue status rather
than keeping a second count means the metrics can never disagree with the API.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["kueue_samples", "quantity"]

Sample = tuple[str, dict[str, str], float, float]
_ROLE = {"replica_role": "standalone"}


def quantity(value: Any) -> float:
    """A Kubernetes quantity (``8``, ``"8"``, ``"500m"``, ``"2k"``) as a float."""
    if value is None:
        return 0.0
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    for suffix, factor in (("m", 1e-3), ("k", 1e3), ("Ki", 1024.0), ("Mi", 1024.0**2), ("Gi", 1024.0**3)):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * factor
    return float(text)


def _flavor_totals(entries: Iterable[Mapping[str, Any]] | None) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for flavor in entries or []:
        for res in flavor.get("resources") or []:
            out[(flavor["name"], res["name"])] = quantity(res.get("total"))
    return out


def kueue_samples(cluster_queues: Iterable[Mapping[str, Any]], ts: float,
                  pending_requests: Mapping[tuple[str, str], float] | None = None) -> list[Sample]:
    """Samples for every ClusterQueue; ``pending_requests`` maps (cq, resource) to pending amounts."""
    out: list[Sample] = []
    for cq in cluster_queues:
        name = cq["metadata"]["name"]
        spec = cq.get("spec") or {}
        status = cq.get("status") or {}
        cohort = spec.get("cohortName") or spec.get("cohort") or ""
        one = {"cluster_queue": name, **_ROLE}
        out.append(("kueue_pending_workloads", {**one, "status": "active"},
                    float(status.get("pendingWorkloads") or 0), ts))
        out.append(("kueue_pending_workloads", {**one, "status": "inadmissible"}, 0.0, ts))
        out.append(("kueue_reserving_active_workloads", dict(one), float(status.get("reservingWorkloads") or 0), ts))
        out.append(("kueue_admitted_active_workloads", dict(one), float(status.get("admittedWorkloads") or 0), ts))
        active = any(c.get("type") == "Active" and c.get("status") == "True" for c in status.get("conditions") or [])
        for state in ("pending", "active", "terminating"):
            value = 1.0 if (state == "active") == active and state != "terminating" else 0.0
            out.append(("kueue_cluster_queue_status", {**one, "status": state}, value, ts))
        out.append(("kueue_cluster_queue_info", {**one, "parent_cohort": cohort, "root_cohort": cohort}, 1.0, ts))
        usage = _flavor_totals(status.get("flavorsUsage"))
        reservation = _flavor_totals(status.get("flavorsReservation"))
        for group in spec.get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                for res in flavor.get("resources") or []:
                    key = (flavor["name"], res["name"])
                    labels = {"cohort": cohort, "cluster_queue": name, "flavor": key[0], "resource": key[1], **_ROLE}
                    out.append(("kueue_cluster_queue_nominal_quota", labels, quantity(res.get("nominalQuota")), ts))
                    for field, metric in (("borrowingLimit", "kueue_cluster_queue_borrowing_limit"),
                                          ("lendingLimit", "kueue_cluster_queue_lending_limit")):
                        limit = res.get(field)
                        out.append((metric, dict(labels), math.inf if limit is None else quantity(limit), ts))
                    out.append(("kueue_cluster_queue_resource_reservation", dict(labels), reservation.get(key, 0.0), ts))
                    out.append(("kueue_cluster_queue_resource_usage", dict(labels), usage.get(key, 0.0), ts))
        for (cq_name, resource), amount in (pending_requests or {}).items():
            if cq_name == name:
                out.append(("kueue_cluster_queue_resource_pending",
                            {"cluster_queue": name, "resource": resource, **_ROLE}, amount, ts))
    return out
