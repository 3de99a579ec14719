"""The deadline plan for scripts (JSON), people (rows) and the Pushgateway (metrics). Pure."""

from __future__ import annotations

from typing import Any

from gpuaas.policies.deadlines import DeadlinePlan, ScheduledJob

__all__ = ["plan_dict", "plan_rows"]


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
