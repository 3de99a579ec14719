"""Idle runs built chunk by chunk: a fleet's history in memory bounded by one chunk.

Why: 16,000 GPUs x 7 days at 1-minute steps is 161 million samples; the replay needs only
the idle runs (a few per workload and day) and the covered time. ``RunStream`` takes the
samples in time chunks (each chunk later than the one before, every pod's samples sorted)
and keeps, per pod, only its last sample and the start of the idle run it is in. Its
result equals :func:`gpuaas.policies.reclaim.replay.idle_runs` and ``observed_seconds`` on the
concatenated samples exactly (a property test checks it), so a replay on Prometheus
history has the trace replay's semantics.

How: each chunk is prefixed with every pod's carried last sample and cut into runs; a run
that starts at a carried idle sample continues the carried run (its start is restored);
the last run of a pod that reaches the end of the combined data stays open and is carried
on; everything else is final.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpuaas.models import MAX_GAP_S
from gpuaas.policies.reclaim.replay import idle_runs

__all__ = ["RunStream"]


class RunStream:
    """Feed ``add(chunk)`` in time order, then read ``runs()``, ``observed_s`` and ``pods``."""

    def __init__(self, threshold: float, max_gap_s: float = MAX_GAP_S) -> None:
        self.threshold = threshold
        self.max_gap_s = max_gap_s
        self.samples = 0
        self._observed = pd.Series(dtype=float)
        self._closed: list[pd.DataFrame] = []
        self._last = pd.DataFrame({"pod": pd.Series(dtype=object), "t": pd.Series(dtype=float),
                                   "value": pd.Series(dtype=float)})
        self._open = idle_runs(self._last, threshold)  # at most one open run per pod

    @property
    def observed_s(self) -> float:
        """Covered seconds over every pod (rule 2 of the replay)."""
        return float(self._observed.sum())

    def observed_weighted_s(self, weights: pd.Series) -> float:
        """Covered seconds, each pod's times its weight (``weights`` by pod, 1 where absent)."""
        w = weights.reindex(self._observed.index).fillna(1.0)
        return float((self._observed * w).sum())

    @property
    def pods(self) -> int:
        return len(self._last)

    def add(self, chunk: pd.DataFrame) -> None:
        """One chunk of ``pod, t, value`` samples, all later than any sample added before."""
        if chunk.empty:
            return
        self.samples += len(chunk)
        chunk = chunk[["pod", "t", "value"]].astype({"t": float, "value": float})
        combined = pd.concat([self._last, chunk], ignore_index=True).sort_values(
            ["pod", "t"], kind="mergesort", ignore_index=True)
        # The carried samples were each pod's last: their coverage is counted only now.
        t = combined["t"].to_numpy(dtype=float)
        pod = combined["pod"].to_numpy()
        gap = np.where(pod[1:] == pod[:-1], t[1:] - t[:-1], np.inf)
        covered = pd.Series(np.where(gap <= self.max_gap_s, gap, 0.0)).groupby(pod[:-1]).sum()
        self._observed = self._observed.add(covered, fill_value=0.0)
        runs = idle_runs(combined, self.threshold, self.max_gap_s)
        if len(self._open):
            carried = self._open.set_index("pod")["start"]
            restored = runs["pod"].map(carried)
            last_t = runs["pod"].map(self._last.set_index("pod")["t"])
            continues = restored.notna() & (runs["start"] == last_t)
            runs.loc[continues, "start"] = restored[continues]
            runs["length"] = runs["end"] - runs["start"]
        last_of_pod = ~runs["pod"].duplicated(keep="last").to_numpy()
        still_open = last_of_pod & (runs["ended_by"] == "end").to_numpy()
        self._closed.append(runs[~still_open])
        self._open = runs[still_open].reset_index(drop=True)
        self._last = combined[~combined["pod"].duplicated(keep="last")].reset_index(drop=True)

    def last_samples(self) -> pd.DataFrame:
        """Each pod's newest sample (``pod, t, value``): is it idle now, and how fresh?"""
        return self._last.copy()

    def runs(self) -> pd.DataFrame:
        """Every run so far, open ones (``ended_by="end"``) included, in pod then time order."""
        frames = [f for f in [*self._closed, self._open] if len(f)]
        if not frames:
            return self._open.copy()
        out = pd.concat(frames, ignore_index=True)
        order = np.lexsort((out["start"].to_numpy(dtype=float), out["pod"].astype(str).to_numpy()))
        return out.iloc[order].reset_index(drop=True)
