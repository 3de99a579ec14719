"""The deadline plan for scripts (JSON), people (rows) and the Pushgateway (metrics). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpuaas.policies.deadline_pools import PoolPlan
from gpuaas.policies.deadlines import DeadlinePlan, ScheduledJob
from gpuaas.pushgateway import MetricFamily

__all__ = ["deadline_metrics", "plan_dict", "plan_rows", "pool_dicts"]


def _num(value: float | None) -> float | int | None:
    """Whole numbers print as ``60``, not ``60.0``; the rest keep 3 decimals."""
    if value is None:
        return None
    rounded = round(value, 3)
    return int(rounded) if rounded == int(rounded) else rounded


def _status(job: ScheduledJob, plan: DeadlinePlan) -> str:
    if job.name in plan.missed:
        return "missed"
    if job.deadline is None:
        return "best effort"
    if job.name in plan.at_risk:
        return "at risk now"
    return "running" if job.running else "holds"


def plan_dict(plan: DeadlinePlan) -> dict[str, Any]:
    """``gpuaas plan deadlines --format json``: the issue's keys, then ``at_risk`` and ``messages``."""
    return {
        "feasible": plan.feasible,
        "extra_gpus": dict(plan.extra_gpus),
        "schedule": [
            {"name": s.name, "start": _num(s.start), "end": _num(s.end), "resource": s.resource, "gpus": s.gpus,
             "deadline": _num(s.deadline), "running": s.running}
            for s in plan.schedule
        ],
        "missed": list(plan.missed),
        "exact": plan.exact,
        "at_risk": list(plan.at_risk),
        "messages": list(plan.messages),
    }


def plan_rows(plan: DeadlinePlan) -> list[list[Any]]:
    """One row per scheduled job, in start order: name, resource, GPUs, start, end, deadline, status."""
    return [[s.name, s.resource, s.gpus, _num(s.start), _num(s.end), "-" if s.deadline is None else _num(s.deadline),
             _status(s, plan)] for s in plan.schedule]


def pool_dicts(pools: Sequence[PoolPlan]) -> list[dict[str, Any]]:
    """``gpuaas plan deadlines --from-cluster --format json``: the same answer per pool, seconds from now."""
    return [{"cohort": p.problem.cohort, "flavor": p.problem.flavor, "capacity_gpus": p.problem.capacity,
             **plan_dict(p.plan), "missed": list(p.missed), "notes": list(p.problem.notes)} for p in pools]


def deadline_metrics(pools: Sequence[PoolPlan]) -> list[MetricFamily]:
    """The scale-up signal: extra GPUs that make every holdable deadline hold, per cohort and flavor.

    ``gpuaas_deadline_capacity_gpus`` is the capacity the plan used, so that a node-pool scaler can
    ask for capacity + extra without knowing the quotas (``deployments/keda/scaledobject-deadlines.yaml``).
    """
    labels = ("cohort", "flavor")
    extra = MetricFamily("gpuaas_extra_gpus_needed", "Fewest extra GPUs that make every holdable deadline hold",
                         labels)
    risk = MetricFamily("gpuaas_deadlines_at_risk", "Deadlines that do not hold on current GPUs (incl. missed)",
                        labels)
    cap = MetricFamily("gpuaas_deadline_capacity_gpus", "GPUs the deadline plan had (nominal quota of the pool)",
                       labels)
    for p in pools:
        key = (p.problem.cohort, p.problem.flavor)
        extra.add(p.plan.extra_gpus.get(p.problem.flavor, 0), *key)
        risk.add(p.at_risk_count, *key)
        cap.add(p.problem.capacity, *key)
    return [extra, risk, cap]
