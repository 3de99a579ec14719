"""Deadline replay on ITP trace files: Kueue's FIFO against the deadlines flow's holds, at the rule's N.

By default the three smaller files (``DEFAULT_FILES``, about 6 minutes of flow ticks on a busy 2-core
machine); ``--files`` names others, ``--all`` takes every file of ``DIR`` (the three larger ones add
about 45 minutes: the flow plans every 15 minutes of two weeks, with the exact solver where it must).

The rule for N (GPUs of the one ClusterQueue), per file: the smallest multiple of 8, no smaller
than the file's largest job, at which FIFO meets at least half of the deadlines that can be met
(``deadline_satisfaction >= 0.5``), found by doubling then bisection on FIFO replays. Then both
runs at that N: the planned one runs the ``deadlines`` flow every flow interval (``--loop flow``,
:mod:`gpuaas.cluster.deadline_flow_replay`) or the replay's own event-driven planner (``--loop event``,
a reference), told the run times by ``--runtime-estimate`` (``--seed`` for the lognormal error).
Prints one row per file and the wall time of the final pair (the CLI's cost).

Run: ``python -m bench.bench_deadline_replay [DIR] [--files 195job.csv ...] [--all] [--n 195job.csv=64 ...]
[--loop flow|event] [--runtime-estimate exact|factor:F|lognormal:SIGMA] [--seed S] [--smoke]``
(``--smoke``: the first 60 jobs of ``195job.csv``, at its known N of 64).
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

from bench._run import TRACES, headline, parser, run
from gpuaas.cluster.deadline_flow_replay import replay_flow
from gpuaas.cluster.deadline_replay import DEFAULT_RUNTIME_ESTIMATE, ReplayStats, estimate_runtimes, replay_deadlines
from gpuaas.cluster.traces import TraceJob, read_itp

DEFAULT_DIR = TRACES / "microsoft-itp-elasticflow"
DEFAULT_FILES = ["195job.csv", "cluster10.csv", "cluster01.csv"]


def choose_n(jobs: list[TraceJob], target: float = 0.5) -> tuple[int, dict[int, ReplayStats]]:
    """The rule above; returns N and every FIFO replay it ran."""
    seen: dict[int, ReplayStats] = {}

    def fifo(n: int) -> float:
        if n not in seen:
            seen[n] = replay_deadlines(jobs, n, planned=False)
        return seen[n].deadline_satisfaction

    lo = 8 * math.ceil(max(j.gpus for j in jobs) / 8)
    if fifo(lo) >= target:
        return lo, seen
    hi = lo * 2
    while fifo(hi) < target:
        lo, hi = hi, hi * 2
    while hi - lo > 8:  # fifo(lo) < target <= fifo(hi)
        mid = 8 * ((lo + hi) // 16)
        if mid in (lo, hi):
            break
        if fifo(mid) >= target:
            hi = mid
        else:
            lo = mid
    return hi, seen


def main(argv: list[str]) -> int:
    cli = parser(__doc__)
    cli.add_argument("dir", nargs="?", type=Path, default=DEFAULT_DIR)
    cli.add_argument("--files", nargs="*")
    cli.add_argument("--all", action="store_true", help="every *.csv of DIR instead of DEFAULT_FILES")
    cli.add_argument("--n", nargs="*", default=[], help="FILE=N: skip the search where N is already known")
    cli.add_argument("--loop", choices=("flow", "event"), default="flow")
    cli.add_argument("--runtime-estimate", default=DEFAULT_RUNTIME_ESTIMATE)
    cli.add_argument("--seed", type=int, default=0)
    args = cli.parse_args(argv)
    known = {k: int(v) for k, v in (item.split("=") for item in args.n)}
    if args.smoke:
        args.files, known = ["195job.csv"], {"195job.csv": 64}
    files = ([args.dir / f for f in args.files] if args.files else sorted(args.dir.glob("*.csv")) if args.all
             else [args.dir / f for f in DEFAULT_FILES])
    if not files:
        raise FileNotFoundError(f"no ITP trace (*.csv) under {args.dir}")
    ratios = []
    print("| file | jobs | hopeless | N | FIFO met | planned met | ratio | FIFO satisfaction | planned satisfaction"
          " | FIFO avg JCT h | planned avg JCT h | FIFO p95 queue h | planned p95 queue h | alloc FIFO/planned"
          " | both runs s |", flush=True)
    print("|" + "---|" * 15, flush=True)
    for path in files:
        jobs = read_itp(path)[:60] if args.smoke else read_itp(path)
        n, seen = (known[path.name], {}) if path.name in known else choose_n(jobs)
        started = time.monotonic()
        fifo = replay_deadlines(jobs, n, planned=False)
        told = None if args.runtime_estimate == "exact" else estimate_runtimes(jobs, args.runtime_estimate, args.seed)
        planned = (replay_flow(jobs, n, estimates=told) if args.loop == "flow"
                   else replay_deadlines(jobs, n, planned=True, estimates=told))
        wall = time.monotonic() - started
        ratio = planned.met / fifo.met if fifo.met else float("inf")
        ratios.append(ratio)
        print(f"| {path.name} | {fifo.jobs} | {fifo.hopeless} | {n} | {fifo.met} | {planned.met} | {ratio:.2f} "
              f"| {fifo.deadline_satisfaction:.3f} | {planned.deadline_satisfaction:.3f} "
              f"| {fifo.avg_jct_s / 3600:.1f} | {planned.avg_jct_s / 3600:.1f} "
              f"| {fifo.p95_queue_s / 3600:.1f} | {planned.p95_queue_s / 3600:.1f} "
              f"| {fifo.gpu_allocation_ratio:.2f}/{planned.gpu_allocation_ratio:.2f} | {wall:.0f} |", flush=True)
        print(f"  (N search on {path.name}: " + ", ".join(f"{k}->{v.deadline_satisfaction:.3f}"
                                                       for k, v in sorted(seen.items())) + ")", flush=True)
    headline(f"{len(files)} ITP file(s), {args.loop} loop, {args.runtime_estimate} run times: deadlines met, "
             "plan over FIFO at the rule's N: "
             + ", ".join(f"{r:.2f}x" for r in ratios))
    return 0


if __name__ == "__main__":
    sys.exit(run(main, "bench_deadline_replay"))
