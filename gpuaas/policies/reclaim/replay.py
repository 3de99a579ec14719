"""Causal replay of idle-reclaim policies on a per-pod GPU duty-cycle trace.

Why: a reclaim window is a bet between GPU-hours saved and cold starts inflicted. The
trace tells, minute by minute, what each pod would have done; replaying a policy on it
answers "how much would it have saved, and how many users would have waited?", with
numbers anyone can recompute from the semantics below. Pure: takes DataFrames, loads
nothing, one GPU per pod.

Input frames (``gpuaas.sources.traces`` builds them):

* utilisation: ``pod`` (str), ``t`` (float, Unix seconds), ``value`` (duty cycle, 0-100 %).
* qps (optional): ``pod``, ``t``, ``qps`` (> 0; a missing row means no request in that
  minute). Only counted: ``qps_samples_while_down`` = request samples that fall while the
  pod is down (``reclaim_at <= t < E``), a check of the duty-cycle wake-ups against traffic.

Semantics (``G`` = 120 s, the missing-data limit; ``W`` = window; ``thr`` = threshold):

1. A sample is *idle* when ``value <= thr`` (equality is idle), otherwise *active*.
2. Coverage: a sample at ``t_k`` stands for ``[t_k, t_{k+1})`` when the pod's next sample
   comes ``<= G`` later; otherwise (a gap ``> G`` = missing data, or the pod's last
   sample) it stands for no time. ``observed_gpu_hours`` = total coverage.
3. An *idle run* is a maximal sequence of consecutive idle samples of one pod with no gap
   ``> G`` inside. It starts at its first sample ``t_i`` and ends at ``E``: the next
   (active) sample's time when that comes ``<= G`` after the last idle sample ``t_j``
   (``ended_by = "active"``), else ``t_j`` (``"gap"`` or ``"end"`` of data). Its length is
   ``L = E - t_i`` = its coverage. ``bound_gpu_hours`` = sum over runs of
   ``max(0, L - W_base)``.
4. A policy gives every run a window ``w`` (seconds after ``t_i``, ``inf`` = never),
   decided causally. The pod is reclaimed at ``r = t_i + w`` if the controller's view at
   ``r`` still shows the run: ``r < E`` for a run ended by an active sample (that sample is
   seen at ``E``), ``r <= t_j + G`` otherwise (until then the gap is not known to be one).
5. A reclaimed pod is down until its first active sample, which is a *wake-up* (one cold
   start). Reclaimed GPU-hours = covered time spent down = ``max(0, L - w)`` per run.
6. Missing data while down: the gap itself is never counted (not observed, not
   reclaimed). The replay's knowledge ends there, so it charges a wake-up if the first
   sample after the gap is active (demand reached a down pod) and otherwise resumes the
   pod *up*, claiming nothing it cannot see (``gap_resumes`` counts these). This is why
   every run starts with the pod up, runs are independent, and the fixed rule reclaims
   exactly ``bound_gpu_hours``.
7. End of data while down: the pod stays down, no wake-up (``never_woke``); nothing past
   its last sample is counted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from gpuaas.models import MAX_GAP_S

__all__ = [
    "ReplayResult",
    "WindowPolicy",
    "fixed_windows",
    "gpu_weights",
    "idle_runs",
    "observed_seconds",
    "qps_samples_while_down",
    "replay_runs",
    "replay_table",
    "replay_windows",
    "seen_at",
]


WindowPolicy = Callable[[pd.DataFrame], np.ndarray]
"""Maps the idle-run table (see :func:`idle_runs`) to one window in seconds per run."""

_RUN_COLUMNS = ["pod", "start", "last_idle", "end", "length", "ended_by", "next_active"]


@dataclass(frozen=True)
class ReplayResult:
    """One policy's totals over a trace; ``to_dict`` is the JSON the CLI prints."""

    policy: str
    window_min: float
    threshold_pct: float
    pods: int
    observed_gpu_hours: float
    idle_runs: int
    reclaims: int
    reclaimed_gpu_hours: float
    wakeups: int
    gap_resumes: int
    never_woke: int
    bound_gpu_hours: float
    qps_samples_while_down: int | None = None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _sorted(util: pd.DataFrame) -> pd.DataFrame:
    return util.sort_values(["pod", "t"], kind="mergesort", ignore_index=True)


def _next_gap(util: pd.DataFrame) -> np.ndarray:
    """Seconds to the same pod's next sample; ``inf`` after its last one (frame sorted)."""
    t = util["t"].to_numpy(dtype=float)
    pod = util["pod"].to_numpy()
    gap = np.full(len(t), np.inf)
    if len(t) > 1:
        same = pod[1:] == pod[:-1]
        gap[:-1] = np.where(same, t[1:] - t[:-1], np.inf)
    return gap


def observed_seconds(util: pd.DataFrame, max_gap_s: float = MAX_GAP_S) -> float:
    """Total coverage (rule 2) in seconds."""
    gap = _next_gap(_sorted(util))
    return float(gap[gap <= max_gap_s].sum())


def idle_runs(util: pd.DataFrame, threshold: float, max_gap_s: float = MAX_GAP_S) -> pd.DataFrame:
    """One row per idle run (rule 3), in pod then time order.

    Columns: ``pod``, ``start`` (t_i), ``last_idle`` (t_j), ``end`` (E), ``length`` (L, s),
    ``ended_by`` ("active" | "gap" | "end"), ``next_active`` (for "gap": is the first
    sample after the gap active?).
    """
    df = _sorted(util)
    if df.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in _RUN_COLUMNS})
    t = df["t"].to_numpy(dtype=float)
    pod = df["pod"].to_numpy()
    idle = df["value"].to_numpy(dtype=float) <= threshold
    gap = _next_gap(df)
    n = len(t)
    prev_gap = np.concatenate(([np.inf], gap[:-1]))
    prev_idle = np.concatenate(([False], idle[:-1]))
    starts = np.flatnonzero(idle & ~(prev_idle & (prev_gap <= max_gap_s)))
    nxt_idle = np.concatenate((idle[1:], [False]))
    ends = np.flatnonzero(idle & ~(nxt_idle & (gap <= max_gap_s)))
    last_gap = gap[ends]
    followed = last_gap <= max_gap_s  # next sample is active and close: ended by activity
    of_pod = np.isfinite(last_gap)  # the pod has a later sample
    ended_by = np.where(followed, "active", np.where(of_pod, "gap", "end"))
    end = t[ends] + np.where(followed, last_gap, 0.0)
    after = np.minimum(ends + 1, n - 1)
    next_active = of_pod & ~followed & ~idle[after]
    return pd.DataFrame(
        {
            "pod": pod[starts],
            "start": t[starts],
            "last_idle": t[ends],
            "end": end,
            "length": end - t[starts],
            "ended_by": ended_by,
            "next_active": next_active,
        }
    )


def fixed_windows(window_s: float) -> WindowPolicy:
    """The fixed rule: every run gets the same window."""

    def policy(runs: pd.DataFrame) -> np.ndarray:
        return np.full(len(runs), float(window_s))

    return policy


def gpu_weights(runs: pd.DataFrame) -> np.ndarray:
    """GPUs per run: the ``gpus`` column where the run table has one (fleet history), else 1 (a trace pod)."""
    weights: np.ndarray = runs["gpus"].to_numpy(dtype=float) if "gpus" in runs else np.ones(len(runs))
    return weights


def replay_runs(runs: pd.DataFrame, windows: np.ndarray, max_gap_s: float = MAX_GAP_S) -> pd.DataFrame:
    """Per-run outcome of reclaiming at ``start + window`` (rules 4-7).

    Adds ``window``, ``reclaim_at`` (NaN when not reclaimed), ``reclaimed`` (s),
    ``reclaimed_gpu_s`` (``reclaimed`` x the run's ``gpus``), ``wakeup`` (bool),
    ``gap_resume`` (bool) and ``never_woke`` (bool) to a copy of ``runs``.
    """
    w = np.asarray(windows, dtype=float)
    if w.shape != (len(runs),):
        raise ValueError(f"need one window per run: {w.shape} for {len(runs)} runs")
    if np.any(np.isnan(w)) or np.any(w < 0):
        raise ValueError("windows must be >= 0 (inf = never)")
    start = runs["start"].to_numpy(dtype=float)
    length = runs["length"].to_numpy(dtype=float)
    seen = runs["last_idle"].to_numpy(dtype=float) - start + max_gap_s
    by = runs["ended_by"].to_numpy()
    active = by == "active"
    # Offsets from the run start, so that the fixed rule's sum is bit-identical to the bound.
    happens = np.where(active, w < length, w <= seen)
    out = runs.copy()
    out["window"] = w
    out["reclaim_at"] = np.where(happens, start + w, np.nan)
    out["reclaimed"] = np.where(happens, np.maximum(0.0, length - w), 0.0)
    out["reclaimed_gpu_s"] = out["reclaimed"].to_numpy() * gpu_weights(runs)
    gap_ended = by == "gap"
    out["wakeup"] = happens & (active | (gap_ended & runs["next_active"].to_numpy(dtype=bool)))
    out["gap_resume"] = happens & gap_ended & ~out["wakeup"].to_numpy()
    out["never_woke"] = happens & (by == "end")
    return out


def qps_samples_while_down(outcome: pd.DataFrame, qps: pd.DataFrame) -> int:
    """How many request samples land in a down spell ``[reclaim_at, end)`` of their pod."""
    down = outcome.loc[outcome["reclaim_at"].notna(), ["pod", "reclaim_at", "end"]]
    if down.empty or qps.empty:
        return 0
    down = down.assign(pod=down["pod"].astype(str)).sort_values("reclaim_at", kind="mergesort")
    reqs = qps[["pod", "t"]].assign(pod=qps["pod"].astype(str), t=qps["t"].astype(float))
    reqs = reqs.sort_values("t", kind="mergesort")
    hit = pd.merge_asof(reqs, down, left_on="t", right_on="reclaim_at", by="pod", direction="backward")
    return int((hit["t"] < hit["end"]).sum())


def replay_windows(
    util: pd.DataFrame,
    policy: WindowPolicy,
    *,
    qps: pd.DataFrame | None = None,
    name: str,
    window_min: float = 30.0,
    threshold: float = 5.0,
    max_gap_s: float = MAX_GAP_S,
) -> ReplayResult:
    """Replay ``policy`` on ``util``; the bound always uses ``window_min`` (the base window)."""
    return replay_table(
        idle_runs(util, threshold, max_gap_s), policy, name=name, pods=int(util["pod"].nunique()),
        observed_s=observed_seconds(util, max_gap_s), qps=qps, window_min=window_min, threshold=threshold,
        max_gap_s=max_gap_s,
    )


def replay_table(
    runs: pd.DataFrame,
    policy: WindowPolicy,
    *,
    name: str,
    pods: int,
    observed_s: float,
    qps: pd.DataFrame | None = None,
    window_min: float = 30.0,
    threshold: float = 5.0,
    max_gap_s: float = MAX_GAP_S,
) -> ReplayResult:
    """Replay ``policy`` on an idle-run table already built (e.g. streamed from Prometheus).

    A ``gpus`` column weighs each run's reclaimed time (a workload's GPUs); ``observed_s``
    is then in GPU-seconds too. Wake-ups count workloads, not GPUs.
    """
    out = replay_runs(runs, policy(runs), max_gap_s)
    base = window_min * 60.0
    over = np.maximum(0.0, runs["length"].to_numpy(dtype=float) - base) * gpu_weights(runs)
    bound = float(over.sum()) if len(runs) else 0.0
    return ReplayResult(
        policy=name,
        window_min=float(window_min),
        threshold_pct=float(threshold),
        pods=pods,
        observed_gpu_hours=observed_s / 3600.0,
        idle_runs=len(runs),
        reclaims=int(out["reclaim_at"].notna().sum()),
        reclaimed_gpu_hours=float(out["reclaimed_gpu_s"].sum()) / 3600.0,
        wakeups=int(out["wakeup"].sum()),
        gap_resumes=int(out["gap_resume"].sum()),
        never_woke=int(out["never_woke"].sum()),
        bound_gpu_hours=bound / 3600.0,
        qps_samples_while_down=None if qps is None else qps_samples_while_down(out, qps),
    )


def seen_at(runs: pd.DataFrame, t: float) -> pd.DataFrame:
    """The runs as a controller sees them at ``t``: a run that started before ``t`` and ends after it
    is still open (its end, and whether it wakes the workload, are still to come). Runs that start
    at or after ``t`` are the caller's to leave out."""
    out = runs.copy()
    late = out["end"].to_numpy(dtype=float) > t
    if late.any():
        out.loc[late, "end"] = t
        out.loc[late, "last_idle"] = np.minimum(out.loc[late, "last_idle"].to_numpy(dtype=float), t)
        out.loc[late, "length"] = t - out.loc[late, "start"].to_numpy(dtype=float)
        out.loc[late, "ended_by"] = "end"
        out.loc[late, "next_active"] = False
    return out
