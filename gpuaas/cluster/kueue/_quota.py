"""Per-flavor quota accounting for ClusterQueues and their cohorts.

Usage is kept in counters that admission and release update incrementally, so one scheduling
pass costs O(workloads), not O(workloads x queues). The borrowing arithmetic follows Kueue's
``pkg/cache/resource_node.go`` for a flat cohort:

* ``guaranteed = nominalQuota - lendingLimit`` when a lending limit is set, else 0: the part a
  lender keeps for itself.
* The cohort pool for a flavor/resource is the sum of the members' lendable parts
  (``nominalQuota - guaranteed``) plus the Cohort object's own ``nominalQuota``; members draw on it
  with whatever they use above their guaranteed part.
* ``available(cq) = max(0, guaranteed - usage) + min(pool_left, borrowing headroom)``, where the
  headroom exists only when ``borrowingLimit`` is set:
  ``(nominal - guaranteed) - max(0, usage - guaranteed) + borrowingLimit``.
* ``borrowed = max(0, usage - nominalQuota)`` for a ClusterQueue in a cohort, and 0 without one
  (as Kueue reports it, even when a lowered quota leaves usage above nominal).

Hierarchical cohorts (``spec.parentName``) are not emulated: every cohort is a root.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...quantity import format_quantity, parse_quantity_milli

__all__ = ["ClusterQueueQuota", "FlavorResource", "PreemptionPolicy", "QuotaBook", "ResourceQuota", "Usage"]

FlavorResource = tuple[str, str]
"""``(flavor, resource)``: the unit Kueue accounts quota in."""

Usage = dict[FlavorResource, int]
"""Milli-units per flavor/resource."""


@dataclass(frozen=True)
class ResourceQuota:
    """One ``resourceGroups[].flavors[].resources[]`` entry, in milli-units."""

    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None

    @property
    def guaranteed(self) -> int:
        return self.nominal - self.lending_limit if self.lending_limit is not None else 0

    @property
    def lendable(self) -> int:
        return self.nominal - self.guaranteed


@dataclass(frozen=True)
class PreemptionPolicy:
    """``spec.preemption`` (defaults ``Never``): whom a pending Workload of this queue may preempt."""

    within_cluster_queue: str = "Never"  # Never | LowerPriority | LowerOrNewerEqualPriority
    reclaim_within_cohort: str = "Never"  # Never | LowerPriority | Any

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> PreemptionPolicy:
        preemption = spec.get("preemption") or {}
        return cls(str(preemption.get("withinClusterQueue") or "Never"),
                   str(preemption.get("reclaimWithinCohort") or "Never"))

    @property
    def enabled(self) -> bool:
        return self.within_cluster_queue != "Never" or self.reclaim_within_cohort != "Never"


@dataclass
class ClusterQueueQuota:
    """A ClusterQueue's spec as the scheduler needs it, plus its live usage counters."""

    name: str
    cohort: str | None
    groups: list[tuple[tuple[str, ...], tuple[str, ...]]]  # (coveredResources, flavor names in order)
    quotas: dict[FlavorResource, ResourceQuota]
    usage: Usage = field(default_factory=dict)  # quota reserved (QuotaReserved=True)
    preemption: PreemptionPolicy = PreemptionPolicy()
    strict_fifo: bool = False  # queueingStrategy StrictFIFO: a head that does not fit blocks the queue

    @classmethod
    def from_object(cls, obj: dict[str, Any]) -> ClusterQueueQuota:
        spec = obj.get("spec") or {}
        groups: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
        quotas: dict[FlavorResource, ResourceQuota] = {}
        for group in spec.get("resourceGroups") or []:
            flavors = group.get("flavors") or []
            groups.append((tuple(group.get("coveredResources") or []), tuple(f["name"] for f in flavors)))
            for flavor in flavors:
                for res in flavor.get("resources") or []:
                    quotas[(flavor["name"], res["name"])] = ResourceQuota(
                        nominal=parse_quantity_milli(res.get("nominalQuota", 0)),
                        borrowing_limit=_optional(res.get("borrowingLimit")),
                        lending_limit=_optional(res.get("lendingLimit")),
                    )
        return cls(obj["metadata"]["name"], spec.get("cohortName") or None, groups, quotas,
                   preemption=PreemptionPolicy.from_spec(spec),
                   strict_fifo=spec.get("queueingStrategy") == "StrictFIFO")

    def nominal(self, fr: FlavorResource) -> int:
        quota = self.quotas.get(fr)
        return quota.nominal if quota else 0

    def group_for(self, resource: str) -> int | None:
        """Index of the resource group covering ``resource``, or None (then it is not accounted)."""
        for index, (covered, _) in enumerate(self.groups):
            if resource in covered:
                return index
        return None


def _optional(value: Any) -> int | None:
    return None if value is None else parse_quantity_milli(value)


class QuotaBook:
    """All ClusterQueues, their cohorts, and the incremental usage counters.

    ``cohort_used[cohort][fr]`` is the sum over members of ``max(0, usage - guaranteed)``; it is
    updated whenever one member's usage changes, so a fit check is O(resources in the request).
    """

    def __init__(self) -> None:
        self.queues: dict[str, ClusterQueueQuota] = {}
        self.cohort_pool: dict[str, Usage] = {}
        self.cohort_used: dict[str, Usage] = {}
        self.cohort_own: dict[str, Usage] = {}  # Cohort objects' own nominalQuota

    # --- spec changes ------------------------------------------------------------------------
    def set_queues(self, queues: list[ClusterQueueQuota], cohort_objects: list[dict[str, Any]]) -> None:
        """Replace every spec, keeping usage; then rebuild the cohort sums from scratch."""
        old = self.queues
        self.queues = {}
        for cq in queues:
            previous = old.get(cq.name)
            cq.usage = previous.usage if previous else {}
            self.queues[cq.name] = cq
        self.cohort_own = {}
        for obj in cohort_objects:
            own = ClusterQueueQuota.from_object({"metadata": obj["metadata"], "spec": obj.get("spec") or {}})
            self.cohort_own[obj["metadata"]["name"]] = {fr: q.nominal for fr, q in own.quotas.items()}
        self._rebuild_cohorts()

    def _rebuild_cohorts(self) -> None:
        self.cohort_pool = {name: dict(own) for name, own in self.cohort_own.items()}
        self.cohort_used = {}
        for cq in self.queues.values():
            if cq.cohort is None:
                continue
            pool = self.cohort_pool.setdefault(cq.cohort, {})
            used = self.cohort_used.setdefault(cq.cohort, {})
            for fr, quota in cq.quotas.items():
                pool[fr] = pool.get(fr, 0) + quota.lendable
            for fr, amount in cq.usage.items():
                used[fr] = used.get(fr, 0) + self._above_guaranteed(cq, fr, amount)

    @staticmethod
    def _above_guaranteed(cq: ClusterQueueQuota, fr: FlavorResource, amount: int) -> int:
        quota = cq.quotas.get(fr)
        return max(0, amount - (quota.guaranteed if quota else 0))

    # --- usage -------------------------------------------------------------------------------
    def add(self, cq_name: str, usage: Usage, sign: int = 1) -> None:
        """Charge (``sign=1``) or release (``sign=-1``) ``usage`` to a ClusterQueue."""
        cq = self.queues.get(cq_name)
        if cq is None:
            return
        used = self.cohort_used.setdefault(cq.cohort, {}) if cq.cohort else None
        for fr, amount in usage.items():
            before = cq.usage.get(fr, 0)
            after = before + sign * amount
            if after:
                cq.usage[fr] = after
            else:
                cq.usage.pop(fr, None)
            if used is not None:
                delta = self._above_guaranteed(cq, fr, after) - self._above_guaranteed(cq, fr, before)
                used[fr] = used.get(fr, 0) + delta

    def available(self, cq_name: str, fr: FlavorResource) -> int:
        """How much more of ``fr`` the ClusterQueue may reserve right now (may be negative)."""
        cq = self.queues[cq_name]
        quota = cq.quotas.get(fr)
        if quota is None:
            return 0
        usage = cq.usage.get(fr, 0)
        if cq.cohort is None:
            return quota.nominal - usage
        local = max(0, quota.guaranteed - usage)
        parent = self.cohort_pool.get(cq.cohort, {}).get(fr, 0) - self.cohort_used.get(cq.cohort, {}).get(fr, 0)
        if quota.borrowing_limit is not None:
            headroom = quota.lendable - max(0, usage - quota.guaranteed) + quota.borrowing_limit
            parent = min(parent, headroom)
        return local + parent

    def borrowed(self, cq_name: str, fr: FlavorResource, usage: int) -> int:
        cq = self.queues[cq_name]
        quota = cq.quotas.get(fr)
        if cq.cohort is None or quota is None:
            return 0
        return max(0, usage - quota.nominal)

    def would_borrow(self, cq_name: str, request: Usage) -> bool:
        cq = self.queues[cq_name]
        return any(
            cq.usage.get(fr, 0) + amount > cq.quotas[fr].nominal for fr, amount in request.items() if fr in cq.quotas
        )

    # --- status ------------------------------------------------------------------------------
    def flavors_status(self, cq_name: str, usage: Usage, *, with_borrowed: bool = True) -> list[dict[str, Any]]:
        """``flavorsReservation`` / ``flavorsUsage`` for the pairs in the spec, in spec order."""
        cq = self.queues[cq_name]
        out: list[dict[str, Any]] = []
        for covered, flavors in cq.groups:
            for flavor in flavors:
                resources = []
                for resource in covered:
                    amount = usage.get((flavor, resource), 0)
                    entry: dict[str, Any] = {"name": resource, "total": format_quantity(resource, amount)}
                    if with_borrowed:
                        entry["borrowed"] = format_quantity(resource, self.borrowed(cq_name, (flavor, resource), amount))
                    resources.append(entry)
                out.append({"name": flavor, "resources": resources})
        return out
