"""The figures of one replayed configuration, as the JSON output names them.

* queueing delay of a job: the sum of its waits (submission to admission, and again after every
  preemption), so a preempted job's second wait counts;
* ``gpu_allocation_ratio``: GPU-seconds held by admitted jobs (work later lost included) over
  total GPUs x makespan (first submission to last completion);
* ``jain_fairness``: Jain's index over the tenants' average queueing delays, 1.0 when every
  tenant waits the same (or nobody waits);
* ``deadline_satisfaction``: jobs finished by their deadline over jobs with one (None without);
* ``preempted_gpu_hours``: GPU-hours run by jobs before they were preempted (lost: no checkpoints);
* ``tenants``: every replayed tenant, its jobs and how many never finished.

A job still waiting when the replay stops (no quota ever admitted it) counts the wait it had by then, a
lower bound, in every figure of waits: left out, a configuration that starves a tenant outright would
score better than one that makes it wait.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from ._engine import JobRecord, ReplayRun

__all__ = ["summarise"]


def _p95(values: list[float]) -> float:
    return float(np.percentile(values, 95)) if values else 0.0


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else 0.0


def jain(values: list[float]) -> float:
    total, squares = sum(values), sum(v * v for v in values)
    return 1.0 if squares == 0 else total * total / (len(values) * squares)


def _wait(job: JobRecord, stopped: float) -> float:
    """Its queueing delay; for a job waiting when the replay stopped at ``stopped``, its wait until then."""
    running = job.started is not None and job.started >= job.pending_since
    return job.queue_s if job.finished is not None or running else job.queue_s + max(0.0, stopped - job.pending_since)


def _tenant(jobs: list[JobRecord], stopped: float) -> dict[str, Any]:
    """One tenant's waits, those of jobs that never finished counted until the replay stopped."""
    waits = [_wait(j, stopped) for j in jobs]
    return {"avg_queue_s": round(_mean(waits), 1), "p95_queue_s": round(_p95(waits), 1),
            "jobs": len(jobs), "jobs_unfinished": sum(j.finished is None for j in jobs)}


def summarise(run: ReplayRun) -> dict[str, Any]:
    """The configuration's figures, with every replayed tenant in ``tenants``, one whose jobs never finished too."""
    done = [j for j in run.jobs if j.finished is not None]
    by_tenant: dict[str, list[JobRecord]] = defaultdict(list)
    for job in run.jobs:
        by_tenant[job.queue_name].append(job)
    tenants = {name: _tenant(jobs, run.makespan_s) for name, jobs in sorted(by_tenant.items())}
    timed = list(tenants.values())
    waits = [_wait(j, run.makespan_s) for j in run.jobs]
    with_deadline = [j for j in run.jobs if j.deadline is not None]
    capacity = run.total_gpus * run.makespan_s
    return {
        "tenants": tenants,
        "avg_queue_s": round(_mean(waits), 1),
        "p95_queue_s": round(_p95(waits), 1),
        "worst_tenant_p95_queue_s": max((t["p95_queue_s"] for t in timed), default=0.0),
        "deadline_satisfaction": round(sum(1 for j in with_deadline if j.finished is not None and j.deadline is not None
                                           and j.finished <= j.deadline) / len(with_deadline), 4)
        if with_deadline else None,
        "gpu_allocation_ratio": round(run.allocated_gpu_s / capacity, 4) if capacity else 0.0,
        "jain_fairness": round(jain([t["avg_queue_s"] for t in timed]), 4),
        "preempted_gpu_hours": round(run.preempted_gpu_hours, 1),
        "preemptions": run.preemptions,
        "gpus_moved_per_night": run.gpus_moved_per_night,
        "jobs_finished": len(done),
        "jobs_unfinished": len(run.jobs) - len(done),
        "makespan_s": round(run.makespan_s, 1),
        "failed_nights": run.failed_nights,
    }
