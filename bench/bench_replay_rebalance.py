"""Wall time and the four rows of ``gpuaas replay rebalance`` on the full Philly trace.

Run: ``python -m bench.bench_replay_rebalance [TRACE_DIR] [--usage-percentile P ...] [--smoke]``
(default: ``../shared/fixtures/traces`` next to the repository; percentiles default to the
policy's ``rebalance.usage_percentile``, the one the flow runs with; ``--smoke``: the smallest ITP
cluster alone).
Four replays, each timed: Philly (82,229 jobs, 109 days) at the Helios VC sizes (2,816 GPUs);
the same jobs at half and a quarter of those quotas (1,408 and 704 GPUs: every job still fits
its tenant), where the cohort has to reclaim; and the five ITP clusters, one tenant each at its
mean demand, for deadline satisfaction.
"""

from __future__ import annotations

import csv
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._run import TRACES, headline, parser, run
from gpuaas.cluster.quota_replay import replay_rebalance
from gpuaas.policy import Policy, RebalancePolicy

DEFAULT = TRACES
FIELDS = ("avg_queue_s", "p95_queue_s", "worst_tenant_p95_queue_s", "deadline_satisfaction", "gpu_allocation_ratio",
          "jain_fairness", "preempted_gpu_hours")


def show(title: str, result: dict[str, Any], seconds: float) -> None:
    meta = result["meta"]
    print(f"\n{title}: {meta['jobs']:,} jobs ({meta['excluded_jobs']} excluded), {meta['total_gpus']:,} GPUs, "
          f"{meta['submission_span_days']} days of submissions; four configurations in {seconds:.1f} s")
    print("| configuration | " + " | ".join(FIELDS) + " | GPUs moved/night |")
    print("|---" * (len(FIELDS) + 2) + "|")
    for name, row in result["configurations"].items():
        moved = row["gpus_moved_per_night"]
        per_night = f"{sum(moved) / len(moved):.1f}" if moved else "0"
        cells = ["-" if row[f] is None else f"{row[f]:,}" for f in FIELDS]
        print(f"| {name} | " + " | ".join(cells) + f" | {per_night} |")


def timed(title: str, **kwargs: Any) -> float:
    t0 = time.perf_counter()
    result = replay_rebalance(progress=lambda line: print(line, file=sys.stderr), **kwargs)
    seconds = time.perf_counter() - t0
    show(title, result, seconds)
    return seconds


def main(argv: list[str]) -> int:
    cli = parser(__doc__)
    cli.add_argument("traces", nargs="?", type=Path, default=DEFAULT)
    cli.add_argument("--usage-percentile", type=float, action="append")
    args = cli.parse_args(argv)
    philly = args.traces / "philly" / "philly_jobs_pollux.csv"
    itp = sorted((args.traces / "microsoft-itp-elasticflow").glob("cluster*.csv"))
    if not itp:
        raise FileNotFoundError(f"no ITP trace (cluster*.csv) under {args.traces / 'microsoft-itp-elasticflow'}")
    if args.smoke:
        smallest = min(itp, key=lambda path: path.stat().st_size)
        seconds = timed(f"ITP, {smallest.name} at its mean demand", traces=[smallest], trace_format="itp")
        headline(f"{smallest.name}: four configurations in {seconds:.1f} s")
        return 0
    philly_s = 0.0
    for pct in args.usage_percentile or [RebalancePolicy().usage_percentile]:
        policy = Policy(rebalance=RebalancePolicy(usage_percentile=pct))
        philly_s = timed(f"Philly, Helios VC quotas, demand p{pct:g}", traces=[philly], trace_format="philly",
                         policy=policy)
        for share, label in ((2, "half"), (1, "a quarter of")):
            with tempfile.TemporaryDirectory() as tmp:
                with (args.traces / "philly" / "philly_vc_nodes_helios.csv").open(newline="") as handle:
                    scaled = {row["vc"]: int(row["node num"]) * 8 * share // 4 for row in csv.DictReader(handle)}
                quotas = Path(tmp) / "scaled.yaml"
                quotas.write_text("".join(f"'{vc}': {gpus}\n" for vc, gpus in scaled.items()), encoding="utf-8")
                timed(f"Philly, {label} the Helios VC quotas, demand p{pct:g}", traces=[philly],
                      trace_format="philly", quotas_file=quotas, policy=policy)
        timed(f"ITP, five clusters at their mean demand, demand p{pct:g}", traces=itp, trace_format="itp",
              policy=policy)
    headline(f"Philly (82,229 jobs) at the Helios VC quotas: four configurations in {philly_s:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(run(main, "bench_replay_rebalance"))
