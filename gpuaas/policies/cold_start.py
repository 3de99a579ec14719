"""The cold-start budget: pick the adaptive windows that reclaim the most within it.

Why: every window is a bet between GPU-hours saved and users who wait for a cold start.
The operator states the trade-off once, in the policy file, either as a budget of
wake-ups per workload per day or as the price of one cold start in GPU-minutes; this
module turns it into the adaptive rule's three windows by replaying every member of a
small family on the history the caller has (the fleet's own Prometheus history in the
live flow, the calibration half in the benchmark):

* long-spell test: has the workload been idle for at least ``long`` minutes in one run
  that ended before this run started? (``LONG_MIN``)
* yes: reclaim after ``short`` minutes (``SHORT_MIN``); no: after ``cautious`` minutes
  (``CAUTIOUS_MIN``, ``inf`` = never).

Budget in wake-ups: the member with the most reclaimed GPU-hours whose wake-ups per
workload per day stay within the budget (none within it: the member with the fewest).
Price: the member with the most ``GPU-minutes - price x wake-ups``. Ties go to the member
with fewer wake-ups. The family is the one :mod:`gpuaas.policies.adaptive_window`
explains; a small family generalises across a trace whose busy and idle hours differ a
lot, where per-workload cost models fitted to one half did worse on the other.

Pure: the idle-run table in, a chosen ``AdaptiveWindow`` and its history figures out.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import pandas as pd

from gpuaas.policies.adaptive_window import AdaptiveWindow
from gpuaas.policies.replay import replay_runs

__all__ = ["CAUTIOUS_MIN", "LONG_MIN", "SHORT_MIN", "BudgetChoice", "choose_for_budget", "family"]

LONG_MIN = (30.0, 60.0, 120.0)
SHORT_MIN = (1.0, 2.0, 5.0, 10.0, 15.0, 20.0)
CAUTIOUS_MIN = (20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 240.0, math.inf)


@dataclass(frozen=True)
class BudgetChoice:
    """The chosen member and what it did on the history it was chosen on."""

    policy: AdaptiveWindow
    reclaimed_gpu_hours: float
    wakeups: int
    wakeups_per_workload_day: float
    within_budget: bool

    @property
    def why(self) -> str:
        p = self.policy
        cautious = "never" if not math.isfinite(p.cautious_s) else f"{p.cautious_s / 60:g} min"
        fit = "within" if self.within_budget else "over (no member fits; fewest wake-ups)"
        return (f"chosen on the history: {p.short_s / 60:g} min after an idle spell of {p.long_s / 60:g} min, "
                f"else {cautious}; {self.wakeups_per_workload_day:.2f} wake-ups per workload-day, {fit} budget")


def family(base_s: float = 1800.0) -> list[AdaptiveWindow]:
    """Every member of the family, as ``AdaptiveWindow`` factors of ``base_s``."""
    return [AdaptiveWindow(base_s, long / (base_s / 60), short / (base_s / 60), cautious / (base_s / 60))
            for long, short, cautious in itertools.product(LONG_MIN, SHORT_MIN, CAUTIOUS_MIN)]


def choose_for_budget(runs: pd.DataFrame, *, workloads: int, days: float,
                      wakeups_per_workload_per_day: float | None = None,
                      cold_start_gpu_minutes: float | None = None,
                      base_s: float = 1800.0) -> BudgetChoice:
    """The member of :func:`family` that reclaims most on ``runs`` within the budget (set one of the two)."""
    if (wakeups_per_workload_per_day is None) == (cold_start_gpu_minutes is None):
        raise ValueError("give exactly one of wakeups_per_workload_per_day and cold_start_gpu_minutes")
    scale = max(workloads, 1) * max(days, 1e-9)
    scored = []
    for member in family(base_s):
        out = replay_runs(runs, member(runs)) if len(runs) else None
        hours = float(out["reclaimed_gpu_s"].sum()) / 3600.0 if out is not None else 0.0
        wakeups = int(out["wakeup"].sum()) if out is not None else 0
        scored.append((member, hours, wakeups))
    if cold_start_gpu_minutes is not None:
        price = cold_start_gpu_minutes / 60.0
        member, hours, wakeups = max(scored, key=lambda s: (s[1] - price * s[2], -s[2]))
        return BudgetChoice(member, hours, wakeups, wakeups / scale, True)
    assert wakeups_per_workload_per_day is not None
    fits = [s for s in scored if s[2] / scale <= wakeups_per_workload_per_day]
    if fits:
        member, hours, wakeups = max(fits, key=lambda s: (s[1], -s[2]))
        return BudgetChoice(member, hours, wakeups, wakeups / scale, True)
    member, hours, wakeups = min(scored, key=lambda s: (s[2], -s[1]))
    return BudgetChoice(member, hours, wakeups, wakeups / scale, False)
