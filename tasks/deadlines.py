"""Tasks of the deadline plan: build and solve the problem per cohort and flavor, publish the signal.

``plan_deadlines`` is the one the rebalance flow composes (its per-queue deadline demand) and the
``deadlines`` flow runs alone; it reads the snapshot only and writes nothing.
"""

from __future__ import annotations

from prefect import task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE

from gpuaas.models import Snapshot
from gpuaas.policies.deadline_pools import PoolPlan, deadline_problems, plan_pools
from gpuaas.pushgateway import push_metrics
from gpuaas.settings import GpuaasSettings
from reports.deadlines import deadline_metrics, pool_dicts
from tasks._options import IO_TASK_OPTIONS

__all__ = ["plan_deadlines", "publish_deadline_artifacts", "push_deadline_metrics"]


@task(name="plan-deadlines", cache_policy=NO_CACHE, timeout_seconds=300)
def plan_deadlines(snapshot: Snapshot) -> list[PoolPlan]:
    """Pure work in a task: bounded by the planner's own MILP limits, and by a timeout here."""
    return plan_pools(deadline_problems(snapshot))


@task(name="publish-deadline-artifacts", cache_policy=NO_CACHE)
def publish_deadline_artifacts(pools: list[PoolPlan]) -> None:
    rows = [{"cohort": p["cohort"], "flavor": p["flavor"], "GPUs": p["capacity_gpus"],
             "extra GPUs": p["extra_gpus"].get(p["flavor"], 0), "at risk": ", ".join(p["at_risk"]) or "-",
             "missed": ", ".join(p["missed"]) or "-", "exact": p["exact"]} for p in pool_dicts(pools)]
    create_table_artifact(key="gpuaas-deadline-plan", table=rows or [{"cohort": "-"}],
                          description="Deadline plan per cohort and flavor: extra GPUs that make every deadline hold")


@task(name="push-deadline-metrics", cache_policy=NO_CACHE, **IO_TASK_OPTIONS)
def push_deadline_metrics(settings: GpuaasSettings, pools: list[PoolPlan]) -> int:
    assert settings.pushgateway_url
    return push_metrics(settings.pushgateway_url, "gpuaas_deadlines", deadline_metrics(pools),
                        timeout=settings.request_timeout_seconds)
