"""The sweep: one open-loop step per rate, lowest first, until two steps fail.

Each step sends a warm-up and then its steady part at the same rate; the row is measured on the
steady part only (requests due after the warm-up). Each step's row is what
:mod:`gpuaas.policies.cost.capacity` reads (``rate_rps``, ``replicas``, ``gpus``, latency quantiles,
``quality``, ``client_limited``, ``achieved_ratio``, ``latency_growth``) plus what a reader needs to
trust it: offered and achieved rate, success ratio, how late requests left, TTFT and inter-token
latency quantiles, input and output tokens per second. Latency quantiles are over the requests
that succeeded (a fast 503 must not look like a fast answer); failures count against ``quality``.
A step with no success has infinite latency.

Steady means: the server answered at 95 % of the offered rate or more (``achieved_ratio``: the
rate the steady part's answers came back at over the rate its requests were due, each over the
middle 80 % of its times), and latency did not
keep growing (``latency_growth``: the median of the steady part's last third over its first).
A queue that grows for the whole step passes a p95 computed over it while it is still short;
these two say the rate is not sustainable. The climb stops after ``failing_steps_to_stop``
failing steps: what lies above is not worth the load on the endpoint.
"""

from __future__ import annotations

import asyncio
import gc
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from gpuaas.loadtest._client import RequestResult, client_for, run_step, warm_up
from gpuaas.loadtest._config import LoadTestConfig
from gpuaas.loadtest._schedule import poisson_schedule
from gpuaas.policies.cost import sustainable_capacity

__all__ = ["SWEEP_COLUMNS", "SweepRun", "run_sweep", "step_passes", "summarize_step"]

SWEEP_COLUMNS = [
    "rate_rps", "replicas", "gpus", "latency_p50_s", "latency_p95_s", "latency_p99_s", "ttft_p50_s", "ttft_p95_s",
    "ttft_p99_s", "itl_p50_s", "itl_p95_s", "itl_p99_s", "quality", "success_ratio", "requests", "successes",
    "warmup_requests", "offered_rps", "achieved_rps", "achieved_ratio", "latency_growth", "latency_growth_s",
    "input_tokens_per_s", "output_tokens_per_s", "lateness_p50_s", "lateness_p99_s", "unsent", "client_limited",
    "warmup_s", "step_s", "wall_s",
]


def _q(values: Sequence[float], q: float) -> float:
    return float(np.quantile(values, q)) if len(values) else math.inf


def _growth(ok: Sequence[RequestResult]) -> tuple[float, float]:
    """(ratio, seconds): median e2e of the last third of the steady part over (and minus) its first third,
    by due time; (1, 0) when a third has fewer than five answers to say anything."""
    ordered = sorted(ok, key=lambda r: r.scheduled_s)
    third = len(ordered) // 3
    if third < 5:
        return 1.0, 0.0
    first = float(np.median([r.e2e_s for r in ordered[:third] if r.e2e_s is not None]))
    last = float(np.median([r.e2e_s for r in ordered[-third:] if r.e2e_s is not None]))
    return (last / first if first > 0 else 1.0), last - first


def _throughput(steady: Sequence[RequestResult], ok: Sequence[RequestResult], span: float) -> tuple[float, float]:
    """(achieved requests/s, achieved / offered) of the steady part.

    The rate its answers came back at (successes between the 10th and 90th percentile of their completion
    times) against the rate its requests were due (the same share of the due times): a server that keeps
    up returns answers as fast as they arrive, whatever its latency; one that falls behind stretches them
    over a longer time, and a 503 is no answer. Percentiles rather than the first and last request, so
    that one slow answer at either end does not decide the verdict. The achieved rate is the offered rate
    (the steady part's requests over its length) times that ratio: the percentile span of a few dozen points
    is shorter than 80 % of the step, and 0.8 n over it would read above the offered rate.
    """
    due = np.asarray([r.scheduled_s for r in steady], dtype=float)
    done = np.asarray([d for d in (r.done_s for r in ok) if d is not None], dtype=float)
    if len(due) < 10 or len(done) < 10:
        achieved = len(done) / span
        return achieved, (min(achieved / (len(due) / span), 1.0) if len(due) else 0.0)
    due_span = float(np.quantile(due, 0.9) - np.quantile(due, 0.1))
    done_span = float(np.quantile(done, 0.9) - np.quantile(done, 0.1))
    if due_span <= 0 or done_span <= 0:
        return len(done) / span, 1.0
    ratio = min((len(done) / done_span) / (len(due) / due_span), 1.0)
    return ratio * len(due) / span, ratio


def summarize_step(results: Sequence[RequestResult], config: LoadTestConfig, rate: float,
                   schedule: Sequence[float], wall_s: float) -> dict[str, Any]:
    """One sweep row from one step's requests, judged on its steady part. Pure."""
    steady = [r for r in results if r.measured]
    ok = [r for r in steady if r.ok]
    e2e = [r.e2e_s for r in ok if r.e2e_s is not None]
    ttft = [r.ttft_s for r in ok if r.ttft_s is not None]
    itl = [r.itl_s for r in ok if r.itl_s is not None]
    lateness = [r.lateness_s for r in results if r.lateness_s is not None]
    unsent = sum(1 for r in results if r.lateness_s is None)
    n = len(steady)
    span = config.step_seconds
    offered = n / span
    achieved, ratio = _throughput(steady, ok, span)
    growth, growth_s = _growth(ok)
    lateness_p99 = _q(lateness, 0.99) if lateness else 0.0
    return {
        "rate_rps": rate, "replicas": config.replicas, "gpus": config.gpus,
        "latency_p50_s": _q(e2e, 0.50), "latency_p95_s": _q(e2e, 0.95), "latency_p99_s": _q(e2e, 0.99),
        "ttft_p50_s": _q(ttft, 0.50), "ttft_p95_s": _q(ttft, 0.95), "ttft_p99_s": _q(ttft, 0.99),
        "itl_p50_s": _q(itl, 0.50), "itl_p95_s": _q(itl, 0.95), "itl_p99_s": _q(itl, 0.99),
        "quality": sum(r.quality_ok for r in steady) / n if n else 0.0,
        "success_ratio": len(ok) / n if n else 0.0,
        "requests": n, "successes": len(ok), "warmup_requests": len(results) - n,
        "offered_rps": offered, "achieved_rps": achieved,
        "achieved_ratio": ratio,
        "latency_growth": growth, "latency_growth_s": growth_s,
        "input_tokens_per_s": sum(r.prompt_tokens for r in ok) / span,
        "output_tokens_per_s": sum(r.output_tokens for r in ok) / span,
        "lateness_p50_s": _q(lateness, 0.50) if lateness else 0.0,
        "lateness_p99_s": lateness_p99,
        "unsent": unsent,
        "client_limited": bool(unsent or lateness_p99 > config.max_lateness_seconds),
        "warmup_s": config.warmup_seconds, "step_s": config.step_seconds, "wall_s": wall_s,
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
    ignore_eos: bool = False
    """Whether the server took ``ignore_eos`` (outputs of the asked length)."""

    @property
    def sweep(self) -> pd.DataFrame:
        return pd.DataFrame(self.steps, columns=SWEEP_COLUMNS)

    @property
    def request_frame(self) -> pd.DataFrame:
        return pd.DataFrame([r.to_dict() for r in self.requests], columns=list(RequestResult.__dataclass_fields__))

    @property
    def unreached(self) -> str | None:
        """The commonest error when no request could connect (nothing listens, a wrong host): then the sweep
        measured the URL, not a server, and its verdict must say so before any latency. A server too slow
        to answer is not this: its requests connected and timed out."""
        sent = [r for r in self.requests if r.lateness_s is not None]
        if not sent or not all(r.status is None and (r.error or "").startswith("ConnectError") for r in sent):
            return None
        return Counter(r.error for r in sent).most_common(1)[0][0]

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
        ignore_eos = run.ignore_eos = await warm_up(client, config)
        for step, rate in enumerate(config.rates):
            schedule = poisson_schedule(rate, duration_s=config.sent_seconds,
                                        max_requests=config.max_requests_per_step, seed=config.seed, step=step)
            results, wall = await run_step(client, config, step, rate, schedule, ignore_eos)
            row = summarize_step(results, config, rate, schedule, wall)
            run.steps.append(row)
            run.requests.extend(results)
            if progress is not None:
                progress(row)
            if not step_passes(row, config):
                failing += 1
                if failing >= config.failing_steps_to_stop:
                    left = len(config.rates) - step - 1
                    not_run = f" ({left} higher rate{'' if left == 1 else 's'} not run)" if left else ""
                    run.stopped = (f"stopped after {failing} failing step{'' if failing == 1 else 's'} at "
                                   f"{rate:g} rps{not_run}")
                    break
    return run
