"""The reclaim frontier on the public GenAI duty-cycle trace, measured out of sample, beside its limit.

Parts 1 and 2 of the trace (96 pods, 22.8 h). The adaptive policy (the survival window for
each wake-up budget, or the fixed fallback) is chosen on the first half of the hours;
every row, fixed, adaptive and clairvoyant, is scored on the idle runs that start in the
second half (the adaptive policy remembers the first half as history, as it would in
production). Prints the rows, each adaptive row's GPU-hours over the fixed frontier's at
the same wake-ups and its share of the headroom to the clairvoyant limit, how long the
frontier took, and the survival window at prices along the budget's ladder, fitted on the
first half and scored on the second (candidates a budget chooses from, before the fallback),
with the built-in adaptive rule beside them; then the same prices refit every hour of the second
half on what a controller had seen by then, and each budget as the live flow applies it
(``RefitRule``, refit every 1, 3 and 6 hours and the default day, which this trace holds once); last,
each part on its own, a fleet of 48 pods; then the hindsight bound of each family of contexts (the best
window per context chosen on the scored half itself), near the recommended budget's wake-ups.

    python -m bench.bench_frontier [TRACE_DIR] [PLOT.png] [--smoke]

``--smoke``: the first 12 pods of the trace's first part, refit every 4 hours, the plot in a temporary folder.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bench._run import TRACES, headline, parser, run, scratch
from gpuaas.policies.analysis import (
    BUDGETS,
    DETECT_MIN,
    ClairvoyantCurve,
    FrontierRow,
    clairvoyant_curve,
    frontier,
    headroom_captured,
    hindsight_curve,
    ratio_at_equal_wakeups,
    seen_at,
)
from gpuaas.policies.reclaim import (
    AdaptiveWindow,
    RefitRule,
    choose_for_budgets,
    context_band,
    fit_survival,
    idle_runs,
    outcomes,
    recent_idle_share,
    replay_runs,
)
from gpuaas.policy import AdaptivePolicy, ColdStartBudget
from gpuaas.sources.traces import load_utilization
from reports.frontier import plot_frontier

DEFAULT = TRACES / "alibaba-genai-2026"


def _pct(x: float | None) -> str:
    return "" if x is None else f"{x:.0%}"


def _as_the_flow_refits(runs: pd.DataFrame, split: float, period_h: float, budget: float) -> np.ndarray:
    """The windows ``RefitRule`` gives, the deployed choice, with the trace moved in time so that a refit
    boundary falls on the split (the replay and the contexts only see time differences)."""
    period = period_h * 3600.0
    shift = math.ceil(split / period) * period - split
    moved = runs.assign(start=runs["start"] + shift, end=runs["end"] + shift, last_idle=runs["last_idle"] + shift)
    rule = RefitRule(ColdStartBudget(wakeups_per_workload_per_day=budget, refit_hours=period_h),
                     history_hours=AdaptivePolicy().history_hours, base_s=1800.0, first_s=split + shift)
    windows: np.ndarray = rule(moved)
    return windows


def _where_the_headroom_is(runs: pd.DataFrame, scored: np.ndarray, split: float, windows: np.ndarray) -> None:
    """How many long spells each half holds, and, at the recommended budget's wake-ups, what the clairvoyant
    reclaims from the spells it stops beside what the policy reclaims from them, per context."""
    print("\nidle spells of 30 / 60 min or more (GPU-hours in the 60-min ones):")
    for name, part in (("first half, seen at the split", seen_at(runs[~scored], split)), ("second half", runs[scored])):
        length = part["length"].to_numpy(dtype=float)
        print(f"  {name}: {int((length >= 1800).sum())} / {int((length >= 3600).sum())} "
              f"({length[length >= 3600].sum() / 3600:.1f})")
    policy = replay_runs(runs, windows)
    clairvoyant = replay_runs(runs, np.full(len(runs), DETECT_MIN * 60.0))
    gain = clairvoyant["reclaimed_gpu_s"].to_numpy(dtype=float)
    costly = scored & clairvoyant["wakeup"].to_numpy(dtype=bool)
    k = int(policy["wakeup"].to_numpy()[scored].sum())
    stopped = scored & ~costly
    stopped[np.flatnonzero(costly)[np.argsort(-gain[costly], kind="stable")[:k]]] = True
    ours = policy["reclaimed_gpu_s"].to_numpy(dtype=float)
    print(f"at budget 1 ({k} wake-ups), GPU-hours of the spells the clairvoyant stops: its own / the policy's, "
          "and the policy's elsewhere, per context (recent idle share):")
    bands = context_band(runs)
    for band, name in enumerate(("under 90 %", "90 % or more")):
        here = bands == band
        print(f"  {name}: {gain[stopped & here].sum() / 3600:.1f} / {ours[stopped & here].sum() / 3600:.1f}, "
              f"elsewhere {ours[scored & ~stopped & here].sum() / 3600:.1f}")


def _each_part_alone(parts: list[Path]) -> None:
    """The adaptive rows of each part on its own (48 pods, as a fleet of that size would see them): chosen on
    its first half, scored on its second, over the fixed frontier and as a share of the headroom."""
    if len(parts) < 2:
        return
    print("\neach part alone, chosen on its first half and scored on its second (budget: GPU-h / wake-ups, "
          "vs fixed, headroom):")
    for part in parts:
        util = load_utilization([part])
        runs = idle_runs(util, 5.0)
        rows = frontier(runs, split_t=(float(util["t"].min()) + float(util["t"].max())) / 2)
        shown = [f"{r.parameter:g}: {r.reclaimed_gpu_hours:.1f} / {r.wakeups}, "
                 f"{'-' if x is None else f'{x:.2f}x'}, {_pct(r.headroom_captured) or '-'}"
                 for r, x in ratio_at_equal_wakeups(rows)]
        print(f"  {part.stem} ({util['pod'].nunique()} pods): " + "; ".join(shown))


def _fleet_idle_share(runs: pd.DataFrame, lookback_s: float = 3600.0) -> np.ndarray:
    """Per run: the share of ``[start - lookback_s, start)`` the fleet's workloads spent idle, on average.

    The fleet's idle time up to ``x`` is the sum over runs of ``clip(x - start, 0, length)``: the runs
    started by ``x`` count from their start, less those ended by ``x`` from their end.
    """
    start = runs["start"].to_numpy(dtype=float)
    end = start + runs["length"].to_numpy(dtype=float)
    starts, ends = np.sort(start), np.sort(end)
    before_s, before_e = np.concatenate(([0.0], np.cumsum(starts))), np.concatenate(([0.0], np.cumsum(ends)))

    def idle_until(x: np.ndarray) -> np.ndarray:
        ns, ne = np.searchsorted(starts, x, side="right"), np.searchsorted(ends, x, side="right")
        result: np.ndarray = (ns * x - before_s[ns]) - (ne * x - before_e[ne])
        return result

    share: np.ndarray = (idle_until(start) - idle_until(start - lookback_s)) / (runs["pod"].nunique() * lookback_s)
    return share


def _hindsight_bounds(runs: pd.DataFrame, scored: np.ndarray, fixed: list[FrontierRow], curve: ClairvoyantCurve,
                      wakeups: int) -> None:
    """What each family of contexts could reach with its windows chosen on the scored half itself, at
    ``wakeups`` and at 25 % fewer and more: the ceiling no policy of that family passes there."""
    share = {lookback: recent_idle_share(runs, lookback) for lookback in (1800.0, 7200.0, 14400.0)}
    previous = runs.groupby("pod", sort=False)["length"].shift(1).fillna(0.0).to_numpy(dtype=float)
    fleet = _fleet_idle_share(runs)
    fleet_band = np.digitize(fleet, np.quantile(fleet[scored], [0.2, 0.4, 0.6, 0.8]))  # the scored half's own
    two_hours = np.digitize(share[7200.0], [0.7, 0.85, 0.9, 0.95]) * 10
    hour = (runs["start"].to_numpy(dtype=float) % 86400.0 // 3600.0).astype(int)  # on one day, also a stretch of time
    families = {
        "one window for all": np.zeros(len(runs), dtype=int),
        "2 h idle share, edge at 90 % (the policy's)": context_band(runs),
        "2 h idle share in 9 bands": np.digitize(share[7200.0], [0.3, 0.5, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98]),
        "2 h x 30 min idle share": two_hours + np.digitize(share[1800.0], [0.5, 0.8, 0.9, 0.95, 0.99]),
        "2 h idle share x previous spell": two_hours + np.digitize(previous, [60, 300, 900, 1800, 3600]),
        "2 h x 4 h idle share": two_hours + np.digitize(share[14400.0], [0.5, 0.7, 0.85, 0.9, 0.95]),
        "fleet idle share, last hour (5 bands)": fleet_band,
        "2 h idle share x fleet idle share": two_hours + fleet_band,
        "hour of the day": hour,
        "hour of the day x the policy's context": hour * 10 + context_band(runs),
    }
    replayed = outcomes(runs)
    on_scored = replayed.of(scored)
    at = (round(0.75 * wakeups), wakeups, round(1.25 * wakeups))
    print(f"\nhindsight bound of each context family (the best window per context, chosen on the scored half "
          f"itself) at {at[0]}, {at[1]} and {at[2]} wake-ups: vs fixed (headroom)")
    for name, codes in families.items():
        ceiling = hindsight_curve(on_scored, codes[scored])
        shown = []
        for k in at:
            hours = ceiling.hours_at(k)
            row = FrontierRow("adaptive", 0.0, hours, k) if hours is not None else None
            ratio = ratio_at_equal_wakeups([*fixed, row])[0][1] if row is not None else None
            shown.append("-" if row is None or ratio is None
                         else f"{ratio:.2f}x ({_pct(headroom_captured(row, fixed, curve))})")
        contexts = len(np.unique(codes[scored]))
        print(f"  {name} ({contexts} context{'' if contexts == 1 else 's'}): {' / '.join(shown)}")
    ceiling = hindsight_curve(on_scored, context_band(runs)[scored])
    best = []
    for k in range(10, fixed[0].wakeups + 1, 10):  # every tenth wake-up up to the 5-minute rule's
        hours = ceiling.hours_at(k)
        ratio = ratio_at_equal_wakeups([*fixed, FrontierRow("adaptive", 0.0, hours, k)])[0][1] if hours else None
        if ratio is not None:
            best.append((ratio, k))
    if best:
        ratio, k = max(best)
        print(f"the policy's own family at any number of wake-ups (every tenth, {best[0][1]} to {best[-1][1]}): at "
              f"most {ratio:.2f}x, at {k} wake-ups")


def main(argv: list[str]) -> int:
    cli = parser(__doc__)
    cli.add_argument("trace", nargs="?", type=Path, default=DEFAULT)
    cli.add_argument("plot", nargs="?", type=Path, default=Path("reclaim-frontier.png"))
    args = cli.parse_args(argv)
    parts = sorted(args.trace.glob("pod_gpu_duty_cycle_part*.csv"))[: 1 if args.smoke else None]
    if not parts:
        raise FileNotFoundError(f"no pod_gpu_duty_cycle_part*.csv under {args.trace}")
    plot: Path = scratch("bench-frontier-") / "frontier.png" if args.smoke else args.plot
    util = load_utilization(parts)
    if args.smoke:
        util = util[util["pod"].isin(sorted(util["pod"].unique())[:12])]
    started = time.perf_counter()
    runs = idle_runs(util, 5.0)
    t0, t1 = float(util["t"].min()), float(util["t"].max())
    split = (t0 + t1) / 2
    rows = frontier(runs, split_t=split)
    elapsed = time.perf_counter() - started
    print(f"{util['pod'].nunique()} pods, {(t1 - t0) / 3600:.1f} h; calibrate on the first "
          f"{(split - t0) / 3600:.1f} h, score on the last {(t1 - split) / 3600:.1f} h (frontier in {elapsed:.1f} s)")
    ratios = {id(r): x for r, x in ratio_at_equal_wakeups(rows)}
    print(f"{'policy':12s} {'parameter':>9s} {'GPU-h':>8s} {'wake-ups':>8s} {'vs fixed':>8s} {'headroom':>8s}")
    for r in rows:
        x = ratios.get(id(r))
        print(f"{r.policy:12s} {r.parameter:>9g} {r.reclaimed_gpu_hours:>8.1f} {r.wakeups:>8d} "
              f"{'' if x is None else f'{x:.2f}x':>8s} {_pct(r.headroom_captured):>8s}")
    measured = [x for _, x in ratio_at_equal_wakeups(rows) if x is not None]
    captured = [r.headroom_captured for r in rows if r.headroom_captured is not None]
    headline(f"{len(rows)} frontier rows in {elapsed:.1f} s; adaptive over fixed at equal wake-ups: best "
             f"{max(measured, default=0.0):.2f}x, median {float(np.median(measured)) if measured else 0.0:.2f}x; "
             f"headroom captured at best {max(captured, default=0.0):.0%}")

    scored = runs["start"].to_numpy() >= split
    calibration = runs[~scored].reset_index(drop=True)
    calibration_seen = seen_at(runs[~scored], split)
    fixed = [r for r in rows if r.policy == "fixed"]
    curve = clairvoyant_curve(runs, scored=scored)
    seen = outcomes(calibration)

    def scored_row(name: str, parameter: float, windows: np.ndarray) -> str:
        out = replay_runs(runs, windows)
        row = FrontierRow("adaptive", parameter, float(out["reclaimed_gpu_s"].to_numpy()[scored].sum()) / 3600,
                          int(out["wakeup"].to_numpy()[scored].sum()))
        (_, ratio), = ratio_at_equal_wakeups([*fixed, row])
        return (f"{name:12s} {parameter:>9g} {row.reclaimed_gpu_hours:>8.1f} {row.wakeups:>8d} "
                f"{'' if ratio is None else f'{ratio:.2f}x':>8s} {_pct(headroom_captured(row, fixed, curve)):>8s}")

    print("\nthe survival window at each price (GPU-min per wake-up), fitted on the first half, no fallback:")
    for price in (0.0, 5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 180.0, 300.0, 600.0, 1200.0):
        rule = fit_survival(calibration, price_gpu_min=price, history=seen)
        print(scored_row("survival", price, rule(runs)))
    print(scored_row("built-in", 30, AdaptiveWindow(1800.0)(runs)))
    print("\nrefit every hour on the runs seen by then (open ones as open), scored on the second half:")
    start = runs["start"].to_numpy(dtype=float)
    every = 4 * 3600.0 if args.smoke else 3600.0  # the smoke run only checks that it runs
    refits = np.arange(split, t1, every)
    for price in (10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 120.0, 300.0):
        windows = fit_survival(calibration, price_gpu_min=price, history=seen)(runs)
        for at in refits:
            rule = fit_survival(seen_at(runs[start < at], float(at)).reset_index(drop=True), price_gpu_min=price)
            now = (start >= at) & (start < at + every)
            windows[now] = rule(runs)[now]
        print(scored_row("online", price, windows))
    print("\neach budget as the live flow applies it (RefitRule: chosen again at every refit boundary on the "
          "history a cycle reads), the boundaries placed at the split and every refit_hours after it, "
          "scored on the second half:")
    for period_h in (4.0, 24.0) if args.smoke else (1.0, 3.0, 6.0, 24.0):
        for budget in BUDGETS:
            print(scored_row(f"refit {period_h:g} h", budget, _as_the_flow_refits(runs, split, period_h, budget)),
                  flush=True)
    initial = choose_for_budgets(calibration_seen, workloads=int(calibration_seen["pod"].nunique()),
                                 days=(split - t0) / 86400.0, budgets=[1.0])[0].policy(runs)
    _where_the_headroom_is(runs, scored, split, initial)
    recommended = next(r for r in rows if r.policy == "adaptive" and r.parameter == 1.0)
    _hindsight_bounds(runs, scored, fixed, curve, recommended.wakeups)
    _each_part_alone(parts)
    plot_frontier(rows, plot, "GenAI trace: chosen on the first half of the hours, scored on the second")
    print(f"plot: {plot}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main, "bench_frontier"))
