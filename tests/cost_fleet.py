"""The default scenario for the cost report tests, started on an hour boundary.

CPU and RAM are priced (``CPU_PRICE`` per core-hour, ``RAM_PRICE`` per GiB-hour; every pod of the
scenario holds 4 cores and 32 GiB: $0.32 per pod-hour), so a report that mixed OpenCost's total
cost with its GPU cost would show it. The window is the whole history, ``[S, S + 2 h]`` with ``S``
on the hour, so the scenario's hourly quality cycle (``llm-eval``: score 0.92 for minutes 0-40 of each hour, 0.7 after) falls
on the report's 5-minute quality steps exactly: steps ending at minutes 5..35 count, the five
ending at 40..60 do not (each holds a sample below 0.8), i.e. 35 of every 60 minutes.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gpuaas.cluster.clock import ManualClock
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.scenario import Scenario, default_scenario
from gpuaas.settings import GpuaasSettings, MetricNames, load_settings

__all__ = ["COST_HISTORY", "COST_POLICY", "CPU_PRICE", "POD_EXTRA_PER_HOUR", "RAM_PRICE", "cost_cluster",
           "cost_settings"]

COST_POLICY = Path(__file__).resolve().parents[1] / "gpuaas" / "cluster" / "scenarios" / "default-policy.yaml"
COST_HISTORY = timedelta(hours=2)
CPU_PRICE, RAM_PRICE = 0.04, 0.005
POD_EXTRA_PER_HOUR = 4 * CPU_PRICE + 32 * RAM_PRICE
"""CPU and RAM of one pod of the scenario per hour: $0.32."""


def cost_cluster(data_dir: Path, scenario: Scenario | None = None, end: datetime | None = None,
                 history: timedelta = COST_HISTORY) -> EmbeddedCluster:
    """``scenario`` (default: the default scenario) with CPU and RAM priced, its ``history`` ending at ``end``
    (default: the last full hour)."""
    end = end or datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    scenario = scenario or default_scenario()
    priced = scenario.model_copy(update={"pools": [
        pool.model_copy(update={"cpu_hourly_price": CPU_PRICE, "ram_gib_hourly_price": RAM_PRICE})
        for pool in scenario.pools]})
    return EmbeddedCluster(priced, data_dir, seed=5, history=history, clock=ManualClock(end - history))


def cost_settings(cluster: EmbeddedCluster, **overrides: Any) -> GpuaasSettings:
    values: dict[str, Any] = {
        "kubeconfig": cluster.kubeconfig, "prometheus_url": cluster.prometheus_url,
        "opencost_url": cluster.opencost_url, "policy_file": COST_POLICY, "nvml": "off",
        "metrics": MetricNames(sample_interval_seconds=cluster.step.total_seconds()),
        "data_dir": cluster.data_dir / "gpuaas-data",  # the store the report reads capacity from: the test's own
    }
    values.update(overrides)
    return load_settings(**values)
