"""The nightly rebalance inside a replay: demand from the replay's own history, then the planner.

Demand per queue, written down: every simulated hour the replay samples each queue's GPUs in
use plus its pending GPUs (what it would have used had nothing waited); a night's demand is a
percentile of the last ``history_days`` of samples, by default the 100th (last week's peak: on
the Philly trace the 90th and 99th let short bursts through; the README gives all three). The guarantee is half of the queue's
static quota, or the largest job it has submitted so far when that is bigger (at most one step
above its quota, so the plan stays feasible): a queue is never shrunk below a job it has asked
for, and is grown back to one that arrives after a shrink. Without the half, a queue idle on the
first nights shrinks to where the relative step (``max_step_percent`` of almost nothing) can never
grow it again, and its jobs wait forever. ``recent_change`` is the queue's net quota change over the last
``no_reversal_days`` nights. The planner is :func:`gpuaas.policies.quotas.plan_quotas`, unchanged.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from gpuaas.errors import GpuaasError
from gpuaas.policies.quotas import QueueDemand, QuotaLimits, plan_quotas

__all__ = ["FLAVOR", "DEFAULT_LIMITS", "History", "NightResult", "plan_night"]

FLAVOR = "gpu"
DEFAULT_LIMITS = QuotaLimits(max_step_gpus=64, max_step_percent=50.0, max_total_moved_gpus=256, hysteresis_gpus=1)
"""Per night: at most 64 GPUs or half of a queue's quota, 256 GPUs in all (the command's defaults)."""


@dataclass
class History:
    """One queue's hourly demand samples and recent quota changes."""

    samples: deque[float] = field(default_factory=deque)  # GPUs in use + pending, one per hour
    changes: deque[int] = field(default_factory=deque)  # net change per night
    largest_job: int = 0
    floor: int = 0  # half the static quota: the least a rebalance leaves the queue


@dataclass(frozen=True)
class NightResult:
    quotas: dict[str, int]
    moved_gpus: int
    failed: str | None = None  # why no plan was applied


def _step(quota: int, limits: QuotaLimits) -> int:
    return min(limits.max_step_gpus, math.floor(quota * limits.max_step_percent / 100))


def plan_night(quotas: dict[str, int], history: dict[str, History], limits: QuotaLimits,
               history_hours: int, no_reversal_nights: int, percentile: float = 100.0) -> NightResult:
    """New quotas for every queue (the same total), or the old ones and why not."""
    queues = []
    for name in sorted(quotas):
        h = history[name]
        window = list(h.samples)[-history_hours:]
        demand = float(np.percentile(window, percentile)) if window else float(quotas[name])
        queues.append(QueueDemand(
            name=name, nominal={FLAVOR: quotas[name]}, demand={FLAVOR: demand},
            guaranteed={FLAVOR: min(max(h.largest_job, h.floor), quotas[name] + _step(quotas[name], limits))},
            recent_change={FLAVOR: sum(list(h.changes)[-no_reversal_nights:])},
        ))
    try:
        plan = plan_quotas(queues, limits)
    except GpuaasError as exc:
        return NightResult(dict(quotas), 0, str(exc))
    new = dict(quotas)
    for change in plan.changes:
        new[change.queue] = change.after
    return NightResult(new, plan.moved_gpus)
