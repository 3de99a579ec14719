"""Time and peak memory of replaying the full GenAI duty-cycle trace (fixed and adaptive).

Run: ``python -m bench.bench_replay [TRACE_DIR] [--smoke]`` (default: ``../shared/fixtures/traces/
alibaba-genai-2026`` next to the repository; ``--smoke``: the first part of the trace only). Peak memory
is Python's traced allocations (``tracemalloc``: numpy and pandas buffers included), not the process RSS.
"""

from __future__ import annotations

import sys
import time
import tracemalloc
from pathlib import Path

from bench._run import TRACES, headline, parser, run
from gpuaas.policies.reclaim import AdaptiveWindow, fixed_windows, replay_windows
from gpuaas.sources.traces import load_qps, load_utilization

DEFAULT = TRACES / "alibaba-genai-2026"


def main(argv: list[str]) -> int:
    cli = parser(__doc__)
    cli.add_argument("trace", nargs="?", type=Path, default=DEFAULT)
    args = cli.parse_args(argv)
    trace: Path = args.trace
    parts = sorted(trace.glob("pod_gpu_duty_cycle_part*.csv"))[: 1 if args.smoke else None]
    if not parts:
        raise FileNotFoundError(f"no pod_gpu_duty_cycle_part*.csv under {trace}")
    reclaimed = {}
    tracemalloc.start()
    t0 = time.perf_counter()
    util = load_utilization(parts)
    qps = load_qps(trace / "qps.csv")
    t1 = time.perf_counter()
    for policy, name in ((fixed_windows(1800.0), "fixed"), (AdaptiveWindow(1800.0), "adaptive")):
        r = replay_windows(util, policy, name=name, qps=qps, window_min=30, threshold=5)
        reclaimed[name] = r.reclaimed_gpu_hours
        print(
            f"{name:9s} pods={r.pods} observed={r.observed_gpu_hours:.2f} reclaimed={r.reclaimed_gpu_hours:.2f}"
            f" wakeups={r.wakeups} bound={r.bound_gpu_hours:.2f}"
        )
    t2 = time.perf_counter()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"rows={len(util)} load={t1 - t0:.2f}s replay(both)={t2 - t1:.2f}s peak={peak / 2**20:.1f} MiB")
    headline(f"{len(util):,} rows: load {t1 - t0:.2f} s, both replays {t2 - t1:.2f} s, peak {peak / 2**20:.0f} MiB; "
             f"reclaimed GPU-h fixed {reclaimed['fixed']:.1f}, adaptive {reclaimed['adaptive']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main, "bench_replay"))
