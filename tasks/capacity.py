"""Capacity tasks for any flow: the pure sweep policy, and a service's measured per-replica rate.

``serving_capacity_estimate`` is what the cost report ("replicas needed for the forecast") and
the planners call: the number, its source (sweep file or load-test run) and its age.
"""

from __future__ import annotations

from datetime import datetime

import pandas as pd

from gpuaas.loadtest import serving_capacity
from gpuaas.models import CapacityEstimate
from gpuaas.policies.cost import CapacityResult, sustainable_capacity
from gpuaas.settings import GpuaasSettings
from tasks._options import gpuaas_task

__all__ = ["compute_capacity", "serving_capacity_estimate"]


@gpuaas_task("compute-capacity")
def compute_capacity(sweep: pd.DataFrame, slo_quantile: str, slo_seconds: float, min_quality: float | None = None,
                     forecast_rps: float | None = None, source: str = "sweep") -> CapacityResult:
    """Same answer as ``gpuaas capacity`` on the same rows (no retries: a bad sweep stays bad)."""
    return sustainable_capacity(sweep, slo_quantile=slo_quantile, slo_seconds=slo_seconds, min_quality=min_quality,
                                forecast_rps=forecast_rps, source=source)


@gpuaas_task("serving-capacity", retries=2, retry_delay_seconds=2)
def serving_capacity_estimate(settings: GpuaasSettings, namespace: str, name: str, model_name: str | None = None,
                              now: datetime | None = None) -> CapacityEstimate | None:
    """The sustainable per-replica rate of a service with its source and age (None: never measured)."""
    return serving_capacity(settings, namespace, name, model_name=model_name, now=now)
