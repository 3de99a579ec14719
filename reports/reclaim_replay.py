"""The ``gpuaas replay reclaim`` headline: what the replayed policy would have reclaimed, in one sentence. Pure.

Why a sentence before the table: the table is ten columns of totals; the reader wants the trade first (GPU-hours
won for wake-ups paid) and where to look next, the frontier across windows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reports._format import counted

__all__ = ["gpu_hours", "replay_headline"]


def gpu_hours(value: float) -> str:
    """GPU-hours as the headline writes them: whole hours with thousands separators from 10 up, one decimal below
    (``1,673``, ``305``, ``2.5``): the replay's totals are estimates, and the table keeps the decimals."""
    return f"{value:,.0f}" if abs(value) >= 10 else f"{value:.1f}"


def _policy(result: Mapping[str, Any], budget: float | None) -> str:
    window = float(result["window_min"])
    if result["policy"] == "fixed":
        return f"the fixed {window:g}-minute window"
    if budget is not None:
        return f"the window refit for --budget {budget:g} wake-ups per workload per day (base {window:g} min)"
    return f"the adaptive window (base {window:g} min)"


def replay_headline(chosen: Mapping[str, Any], fixed: Mapping[str, Any] | None = None,
                    budget: float | None = None) -> str:
    """The replay in one sentence: ``chosen`` (a ``ReplayResult.to_dict()``, the JSON the command prints) reclaims
    so many of the observed GPU-hours for so many wake-ups; ``fixed``, the fixed window's result beside an adaptive
    ``chosen``, is what it is weighed against; ``budget`` the ``--budget`` the adaptive window was refit for.
    The next step is the frontier: the same trade at every window."""
    if not chosen["pods"]:
        return ("Reclaim replay: nothing to replay, the input holds no duty-cycle samples; check the --utilization "
                "files (or the --since window with --from-prometheus).")
    first = (f"Reclaim replay: {_policy(chosen, budget)} would reclaim {gpu_hours(chosen['reclaimed_gpu_hours'])} "
             f"of {gpu_hours(chosen['observed_gpu_hours'])} observed GPU-hours on "
             f"{counted(chosen['pods'], 'pod')} (idle at duty cycle <= {chosen['threshold_pct']:g} %) "
             f"for {counted(chosen['wakeups'], 'wake-up')}")
    if fixed is not None:
        first += (f", against {gpu_hours(fixed['reclaimed_gpu_hours'])} for {counted(fixed['wakeups'], 'wake-up')} "
                  f"with {_policy(fixed, None)}")
    return first + "; the trade at every window: the same command with --frontier."
