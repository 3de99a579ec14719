"""The GPU-hours / wake-ups frontier: the fixed rule's windows, the adaptive budgets and the clairvoyant limit.

Why: a window or a budget is chosen by reading the trade-off off real data, and a claim
that the adaptive policy "does better" means more GPU-hours at the same number of
wake-ups, not more of both. Measured honestly: the adaptive policy's parameters are chosen
on the calibration part (runs that start before ``split_t``) and every row is scored on
the rest (runs that start at or after it). A calibration run still idle at the split is
seen as open there (its end belongs to the scored part). The adaptive windows themselves are
causal, so the calibration part is also the history the policy remembers when scoring begins,
as it would be in production. With no ``split_t`` both parts are the whole input.

The clairvoyant rows (:mod:`gpuaas.policies.analysis.clairvoyant`) say how far any policy could go:
one per fixed row, with that row's wake-ups, on the same scored runs. Each adaptive row
carries ``headroom_captured`` = (adaptive - fixed) / (clairvoyant - fixed), the fixed
frontier interpolated linearly between its windows and the clairvoyant curve taken exactly,
both at the adaptive row's wake-ups: the share of what a better window could still win that
the policy has won (0: no better than the fixed rule, 1: the physical limit).

Pure: an idle-run table (:func:`gpuaas.policies.reclaim.replay.idle_runs` or a
:class:`~gpuaas.policies.reclaim.run_stream.RunStream`) in, rows out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd

from gpuaas.policies.analysis.clairvoyant import DETECT_MIN, ClairvoyantCurve, clairvoyant_curve
from gpuaas.policies.reclaim import choose_for_budgets, fixed_frontier_at, replay_runs, seen_at

__all__ = ["BUDGETS", "FIXED_WINDOWS_MIN", "FrontierRow", "frontier", "headroom_captured", "ratio_at_equal_wakeups",
           "seen_at"]

FIXED_WINDOWS_MIN = (5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0)
BUDGETS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
"""Wake-ups per workload per day for the adaptive rows."""


@dataclass(frozen=True)
class FrontierRow:
    """``parameter``: the window (min) for ``fixed``, the wake-up budget for ``adaptive``, and for
    ``clairvoyant`` the fixed window whose wake-ups it was given. ``headroom_captured``: adaptive
    rows only, None where the fixed frontier does not reach the row's wake-ups."""

    policy: str
    parameter: float
    reclaimed_gpu_hours: float
    wakeups: int
    headroom_captured: float | None = None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _score(runs: pd.DataFrame, windows: np.ndarray, scored: np.ndarray) -> tuple[float, int]:
    out = replay_runs(runs, windows)
    return float(out["reclaimed_gpu_s"].to_numpy()[scored].sum()) / 3600.0, int(out["wakeup"].to_numpy()[scored].sum())


def frontier(runs: pd.DataFrame, *, split_t: float | None = None, windows_min: Sequence[float] = FIXED_WINDOWS_MIN,
             budgets: Sequence[float] = BUDGETS, base_s: float = 1800.0,
             detect_s: float = DETECT_MIN * 60.0) -> list[FrontierRow]:
    """Fixed rows (one per window), adaptive rows (one per budget), then clairvoyant rows (one per
    fixed row, at its wake-ups), all scored on the runs that start at or after ``split_t``."""
    start = runs["start"].to_numpy(dtype=float)
    scored = np.ones(len(runs), dtype=bool) if split_t is None else start >= split_t
    calibration = seen_at(runs[~scored], float(split_t)) if split_t is not None else runs
    days = 0.0
    if len(calibration):
        last = float(split_t) if split_t is not None else float(calibration["end"].max())
        days = (last - float(calibration["start"].min())) / 86400.0
    workloads = int(calibration["pod"].nunique())
    fixed = []
    for minutes in windows_min:
        hours, wakeups = _score(runs, np.full(len(runs), minutes * 60.0), scored)
        fixed.append(FrontierRow("fixed", float(minutes), hours, wakeups))
    curve = clairvoyant_curve(runs, detect_s=detect_s, scored=scored)
    adaptive = []
    choices = choose_for_budgets(calibration, workloads=workloads, days=days, budgets=budgets, base_s=base_s)
    for budget, choice in zip(budgets, choices, strict=True):
        hours, wakeups = _score(runs, choice.policy(runs), scored)
        row = FrontierRow("adaptive", float(budget), hours, wakeups)
        adaptive.append(replace(row, headroom_captured=headroom_captured(row, fixed, curve)))
    clairvoyant = [FrontierRow("clairvoyant", r.parameter, curve.hours_at(r.wakeups), curve.wakeups_at(r.wakeups))
                   for r in fixed]
    return [*fixed, *adaptive, *clairvoyant]


def _fixed_at(fixed: Sequence[FrontierRow], wakeups: int) -> float | None:
    return fixed_frontier_at([(r.wakeups, r.reclaimed_gpu_hours) for r in fixed], wakeups)


def headroom_captured(row: FrontierRow, fixed: Sequence[FrontierRow], curve: ClairvoyantCurve) -> float | None:
    """(row - fixed) / (clairvoyant - fixed) at the row's wake-ups; None where either is undefined."""
    ref = _fixed_at(fixed, row.wakeups)
    if ref is None:
        return None
    limit = curve.hours_at(row.wakeups)
    if limit - ref <= 1e-9:
        return None
    return (row.reclaimed_gpu_hours - ref) / (limit - ref)


def ratio_at_equal_wakeups(rows: Sequence[FrontierRow]) -> list[tuple[FrontierRow, float | None]]:
    """Each adaptive row's GPU-hours over the fixed frontier's at its wake-ups (linear between
    the measured windows); None outside the fixed rows' wake-up range (no extrapolation).
    The clairvoyant rows are not compared: they are the limit, not a policy."""
    fixed = [r for r in rows if r.policy == "fixed"]
    out: list[tuple[FrontierRow, float | None]] = []
    for r in rows:
        if r.policy != "adaptive":
            continue
        ref = _fixed_at(fixed, r.wakeups)
        out.append((r, r.reclaimed_gpu_hours / ref if ref is not None and ref > 0 else None))
    return out
