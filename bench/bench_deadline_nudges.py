"""Time of one pool's deadline plan and its nudges for 500, 2,000 and 5,000 Workloads.

Run: ``python -m bench.bench_deadline_nudges [SEED] [--smoke]`` (``--smoke``: 100 Workloads). One pool of two
ClusterQueues that preempt by priority (``withinClusterQueue`` and ``reclaimWithinCohort`` at ``LowerPriority``),
a third of the Workloads running, the rest pending with deadlines that EDF meets, all of one priority: the
preemption guard finds no pair, so it has to rule out every one. Wall and CPU time of ``plan_pools`` (the plan) and
of ``plan_nudges`` (Kueue's order played on the pool, the guards, the holds).
"""

from __future__ import annotations

import random
import sys
import time
from datetime import UTC, datetime, timedelta

import pandas as pd

from bench._run import headline, parser, run
from gpuaas.policies.deadlines import DeadlineJob, PoolProblem, plan_nudges, plan_pools
from gpuaas.policies.deadlines.kueue_order import ClusterQueues, Preemption
from gpuaas.policy import DeadlinesPolicy

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


def instance(size: int, seed: int) -> tuple[PoolProblem, pd.DataFrame]:
    """The pool and the snapshot's Workloads frame (priorities and queue times: Kueue's order can be played)."""
    rng = random.Random(seed)
    jobs, rows, held = [], [], 0
    capacity = size // 2
    for i in range(size):
        name, gpus, minutes = f"ns/w{i:05d}", rng.choice([1, 1, 2]), rng.randint(10, 120)
        if i % 3 == 0 and held + gpus <= capacity:
            held += gpus
            jobs.append(DeadlineJob(name, gpus, minutes * 60.0, None, "h100", running_for=rng.randint(0, 9) * 60.0))
        else:
            jobs.append(DeadlineJob(name, gpus, minutes * 60.0, 30 * 86400.0, "h100"))
        rows.append({"namespace": "ns", "name": name.removeprefix("ns/"), "priority": 0,
                     "created_at": pd.Timestamp(NOW - timedelta(seconds=size - i)), "deadline_hold": None})
    rule = Preemption(within_cluster_queue="LowerPriority", reclaim_within_cohort="LowerPriority")
    queues = ClusterQueues({j.name: "a" if k % 2 else "b" for k, j in enumerate(jobs)},
                           {"a": capacity // 2, "b": capacity - capacity // 2}, {"a": rule, "b": rule})
    return PoolProblem("c", "h100", capacity, tuple(jobs), queues=queues), pd.DataFrame(rows)


def main(argv: list[str]) -> int:
    cli = parser(__doc__)
    cli.add_argument("seed", nargs="?", type=int, default=7)
    args = cli.parse_args(argv)
    sizes = (100,) if args.smoke else (500, 2000, 5000)
    policy = DeadlinesPolicy(max_holds_per_run=10, release_margin_minutes=30, runtime_estimate_error=2.0)
    print("Workloads | plan wall s | plan CPU s | nudges wall s | nudges CPU s | holds")
    parts = []
    for size in sizes:
        problem, frame = instance(size, args.seed)
        t0, c0 = time.perf_counter(), time.process_time()
        pools = plan_pools([problem])
        t1, c1 = time.perf_counter(), time.process_time()
        nudges = plan_nudges(pools, frame, NOW, policy)
        t2, c2 = time.perf_counter(), time.process_time()
        holds = sum(n.action == "hold" for n in nudges)
        print(f"{size:>9,} | {t1 - t0:11.2f} | {c1 - c0:10.2f} | {t2 - t1:13.2f} | {c2 - c1:12.2f} | {holds}")
        parts.append(f"{size:,} in {t1 - t0:.2f} s + {t2 - t1:.2f} s")
    headline("one pool's plan + nudges: " + ", ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(run(main, "bench_deadline_nudges"))
