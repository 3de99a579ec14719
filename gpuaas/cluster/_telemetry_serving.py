"""vLLM series for serving workloads, generated from a scenario's traffic profile.

Each serving pod keeps cumulative counters (requests by ``finished_reason``, the
``vllm:e2e_request_latency_seconds`` histogram) that grow by the requests of each interval;
gauges (running, waiting, KV-cache usage) follow Little's law. Latencies are log-normal
around the scenario's median, spread over vLLM's real bucket bounds. Counts are whole numbers
with the fractional remainder carried to the next interval, so totals are exact and the
output is deterministic without any random draw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from gpuaas.cluster._profiles import level
from gpuaas.cluster._scenario_models import Serving

__all__ = ["E2E_BUCKETS", "FINISHED_REASONS", "ServingCounters"]

Sample = tuple[str, dict[str, str], float, float]

E2E_BUCKETS: tuple[float, ...] = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
    120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)
"""Bucket bounds of ``vllm:e2e_request_latency_seconds`` as vLLM V1 exposes them."""

FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")
_LENGTH_SHARE = 0.03


def _normal_cdf(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


@dataclass
class ServingCounters:
    """Cumulative vLLM counters for one pod of one service."""

    serving: Serving
    namespace: str
    pod: str
    carry: float = 0.0
    total: int = 0
    by_reason: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FINISHED_REASONS, 0))
    buckets: list[int] = field(default_factory=lambda: [0] * len(E2E_BUCKETS))
    latency_sum: float = 0.0
    rps: float = 0.0
    quality: float | None = None
    """The scenario's quality score at the last step (``Serving.quality``), None when it has none."""

    def advance(self, at: datetime, dt: timedelta, running_for: timedelta, pods: int) -> None:
        """Add the requests this pod served during ``(at - dt, at]``."""
        self.rps = level(self.serving.requests_per_second, at, running_for) / max(pods, 1)
        if self.serving.quality is not None:
            self.quality = level(self.serving.quality, at, running_for)
        expected = self.rps * dt.total_seconds() + self.carry
        n = int(expected)
        self.carry = expected - n
        if n == 0:
            return
        s = self.serving
        errors = round(n * s.error_ratio)
        aborts = min(round(n * s.abort_ratio), n - errors)
        length = round((n - errors - aborts) * _LENGTH_SHARE)
        self.by_reason["abort"] += aborts
        self.by_reason["error"] += errors
        self.by_reason["length"] += length
        self.by_reason["stop"] += n - errors - aborts - length
        mu = math.log(s.latency_seconds)
        for i, bound in enumerate(E2E_BUCKETS):
            self.buckets[i] += round(n * _normal_cdf((math.log(bound) - mu) / s.latency_sigma))
        self.total += n
        self.latency_sum += n * s.latency_seconds * math.exp(s.latency_sigma**2 / 2)

    def samples(self, ts: float) -> list[Sample]:
        s = self.serving
        base = {"engine": "0", "model_name": s.model_name, "namespace": self.namespace, "pod": self.pod}
        mean_latency = s.latency_seconds * math.exp(s.latency_sigma**2 / 2)
        in_flight = self.rps * mean_latency
        running = min(in_flight, float(s.max_running))
        out: list[Sample] = [
            ("vllm:num_requests_running", dict(base), round(running, 3), ts),
            ("vllm:num_requests_waiting", dict(base), round(max(0.0, in_flight - running), 3), ts),
            ("vllm:kv_cache_usage_perc", dict(base), round(min(1.0, in_flight / s.max_running), 6), ts),
        ]
        out.extend(("vllm:request_success_total", {**base, "finished_reason": reason}, float(count), ts)
                   for reason, count in self.by_reason.items())
        for bound, count in zip(E2E_BUCKETS, self.buckets, strict=True):
            out.append(("vllm:e2e_request_latency_seconds_bucket", {**base, "le": repr(bound)}, float(count), ts))
        out.append(("vllm:e2e_request_latency_seconds_bucket", {**base, "le": "+Inf"}, float(self.total), ts))
        out.append(("vllm:e2e_request_latency_seconds_sum", dict(base), round(self.latency_sum, 6), ts))
        out.append(("vllm:e2e_request_latency_seconds_count", dict(base), float(self.total), ts))
        if self.quality is not None:
            quality_labels = {k: v for k, v in base.items() if k != "engine"}
            out.append((s.quality_metric, quality_labels, round(self.quality, 6), ts))
        return out
