"""The nightly rebalance inside a replay: the rebalance flow's demand formula and planner, on the replay's history.

What the flow does each night, with the replay's own history in place of Prometheus:

* every simulated hour the replay samples each queue's GPUs in use and its pending GPUs;
* held = the policy's ``usage_percentile`` of the in-use samples of the last ``usage_lookback_days``
  (the flow reads the same percentile of Kueue's usage gauge over the same window);
* pending = :func:`gpuaas.policies.quotas.demand.pending_demand` of the window's median pending GPUs
  and of the GPUs pending now, with how long the oldest has waited;
* demand = :func:`gpuaas.policies.quotas.demand.cell_demand`, capped at the cohort's GPUs; the
  busiest demand the same with the window's most GPUs pending at once;
* whether each queue can reclaim what it lends (its ClusterQueue's cohort and ``reclaimWithinCohort``);
* guarantees from the policy's tenants (none by default), ``recent_change`` the queue's net quota
  change over the last ``no_reversal_days`` nights, the limits :func:`limits_of` the policy;
* the flow's own decision for one cohort, :func:`gpuaas.operations.rebalance.plan_cohort` (the planner,
  ``plan_quotas``, unchanged), on GPUs alone.

No floor, no replay-only limit: a replay that protected queues the deployed flow leaves exposed
would promise what production does not deliver.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from gpuaas.operations.rebalance import plan_cohort
from gpuaas.policies.quotas import CohortDemand, QueueDemand, cell_demand, limits_of, pending_demand
from gpuaas.policy import Policy

__all__ = ["FLAVOR", "History", "NightResult", "plan_night"]

FLAVOR = "gpu"
COHORT = "replay"
"""The one cohort a quota replay plans: every queue of the trace."""


@dataclass
class History:
    """One queue's hourly samples and recent quota changes."""

    used: deque[float] = field(default_factory=deque)  # GPUs in use, one per hour
    pending: deque[float] = field(default_factory=deque)  # GPUs pending, one per hour
    changes: deque[int] = field(default_factory=deque)  # net change per night
    pending_now: float = 0.0
    oldest_wait_s: float = 0.0


@dataclass(frozen=True)
class NightResult:
    quotas: dict[str, int]
    moved_gpus: int
    failed: str | None = None  # why no plan was applied


def history_hours(policy: Policy) -> int:
    return max(1, math.ceil(policy.rebalance.usage_lookback_days * 24))


def no_reversal_nights(policy: Policy) -> int:
    return math.ceil(policy.rebalance.no_reversal_days)


def plan_night(quotas: dict[str, int], history: dict[str, History], policy: Policy,
               reclaims: Mapping[str, bool] | None = None) -> NightResult:
    """New quotas for every queue (the same total), or the old ones and why not.

    ``reclaims``: queue -> whether its ClusterQueue can take back what it lends (in a cohort, with
    ``reclaimWithinCohort`` other than ``Never``), as the flow reads it from the snapshot; all by default.
    """
    rb = policy.rebalance
    hours, nights = history_hours(policy), no_reversal_nights(policy)
    total = float(sum(quotas.values()))
    queues = []
    for name in sorted(quotas):
        h = history[name]
        used = list(h.used)[-hours:]
        held = float(np.percentile(used, rb.usage_percentile)) if used else 0.0
        waiting = list(h.pending)[-hours:]
        median = float(np.median(waiting)) if waiting else 0.0
        demand = cell_demand(held, pending_demand(median, h.pending_now, h.oldest_wait_s, rb), 0.0, total)
        busiest = cell_demand(held, max(waiting, default=0.0), 0.0, total)
        tenant = policy.tenant_for(None, name)
        queues.append(QueueDemand(
            name=name, nominal={FLAVOR: quotas[name]}, demand={FLAVOR: demand},
            guaranteed={FLAVOR: tenant.guaranteed_gpus} if tenant and tenant.guaranteed_gpus else {},
            weight=tenant.weight if tenant else 1.0,
            recent_change={FLAVOR: sum(list(h.changes)[-nights:])} if nights else {},
            reclaims=True if reclaims is None else reclaims[name], busiest={FLAVOR: busiest},
        ))
    outcome = plan_cohort(CohortDemand(COHORT, queues, limits_of(rb), history_seconds=hours * 3600.0,
                                       little_history=False))
    plan = outcome.plan
    if plan is None:
        return NightResult(dict(quotas), 0, outcome.error)
    new = dict(quotas)
    for change in plan.changes:
        new[change.queue] = change.after
    return NightResult(new, plan.moved_gpus)
