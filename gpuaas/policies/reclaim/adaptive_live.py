"""The adaptive window in the live flow: is this workload's current idle spell past its window?

Why a module: the live flow must decide exactly as ``gpuaas replay reclaim --adaptive``
replays, so it uses the same idle runs (built from the fleet's history by a
:class:`~gpuaas.policies.reclaim.run_stream.RunStream`) and the same window policy. At ``now`` a
workload is

* ``idle``: its newest sample is idle and at most ``max_gap_s`` old (the replay still
  "sees" the run), so it is in an open run that started at ``idle_since``; the policy gives
  that run its window from the runs that ended before it started; ``due`` when
  ``now - idle_since >= window`` (the replay reclaims at ``idle_since + window``).
* ``active``: its newest sample is above the threshold.
* ``stale``: its newest sample is older than ``max_gap_s``: missing data, never idle.

A workload without any history sample is absent from the result (``unknown`` upstream).
Pure: runs, last samples, the policy and the instant in; one row per workload out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpuaas.models import MAX_GAP_S
from gpuaas.policies.reclaim.adaptive_window import AdaptiveWindow
from gpuaas.policies.reclaim.cold_start import WindowRule
from gpuaas.policies.reclaim.idle import resolve_rule
from gpuaas.policies.reclaim.refit import choose_at, reasons, refit_boundary
from gpuaas.policies.reclaim.replay import WindowPolicy
from gpuaas.policies.reclaim.run_stream import RunStream
from gpuaas.policy import WORKLOAD_KINDS, Policy, ReclaimStrategy

__all__ = ["ADAPTIVE_COLUMNS", "adaptive_rules", "adaptive_state", "apply_adaptive", "live_states", "percent"]

ADAPTIVE_COLUMNS = ["key", "state", "idle_since", "idle_seconds", "window_seconds", "due", "why"]


def adaptive_state(runs: pd.DataFrame, last: pd.DataFrame, now_s: float, policy: WindowPolicy,
                   why: list[str] | None = None, *, threshold: float,
                   max_gap_s: float = MAX_GAP_S) -> pd.DataFrame:
    """One row per key of ``last`` (``pod, t, value``); ``why`` gives a reason per run of ``runs``."""
    if last.empty:
        return pd.DataFrame(columns=ADAPTIVE_COLUMNS)
    windows = policy(runs) if len(runs) else np.zeros(0)
    reasons = why if why is not None else [""] * len(runs)
    table = runs.assign(window=windows, why=reasons)
    open_runs = table[table["ended_by"] == "end"].drop_duplicates("pod", keep="last").set_index("pod")
    out = last.rename(columns={"pod": "key"}).reset_index(drop=True)
    age = now_s - out["t"].to_numpy(dtype=float)
    idle_now = out["value"].to_numpy(dtype=float) <= threshold
    state = np.where(age > max_gap_s, "stale", np.where(idle_now, "idle", "active"))
    since = out["key"].map(open_runs["start"]).where(state == "idle")
    out["state"] = state
    out["idle_since"] = since.astype(float)
    out["idle_seconds"] = now_s - out["idle_since"]
    out["window_seconds"] = out["key"].map(open_runs["window"]).where(state == "idle").astype(float)
    out["due"] = (out["idle_seconds"] >= out["window_seconds"]).fillna(False).astype(bool)
    out["why"] = out["key"].map(open_runs["why"]).where(state == "idle", None)
    return out[ADAPTIVE_COLUMNS]


def apply_adaptive(idle: pd.DataFrame, states: pd.DataFrame | None) -> pd.DataFrame:
    """Re-decide the adaptive rows of ``find_idle``'s result from their history ``states``.

    ``states``: ``adaptive_state`` rows keyed by Workload ``uid``, with the ``threshold`` and
    ``base_window_minutes`` they were computed for (a rule's threshold and window). Only rows
    that GPU activity alone decided are touched (an opt-out, a grace period, incomplete
    telemetry or served requests keep their verdict). ``window_minutes`` becomes the window
    used, ``base_window_minutes`` the rule's; ``window_reason`` says why.
    """
    out = idle.copy()
    out["base_window_minutes"] = out["window_minutes"]
    out["window_reason"] = None
    out["idle_since"] = np.nan
    rows = (out["strategy"] == "adaptive") & out["activity_decides"].astype(bool)
    if not rows.any():
        return out
    keyed = (states if states is not None else pd.DataFrame(columns=[*ADAPTIVE_COLUMNS, "threshold",
                                                                     "base_window_minutes"]))
    keyed = keyed.rename(columns={"key": "uid"})
    merged = out.loc[rows, ["uid", "threshold", "window_minutes"]].merge(
        keyed, left_on=["uid", "threshold", "window_minutes"], right_on=["uid", "threshold", "base_window_minutes"],
        how="left")
    merged.index = out.index[rows]
    state = merged["state"].fillna("none")
    idle_min = merged["idle_seconds"].astype(float) / 60.0
    window_min = merged["window_seconds"].astype(float) / 60.0
    verdict = np.select(
        [state == "none", state == "stale", state == "active", ~merged["due"].fillna(False).astype(bool)],
        ["unknown", "unknown", "busy", "busy"], default="idle")
    reason = [
        "no activity history for the adaptive window" if st == "none" else
        "activity history is stale: no adaptive decision on missing data" if st == "stale" else
        "GPU activity above the threshold in the newest minute" if st == "active" else
        f"idle for {im:.0f} min, under its adaptive window of {wm:g} min ({why})" if v == "busy" else
        f"idle for {im:.0f} min, past its adaptive window of {wm:g} min ({why})"
        for st, v, im, wm, why in zip(state, verdict, idle_min, window_min, merged["why"], strict=True)
    ]
    out.loc[rows, "verdict"] = verdict
    out.loc[rows, "reason"] = reason
    out.loc[rows, "window_reason"] = merged["why"]
    out.loc[rows, "idle_since"] = merged["idle_since"].astype(float)
    due = rows.copy()
    due.loc[rows] = verdict == "idle"
    out.loc[due, "window_minutes"] = window_min[verdict == "idle"].to_numpy()
    out.loc[due, "idle_seconds"] = merged.loc[verdict == "idle", "idle_seconds"].astype(float).to_numpy()
    out.loc[rows & ~due, "idle_seconds"] = np.nan
    return out


def adaptive_rules(policy: Policy) -> list[tuple[float, float]]:
    """The distinct ``(threshold, window_minutes)`` of every rule that resolves to ``adaptive``."""
    tenants: list[str | None] = [None, *(t.name for t in policy.tenants)]
    combos = set()
    for kind in WORKLOAD_KINDS:
        for tenant in tenants:
            rule = resolve_rule(policy, kind, tenant)
            if rule.strategy is ReclaimStrategy.adaptive:
                combos.add((float(rule.activity_threshold), float(rule.window_minutes)))
    return sorted(combos)


def percent(threshold: float) -> float:
    """A policy threshold (0-1) on the history's percent scale, without float noise."""
    return round(threshold * 100.0, 6)


def live_states(streams: dict[float, RunStream], policy: Policy, now_s: float) -> pd.DataFrame:
    """``adaptive_state`` for every adaptive rule, from the run streams of its threshold.

    With a budget the window is the one chosen at the last refit boundary on the history read
    (:func:`~gpuaas.policies.reclaim.refit.choose_at`), applied to every run idle since, so every
    cycle of a period decides with the same window for the same context, as
    :class:`~gpuaas.policies.reclaim.refit.RefitRule` replays it."""
    adaptive = policy.reclaim.adaptive
    budget = adaptive.cold_start_budget
    frames = []
    for threshold, window in adaptive_rules(policy):
        stream = streams[percent(threshold)]
        runs = stream.runs()
        rule: WindowRule
        if budget is None:
            rule = AdaptiveWindow(base_s=window * 60.0)
            why = [f"{w}; built-in adaptive rule" for w in rule.why(runs)]
        else:
            fit_at = refit_boundary(now_s, budget.refit_hours)
            choice = choose_at(runs, fit_at, budget=budget, history_hours=adaptive.history_hours, base_s=window * 60.0)
            rule, why = choice.policy, reasons(choice, runs, fit_at)
        state = adaptive_state(runs, stream.last_samples(), now_s, rule, why, threshold=percent(threshold),
                               max_gap_s=stream.max_gap_s)
        frames.append(state.assign(threshold=threshold, base_window_minutes=window))
    if not frames:
        return pd.DataFrame(columns=[*ADAPTIVE_COLUMNS, "threshold", "base_window_minutes"])
    return pd.concat(frames, ignore_index=True)
