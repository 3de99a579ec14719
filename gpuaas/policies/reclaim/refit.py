"""The adaptive window's refit: chosen once a period on the history seen then, kept until the next.

Why: chosen again every cycle on its rolling history, the survival window follows the last few
hours; replayed that way on the GenAI trace it did worse than the fixed rule at the recommended
budget. Chosen once a period (``refit_hours``, a day by default: at 00:00 UTC) on the history a
cycle reads, every cycle of the period decides with the same window for the same context, and a
backtest of a budget (:class:`RefitRule`, ``gpuaas replay reclaim --budget``) makes the same
choices at the same instants as the live flow (:func:`~gpuaas.policies.reclaim.live_states`).

Pure: idle runs (pod then time order) in, windows and reasons out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import pandas as pd

from gpuaas.policies.reclaim.cold_start import BudgetChoice, choose_for_budget
from gpuaas.policies.reclaim.replay import seen_at
from gpuaas.policy import ColdStartBudget, Policy

__all__ = ["Decided", "RefitRule", "choose_at", "history_start", "reasons", "refit_boundary"]


def refit_boundary(now_s: float, refit_hours: float) -> float:
    """The instant the window in force at ``now_s`` was chosen at: the last multiple of the refit
    period since the Unix epoch (00:00 UTC for a day)."""
    period = refit_hours * 3600.0
    return math.floor(now_s / period) * period


def history_start(now_s: float, policy: Policy) -> float:
    """Where a cycle's history read starts: ``history_hours`` before the refit boundary when a budget
    chooses the window there, else before ``now_s``. A bounded span, so a bounded number of queries."""
    adaptive = policy.reclaim.adaptive
    budget = adaptive.cold_start_budget
    anchor = now_s if budget is None else refit_boundary(now_s, budget.refit_hours)
    return anchor - adaptive.history_hours * 3600.0


def _read_from(runs: pd.DataFrame, t: float) -> pd.DataFrame:
    """The runs a history read from ``t`` holds: one that ended before is not read, one that started
    before starts at ``t`` (a live read has the same runs already)."""
    out = runs[runs["end"].to_numpy(dtype=float) > t].copy()
    early = out["start"].to_numpy(dtype=float) < t
    if early.any():
        out.loc[early, "start"] = t
        out["length"] = out["end"] - out["start"]
    return out


def choose_at(runs: pd.DataFrame, fit_at: float, *, budget: ColdStartBudget, history_hours: float,
              base_s: float) -> BudgetChoice:
    """The rule chosen at ``fit_at`` on the ``history_hours`` before it: the runs as they were seen
    then (a spell still idle is open), wake-ups per workload with an idle spell in that history and
    per day of it that holds data."""
    began = runs[runs["start"].to_numpy(dtype=float) < fit_at]
    history = seen_at(_read_from(began, fit_at - history_hours * 3600.0), fit_at).reset_index(drop=True)
    days = history_hours / 24.0
    if len(history):
        days = min(days, (fit_at - float(history["start"].min())) / 86400.0)
    return choose_for_budget(history, workloads=max(int(history["pod"].nunique()), 1), days=days, base_s=base_s,
                             wakeups_per_workload_per_day=budget.wakeups_per_workload_per_day,
                             cold_start_gpu_minutes=budget.cold_start_gpu_minutes)


def reasons(choice: BudgetChoice, runs: pd.DataFrame, fit_at: float) -> list[str]:
    """Per run, what the chosen rule expects of it, how the rule was chosen and on which history."""
    asof = f"history to {datetime.fromtimestamp(fit_at, UTC):%Y-%m-%d %H:%M} UTC"
    expected = choice.policy.why(runs)
    said = {w: f"{w}; {choice.why}; {asof}" for w in set(expected)}  # a few sentences, many runs
    return [said[w] for w in expected]


@dataclass(frozen=True)
class RefitRule:
    """The budget's window as the live flow applies it over a whole history: at each refit boundary the
    rule is chosen again (:func:`choose_at`) and decides every spell idle during its period. A spell
    that outlasts a boundary is decided by the new rule from then on: reclaimed at the boundary if it
    is already past the new window."""

    budget: ColdStartBudget
    history_hours: float
    base_s: float
    first_s: float | None = None
    """The first instant replayed: runs idle only before it are history, never decided (``inf``)."""

    def __call__(self, runs: pd.DataFrame) -> np.ndarray:
        return self._decide(runs, explain=False)[0]

    def why(self, runs: pd.DataFrame) -> list[str]:
        return self._decide(runs, explain=True)[1]

    def decide(self, runs: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
        """Per run, its window in seconds (``inf``: never reclaimed) and the reason of the rule that set it."""
        return self._decide(runs, explain=True)

    def _decide(self, runs: pd.DataFrame, *, explain: bool) -> tuple[np.ndarray, list[str]]:
        window = np.full(len(runs), math.inf)
        why = ["never past its window" for _ in range(len(runs) if explain else 0)]
        if runs.empty:
            return window, why
        start = runs["start"].to_numpy(dtype=float)
        end = runs["end"].to_numpy(dtype=float)
        period = self.budget.refit_hours * 3600.0
        open_ = np.ones(len(runs), dtype=bool)
        first = float(start.min()) if self.first_s is None else max(float(start.min()), self.first_s)
        at = refit_boundary(first, self.budget.refit_hours)
        while at <= float(end.max()) and open_.any():
            nxt = at + period
            here = open_ & (start < nxt) & (end > at)
            if here.any():
                choice = choose_at(runs, at, budget=self.budget, history_hours=self.history_hours, base_s=self.base_s)
                due = np.maximum(start + choice.policy(runs), at)
                hit = here & (due < nxt)
                window[hit] = due[hit] - start[hit]
                if explain:
                    words = reasons(choice, runs, at)
                    for i in np.flatnonzero(hit):
                        why[i] = words[i]
                open_ &= ~hit
            at = nxt
        return window, why


@dataclass(frozen=True)
class Decided:
    """Windows and reasons already decided for one run table: a :class:`RefitRule` fits at every boundary,
    so a replay that needs both the windows and the reasons decides once and reads them here."""

    windows: np.ndarray
    reasons: tuple[str, ...]

    @classmethod
    def by(cls, rule: RefitRule, runs: pd.DataFrame) -> Decided:
        windows, why = rule.decide(runs)
        return cls(windows, tuple(why))

    def __call__(self, runs: pd.DataFrame) -> np.ndarray:
        if len(runs) != len(self.windows):
            raise ValueError(f"decided for {len(self.windows)} runs, asked for {len(runs)}")
        return self.windows

    def why(self, runs: pd.DataFrame) -> list[str]:
        self(runs)
        return list(self.reasons)
