"""The GPU-hours / wake-ups frontier: the fixed rule's windows against the adaptive budgets.

Why: a window or a budget is chosen by reading the trade-off off real data, and a claim
that the adaptive policy "does better" means more GPU-hours at the same number of
wake-ups, not more of both. Measured honestly: the adaptive policy's parameters are chosen
on the calibration part (runs that start before ``split_t``) and every row is scored on
the rest (runs that start at or after it). The adaptive windows themselves are causal, so
the calibration part is also the history the policy remembers when scoring begins, as it
would be in production. With no ``split_t`` both parts are the whole input.

Pure: an idle-run table (:func:`gpuaas.policies.replay.idle_runs` or a
:class:`~gpuaas.policies.run_stream.RunStream`) in, rows out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from gpuaas.policies.cold_start import choose_for_budget
from gpuaas.policies.replay import replay_runs

__all__ = ["BUDGETS", "FIXED_WINDOWS_MIN", "FrontierRow", "frontier", "ratio_at_equal_wakeups"]

FIXED_WINDOWS_MIN = (5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0)
BUDGETS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
"""Wake-ups per workload per day for the adaptive rows."""


@dataclass(frozen=True)
class FrontierRow:
    """``parameter``: the window (min) for ``fixed``, the wake-up budget for ``adaptive``."""

    policy: str
    parameter: float
    reclaimed_gpu_hours: float
    wakeups: int

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _score(runs: pd.DataFrame, windows: np.ndarray, scored: np.ndarray) -> tuple[float, int]:
    out = replay_runs(runs, windows)
    return float(out["reclaimed_gpu_s"].to_numpy()[scored].sum()) / 3600.0, int(out["wakeup"].to_numpy()[scored].sum())


def frontier(runs: pd.DataFrame, *, split_t: float | None = None, windows_min: Sequence[float] = FIXED_WINDOWS_MIN,
             budgets: Sequence[float] = BUDGETS, base_s: float = 1800.0) -> list[FrontierRow]:
    """Fixed rows (one per window) then adaptive rows (one per budget), scored after ``split_t``."""
    start = runs["start"].to_numpy(dtype=float)
    scored = np.ones(len(runs), dtype=bool) if split_t is None else start >= split_t
    calibration = runs[~scored] if split_t is not None else runs
    days = 0.0
    if len(calibration):
        last = float(split_t) if split_t is not None else float(calibration["end"].max())
        days = (last - float(calibration["start"].min())) / 86400.0
    workloads = int(calibration["pod"].nunique())
    rows = []
    for minutes in windows_min:
        hours, wakeups = _score(runs, np.full(len(runs), minutes * 60.0), scored)
        rows.append(FrontierRow("fixed", float(minutes), hours, wakeups))
    for budget in budgets:
        choice = choose_for_budget(calibration, workloads=workloads, days=days,
                                   wakeups_per_workload_per_day=budget, base_s=base_s)
        hours, wakeups = _score(runs, choice.policy(runs), scored)
        rows.append(FrontierRow("adaptive", float(budget), hours, wakeups))
    return rows


def ratio_at_equal_wakeups(rows: Sequence[FrontierRow]) -> list[tuple[FrontierRow, float | None]]:
    """Each adaptive row's GPU-hours over the fixed frontier's at its wake-ups (linear between
    the measured windows); None outside the fixed rows' wake-up range (no extrapolation)."""
    fixed = sorted((r.wakeups, r.reclaimed_gpu_hours) for r in rows if r.policy == "fixed")
    if not fixed:
        return [(r, None) for r in rows if r.policy == "adaptive"]
    wk = np.array([f[0] for f in fixed], dtype=float)
    hours = np.array([f[1] for f in fixed], dtype=float)
    out: list[tuple[FrontierRow, float | None]] = []
    for r in rows:
        if r.policy != "adaptive":
            continue
        if not wk[0] <= r.wakeups <= wk[-1]:
            out.append((r, None))
            continue
        ref = float(np.interp(r.wakeups, wk, hours))
        out.append((r, r.reclaimed_gpu_hours / ref if ref > 0 else None))
    return out
