"""The adaptive strategy's history task: the fleet's idle runs from Prometheus, once per cycle.

A fixed number of range queries per cycle, whatever the fleet size: ``history_hours / chunk_hours``,
and at most ``refit_hours / chunk_hours`` more with a cold-start budget, whose window is chosen on
the history before its last refit boundary. Retried on transient errors like every source read.
Runs only when a rule of the policy resolves to ``strategy: adaptive``; otherwise the flow does not
call it.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd
from prefect import get_run_logger

from gpuaas.idle_history import read_fleet_history
from gpuaas.policies.reclaim import adaptive_rules, history_start, live_states, percent
from gpuaas.settings import GpuaasSettings
from tasks._options import gpuaas_task

__all__ = ["adaptive_history"]


@gpuaas_task("adaptive-history", io=True, timeout_seconds=600)
def adaptive_history(settings: GpuaasSettings, now: datetime) -> pd.DataFrame:
    """Per Workload uid and adaptive rule: its current idle spell, the window for it and why."""
    policy = settings.policy
    config = policy.reclaim.adaptive
    start = datetime.fromtimestamp(history_start(now.timestamp(), policy), UTC)
    thresholds = sorted({percent(t) for t, _ in adaptive_rules(policy)})
    reading, _ = read_fleet_history(settings, start, now, key="uid", thresholds_pct=thresholds,
                                    chunk_s=config.chunk_hours * 3600.0)
    get_run_logger().info("adaptive history: %d range queries, %d series, %d Workloads over %.1fh",
                          reading.queries, reading.series, max(s.pods for s in reading.streams.values()),
                          (now - start).total_seconds() / 3600.0)
    return live_states(reading.streams, policy, now.timestamp())
