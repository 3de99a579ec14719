"""The sweep: one open-loop step per rate, lowest first, until two steps fail.

Each step's row is what :mod:`gpuaas.policies.capacity` reads (``rate_rps``, ``replicas``,
``gpus``, latency quantiles, ``quality``, ``client_limited``) plus what a reader needs to trust
it: offered and achieved rate, success ratio, how late requests left. Latency quantiles are
over the requests that succeeded (a fast 503 must not look like a fast answer); failures count
against ``quality``. A step with no success has infinite latency. The climb stops after
``failing_steps_to_stop`` failing steps (the SLO, the quality floor or a client limit): what
lies above is not worth the load on the endpoint.
"""

from __future__ import annotations

import asyncio
import gc
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from gpuaas.loadtest._client import RequestResult, client_for, run_step, warm_up
from gpuaas.loadtest._config import LoadTestConfig
from gpuaas.loadtest._schedule import poisson_schedule
from gpuaas.policies.capacity import sustainable_capacity

__all__ = ["SWEEP_COLUMNS", "SweepRun", "run_sweep", "step_passes", "summarize_step"]

SWEEP_COLUMNS = [
    "rate_rps", "replicas", "gpus", "latency_p50_s", "latency_p95_s", "latency_p99_s", "ttft_p50_s", "ttft_p95_s",
    "quality", "success_ratio", "requests", "successes", "offered_rps", "achieved_rps", "lateness_p50_s",
    "lateness_p99_s", "unsent", "client_limited", "wall_s",
]


def _q(values: Sequence[float], q: float) -> float:
    return float(np.quantile(values, q)) if len(values) else math.inf


def summarize_step(results: Sequence[RequestResult], config: LoadTestConfig, rate: float,
                   schedule: Sequence[float], wall_s: float) -> dict[str, Any]:
    """One sweep row from one step's requests. Pure."""
    ok = [r for r in results if r.ok]
    e2e = [r.e2e_s for r in ok if r.e2e_s is not None]
    ttft = [r.ttft_s for r in ok if r.ttft_s is not None]
    lateness = [r.lateness_s for r in results if r.lateness_s is not None]
    unsent = sum(1 for r in results if r.lateness_s is None)
    n = len(results)
    capped = len(schedule) >= config.max_requests_per_step
    window = min(config.step_seconds, len(schedule) / rate) if capped else config.step_seconds
    ends = [r.scheduled_s + (r.lateness_s or 0.0) + (r.e2e_s or 0.0) for r in ok]
    lateness_p99 = _q(lateness, 0.99) if lateness else 0.0
    return {
        "rate_rps": rate, "replicas": config.replicas, "gpus": config.gpus,
        "latency_p50_s": _q(e2e, 0.50), "latency_p95_s": _q(e2e, 0.95), "latency_p99_s": _q(e2e, 0.99),
        "ttft_p50_s": _q(ttft, 0.50), "ttft_p95_s": _q(ttft, 0.95),
        "quality": sum(r.quality_ok for r in results) / n if n else 0.0,
        "success_ratio": len(ok) / n if n else 0.0,
        "requests": n, "successes": len(ok),
        "offered_rps": n / window if window > 0 else 0.0,
        "achieved_rps": len(ok) / max(ends) if ends and max(ends) > 0 else 0.0,
        "lateness_p50_s": _q(lateness, 0.50) if lateness else 0.0,
        "lateness_p99_s": lateness_p99,
        "unsent": unsent,
        "client_limited": bool(unsent or lateness_p99 > config.max_lateness_seconds),
        "wall_s": wall_s,
    }


def step_passes(row: dict[str, Any], config: LoadTestConfig) -> bool:
    """The capacity policy's own verdict on this one row (no second copy of the rule)."""
    return sustainable_capacity(pd.DataFrame([row]), slo_quantile=config.slo_quantile,
                                slo_seconds=config.slo_seconds, min_quality=config.min_quality).met


@dataclass
class SweepRun:
    config: LoadTestConfig
    steps: list[dict[str, Any]] = field(default_factory=list)
    requests: list[RequestResult] = field(default_factory=list)
    stopped: str = ""

    @property
    def sweep(self) -> pd.DataFrame:
        return pd.DataFrame(self.steps, columns=SWEEP_COLUMNS)

    @property
    def request_frame(self) -> pd.DataFrame:
        return pd.DataFrame([r.to_dict() for r in self.requests], columns=list(RequestResult.__dataclass_fields__))

    @property
    def lateness_p99_s(self) -> float:
        values = [r.lateness_s for r in self.requests if r.lateness_s is not None]
        return _q(values, 0.99) if values else 0.0

    @property
    def client_limited_rates(self) -> list[float]:
        return [float(s["rate_rps"]) for s in self.steps if s["client_limited"]]


def run_sweep(config: LoadTestConfig, progress: Callable[[dict[str, Any]], None] | None = None) -> SweepRun:
    """Climb the rates; refuses a non-loopback URL unless the config allows remote targets."""
    config.check_target()
    # A full collection of the heap the process already holds (Prefect, pandas: hundreds of MB)
    # stalls the event loop for tenths of a second, and every request due meanwhile leaves late.
    # Freezing that heap keeps the collector to what the sweep itself allocates.
    gc.collect()
    gc.freeze()
    try:
        return asyncio.run(_sweep(config, progress))
    finally:
        gc.unfreeze()


async def _sweep(config: LoadTestConfig, progress: Callable[[dict[str, Any]], None] | None) -> SweepRun:
    run = SweepRun(config)
    failing = 0
    async with client_for(config) as client:
        await warm_up(client, config)
        for step, rate in enumerate(config.rates):
            schedule = poisson_schedule(rate, duration_s=config.step_seconds,
                                        max_requests=config.max_requests_per_step, seed=config.seed, step=step)
            results, wall = await run_step(client, config, step, rate, schedule)
            row = summarize_step(results, config, rate, schedule, wall)
            run.steps.append(row)
            run.requests.extend(results)
            if progress is not None:
                progress(row)
            if not step_passes(row, config):
                failing += 1
                if failing >= config.failing_steps_to_stop:
                    left = len(config.rates) - step - 1
                    run.stopped = (f"stopped after {failing} failing steps at {rate:g} rps "
                                   f"({left} higher rates not run)")
                    break
    return run
