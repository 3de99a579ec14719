"""Verified outcomes: what a GPU's work produced that someone can rely on. Pure functions.

A serving request is a verified outcome when it finished normally (its ``finished_reason`` is
one of the service's good reasons: vLLM's ``request_success_total`` also counts ``abort`` and
``error``), within the latency SLO, and while the service's quality metric, where one is
configured, stood at or above its threshold. A batch job is one when its Kueue Workload
finished successfully (``Finished=True`` with a success reason) no later than its
``gpuaas.io/deadline``; a job is counted once however many Workloads it went through. For the cost
report a job without a deadline that finished successfully is ``no-deadline``: nothing says it was
in time, so it is not a verified outcome (the report says how many there were).

The latency share comes from a classic Prometheus histogram, which only knows cumulative
counts at its bucket bounds. Inside the bucket that holds the threshold the share is linearly
interpolated (as ``histogram_quantile`` does for the inverse question); the true share lies
somewhere between the counts at the bucket's two bounds, so the error bound is the share of
requests in that bucket, and the bucket itself is reported next to it.

The histogram counts every finished request, aborted and failed ones too, so good requests within
the SLO are estimated as ``good x share within``. Their true number lies between
``within_low - (all - good)`` (every bad request was fast) and ``min(good, within_high)`` (every
slow request was a bad one), ``within_low``/``within_high`` being the bucket's bounds:
``verified_bounds`` gives that range.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from gpuaas.models import FinishedJob

__all__ = [
    "BatchOutcome",
    "SloFraction",
    "batch_outcomes",
    "fraction_within",
    "verified_bounds",
    "verified_requests",
]


@dataclass(frozen=True)
class SloFraction:
    """Share of requests at or under a latency threshold, with how wrong it can be."""

    requests: float
    """All requests the histogram counted (its ``+Inf`` bucket)."""
    within: float
    """Requests at or under the threshold (interpolated inside the threshold's bucket)."""
    fraction: float | None
    """``within / requests``; None when there were no requests (unknown, not 0 and not 1)."""
    error_bound: float | None
    """Largest possible distance of ``fraction`` from the true share: the bucket's share of requests."""
    bucket: tuple[float, float]
    """Bounds (seconds) of the bucket holding the threshold; its width is the resolution."""
    within_low: float | None = None
    """Fewest requests that can be at or under the threshold (the count at the bucket's lower bound)."""
    within_high: float | None = None
    """Most requests that can be at or under the threshold (the count at the bucket's upper bound)."""


def _cumulative(buckets: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Sorted ``(le, count)`` pairs made monotone: ``increase()`` of each bucket is extrapolated
    separately, so a bucket can come out a hair below the one under it."""
    merged: dict[float, float] = {}
    for le, count in buckets:
        if math.isnan(count):
            continue
        merged[float(le)] = merged.get(float(le), 0.0) + float(count)
    out: list[tuple[float, float]] = []
    running = 0.0
    for le in sorted(merged):
        running = max(running, merged[le])
        out.append((le, running))
    return out


def fraction_within(buckets: Iterable[tuple[float, float]], threshold: float) -> SloFraction:
    """The share of a histogram's requests at or under ``threshold`` seconds.

    ``buckets`` are cumulative ``(le, count)`` pairs, the ``+Inf`` bucket included (without it
    the largest bound's count is taken as the total). A threshold on a bound is exact (error
    0); beyond the largest finite bound nothing can be interpolated and the share is the
    largest bound's, with every request above it counted in the error bound.
    """
    cum = _cumulative(buckets)
    if not cum:
        return SloFraction(0.0, 0.0, None, None, (0.0, math.inf))
    total = cum[-1][1]
    lower, lower_count = 0.0, 0.0
    for le, count in cum:
        if le >= threshold:
            if math.isinf(le):
                within, spread = lower_count, count - lower_count
            elif le == threshold:
                within, spread = count, 0.0
            else:
                within = lower_count + (count - lower_count) * (threshold - lower) / (le - lower)
                spread = count - lower_count
            upper = le
            break
        lower, lower_count = le, count
    else:  # no +Inf bucket and the threshold is beyond every bound: all requests are within
        within, spread, upper = total, 0.0, math.inf
    if total <= 0:
        return SloFraction(0.0, 0.0, None, None, (lower, upper))
    return SloFraction(total, within, within / total, spread / total, (lower, upper),
                       within_low=lower_count if spread else within, within_high=lower_count + spread if spread else within)


def verified_requests(good: float, slo: SloFraction) -> float | None:
    """Good requests that also met the SLO; None when the latency share is unknown."""
    if slo.fraction is None:
        return None if good > 0 else 0.0
    return good * slo.fraction


def verified_bounds(good: float, slo: SloFraction) -> tuple[float, float] | None:
    """The range the true number of good requests within the SLO lies in (see the module docstring);
    None when the latency share is unknown."""
    if slo.fraction is None or slo.within_low is None or slo.within_high is None:
        return None if good > 0 else (0.0, 0.0)
    return max(slo.within_low - (slo.requests - good), 0.0), min(good, slo.within_high)


@dataclass(frozen=True)
class BatchOutcome:
    """One batch job's verdict in a window: ``on-time`` is the only verified outcome."""

    namespace: str
    job: str
    owner_kind: str
    finished_at: datetime
    deadline: datetime | None
    verdict: str
    """``on-time`` | ``no-deadline`` (succeeded, no ``gpuaas.io/deadline``: not verified) | ``late`` | ``failed``."""
    attempt_created_at: datetime | None = None
    """Creation of the Workload that produced the verdict (its attempt); None: unknown, every attempt counts."""

    @property
    def verified(self) -> bool:
        return self.verdict == "on-time"


def batch_outcomes(jobs: Sequence[FinishedJob], start: datetime, end: datetime,
                   success_reasons: Sequence[str], require_deadline: bool = False) -> list[BatchOutcome]:
    """One verdict per job (namespace, owner) that finished in ``(start, end]``.

    ``require_deadline`` (the cost report's rule): a success without a deadline is ``no-deadline``, not
    ``on-time``; without it such a job is judged on success alone.

    A job whose Workload was replaced (a requeued RayCluster gets a new Workload) is counted
    once: its best verdict wins (a success before the deadline over one without a deadline over a late one
    over a failure).
    """
    rank = {"on-time": 0, "no-deadline": 1, "late": 2, "failed": 3}
    best: dict[tuple[str, str, str], BatchOutcome] = {}
    for job in jobs:
        if not (start < job.finished_at <= end):
            continue
        if job.reason not in success_reasons:
            verdict = "failed"
        elif job.deadline is None:
            verdict = "no-deadline" if require_deadline else "on-time"
        elif job.finished_at > job.deadline:
            verdict = "late"
        else:
            verdict = "on-time"
        key = (job.namespace, job.owner_kind, job.owner_name or job.workload)
        outcome = BatchOutcome(job.namespace, key[2], job.owner_kind, job.finished_at, job.deadline, verdict,
                               job.created_at)
        held = best.get(key)
        if held is None or (rank[verdict], outcome.finished_at) < (rank[held.verdict], held.finished_at):
            best[key] = outcome
    return sorted(best.values(), key=lambda o: (o.namespace, o.job))
