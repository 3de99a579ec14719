"""What a cold-start budget costs the live reclaim flow each cycle, as the fleet grows.

With a budget, every reclaim cycle chooses the day's window again on the history it read
(``choose_at``: the survival window fitted at each price of the ladder, the fixed windows beside it,
the check on the history's later half), then gives each workload's open spell its window and reason.
The flow is stateless, so that work is paid every cycle, not once a day. This bench times both on the
GenAI duty-cycle trace (96 pods, 22.8 h, idle at or below 5 %), its idle runs copied to fleets of 4,
16 and 64 times as many workloads, and prints the peak of Python's traced allocations.

    python -m bench.bench_refit [TRACE_DIR] [--smoke]

``--smoke``: the first 12 pods of the trace's first part, once.
"""

from __future__ import annotations

import sys
import time
import tracemalloc
from pathlib import Path

import pandas as pd

from bench._run import TRACES, headline, parser, run
from gpuaas.policies.reclaim import choose_at, idle_runs, reasons
from gpuaas.policy import AdaptivePolicy, ColdStartBudget
from gpuaas.sources.traces import load_utilization

DEFAULT = TRACES / "alibaba-genai-2026"
COPIES = (1, 4, 16, 64)


def _fleet(runs: pd.DataFrame, copies: int) -> pd.DataFrame:
    """``copies`` workloads per pod of ``runs``, each with its spells (pod then time order, as read)."""
    return pd.concat([runs.assign(pod=runs["pod"] + f"/{i}") for i in range(copies)], ignore_index=True)


def main(argv: list[str]) -> int:
    cli = parser(__doc__)
    cli.add_argument("trace", nargs="?", type=Path, default=DEFAULT)
    args = cli.parse_args(argv)
    parts = sorted(args.trace.glob("pod_gpu_duty_cycle_part*.csv"))[: 1 if args.smoke else None]
    if not parts:
        raise FileNotFoundError(f"no pod_gpu_duty_cycle_part*.csv under {args.trace}")
    util = load_utilization(parts)
    if args.smoke:
        util = util[util["pod"].isin(sorted(util["pod"].unique())[:12])]
    runs = idle_runs(util, 5.0)
    if runs.empty:
        raise ValueError(f"no idle run at or below 5 % in {', '.join(str(p) for p in parts)}: nothing to choose on")
    now = float(util["t"].max())
    budget, defaults = ColdStartBudget(wakeups_per_workload_per_day=1.0), AdaptivePolicy()
    span_h = min(defaults.history_hours, (now - float(util["t"].min())) / 3600)
    print(f"budget {budget.wakeups_per_workload_per_day:g} wake-ups per workload-day, the window chosen on the "
          f"{span_h:.1f} h of history before now (history_hours {defaults.history_hours:g}, the default)")
    shown = []
    for copies in COPIES[:1] if args.smoke else COPIES:
        fleet = _fleet(runs, copies)
        tracemalloc.start()
        began = time.perf_counter()
        choice = choose_at(fleet, now, budget=budget, history_hours=defaults.history_hours, base_s=1800.0)
        chosen = time.perf_counter()
        choice.policy(fleet)
        reasons(choice, fleet, now)
        done = time.perf_counter()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        workloads = fleet["pod"].nunique()
        print(f"{workloads:>6,} workloads, {len(fleet):>9,} idle runs: the choice {chosen - began:6.2f} s, windows "
              f"and reasons {done - chosen:5.2f} s, peak {peak / 2**20:6.0f} MiB ({choice.why})")
        shown.append(f"{workloads:,} workloads {done - began:.1f} s")
    headline("a budget's choice per cycle: " + ", ".join(shown))
    return 0


if __name__ == "__main__":
    sys.exit(run(main, "bench_refit"))
