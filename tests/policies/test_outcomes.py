"""Verified outcomes, by hand: histogram interpolation at bucket edges and inside buckets, batch verdicts.

Cases: threshold on a bound (exact, error 0); inside a bucket (linear, error = the bucket's
share); below the first bound (lower edge 0); beyond the largest finite bound (no
interpolation, the tail is the error); no requests (unknown, never 0 or 1); noisy buckets
from ``increase()`` (made monotone); batch jobs on time, late, failed, requeued (counted once),
outside the window; cost per outcome never inf or 0.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from gpuaas.models import FinishedJob
from gpuaas.policies.cost import batch_outcomes, cost_per_outcome, fraction_within, verified_requests

INF = math.inf
# 100 requests: 10 <= 0.5 s, 40 <= 1 s, 70 <= 2 s, 90 <= 5 s, all 100 below +Inf
HIST = [(0.5, 10.0), (1.0, 40.0), (2.0, 70.0), (5.0, 90.0), (INF, 100.0)]


@pytest.mark.parametrize(
    ("threshold", "fraction", "error", "bucket"),
    [
        (2.0, 0.70, 0.0, (1.0, 2.0)),     # on a bound: 70/100 exactly
        (0.5, 0.10, 0.0, (0.0, 0.5)),     # on the first bound
        (1.5, 0.55, 0.30, (1.0, 2.0)),    # inside (1, 2]: 40 + 30 x 0.5/1 = 55; 30 requests in the bucket
        (3.5, 0.80, 0.20, (2.0, 5.0)),    # inside (2, 5]: 70 + 20 x 1.5/3 = 80
        (0.25, 0.05, 0.10, (0.0, 0.5)),   # below the first bound: lower edge 0, 10 x 0.25/0.5 = 5
        (10.0, 0.90, 0.10, (5.0, INF)),   # beyond the last finite bound: 90 known, the 10 above are the error
    ],
    ids=["on-bound", "first-bound", "inside", "inside-wide", "below-first", "beyond-last"],
)
def test_fraction_within(threshold: float, fraction: float, error: float, bucket: tuple[float, float]) -> None:
    slo = fraction_within(HIST, threshold)
    assert slo.requests == 100
    assert slo.fraction == pytest.approx(fraction)
    assert slo.error_bound == pytest.approx(error)
    assert slo.bucket == bucket


def test_no_requests_is_unknown_not_zero() -> None:
    slo = fraction_within([(1.0, 0.0), (INF, 0.0)], 1.0)
    assert slo.fraction is None and slo.error_bound is None
    assert verified_requests(0.0, slo) == 0.0
    assert verified_requests(5.0, slo) is None  # good requests but no histogram: unknown


def test_noisy_increase_buckets_are_made_monotone() -> None:
    # increase() extrapolates each bucket alone: 40.2 under 1 s but 39.9 under 2 s happens
    slo = fraction_within([(1.0, 40.2), (2.0, 39.9), (INF, 50.0)], 2.0)
    assert slo.within == pytest.approx(40.2) and slo.fraction == pytest.approx(40.2 / 50)


def test_series_summed_over_pods_per_bound() -> None:
    # two pods' rows with the same le are one histogram: 3+1 under 1 s of 4+6
    slo = fraction_within([(1.0, 3.0), (1.0, 1.0), (INF, 4.0), (INF, 6.0)], 1.0)
    assert slo.fraction == pytest.approx(0.4)


@given(st.lists(st.floats(0, 1000), min_size=1, max_size=8), st.floats(0.01, 100))
@example(counts=[1.0], threshold=0.1)  # the threshold on a bound: exact, error 0
def test_true_share_is_within_the_bound(counts: list[float], threshold: float) -> None:
    bounds = [0.1 * 2**i for i in range(len(counts))]
    cum, running = [], 0.0
    for b, c in zip(bounds, counts):
        running += c
        cum.append((b, running))
    cum.append((INF, running + 1.0))
    slo = fraction_within(cum, threshold)
    assert slo.fraction is not None and slo.error_bound is not None
    assert 0.0 <= slo.fraction <= 1.0
    # whatever the requests inside the bucket did, the true share is between the bucket's edges
    hi = max([c for b, c in cum if b <= slo.bucket[1]] or [0.0]) / cum[-1][1]
    # a threshold on the bucket's upper bound is exact: the share is that bound's count (error 0)
    lo = hi if slo.bucket[1] == threshold else max([c for b, c in cum if b <= slo.bucket[0]] or [0.0]) / cum[-1][1]
    assert lo - 1e-9 <= slo.fraction <= hi + 1e-9
    assert hi - lo == pytest.approx(slo.error_bound, abs=1e-9)


T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _job(owner: str, finished_min: float, deadline_min: float | None, reason: str = "Succeeded",
         workload: str | None = None) -> FinishedJob:
    return FinishedJob("forecast", workload or f"raycluster-{owner}", workload or owner, "RayCluster", owner,
                       T0 + timedelta(minutes=finished_min),
                       reason, None if deadline_min is None else T0 + timedelta(minutes=deadline_min))


def test_batch_verdicts() -> None:
    jobs = [
        _job("ontime", 60, 120),
        _job("at-deadline", 120, 120),             # finishing exactly at the deadline is in time
        _job("late", 90, 60),
        _job("failed", 30, 120, reason="Failed"),
        _job("nodeadline", 45, None),
        _job("before-window", -10, 120),           # finished before the window: not this report's
        _job("requeued", 50, 120, reason="Failed", workload="wl-a"),
        _job("requeued", 100, 120, workload="wl-b"),  # the same job's second Workload: counted once
    ]
    verdicts = {o.job: o.verdict for o in batch_outcomes(jobs, T0, T0 + timedelta(hours=3), ["Succeeded"])}
    assert verdicts == {"ontime": "on-time", "at-deadline": "on-time", "late": "late", "failed": "failed",
                        "nodeadline": "on-time", "requeued": "on-time"}


@pytest.mark.parametrize(("cost", "outcomes", "expected"),
                         [(100.0, 50.0, 2.0), (100.0, 0.0, None), (None, 5.0, None), (0.0, 5.0, 0.0),
                          (12.0, None, None)],
                         ids=["plain", "no-outcome", "cost-unknown", "free", "outcomes-unknown"])
def test_cost_per_outcome(cost: float | None, outcomes: float | None, expected: float | None) -> None:
    assert cost_per_outcome(cost, outcomes) == expected
