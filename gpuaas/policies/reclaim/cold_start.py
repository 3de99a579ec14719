"""The cold-start budget: the survival window that reclaims the most within it, or the fixed rule.

Why: every window is a bet between GPU-hours saved and users who wait for a cold start.
The operator states the trade-off once, in the policy file, either as a budget of
wake-ups per workload per day or as the price of one cold start in GPU-minutes; this
module turns it into a :class:`~gpuaas.policies.reclaim.spell_survival.SurvivalWindow` fitted on
the history the caller has (the fleet's own Prometheus history in the live flow, the
calibration part in the frontier):

* price: the survival window fitted at that price;
* budget in wake-ups: the survival window fitted at each price of ``PRICES_GPU_MIN`` is
  replayed on the history, and the one with the most GPU-hours whose wake-ups per
  workload per day stay within the budget wins (ties: fewer wake-ups);
* either way the fixed windows (``FIXED_FALLBACK_MIN``) compete on the same terms, and
  only spells whose end the history has seen are scored.

Never worse than the fixed rule, as far as the history can tell: the chosen price is
fitted again on the earlier half of the history and replayed on the later half, beside
every fixed window there. If it reclaims less than the fixed windows do at the same
wake-ups (linear between them), the choice falls back to the best candidate that held
on the later half, the fixed windows included (with a price: the one with the most
GPU-minutes minus price x wake-ups), and a fixed fallback says why.

Pure: the idle-run table in, a chosen window rule and its history figures out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Protocol

import numpy as np
import pandas as pd

from gpuaas.policies.reclaim.spell_survival import (
    WINDOWS_MIN,
    Outcomes,
    SurvivalEvidence,
    SurvivalWindow,
    context_band,
    outcomes,
)

__all__ = ["FIXED_FALLBACK_MIN", "PRICES_GPU_MIN", "BudgetChoice", "FixedWindow", "WindowRule", "choose_for_budget",
           "choose_for_budgets", "fixed_frontier_at"]

PRICES_GPU_MIN = tuple(sorted({0.0, *(round(float(p), 1) for p in np.geomspace(1.0, 1200.0, 48))}))
"""Cold-start prices (GPU-minutes per wake-up) a wake-up budget is met with: 0, then 1 to 1,200 in 48
geometric steps. Dense, because the windows a price gives jump between prices, and a budget can
only be met as closely as the ladder allows (with 15 steps, budgets of 8 and 16 wake-ups a day
find no survival window between two jumps on the GenAI trace and take the fixed rule)."""
FIXED_FALLBACK_MIN = (5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 240.0, math.inf)


class WindowRule(Protocol):
    """A reclaim window per idle run, and the reason for it in the audit log's words."""

    def __call__(self, runs: pd.DataFrame) -> np.ndarray: ...

    def why(self, runs: pd.DataFrame) -> list[str]: ...


@dataclass(frozen=True)
class FixedWindow:
    """The fixed rule as a window rule, with the reason it was chosen."""

    window_s: float
    reason: str

    def __call__(self, runs: pd.DataFrame) -> np.ndarray:
        return np.full(len(runs), self.window_s)

    def why(self, runs: pd.DataFrame) -> list[str]:
        shown = "never" if not math.isfinite(self.window_s) else f"{self.window_s / 60:g} min"
        return [f"fixed {shown} window: {self.reason}"] * len(runs)


Candidate = SurvivalWindow | FixedWindow


@dataclass(frozen=True)
class BudgetChoice:
    """The chosen rule and what it did on the history it was chosen on."""

    policy: Candidate
    reclaimed_gpu_hours: float
    wakeups: int
    wakeups_per_workload_day: float
    within_budget: bool

    @property
    def why(self) -> str:
        fit = "within" if self.within_budget else "over (nothing fits; fewest wake-ups)"
        what = (f"survival window at {self.policy.price_gpu_min:g} GPU-min per wake-up"
                if isinstance(self.policy, SurvivalWindow) else "fixed window")
        return (f"chosen on the history: {what}; {self.wakeups_per_workload_day:.2f} wake-ups per workload-day, "
                f"{fit} budget")


@dataclass(frozen=True, eq=False)
class _Replayed:
    """A history replayed once at every window any candidate can give, so that scoring a rule is a lookup."""

    runs: pd.DataFrame
    seen: Outcomes
    done: np.ndarray
    """The runs whose end is known (not still open when the history ends): the only ones scored."""
    earlier_evidence: dict[tuple[float, tuple[float, ...]], SurvivalEvidence] = field(default_factory=dict)
    """The earlier half of the history as evidence, per look-back and bands."""
    bands: dict[tuple[float, tuple[float, ...]], np.ndarray] = field(default_factory=dict)
    """Each run's context band, per look-back and bands."""

    def score(self, rule: Candidate, mask: np.ndarray | None = None) -> tuple[float, int]:
        """GPU-hours and wake-ups of ``rule`` on the completed runs where ``mask`` holds (all by default)."""
        windows = rule.of_bands(self._bands(rule)) if isinstance(rule, SurvivalWindow) else rule(self.runs)
        rows = np.searchsorted(np.asarray(self.seen.windows_s), windows)
        cols = np.arange(len(self.runs))
        keep = self.done if mask is None else mask & self.done
        return (float(self.seen.saved_gpu_min[rows, cols][keep].sum()) / 60.0,
                int(self.seen.wakeups[rows, cols][keep].sum()))

    def _bands(self, rule: SurvivalWindow) -> np.ndarray:
        key = (rule.lookback_s, rule.edges)
        if key not in self.bands:
            self.bands[key] = context_band(self.runs, rule.lookback_s, rule.edges)
        return self.bands[key]

    @cached_property
    def _halves(self) -> tuple[np.ndarray, np.ndarray]:
        start = self.runs["start"].to_numpy(dtype=float)
        middle = (float(start.min()) + float(self.runs["end"].to_numpy(dtype=float).max())) / 2.0
        return start < middle, start >= middle

    def holds_on_later_half(self, rule: SurvivalWindow) -> bool:
        """Fitted on the earlier half of the history, does ``rule``'s price beat the fixed rule on the later half?"""
        earlier, later = self._halves
        if not earlier.any() or not later.any():
            return True
        key = (rule.lookback_s, rule.edges)
        if key not in self.earlier_evidence:  # one per context definition, fitted at every price checked
            self.earlier_evidence[key] = SurvivalEvidence.of(self.runs, history=self.seen, mask=earlier,
                                                             lookback_s=rule.lookback_s, edges=rule.edges)
        evidence = self.earlier_evidence[key]
        hours, wakeups = self.score(evidence.fit(rule.price_gpu_min), later)
        ref = fixed_frontier_at(self._fixed_on_later_half, wakeups)
        return ref is None or hours >= ref - 1e-9

    @cached_property
    def _fixed_on_later_half(self) -> list[tuple[int, float]]:
        """``(wake-ups, GPU-hours)`` of every fixed window on the later half of the history."""
        later = self._halves[1]
        return [(k, h) for h, k in (self.score(FixedWindow(m * 60.0, ""), later) for m in FIXED_FALLBACK_MIN)]


def fixed_frontier_at(points: Sequence[tuple[int, float]], wakeups: int) -> float | None:
    """The fixed rule's GPU-hours at ``wakeups``, from its windows' ``(wake-ups, GPU-hours)``: the most
    any window reaches with those wake-ups, linear between them; None outside their range (no
    extrapolation)."""
    best: dict[int, float] = {}
    for k, hours in points:
        best[k] = max(hours, best.get(k, -math.inf))
    if not best:
        return None
    wk = np.array(sorted(best), dtype=float)
    if not wk[0] <= wakeups <= wk[-1]:
        return None
    return float(np.interp(wakeups, wk, np.array([best[int(k)] for k in wk], dtype=float)))


def choose_for_budget(runs: pd.DataFrame, *, workloads: int, days: float,
                      wakeups_per_workload_per_day: float | None = None,
                      cold_start_gpu_minutes: float | None = None,
                      base_s: float = 1800.0) -> BudgetChoice:
    """The rule that reclaims most on ``runs`` within the budget (set exactly one of the two).

    ``base_s`` is the rule's own window: the fixed fallback when the history is empty."""
    if (wakeups_per_workload_per_day is None) == (cold_start_gpu_minutes is None):
        raise ValueError("give exactly one of wakeups_per_workload_per_day and cold_start_gpu_minutes")
    if cold_start_gpu_minutes is not None:
        return _choose(runs, workloads=workloads, days=days, budgets=[None], price=cold_start_gpu_minutes,
                       base_s=base_s)[0]
    return _choose(runs, workloads=workloads, days=days, budgets=[wakeups_per_workload_per_day], base_s=base_s)[0]


def choose_for_budgets(runs: pd.DataFrame, *, workloads: int, days: float, budgets: Sequence[float],
                       base_s: float = 1800.0) -> list[BudgetChoice]:
    """:func:`choose_for_budget` for several wake-up budgets at once: the history is replayed and
    the candidates fitted once (what the frontier needs, one row per budget)."""
    return _choose(runs, workloads=workloads, days=days, budgets=list(budgets), base_s=base_s)


def _choose(runs: pd.DataFrame, *, workloads: int, days: float, budgets: Sequence[float | None],
            price: float | None = None, base_s: float) -> list[BudgetChoice]:
    """One choice per budget (``None``: by ``price`` instead)."""
    scale = max(workloads, 1) * max(days, 1e-9)
    runs = runs.reset_index(drop=True)
    # Spells still open when the history ends are scored by nobody: their end is not known yet.
    done = runs["ended_by"].to_numpy() != "end" if len(runs) else np.zeros(0, dtype=bool)
    if not done.any():
        return [BudgetChoice(FixedWindow(base_s, "no completed idle spell in the history yet"), 0.0, 0, 0.0, True)
                for _ in budgets]
    replayed = _Replayed(runs, outcomes(runs, sorted({*WINDOWS_MIN, *FIXED_FALLBACK_MIN})), done)
    prices = PRICES_GPU_MIN if price is None else (price,)
    evidence = SurvivalEvidence.of(runs, history=replayed.seen)
    rules: list[Candidate] = [evidence.fit(p) for p in prices]
    rules += [FixedWindow(m * 60.0, "no survival window beat it on the history") for m in FIXED_FALLBACK_MIN]
    candidates = [(rule, *replayed.score(rule)) for rule in rules]
    holds: dict[float, bool] = {}

    def pick(pool: list[tuple[Candidate, float, int]], budget: float | None) -> BudgetChoice:
        if budget is None:
            per_wakeup = (price or 0.0) / 60.0
            rule, hours, wakeups = max(pool, key=lambda c: (c[1] - per_wakeup * c[2], -c[2]))
            return BudgetChoice(rule, hours, wakeups, wakeups / scale, True)
        fits = [c for c in pool if c[2] / scale <= budget]
        if fits:
            rule, hours, wakeups = max(fits, key=lambda c: (c[1], -c[2]))
            return BudgetChoice(rule, hours, wakeups, wakeups / scale, True)
        rule, hours, wakeups = min(pool, key=lambda c: (c[2], -c[1]))
        return BudgetChoice(rule, hours, wakeups, wakeups / scale, False)

    def held(candidate: tuple[Candidate, float, int]) -> bool:
        rule = candidate[0]
        if not isinstance(rule, SurvivalWindow):
            return True
        if rule.price_gpu_min not in holds:
            holds[rule.price_gpu_min] = replayed.holds_on_later_half(rule)
        return holds[rule.price_gpu_min]

    out = []
    for budget in budgets:
        choice = pick(candidates, budget)
        rule = choice.policy
        if isinstance(rule, SurvivalWindow) and not held((rule, choice.reclaimed_gpu_hours, choice.wakeups)):
            fallback = pick([c for c in candidates if held(c)], budget)
            if isinstance(fallback.policy, FixedWindow):
                reason = (f"the survival window at {rule.price_gpu_min:g} GPU-min per wake-up, fitted on the "
                          "earlier half of the history, reclaimed less than the fixed rule on the later half")
                fallback = replace(fallback, policy=FixedWindow(fallback.policy.window_s, reason))
            choice = fallback
        out.append(choice)
    return out
