"""Capacity tasks for any flow: a service's measured per-replica rate (a sweep's own capacity is
``gpuaas.operations.load_test.plan``).

``serving_capacity_estimate`` is what the cost report ("replicas needed for the forecast") and
the planners call: the number, its source (sweep file or load-test run) and its age.
"""

from __future__ import annotations

from datetime import datetime

from gpuaas.loadtest import serving_capacity
from gpuaas.models import CapacityEstimate
from gpuaas.settings import GpuaasSettings
from tasks._options import gpuaas_task

__all__ = ["serving_capacity_estimate"]


@gpuaas_task("serving-capacity", retries=2, retry_delay_seconds=2)
def serving_capacity_estimate(settings: GpuaasSettings, namespace: str, name: str, model_name: str | None = None,
                              now: datetime | None = None) -> CapacityEstimate | None:
    """The sustainable per-replica rate of a service with its source and age (None: never measured)."""
    return serving_capacity(settings, namespace, name, model_name=model_name, now=now)
