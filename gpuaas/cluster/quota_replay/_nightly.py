"""The nightly rebalance inside a replay: the rebalance flow's demand formula and planner, on the replay's history.

What the flow does each night, with the replay's own history in place of Prometheus:

* every simulated hour the replay samples each queue's GPUs in use and its pending GPUs;
* held = the policy's ``usage_percentile`` of the in-use samples of the last ``usage_lookback_days``
  (the flow reads the same percentile of Kueue's usage gauge over the same window);
* pending = :func:`gpuaas.policies.quotas.demand.pending_demand` of the window's median pending GPUs
  and of the GPUs pending now, with how long the oldest has waited;
* the deadline need: the flow's own :func:`gpuaas.policies.deadlines.deadline_problems` and
  :func:`gpuaas.policies.quotas.deadline_gpus_of_problems` on a snapshot of the replay's Workloads
  with a deadline, pending and running, each with the run time its annotation would state (the
  estimate, ``--runtime-estimate``: the true one only where the estimate is exact), all queues one
  deadline pool (``deadline_gpus``);
* demand = :func:`gpuaas.policies.quotas.demand.cell_demand`, capped at the cohort's GPUs; the
  busiest demand the same with the larger of the pending demand and the window's most GPUs pending
  at once, as the flow's ``cohort_demands``;
* whether each queue can reclaim what it lends (its ClusterQueue's cohort and ``reclaimWithinCohort``);
* guarantees from the policy's tenants (none by default), ``recent_change`` the queue's net quota
  change over the last ``no_reversal_days`` nights, the limits :func:`limits_of` the policy;
* the history each queue has (its hours of samples, as the flow counts a cell's samples in the window)
  and the cohort's, through the flow's :func:`gpuaas.policies.quotas.demand.short_history`: in the
  first ``min_history_days`` the night's cap is one step and no queue lends below its share;
* what the replay's own plans moved since :func:`gpuaas.operations.rebalance.moves_window_start`, as
  the flow reads it from the audit log: spent of the night's steps and total cap. Each night's moves
  are stamped at its decision instant, so at a nightly cadence the previous night's never count, as
  in the flow;
* the flow's own decision for one cohort, :func:`gpuaas.operations.rebalance.plan_cohort` (the planner,
  ``plan_quotas``, unchanged), on GPUs alone.

No floor, no replay-only limit: a replay that protected queues the deployed flow leaves exposed
would promise what production does not deliver.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd

from gpuaas.models import Snapshot, WorkloadState
from gpuaas.operations.rebalance import moves_window_start, plan_cohort
from gpuaas.policies.deadlines import deadline_problems
from gpuaas.policies.quotas import (
    CohortDemand,
    QueueDemand,
    cell_demand,
    deadline_gpus_of_problems,
    limits_of,
    pending_demand,
    short_history,
)
from gpuaas.policy import Policy
from gpuaas.quantity import GPU

__all__ = ["EPOCH", "FLAVOR", "DeadlineWork", "History", "NightResult", "deadline_gpus", "moved_in_window",
           "night_demand", "plan_night"]

FLAVOR = "gpu"
COHORT = "replay"
"""The one cohort a quota replay plans: every queue of the trace."""
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
"""The instant a trace's time 0 is replayed at."""


@dataclass
class History:
    """One queue's hourly samples and recent quota changes."""

    used: deque[float] = field(default_factory=deque)  # GPUs in use, one per hour
    pending: deque[float] = field(default_factory=deque)  # GPUs pending, one per hour
    changes: deque[int] = field(default_factory=deque)  # net change per night
    pending_now: float = 0.0
    oldest_wait_s: float = 0.0
    applied: deque[tuple[datetime, int]] = field(default_factory=deque)
    """(instant, net GPUs) of each plan that changed the queue's quota, oldest first: what the audit log holds."""


@dataclass(frozen=True)
class DeadlineWork:
    """A job of the replay with a deadline, pending or running, as its Workload would show it to the flow."""

    queue: str
    name: str
    gpus: int
    estimate_s: float
    """The run time its annotation states: what the deadline planner is told, not the true one."""
    deadline_s: float
    """Seconds since the trace's start, as every time of the replay."""
    started_s: float | None = None
    """When it was admitted; None while it is pending."""


@dataclass(frozen=True)
class NightResult:
    quotas: dict[str, int]
    moved_gpus: int
    failed: str | None = None  # why no plan was applied


def history_hours(policy: Policy) -> int:
    return max(1, math.ceil(policy.rebalance.usage_lookback_days * 24))


def no_reversal_nights(policy: Policy) -> int:
    return math.ceil(policy.rebalance.no_reversal_days)


def moved_in_window(history: Mapping[str, History], now: datetime) -> dict[str, tuple[int, int]]:
    """queue -> (GPUs gained, GPUs lost) by the replay's plans applied since ``moves_window_start(now)``: what
    the flow's ``read_audit_view`` reads from the audit log, over the same window. Queues that moved nothing
    there are left out, as in the flow."""
    since = moves_window_start(now)
    out: dict[str, tuple[int, int]] = {}
    for name, h in history.items():
        deltas = [delta for at, delta in h.applied if at >= since and delta]
        if deltas:
            out[name] = (sum(d for d in deltas if d > 0), sum(-d for d in deltas if d < 0))
    return out


def deadline_gpus(quotas: Mapping[str, int], work: Sequence[DeadlineWork], now: float) -> dict[str, int]:
    """queue -> the GPUs the flow's deadline need asks for it: the replay's Workloads with a deadline on a
    snapshot of the queues' quota cells in one cohort, through the flow's ``deadline_problems`` and
    ``deadline_gpus_of_problems``. One cohort for isolated queues too: the flow plans only queues of a
    cohort, so they stand for a cohort whose queues cannot borrow, one deadline pool all the same (a job
    larger than its queue's quota tonight still counts; one larger than the cohort does not). Queues
    without deadline work are left out."""
    if not work:
        return {}
    at = EPOCH + timedelta(seconds=now)
    quota_rows = [{"cluster_queue": name, "cohort": COHORT, "flavor": FLAVOR, "resource": GPU, "nominal": float(gpus),
                   "borrowing_limit": None, "lending_limit": None} for name, gpus in sorted(quotas.items())]
    workloads = pd.DataFrame([{
        "namespace": w.queue, "name": w.name, "cluster_queue": w.queue,
        "state": WorkloadState.pending.value if w.started_s is None else WorkloadState.admitted.value,
        "gpus": float(w.gpus), "flavor": None if w.started_s is None else FLAVOR, "active": True,
        "runtime_seconds": w.estimate_s, "deadline_at": EPOCH + timedelta(seconds=w.deadline_s),
        "admitted_at": None if w.started_s is None else EPOCH + timedelta(seconds=w.started_s),
    } for w in work])
    snapshot = Snapshot(collected_at=at, windows_minutes=(), sources={}, quotas=pd.DataFrame(quota_rows),
                        workloads=workloads)
    needs = deadline_gpus_of_problems(deadline_problems(snapshot, (GPU,)), snapshot)
    return {queue: gpus for (queue, _), gpus in needs.items()}


def night_demand(quotas: Mapping[str, int], history: Mapping[str, History], policy: Policy,
                 reclaims: Mapping[str, bool] | None = None, *, now: datetime | None = None,
                 deadline_need: Mapping[str, int] | None = None) -> CohortDemand:
    """The planner's input for one night, as the flow's ``cohort_demands`` builds it from the cluster.

    ``reclaims``: queue -> whether its ClusterQueue can take back what it lends (in a cohort, with
    ``reclaimWithinCohort`` other than ``Never``), as the flow reads it from the snapshot; all by default.
    ``now``: the decision instant, from which the moves of ``History.applied`` in the window count as spent
    (none without it). ``deadline_need``: queue -> GPUs its deadline jobs need (``deadline_gpus``).
    """
    rb = policy.rebalance
    hours, nights = history_hours(policy), no_reversal_nights(policy)
    total = float(sum(quotas.values()))
    moved = moved_in_window(history, now) if now is not None else {}
    deadline_need = deadline_need or {}
    queues = []
    for name in sorted(quotas):
        h = history[name]
        used = list(h.used)[-hours:]
        held = float(np.percentile(used, rb.usage_percentile)) if used else 0.0
        waiting = list(h.pending)[-hours:]
        median = float(np.median(waiting)) if waiting else 0.0
        pending = pending_demand(median, h.pending_now, h.oldest_wait_s, rb)
        need = float(deadline_need.get(name, 0))
        tenant = policy.tenant_for(None, name)
        queues.append(QueueDemand(
            name=name, nominal={FLAVOR: quotas[name]}, demand={FLAVOR: cell_demand(held, pending, need, total)},
            guaranteed={FLAVOR: tenant.guaranteed_gpus} if tenant and tenant.guaranteed_gpus else {},
            weight=tenant.weight if tenant else 1.0,
            recent_change={FLAVOR: change} if nights and (change := sum(list(h.changes)[-nights:])) else {},
            reclaims=True if reclaims is None else reclaims[name],
            busiest={FLAVOR: cell_demand(held, max(pending, max(waiting, default=0.0)), need, total)},
            moved_24h={FLAVOR: moved[name]} if name in moved else {},
            history_seconds={FLAVOR: len(used) * 3600.0},
        ))
    limits = limits_of(rb)
    spent = sum(gained for gained, _ in moved.values())
    if spent:
        limits = replace(limits, moved_24h_gpus=spent)
    seen = max((len(h.used) for h in history.values()), default=0) * 3600.0
    notes: list[str] = []
    limits, little = short_history(limits, seen, rb, notes)
    return CohortDemand(COHORT, queues, limits, history_seconds=seen, little_history=little, notes=notes)


def plan_night(quotas: dict[str, int], history: dict[str, History], policy: Policy,
               reclaims: Mapping[str, bool] | None = None, *, now: datetime | None = None,
               deadline_need: Mapping[str, int] | None = None) -> NightResult:
    """New quotas for every queue (the same total), or the old ones and why not: the flow's decision
    (``plan_cohort``) on ``night_demand``'s input (the arguments are its)."""
    outcome = plan_cohort(night_demand(quotas, history, policy, reclaims, now=now, deadline_need=deadline_need))
    plan = outcome.plan
    if plan is None:
        return NightResult(dict(quotas), 0, outcome.error)
    new = dict(quotas)
    for change in plan.changes:
        new[change.queue] = change.after
    return NightResult(new, plan.moved_gpus)
