"""Deadline work queued to a LocalQueue whose ClusterQueue does not exist: missed, said, never left out.

Why a pool of its own: the pools are cut by cohort tree and flavor of the ClusterQueues there are, so a
Workload of a missing ClusterQueue has none, and the plan would leave it out without a word (a plan of
"no job has a deadline" while one will be missed). Kueue never admits it, so it is what the planner
calls a job that cannot be admitted: ``missed``, as a job larger than its pool is (``NoPlace`` says
which), in a pool of 0 GPUs named after the missing ClusterQueue as a queue without a cohort is
(``-ghost-cq``), with the collect's note (``gpuaas.kueue_gaps.missing_note``). No GPU helps it, so it
asks for no extra GPU, and no hold or demotion is ever planned for it (it is no job of the plan).

The LocalQueues come from the snapshot's data quality (``gpuaas.kueue_gaps``). Pure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import pandas as pd

from gpuaas.kueue_gaps import missing_note, missing_queues, stranded_workloads
from gpuaas.models import Snapshot
from gpuaas.policies.deadlines.marks import RecordedHolds
from gpuaas.policies.deadlines.pools import NO_COHORT, PoolProblem, pool_problems
from gpuaas.policies.deadlines.problem import MAX_TIME, DeadlineJob

__all__ = ["NO_FLAVOR", "MissingQueuePool", "NoPlace", "deadline_problems", "missing_queue_problems"]

NO_FLAVOR = "-"
"""The flavor of a missing ClusterQueue's pool: it has none."""


class NoPlace(StrEnum):
    """Why a pending job has no place in its pool's plan; either way its deadline is ``missed``."""

    larger_than_pool = "larger than the pool"
    no_cluster_queue = "its ClusterQueue does not exist"
    namespace_not_selected = "its ClusterQueue does not admit from its namespace"


@dataclass(frozen=True)
class MissingQueuePool(PoolProblem):
    """The deadline work of a ClusterQueue that does not exist: 0 GPUs, each job ``too_big`` (never admitted)."""

    cluster_queue: str = ""


def _deadline(now: pd.Timestamp, value: object) -> float | None:
    """Seconds from ``now`` to ``value``, at the planner's horizon at most (as the pools count them)."""
    if value is None or pd.isna(value):
        return None
    return min(max(float((pd.Timestamp(value) - now).total_seconds()), -MAX_TIME), MAX_TIME)


def missing_queue_problems(snapshot: Snapshot) -> list[MissingQueuePool]:
    """One pool per missing ClusterQueue that pending Workloads with a deadline are queued to, by its name."""
    wls = snapshot.workloads
    if wls.empty or "deadline_at" not in wls:
        return []
    now = pd.Timestamp(snapshot.collected_at)
    queues: dict[str, list[tuple[str, str]]] = {}
    for (namespace, local_queue), cluster_queue in sorted(missing_queues(snapshot.data_quality).items()):
        queues.setdefault(cluster_queue, []).append((namespace, local_queue))
    out = []
    for cluster_queue, local_queues in sorted(queues.items()):
        jobs = []
        for namespace, local_queue in local_queues:
            for wl in stranded_workloads(wls, namespace, local_queue).itertuples(index=False):
                deadline = _deadline(now, wl.deadline_at)
                if deadline is None:
                    continue
                runtime = getattr(wl, "runtime_seconds", None)
                duration = 0.0 if runtime is None or pd.isna(runtime) else float(runtime)
                jobs.append(DeadlineJob(f"{wl.namespace}/{wl.name}", int(math.ceil(float(wl.gpus) - 1e-9)), duration,
                                        deadline, NO_FLAVOR))
        if jobs:
            notes = tuple(missing_note(ns, lq, cluster_queue, wls) for ns, lq in local_queues)
            out.append(MissingQueuePool(f"{NO_COHORT}{cluster_queue}", NO_FLAVOR, 0, (), tuple(jobs), notes,
                                        cluster_queue=cluster_queue))
    return out


def deadline_problems(snapshot: Snapshot, gpu_resources: Sequence[str] = ("nvidia.com/gpu",), *,
                      recorded: RecordedHolds | None = None) -> list[PoolProblem]:
    """Every pool a deadline is planned in: each cohort-tree/flavor pool with GPU quota (``pool_problems``, which
    counts only the hold marks in ``recorded`` as holds; None: every mark), then one per missing ClusterQueue that
    Workloads with a deadline are queued to (``missing_queue_problems``), where every deadline is missed."""
    return [*pool_problems(snapshot, gpu_resources, recorded=recorded), *missing_queue_problems(snapshot)]
