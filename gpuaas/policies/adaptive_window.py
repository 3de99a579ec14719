"""The adaptive reclaim window: learn per pod whether its idle spells are long.

Why: on the Alibaba GenAI serving trace most idle runs are short (median about 2 min) and
a fixed 30-minute window wastes the first 30 minutes of every long one, while many runs
end between 30 and 45 minutes (periodic traffic), so the 30-minute mark is also where a
fixed rule buys most of its cold starts. Pods differ: some are idle for hours, others
never are. The policy therefore asks one causal question per idle run, at its start:
*has this pod already been idle for at least twice the base window in one run?*

* yes: its spells are long, reclaim after ``base / 3`` (10 min for a 30-min base);
* no (or no history yet): wait ``4 * base / 3`` (40 min), past the short-spell cluster.

Only runs that ended before the current run started are used (a run's length is known
at its end, which is never after the next run's start), so a decision at time t depends
on samples up to t alone. Three numbers, all tied to the base window; they were chosen on
parts 1 and 2 of the trace, and the same rule beats the fixed one on each part alone.
On both parts (96 pods, 1,673.16 observed GPU-hours, 30 min, <= 5 %): fixed reclaims
305.32 GPU-hours (= the bound) for 384 wake-ups; adaptive 316.59 for 271.
Request rates were tried as a veto (no reclaim within 15 min of a request) and changed
almost nothing: the duty cycle already reflects the traffic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["AdaptiveWindow", "adaptive_windows"]


@dataclass(frozen=True)
class AdaptiveWindow:
    """The policy's parameters, as multiples of the base window."""

    base_s: float = 1800.0
    long_run_factor: float = 2.0
    short_factor: float = 1.0 / 3.0
    cautious_factor: float = 4.0 / 3.0

    def __call__(self, runs: pd.DataFrame) -> np.ndarray:
        return adaptive_windows(runs, self)


def adaptive_windows(runs: pd.DataFrame, params: AdaptiveWindow) -> np.ndarray:
    """One window (s) per run of :func:`gpuaas.policies.replay.idle_runs` (pod, time order)."""
    if runs.empty:
        return np.zeros(0)
    long_run = (runs["length"].to_numpy(dtype=float) >= params.long_run_factor * params.base_s).astype(int)
    per_pod = pd.Series(long_run, index=runs.index).groupby(runs["pod"].to_numpy(), sort=False)
    seen_before = (per_pod.cumsum() - long_run).to_numpy()  # long runs strictly before this one
    return np.where(
        seen_before > 0, params.short_factor * params.base_s, params.cautious_factor * params.base_s
    ).astype(float)
