"""``gpuaas replay reclaim``: replay reclaim policies on a recorded GPU duty-cycle trace.

Why on the command line: choosing a reclaim window is a trade between GPU-hours and cold
starts, and the trade should be read off real data before a policy file changes. The
semantics are those of :mod:`gpuaas.policies.reclaim.replay`. ``--frontier`` walks the trade-off
(:mod:`gpuaas.policies.analysis.frontier`); ``--from-prometheus`` replays the fleet's own history
(:mod:`gpuaas.idle_history`) with the same semantics.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
import typer

from gpuaas.cli._backtest import MAX_SINCE, fleet_history, print_frontier
from gpuaas.cli._common import (
    OutputFormat,
    check_outputs,
    describe_error,
    err_console,
    fail,
    flag_given,
    lead,
    namespace_name,
    print_json,
    settings_or_exit,
    usage_error,
)
from gpuaas.cli._progress import progress
from gpuaas.cli._tables import print_table
from gpuaas.cli.audit_cmd import parse_since
from gpuaas.errors import GpuaasError
from gpuaas.phrases import counted
from gpuaas.policies.analysis import DETECT_MIN, calibration_evidence
from gpuaas.policies.analysis import frontier as frontier_rows
from gpuaas.policies.reclaim import (
    AdaptiveWindow,
    Decided,
    RefitRule,
    ReplayResult,
    WindowRule,
    fixed_windows,
    idle_runs,
    observed_seconds,
    refit_boundary,
    replay_runs,
    replay_table,
)
from gpuaas.policy import MAX_MINUTES, AdaptivePolicy, ColdStartBudget
from gpuaas.sources.history import MAX_POINTS
from gpuaas.sources.traces import load_qps, load_utilization
from reports.frontier import nothing_scored_headline, plot_frontier
from reports.reclaim_replay import replay_headline

__all__ = ["reclaim"]




class DutyUnit(str, Enum):
    auto = "auto"
    percent = "percent"
    fraction = "fraction"


_REFIT_HOURS: float = ColdStartBudget.model_fields["refit_hours"].default
_HISTORY_HOURS: float = AdaptivePolicy.model_fields["history_hours"].default

_COLUMNS = {
    "policy": "policy", "window_min": "window (min)", "pods": "pods", "observed_gpu_hours": "GPU-hours observed",
    "reclaimed_gpu_hours": "GPU-hours reclaimed", "wakeups": "wake-ups", "bound_gpu_hours": "bound (GPU-hours)",
    "reclaims": "reclaims", "gap_resumes": "resumed after a gap", "never_woke": "never woke",
}
"""A replay's fields (the JSON's keys) and their headers in the table."""
_OPTIONAL = ("resumed after a gap", "never woke", "reclaims", "bound (GPU-hours)", "pods")
"""What a narrow terminal leaves out first: the counts behind the two figures compared, GPU-hours and wake-ups."""


def _row(result: ReplayResult) -> list[Any]:
    data = result.to_dict()
    return [round(v, 2) if isinstance(v, float) else v for v in (data[c] for c in _COLUMNS)]


def _reclaim_times(runs: pd.DataFrame, policy: WindowRule | None, window_s: float) -> list[dict[str, Any]]:
    """When each reclaim happens (UTC ISO) and why: what the live flow is checked against."""
    windows = policy(runs) if policy is not None else fixed_windows(window_s)(runs)
    why = policy.why(runs) if policy is not None else [f"fixed {window_s / 60:g} min window"] * len(runs)
    out = replay_runs(runs, windows)
    rows = []
    for (_, run), reason in zip(out.iterrows(), why, strict=True):
        if pd.isna(run["reclaim_at"]):
            continue
        rows.append({"workload": run["pod"], "idle_since": _iso(run["start"]), "reclaim_at": _iso(run["reclaim_at"]),
                     "window_min": float(run["window"]) / 60.0, "why": reason})
    return rows


def _iso(t: float) -> str:
    return datetime.fromtimestamp(float(t), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def reclaim(
    ctx: typer.Context,
    utilization: Annotated[
        list[Path] | None,
        typer.Option("--utilization", help="Duty-cycle CSV; repeat for part files (concatenated)."),
    ] = None,
    qps: Annotated[Path | None, typer.Option("--qps", help="Request-rate CSV (optional).")] = None,
    window: Annotated[
        float, typer.Option("--window", min=0.0, max=MAX_MINUTES, help="Idle window in minutes (the base window).")
    ] = 30.0,
    threshold: Annotated[
        float, typer.Option("--threshold", min=0.0, max=100.0, help="Idle when duty cycle <= this %.")
    ] = 5.0,
    adaptive: Annotated[
        bool, typer.Option("--adaptive", help="Per-pod adaptive window instead of the fixed rule.")
    ] = False,
    budget: Annotated[
        float | None, typer.Option("--budget", min=0.0, max=24 * 60, help="Adaptive: wake-ups per workload per day, the "
                                   "window chosen at every refit boundary on the history before it, as the "
                                   "live flow chooses it.")
    ] = None,
    refit_hours: Annotated[
        float, typer.Option("--refit-hours", min=0.01, max=24 * 7, help=(
            "--budget: hours between refits, at the multiples of it since 1970-01-01 00:00 UTC: a divisor of 24 "
            "refits at 00:00 UTC and every that many hours after; 5 at an hour that moves from day to day, 168 on "
            "Thursdays at 00:00 UTC."))
    ] = _REFIT_HOURS,
    history_hours: Annotated[
        float, typer.Option("--history-hours", min=0.01, max=24 * 31, help="--budget: hours of history each refit reads.")
    ] = _HISTORY_HOURS,
    unit: Annotated[DutyUnit, typer.Option("--unit", help="Duty-cycle unit in the CSV.")] = DutyUnit.auto,
    frontier: Annotated[
        bool, typer.Option("--frontier", help="GPU-hours vs wake-ups: fixed windows, adaptive budgets and the "
                           "clairvoyant limit at the fixed rows' wake-ups.")
    ] = False,
    detect_minutes: Annotated[
        float, typer.Option("--detect-minutes", min=0.0, max=MAX_MINUTES, help="--frontier: minutes an idle run lasts before the "
                            "clairvoyant rows (each run's length known when it starts) may stop it.")
    ] = DETECT_MIN,
    plot: Annotated[Path, typer.Option("--plot", help="Where --frontier writes its PNG.")] = Path(
        "reclaim-frontier.png"),
    calibrate: Annotated[
        float, typer.Option("--calibrate", min=0.0, max=0.9, help="--frontier: share of the hours that "
                            "chooses the adaptive parameters; the rest scores every row (0: all of both).")
    ] = 0.5,
    from_prometheus: Annotated[
        bool, typer.Option("--from-prometheus", help="Replay the fleet's own GPU history from Prometheus.")
    ] = False,
    since: Annotated[str | None, typer.Option("--since", help="--from-prometheus: how far back (7d, 12h, ISO; "
                                              "default 7d).")] = None,
    namespace: Annotated[
        list[str] | None, typer.Option("--namespace", parser=namespace_name, metavar="NAMESPACE",
                                       help="--from-prometheus: only these namespaces (repeat).")
    ] = None,
    chunk_hours: Annotated[
        float, typer.Option("--chunk-hours", min=0.1, max=MAX_POINTS // 60, help="--from-prometheus: hours per range "
                            "query, at most one query's 11,000 one-minute steps (memory grows with GPUs x chunk).")
    ] = 1.0,
    reclaims: Annotated[
        bool, typer.Option("--reclaims", help="JSON: list every reclaim (workload, minute, window, why).")
    ] = False,
    format: Annotated[OutputFormat, typer.Option("--format", help="Output format.")] = OutputFormat.table,
) -> None:
    """Replay a reclaim policy causally; print GPU-hours reclaimed, wake-ups and the bound."""
    if budget is not None and budget <= 0:
        raise usage_error("must be above 0 wake-ups per workload per day", "--budget")
    if from_prometheus == bool(utilization):
        raise usage_error("give --utilization CSV(s) or --from-prometheus" + (", not both" if from_prometheus else ""))
    # A flag that would be ignored is refused: the replay would be misread as one it was not.
    for flag, applies, needs in (("detect_minutes", frontier, "--frontier"), ("plot", frontier, "--frontier"),
                                 ("calibrate", frontier, "--frontier"), ("refit_hours", budget is not None, "--budget"),
                                 ("history_hours", budget is not None, "--budget"),
                                 ("chunk_hours", from_prometheus, "--from-prometheus")):
        if flag_given(ctx, flag) and not applies:
            raise usage_error(f"--{flag.replace('_', '-')} applies with {needs} only: give it with {needs}, or leave "
                              "it out")
    for flag in ("budget", "adaptive", "qps", "reclaims"):  # --frontier walks windows and budgets of its own
        if frontier and flag_given(ctx, flag):
            raise usage_error(f"--{flag} does not apply with --frontier (it replays fixed windows, adaptive budgets "
                              "and the clairvoyant limit of its own): give one or the other")
    if window <= 0:  # a 0-minute window stops every spell as it starts: no rule a policy may hold (above 0)
        raise usage_error(f"--window must be above 0 minutes, as the policy's window_minutes, got {window:g}")
    if flag_given(ctx, "reclaims") and format is not OutputFormat.json:
        raise usage_error("--reclaims lists the reclaims in the JSON only: give it with --format json, or leave it out")
    if frontier:
        check_outputs({"--plot": plot}, {"--utilization": utilization})  # --qps is refused above
    if not from_prometheus and (since is not None or namespace):  # it would be ignored, and the replay misread
        raise usage_error(f"{'--since' if since is not None else '--namespace'}: reads the Prometheus history: "
                          "give it with --from-prometheus, or leave it out")
    end = datetime.now(UTC)
    try:
        start = parse_since(since or "7d", end)
    except (ValueError, OverflowError) as exc:
        raise usage_error(str(exc) if isinstance(exc, ValueError) else f"{since!r} reaches before year 1",
                          "--since") from exc
    if end <= start:
        raise usage_error("must be in the past", "--since")
    if end - start > MAX_SINCE:  # one range query per chunk of it: an unbounded count (0001-01-01: 17.7 million)
        raise usage_error(f"at most {MAX_SINCE.days}d back, the longest history a Prometheus is commonly set to "
                          "keep", "--since")
    try:
        rates = None
        if from_prometheus:
            settings = settings_or_exit()
            runs, pods, observed_s = fleet_history(settings, start, end, namespaces=namespace or (),
                                                   threshold_pct=threshold, chunk_hours=chunk_hours)
            span = (start.timestamp(), end.timestamp())
        else:
            util = load_utilization(utilization or [], unit=unit.value)
            rates = load_qps(qps) if qps is not None else None
            runs, pods = idle_runs(util, threshold), int(util["pod"].nunique())
            observed_s = observed_seconds(util)
            span = (float(util["t"].min()), float(util["t"].max())) if len(util) else (0.0, 0.0)
    except GpuaasError as exc:
        raise fail(describe_error(exc)) from exc  # an API error status names the API that answered
    except (ValueError, OverflowError) as exc:
        raise fail(str(exc)) from exc
    base_s = window * 60.0
    if frontier:
        split = span[0] + (span[1] - span[0]) * calibrate if calibrate > 0 else None
        with progress(f"frontier: {counted(len(runs), 'idle run')}, 9 windows, 7 budgets and the clairvoyant limit"):
            rows = frontier_rows(runs, split_t=split, base_s=base_s, detect_s=detect_minutes * 60.0)
            evidence = calibration_evidence(runs, split)
        how = "all hours" if split is None else f"chosen on the first {calibrate:.0%} of the hours, scored on the rest"
        title = f"Reclaim frontier, idle <= {threshold:g} % ({how})"
        # every row 0: the first line says why in numbers, and the plot is an empty frame that says the same
        nothing = nothing_scored_headline(rows, runs, pods=pods, span=span, split_t=split, threshold_pct=threshold,
                                          from_prometheus=from_prometheus)
        try:
            plot_frontier(rows, plot, title, empty_note=nothing)
        except GpuaasError as exc:
            raise fail(str(exc)) from exc
        print_frontier(rows, evidence, format, title, headline=nothing)
        err_console.print(f"wrote {plot}" + (" (an empty frame: every row is 0)" if nothing else ""), markup=False,
                          highlight=False)
        return
    common: dict[str, Any] = {"pods": pods, "observed_s": observed_s, "qps": rates, "window_min": window,
                              "threshold": threshold}
    fixed = replay_table(runs, fixed_windows(base_s), name="fixed", **common)
    results = [fixed]
    policy: WindowRule | None = None
    refit_note = ""  # printed after the headline: the command's first line says what the replay found
    if adaptive or budget is not None:
        policy = AdaptiveWindow(base_s=base_s)
        if budget is not None:
            rule = RefitRule(ColdStartBudget(wakeups_per_workload_per_day=budget, refit_hours=refit_hours),
                             history_hours=history_hours, base_s=base_s)
            policy = Decided.by(rule, runs)  # the replay and --reclaims read one decision
            refits = round((refit_boundary(span[1], refit_hours) - refit_boundary(span[0], refit_hours))
                           / (refit_hours * 3600.0))
            refit_note = (f"--budget {budget:g}: the window chosen again at {refits} refit "
                          f"boundar{'y' if refits == 1 else 'ies'} ({_apart(refit_hours)}), "
                          f"each on the {history_hours:g} h before it; the fixed {window:g}-min window until "
                          "one has a completed idle spell before it")
        results.append(replay_table(runs, policy, name="adaptive", **common))
    chosen = results[-1]
    data = chosen.to_dict()
    data["headline"] = replay_headline(data, fixed.to_dict() if policy is not None else None, budget)
    lead(data, format)  # the first line: on stdout above the table, on stderr beside the JSON
    if refit_note:
        err_console.print(refit_note, markup=False, highlight=False, soft_wrap=True)
    if format is OutputFormat.json:
        if policy is not None:
            data["fixed"] = fixed.to_dict()
        if reclaims:
            data["reclaims"] = _reclaim_times(runs, policy, base_s)
        print_json(data)
        return
    print_table(f"Reclaim replay, idle <= {threshold:g} %", list(_COLUMNS.values()), [_row(r) for r in results],
                optional=_OPTIONAL)


def _apart(refit_hours: float) -> str:
    """Where the refit boundaries fall, as the live flow puts them: the multiples of the period since the Unix epoch.
    Only a period that divides a day puts one at 00:00 UTC each day (5 h puts them at 14:00 UTC on some days)."""
    per_day = 24 / refit_hours
    if abs(per_day - round(per_day)) < 1e-9:
        return f"{refit_hours:g} h apart from 00:00 UTC"
    return f"{refit_hours:g} h apart, counted from 1970-01-01 00:00 UTC"
