"""The clairvoyant reclaim frontier: the most GPU-hours any policy could reclaim for a number of wake-ups.

Why: a frontier that compares a policy with the fixed rule only says how much better it is,
never how much better it could be. The limit is computable on a replayed trace. A policy
that knows, when an idle run starts, how long it will last and whether its end will wake
the workload can do no better than this:

* detection is not free: the earliest it can stop a workload is ``detect_s`` after the run
  starts (a controller has to see a few idle samples first);
* a run whose stop costs no wake-up (it ends in missing data with no demand behind it, or
  at the end of the data) is always stopped at ``detect_s`` when that gains anything;
* every other stopped run costs exactly one wake-up, so for ``k`` wake-ups the best is to
  stop the ``k`` runs that gain most, each at ``detect_s`` (a later stop gains less for
  the same wake-up).

Each run is scored by :func:`gpuaas.policies.reclaim.replay.replay_runs` with the window
``detect_s``, so the clairvoyant rows have exactly the replay's semantics (rules 4-7),
GPU weights included. The curve is exact at every integer number of wake-ups and linear
in between; it is concave (gains are taken largest first).

Pure: an idle-run table in, a curve out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpuaas.policies.reclaim import replay_runs

__all__ = ["DETECT_MIN", "ClairvoyantCurve", "clairvoyant_curve"]

DETECT_MIN = 5.0
"""Minutes an idle run lasts before even a clairvoyant controller may stop it."""


@dataclass(frozen=True)
class ClairvoyantCurve:
    """``free_gpu_s``: reclaimed without a wake-up; ``gains_gpu_s``: each costly run's gain, largest first."""

    free_gpu_s: float
    gains_gpu_s: tuple[float, ...]

    @property
    def max_wakeups(self) -> int:
        return len(self.gains_gpu_s)

    def wakeups_at(self, wakeups: float) -> int:
        """Wake-ups the clairvoyant spends when allowed ``wakeups`` (never more runs than gain)."""
        return int(min(max(wakeups, 0.0), float(self.max_wakeups)))

    def hours_at(self, wakeups: float) -> float:
        """GPU-hours reclaimed with at most ``wakeups`` wake-ups (linear between integers)."""
        cumulative = np.concatenate(([0.0], np.cumsum(np.asarray(self.gains_gpu_s, dtype=float))))
        k = min(max(float(wakeups), 0.0), float(self.max_wakeups))
        return (self.free_gpu_s + float(np.interp(k, np.arange(len(cumulative), dtype=float), cumulative))) / 3600.0


def clairvoyant_curve(runs: pd.DataFrame, *, detect_s: float = DETECT_MIN * 60.0,
                      scored: np.ndarray | None = None) -> ClairvoyantCurve:
    """The clairvoyant curve over the runs where ``scored`` is true (all of them by default)."""
    if detect_s < 0:
        raise ValueError("detect_s must be >= 0")
    if len(runs) == 0:
        return ClairvoyantCurve(0.0, ())
    mask = np.ones(len(runs), dtype=bool) if scored is None else np.asarray(scored, dtype=bool)
    out = replay_runs(runs, np.full(len(runs), float(detect_s)))
    gain = out["reclaimed_gpu_s"].to_numpy(dtype=float)[mask]
    wakes = out["wakeup"].to_numpy(dtype=bool)[mask]
    free = float(gain[~wakes].sum())
    costly = np.sort(gain[wakes & (gain > 0)])[::-1]
    return ClairvoyantCurve(free, tuple(float(g) for g in costly))
