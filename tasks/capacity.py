"""The capacity task: the pure sweep policy, callable from any flow (load test, cost report, planners)."""

from __future__ import annotations

import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from gpuaas.policies.capacity import CapacityResult, sustainable_capacity

__all__ = ["compute_capacity"]


@task(name="compute-capacity", cache_policy=NO_CACHE)
def compute_capacity(sweep: pd.DataFrame, slo_quantile: str, slo_seconds: float, min_quality: float | None = None,
                     forecast_rps: float | None = None, source: str = "sweep") -> CapacityResult:
    """Same answer as ``gpuaas capacity`` on the same rows (no retries: a bad sweep stays bad)."""
    return sustainable_capacity(sweep, slo_quantile=slo_quantile, slo_seconds=slo_seconds, min_quality=min_quality,
                                forecast_rps=forecast_rps, source=source)
