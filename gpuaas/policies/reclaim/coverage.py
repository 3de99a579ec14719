"""When a window's GPU telemetry is complete enough to judge idleness, and when a run is blind.

The rule (one per GPU and window, the workload taking its worst GPU):

1. **Sample-count floor**: at least ``COVERAGE_FLOOR`` (80 %) of the samples the scrape
   interval promises are there.
2. **Longest gap**: no stretch of the window longer than ``MAX_GAP_INTERVALS`` (3) sample
   intervals went without a sample: not before the first sample, not between two samples,
   not after the newest one (the GPU's age: stale telemetry is a gap that reaches ``now``).

Why both: a loaded Prometheus misses or delays a scrape now and then (28 of 30 samples in a
30-minute window); each such gap is one or two intervals, which Prometheus's own lookback
papers over and which cannot hide a busy spell of any length. A real hole (an exporter down for
five minutes, a series that starts late, a sample four minutes old) is a long gap even when the
count still reaches 80 %, and a GPU could have been busy in it. The count floor is the second
line of defence (it needs no subquery). Gaps are measured in PromQL (``gpuaas.sources._promql``)
as upper bounds, so the rule never reads a hole as smaller than it was.

A run whose snapshot leaves most GPU workloads without complete telemetry is **degraded**: it
judged almost nothing, and its summary says so first instead of "no idle workloads".
"""

from __future__ import annotations

import pandas as pd

from gpuaas.models import MAX_GAP_INTERVALS

__all__ = ["COVERAGE_FLOOR", "DEGRADED_UNKNOWN_SHARE", "blind_run_line", "incomplete_detail",
           "max_gap_seconds", "telemetry_complete"]

COVERAGE_FLOOR = 0.8
"""Least share of the expected samples a GPU must have in the window."""
DEGRADED_UNKNOWN_SHARE = 0.5
"""A run whose GPU workloads are at least this share ``unknown`` is degraded."""


def max_gap_seconds(sample_interval_s: float) -> float:
    return MAX_GAP_INTERVALS * sample_interval_s


def telemetry_complete(coverage: pd.Series, longest_gap_s: pd.Series, sample_interval_s: float) -> pd.Series:
    """Per row: the count floor holds and the longest gap is within the limit (missing figures fail)."""
    cov = coverage.astype(float)
    gap = longest_gap_s.astype(float)
    return (cov.fillna(0) >= COVERAGE_FLOOR) & gap.notna() & (gap <= max_gap_seconds(sample_interval_s))


def incomplete_detail(coverage: float | None, longest_gap_s: float | None, age_s: float | None,
                      gpus_seen: float, gpus: float, *, activity_max: float | None = None) -> str:
    """What the evidence showed, for the verdict's reason: ``newest sample 240s old, longest gap 240s, ...``;
    where the samples are there but their activity is not a reading (``activity_max``: None for NaN, or below
    0), that first: it is why a window with every sample reads as unknown."""
    parts = []
    if activity_max is not None and activity_max < 0:
        parts.append(f"GPU activity {activity_max:.2f}, below 0, which no duty cycle reads: check "
                     "GPUAAS_METRICS__GPU_ACTIVITY and any recording rule behind it")
    elif activity_max is None and coverage is not None and not pd.isna(coverage) and coverage > 0:
        parts.append("its samples hold no activity value (NaN)")
    if age_s is not None and not pd.isna(age_s):
        parts.append(f"newest sample {age_s:.0f}s old")
    if longest_gap_s is not None and not pd.isna(longest_gap_s):
        parts.append(f"longest gap {longest_gap_s:.0f}s")
    parts.append("no sample in the window" if coverage is None or pd.isna(coverage) else f"coverage {coverage:.0%}")
    parts.append(f"{gpus_seen:g}/{gpus:g} GPUs seen")
    return ", ".join(parts)


def blind_run_line(unknown: int, gpu_workloads: int, idle: int) -> str | None:
    """The first line of a degraded run's summary, or None when enough telemetry was complete."""
    if gpu_workloads <= 0 or unknown < max(1.0, DEGRADED_UNKNOWN_SHARE * gpu_workloads):
        return None
    judged = "nothing judged idle" if idle == 0 else f"only {idle} judged idle"
    return f"telemetry incomplete for {unknown} of {gpu_workloads} GPU workloads — {judged}"
