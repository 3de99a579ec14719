"""Verified outcomes as whole numbers that add up, and per tenant and the cluster. Pure.

A serving service's verified requests are an estimate (good requests x the share within the SLO), so
they are fractions; printed one by one, 173,821.6 + 17,248.4 + 73,080.4 reads 264,150 against a total of
264,151. The report therefore counts whole requests, rounded with the largest-remainder rule from the
top down: the cluster's total is its sum rounded once, each tenant's share of it is its floor plus one
for the largest remainders, and so for the services inside a tenant. Every printed row then adds up to
the printed total, and each figure is within one of its estimate. A window of one period shows that
period's count as its service's; the periods of a longer window are estimated each on their own (their
own share within the SLO), so they are not forced to the window's total.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

from gpuaas.policies.cost.services import ServiceTally

__all__ = ["Outcomes", "largest_remainder", "whole_verified"]

K = TypeVar("K", bound=Hashable)


def largest_remainder(values: Mapping[K, float], total: int) -> dict[K, int]:
    """Whole numbers, one per value, that sum to ``total``: each value's floor, plus one for the values with
    the largest fractional parts (ties in the order given, so the same inputs round the same way)."""
    floors = {key: math.floor(value) for key, value in values.items()}
    order = sorted(values, key=lambda key: floors[key] - values[key])  # largest remainder first; stable
    for key in order[:max(total - sum(floors.values()), 0)]:
        floors[key] += 1
    return floors


def _round_half_up(value: float) -> int:
    return math.floor(value + 0.5)


def whole_verified(services: Sequence[ServiceTally]) -> None:
    """Replace each serving service's verified requests by whole numbers that add up per tenant and over the
    cluster (the module docstring). Unknown ones (None) stay unknown; batch jobs are whole already. Call it
    after the productive shares are taken from the estimates: the rounding is for what is printed."""
    counted = [s for s in services if s.spec.kind == "serving" and s.verified is not None]
    by_tenant: dict[str, list[int]] = {}
    for i, svc in enumerate(counted):
        by_tenant.setdefault(svc.tenant, []).append(i)
    estimate = {tenant: sum(counted[i].verified or 0.0 for i in members) for tenant, members in by_tenant.items()}
    tenants = largest_remainder(estimate, _round_half_up(sum(estimate.values())))
    for tenant, members in by_tenant.items():
        whole = largest_remainder({i: counted[i].verified or 0.0 for i in members}, tenants[tenant])
        for i, value in whole.items():
            counted[i].verified = float(value)
            daily = counted[i].daily_verified
            if len(daily) == 1 and None not in daily.values():  # one period: its row is the service's, shown alike
                counted[i].daily_verified = dict.fromkeys(daily, float(value))


class Outcomes:
    """Verified requests and jobs per tenant (None: the whole cluster), never added together; None where
    unknown (the jobs without the Kubernetes API) or where a tenant has both kinds (``verified``)."""

    def __init__(self, services: list[ServiceTally], jobs_known: bool) -> None:
        self._services = services
        self._jobs_known = jobs_known

    def _mine(self, tenant: str | None, kind: str) -> list[ServiceTally]:
        return [s for s in self._services if s.spec.kind == kind and (tenant is None or s.tenant == tenant)]

    def requests(self, tenant: str | None) -> float | None:
        """Verified requests; None where a service served requests none of which could be verified (no latency
        histogram): 0 would say none met the SLO. A service without any series adds nothing."""
        serving = self._mine(tenant, "serving")
        if any(s.outcomes_unknown(self._jobs_known) for s in serving):
            return None
        return sum(s.verified or 0.0 for s in serving)

    def jobs(self, tenant: str | None) -> float | None:
        batch = self._mine(tenant, "batch")
        if batch and not self._jobs_known:
            return None
        return sum(s.verified or 0.0 for s in batch)

    def mixed(self, tenant: str | None) -> bool:
        return bool(self._mine(tenant, "serving")) and bool(self._mine(tenant, "batch"))

    def verified(self, tenant: str | None) -> float | None:
        """The tenant's outcomes where they are of one kind; None for both kinds (a request is not a job)."""
        if self.mixed(tenant):
            return None
        return self.jobs(tenant) if self._mine(tenant, "batch") else self.requests(tenant)

    def unknown_hours(self, tenant: str | None) -> dict[str, None]:
        """Productive and in-progress hours are unknown where batch outcomes are, productive hours where a serving
        service's are (``ServiceTally.outcomes_unknown``): ``{}`` where they are known."""
        out: dict[str, None] = {}
        if any(s.outcomes_unknown(self._jobs_known) for s in self._mine(tenant, "serving")):
            out["productive_gpu_hours"] = None
        if not self._jobs_known and self._mine(tenant, "batch"):
            out.update(productive_gpu_hours=None, in_progress_gpu_hours=None)
        return out
