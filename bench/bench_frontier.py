"""The reclaim frontier on the public GenAI duty-cycle trace, measured out of sample.

Parts 1 and 2 of the trace (96 pods, 22.8 h). The adaptive policy's parameters (its
windows, for each wake-up budget) are chosen on the first half of the hours; every row,
fixed and adaptive, is scored on the idle runs that start in the second half (the
adaptive policy remembers the first half as history, as it would in production). Prints
the rows, each adaptive row's GPU-hours over the fixed frontier's at the same wake-ups
(linear between the measured windows), how far the calibration's wake-up rate is from the
scored half's, and the best ratio any member of the family reaches on the scored half
(an oracle, chosen with hindsight: the ceiling of this family on this data), and a wider
oracle: every pod its own best window on the scored half; and the budget re-chosen every
hour on the preceding half-trace of history, as the live flow re-chooses it every run.

    python -m bench.bench_frontier [TRACE_DIR] [PLOT.png] [--smoke]

``--smoke``: the first 12 pods of the trace's first part, the plot in a temporary folder.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bench._run import TRACES, headline, parser, run
from gpuaas.cli._backtest import plot_frontier
from gpuaas.policies.cold_start import choose_for_budget, family
from gpuaas.policies.frontier import frontier, ratio_at_equal_wakeups
from gpuaas.policies.replay import idle_runs, replay_runs
from gpuaas.sources.traces import load_utilization

DEFAULT = TRACES / "alibaba-genai-2026"


def main(argv: list[str]) -> int:
    cli = parser(__doc__)
    cli.add_argument("trace", nargs="?", type=Path, default=DEFAULT)
    cli.add_argument("plot", nargs="?", type=Path, default=Path("reclaim-frontier.png"))
    args = cli.parse_args(argv)
    parts = sorted(args.trace.glob("pod_gpu_duty_cycle_part*.csv"))[: 1 if args.smoke else None]
    if not parts:
        raise FileNotFoundError(f"no pod_gpu_duty_cycle_part*.csv under {args.trace}")
    plot: Path = Path(tempfile.mkdtemp(prefix="bench-frontier-")) / "frontier.png" if args.smoke else args.plot
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
          f"{(split - t0) / 3600:.1f} h, score on the last {(t1 - split) / 3600:.1f} h ({elapsed:.1f} s)")
    hourly = util.assign(hour=((util["t"] - t0) // 3600).astype(int)).groupby("hour")["value"]
    idle_share = (hourly.apply(lambda v: float((v <= 5.0).mean())) * 100).round().astype(int).tolist()
    print(f"idle share of samples per hour (%): {idle_share}")
    ratios = {id(r): x for r, x in ratio_at_equal_wakeups(rows)}
    print(f"{'policy':9s} {'parameter':>9s} {'GPU-h':>8s} {'wake-ups':>8s} {'vs fixed':>8s}")
    for r in rows:
        x = ratios.get(id(r))
        print(f"{r.policy:9s} {r.parameter:>9g} {r.reclaimed_gpu_hours:>8.1f} {r.wakeups:>8d} "
              f"{'' if x is None else f'{x:.2f}x':>8s}")
    measured = [x for _, x in ratio_at_equal_wakeups(rows) if x is not None]
    print(f"adaptive over fixed at equal wake-ups: best {max(measured):.2f}x, median {np.median(measured):.2f}x")
    headline(f"{len(rows)} frontier rows in {elapsed:.1f} s; adaptive over fixed at equal wake-ups: best "
             f"{max(measured):.2f}x, median {np.median(measured):.2f}x")

    calibration = runs[runs["start"].to_numpy() < split]
    scored = runs["start"].to_numpy() >= split
    pods_c = int(calibration["pod"].nunique())
    pods_s = int(runs.loc[scored, "pod"].nunique())
    for budget in (0.5, 4.0):
        choice = choose_for_budget(calibration, workloads=pods_c, days=(split - t0) / 86400,
                                   wakeups_per_workload_per_day=budget)
        out = replay_runs(runs, choice.policy(runs))
        rate = float(out["wakeup"].to_numpy()[scored].sum()) / (pods_s * (t1 - split) / 86400)
        print(f"budget {budget:g}/workload-day: {choice.wakeups_per_workload_day:.2f} on the calibration half, "
              f"{rate:.2f} on the scored half ({choice.why})")
    fixed = sorted((r.wakeups, r.reclaimed_gpu_hours) for r in rows if r.policy == "fixed")
    wk, hours = np.array([f[0] for f in fixed], float), np.array([f[1] for f in fixed], float)
    best = 0.0
    for member in family():
        out = replay_runs(runs, member(runs))
        w, h = int(out["wakeup"].to_numpy()[scored].sum()), float(out["reclaimed_gpu_s"].to_numpy()[scored].sum()) / 3600
        if wk[0] <= w <= wk[-1]:
            best = max(best, h / float(np.interp(w, wk, hours)))
    print(f"oracle: the best member of the family, chosen on the scored half itself: {best:.2f}x")
    # A wider oracle: every pod its own best fixed window on the scored half, for a price per wake-up.
    grid = np.array([1, 2, 3, 5, 10, 15, 20, 30, 45, 60, 90, 120, 240, np.inf]) * 60.0
    pods = runs["pod"].to_numpy()
    per_h, per_k = [], []
    for w_s in grid:
        out = replay_runs(runs, np.full(len(runs), w_s))
        per_h.append(pd.Series(out["reclaimed_gpu_s"].to_numpy() * scored / 3600).groupby(pods).sum())
        per_k.append(pd.Series(out["wakeup"].to_numpy() * scored).groupby(pods).sum())
    h_tab, k_tab = pd.concat(per_h, axis=1).to_numpy(), pd.concat(per_k, axis=1).to_numpy()
    found = []
    for price in (0.2, 0.3, 0.5, 1.0):
        pick = np.argmax(h_tab - price * k_tab, axis=1)
        h, k = h_tab[np.arange(len(h_tab)), pick].sum(), k_tab[np.arange(len(k_tab)), pick].sum()
        if wk[0] <= k <= wk[-1]:
            found.append(f"{h / float(np.interp(k, wk, hours)):.2f}x at {int(k)} wake-ups")
    print(f"oracle: each pod its own best window on the scored half: {', '.join(found)}")
    # As the live flow does: re-chosen every hour on the preceding 11.4 h, applied to the next hour.
    members = family()
    per_member = [replay_runs(runs, m(runs)) for m in members]
    rec = np.array([o["reclaimed_gpu_s"].to_numpy() / 3600 for o in per_member])
    wake = np.array([o["wakeup"].to_numpy(dtype=float) for o in per_member])
    start, end, span = runs["start"].to_numpy(), runs["end"].to_numpy(), split - t0
    for budget in (0.5, 1.0, 4.0):
        h = k = 0.0
        for a in np.arange(split, t1, 3600.0):
            cal = (end < a) & (end >= a - span)
            rate = wake[:, cal].sum(axis=1) / (max(len(set(pods[cal])), 1) * span / 86400)
            ok = rate <= budget
            j = int(np.argmax(np.where(ok, rec[:, cal].sum(axis=1), -1.0))) if ok.any() else int(
                np.argmin(wake[:, cal].sum(axis=1)))
            now = (start >= a) & (start < a + 3600)
            h, k = h + float(rec[j, now].sum()), k + float(wake[j, now].sum())
        ratio = f"{h / float(np.interp(k, wk, hours)):.2f}x" if wk[0] <= k <= wk[-1] else "-"
        print(f"re-chosen hourly, budget {budget:g}: {h:.1f} GPU-h, {int(k)} wake-ups "
              f"({k / (pods_s * (t1 - split) / 86400):.2f} per workload-day), {ratio}")
    plot_frontier(rows, plot, "GenAI trace: chosen on the first half of the hours, scored on the second")
    print(f"plot: {plot}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main, "bench_frontier"))
