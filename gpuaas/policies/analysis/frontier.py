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

Each adaptive row also carries its context's ceiling (:mod:`gpuaas.policies.analysis.hindsight`): the
most any policy that gives each spell the window of its context (the recent idle share the
adaptive policy keys on) reaches at the row's wake-ups, its windows chosen on the scored runs
themselves. What separates the row from the ceiling is learning, which a longer history can
improve; what separates the ceiling from the clairvoyant limit, the context cannot tell.

Every row carries its wake-ups per workload-day on the scored part: a budget is kept on the part it is
chosen on, and whether it held on the rest is for the reader to see, not to assume.

Pure: an idle-run table (:func:`gpuaas.policies.reclaim.replay.idle_runs` or a
:class:`~gpuaas.policies.reclaim.run_stream.RunStream`) in, rows out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd

from gpuaas.phrases import listed
from gpuaas.policies.analysis.clairvoyant import DETECT_MIN, ClairvoyantCurve, clairvoyant_curve
from gpuaas.policies.analysis.hindsight import hindsight_curve
from gpuaas.policies.reclaim import (
    LOOKBACK_S,
    SHARE_EDGES,
    WINDOWS_MIN,
    Outcomes,
    choose_for_budgets,
    context_band,
    fixed_frontier_at,
    outcomes,
    replay_runs,
    seen_at,
)

__all__ = ["BUDGETS", "FIXED_WINDOWS_MIN", "LONG_SPELL_S", "CalibrationEvidence", "FrontierRow", "ceiling_ratios",
           "calibration_evidence", "frontier", "frontier_headline", "headroom_captured", "ratio_at_equal_wakeups",
           "seen_at"]

FIXED_WINDOWS_MIN = (5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0)
BUDGETS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
"""Wake-ups per workload per day for the adaptive rows."""
LONG_SPELL_S = 3600.0
"""An idle spell this long or longer counts as long in :class:`CalibrationEvidence`."""


@dataclass(frozen=True)
class FrontierRow:
    """``parameter``: the window (min) for ``fixed``, the wake-up budget for ``adaptive``, and for
    ``clairvoyant`` the fixed window whose wake-ups it was given. ``headroom_captured``: adaptive
    rows only, None where the fixed frontier does not reach the row's wake-ups.
    ``context_ceiling_gpu_hours``: adaptive rows only, the most the policy's context reaches at the
    row's wake-ups with its windows chosen in hindsight on the scored runs."""

    policy: str
    parameter: float
    reclaimed_gpu_hours: float
    wakeups: int
    headroom_captured: float | None = None
    context_ceiling_gpu_hours: float | None = None
    wakeups_per_workload_day: float | None = None
    """On the scored part, counted as a budget counts them when it is chosen: its workloads with an
    idle run there times its span in days. An adaptive row's window is chosen to keep its budget on
    the calibration part; this says whether it held on the hours it is scored on. None on an empty
    scored part."""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _calibration(runs: pd.DataFrame, split_t: float | None) -> pd.DataFrame:
    """The runs the adaptive policy is chosen on: those before ``split_t``, as seen there (all without)."""
    if split_t is None:
        return runs
    return seen_at(runs[runs["start"].to_numpy(dtype=float) < split_t], float(split_t))


@dataclass(frozen=True)
class CalibrationEvidence:
    """What the calibration part holds for the survival window to learn from.

    Why: the adaptive rows beat the fixed rule only where the history they are chosen on holds
    spells a shorter window pays on: spells that start after a quiet stretch, and long ones. A
    backtest whose calibration part holds none gets adaptive rows equal to the fixed rule, and its
    reader should learn why rather than conclude that the policy can do nothing on that fleet."""

    spells: int
    quiet_spells: int
    """Spells that start in the quiet context (the top band of the recent idle share)."""
    long_spells: int
    """Spells of :data:`LONG_SPELL_S` or more (a spell still open at the split counts what it lasted)."""

    def describe(self) -> str:
        quiet = f"{SHARE_EDGES[-1]:.0%} or more of the last {LOOKBACK_S / 3600:g} h idle"
        return (f"calibration part: {self.spells:,} idle spells, {self.quiet_spells:,} after {quiet}, "
                f"{self.long_spells:,} of {LONG_SPELL_S / 60:g} min or more")


def calibration_evidence(runs: pd.DataFrame, split_t: float | None = None) -> CalibrationEvidence:
    """The :class:`CalibrationEvidence` of the part :func:`frontier` chooses the adaptive policy on."""
    calibration = _calibration(runs, split_t).reset_index(drop=True)
    length = calibration["length"].to_numpy(dtype=float)
    quiet = int((context_band(calibration) == len(SHARE_EDGES)).sum()) if len(calibration) else 0
    return CalibrationEvidence(len(calibration), quiet, int((length >= LONG_SPELL_S).sum()))


def frontier_headline(rows: Sequence[FrontierRow], evidence: CalibrationEvidence) -> list[str]:
    """The lines a reader sees first: what the adaptive rows won over the fixed rule, and what they learned from."""
    measured = [(r, x) for r, x in ratio_at_equal_wakeups(rows) if x is not None]
    lines = [evidence.describe()]
    if not measured:
        lines.append("no adaptive row falls within the fixed windows' wake-ups: nothing to compare")
    elif evidence.spells == 0:  # nothing was learned: every budget keeps the rule's own window
        low, high = min(x for _, x in measured), max(x for _, x in measured)
        said = f"{low:.2f}x" if round(low, 2) == round(high, 2) else f"{low:.2f}x to {high:.2f}x"
        lines.append(f"the calibration part holds no idle spell to learn from: every budget keeps the rule's own "
                     f"window, {said} the best fixed window at its wake-ups; backtest a longer history")
    elif all(abs(x - 1.0) < 0.005 for _, x in measured):
        lines.append("every budget matched the fixed rule at its wake-ups (1.00x); the adaptive policy learns "
                     "from the spells counted above, so a longer history can tell it more")
    else:
        best, ratio = max(measured, key=lambda m: (m[1], -m[0].parameter))
        worst = min(x for _, x in measured)
        share = "" if best.headroom_captured is None else f", {best.headroom_captured:.0%} of the clairvoyant headroom"
        tied = sorted(r.parameter for r, _ in measured
                      if (r.reclaimed_gpu_hours, r.wakeups) == (best.reclaimed_gpu_hours, best.wakeups))
        same = "" if len(tied) == 1 else "the same result at each: "
        lines.append(f"adaptive over fixed at equal wake-ups: {worst:.2f}x to {ratio:.2f}x over {len(measured)} "
                     f"budgets; best at {_listed(tied)} wake-ups per workload-day ({same}{ratio:.2f}x{share})")
        lines += _ceiling_line(best, rows)
    return lines + _budget_line(rows)


def _budget_line(rows: Sequence[FrontierRow]) -> list[str]:
    """The budgets the scored part ran over. A budget's window is chosen to keep it on the
    calibration part; a fleet whose spells end otherwise afterwards wakes at another rate, and a
    reader choosing a budget should see how far off it ran, not only the GPU-hours at equal wake-ups."""
    over = [(r.parameter, r.wakeups_per_workload_day) for r in rows if r.policy == "adaptive"
            and r.wakeups_per_workload_day is not None and r.wakeups_per_workload_day > r.parameter]
    if not over:
        return []
    budgets = len([r for r in rows if r.policy == "adaptive"])
    rates = [rate for _, rate in over]
    times = max((rate / budget for budget, rate in over if budget > 0), default=0.0)
    return [f"{len(over)} of {budgets} budgets ran over on the scored part ({min(rates):.1f} to {max(rates):.1f} "
            f"wake-ups per workload-day, up to {times:.0f}x the budget): a budget is chosen on the calibration "
            "part's wake-ups, and its windows woke the scored part's workloads more often"]


def _listed(budgets: Sequence[float]) -> str:
    """``0.25``, ``0.25 and 1``, ``0.25, 0.5 and 1``."""
    return listed([f"{b:g}" for b in budgets])


def _ceiling_line(best: FrontierRow, rows: Sequence[FrontierRow]) -> list[str]:
    """Where the best row stands against its context's ceiling, and so what could move it."""
    ceiling = ceiling_ratios(rows).get(best.parameter)
    if ceiling is None or not best.context_ceiling_gpu_hours:
        return []
    reached = best.reclaimed_gpu_hours / best.context_ceiling_gpu_hours
    where = (f"its context's ceiling there, windows chosen in hindsight on the scored part: {ceiling:.2f}x; "
             f"the policy reached {reached:.0%} of it")
    if reached >= 0.95:
        return [f"{where}: more history cannot add much; the rest of the headroom needs a signal its context "
                "does not carry"]
    return [f"{where}: a longer history to learn from can close the gap"]


def ceiling_ratios(rows: Sequence[FrontierRow]) -> dict[float, float | None]:
    """Per adaptive row's budget, its context's ceiling over the fixed frontier at the row's wake-ups
    (None outside the fixed rows' wake-ups): the ceiling read as :func:`ratio_at_equal_wakeups`
    reads the row, so the two stand side by side."""
    fixed = [r for r in rows if r.policy == "fixed"]
    ceilings = [replace(r, reclaimed_gpu_hours=r.context_ceiling_gpu_hours) for r in rows
                if r.policy == "adaptive" and r.context_ceiling_gpu_hours is not None]
    return {r.parameter: x for r, x in ratio_at_equal_wakeups([*fixed, *ceilings])}


def _score(runs: pd.DataFrame, windows: np.ndarray, scored: np.ndarray) -> tuple[float, int]:
    out = replay_runs(runs, windows)
    return float(out["reclaimed_gpu_s"].to_numpy()[scored].sum()) / 3600.0, int(out["wakeup"].to_numpy()[scored].sum())


def _fixed_row(replayed: Outcomes, minutes: float) -> FrontierRow:
    """The fixed rule at ``minutes``, read off the replay of every candidate window."""
    i = replayed.windows_s.index(minutes * 60.0)
    return FrontierRow("fixed", minutes, float(replayed.saved_gpu_min[i].sum()) / 60.0,
                       int(round(float(replayed.wakeups[i].sum()))))


def frontier(runs: pd.DataFrame, *, split_t: float | None = None, windows_min: Sequence[float] = FIXED_WINDOWS_MIN,
             budgets: Sequence[float] = BUDGETS, base_s: float = 1800.0,
             detect_s: float = DETECT_MIN * 60.0) -> list[FrontierRow]:
    """Fixed rows (one per window), adaptive rows (one per budget), then clairvoyant rows (one per
    fixed row, at its wake-ups), all scored on the runs that start at or after ``split_t``."""
    start = runs["start"].to_numpy(dtype=float)
    scored = np.ones(len(runs), dtype=bool) if split_t is None else start >= split_t
    calibration = _calibration(runs, split_t)
    days = 0.0
    if len(calibration):
        last = float(split_t) if split_t is not None else float(calibration["end"].max())
        days = (last - float(calibration["start"].min())) / 86400.0
    workloads = int(calibration["pod"].nunique())
    replayed = outcomes(runs, sorted({*WINDOWS_MIN, *windows_min, base_s / 60.0}))  # every window a row can give
    on_scored = replayed.of(scored)
    fixed = [_fixed_row(on_scored, float(minutes)) for minutes in windows_min]
    curve = clairvoyant_curve(runs, detect_s=detect_s, scored=scored)
    ceiling = hindsight_curve(on_scored, context_band(runs)[scored])
    adaptive = []
    choices = choose_for_budgets(calibration, workloads=workloads, days=days, budgets=budgets, base_s=base_s)
    for budget, choice in zip(budgets, choices, strict=True):
        hours, wakeups = _score(runs, choice.policy(runs), scored)
        row = FrontierRow("adaptive", float(budget), hours, wakeups)
        adaptive.append(replace(row, headroom_captured=headroom_captured(row, fixed, curve),
                                context_ceiling_gpu_hours=ceiling.hours_at(wakeups)))
    clairvoyant = [FrontierRow("clairvoyant", r.parameter, curve.hours_at(r.wakeups), curve.wakeups_at(r.wakeups))
                   for r in fixed]
    part, exposure = runs[scored], 0.0
    if len(part):
        first = float(part["start"].min()) if split_t is None else float(split_t)
        exposure = _workload_days(part, first, float(part["end"].max()))
    return [replace(r, wakeups_per_workload_day=r.wakeups / exposure if exposure > 0 else None)
            for r in [*fixed, *adaptive, *clairvoyant]]


def _workload_days(runs: pd.DataFrame, start: float, end: float) -> float:
    """What a wake-up budget is counted against: the workloads with an idle run in ``runs`` times
    the days from ``start`` to ``end``, as the budget's choice counts its history."""
    if runs.empty:
        return 0.0
    return int(runs["pod"].nunique()) * max(end - start, 0.0) / 86400.0


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
