"""Time of one quota plan for 200 and 1,000 ClusterQueues x 4 flavors (the solver's budget: 120 s a plan).

Run: ``python -m bench.bench_quota_plan [SEED] [--smoke]`` (``--smoke``: 20 queues, the default limits). The instances are random but seeded, with the
shape a nightly run sees: every queue holds every flavor, about a third are short of quota,
a third have spare quota, guarantees on some, a recent change on a fifth; the policy's default
limits (cap 32, hysteresis 1) and a hard case (a cap of 2 GPUs per queue that binds, hysteresis 2,
so the binaries are in the model). Wall and CPU time of ``plan_quotas`` (both MILP passes, the
reasons): on a shared machine the CPU time is the steadier figure.
"""

from __future__ import annotations

import random
import sys
import time

from bench._run import headline, parser, run
from gpuaas.policies.quotas import QueueDemand, QuotaLimits, plan_quotas

FLAVORS = ("a100", "h100", "l40s", "mi300")


def instance(queues: int, seed: int) -> list[QueueDemand]:
    rng = random.Random(seed)
    out = []
    for i in range(queues):
        nominal = {f: rng.randint(0, 32) for f in FLAVORS}
        mood = rng.random()
        factor = 1.6 if mood < 0.33 else (0.4 if mood < 0.66 else 1.0)
        out.append(QueueDemand(
            name=f"team-{i:04d}",
            nominal=nominal,
            demand={f: round(max(0.0, rng.gauss(nominal[f] * factor, 3)), 1) for f in FLAVORS},
            guaranteed={f: rng.randint(0, nominal[f] // 2) for f in FLAVORS if rng.random() < 0.3},
            weight=rng.choice([0.5, 1.0, 1.0, 2.0]),
            recent_change={f: rng.choice([-4, -2, 2, 4]) for f in FLAVORS if rng.random() < 0.2},
        ))
    return out


def main(argv: list[str]) -> int:
    cli = parser(__doc__)
    cli.add_argument("seed", nargs="?", type=int, default=7)
    args = cli.parse_args(argv)
    cases = ((20, 32, 1),) if args.smoke else ((200, 32, 1), (200, 400, 2), (1000, 32, 1), (1000, 2000, 2))
    first = ""
    print("queues x flavors | cap, hysteresis | wall s | CPU s | moved GPUs | weighted shortfall before -> after")
    for queues, cap, hysteresis in cases:
        problem = instance(queues, args.seed)
        limits = QuotaLimits(max_step_gpus=8, max_step_percent=50, max_total_moved_gpus=cap,
                             hysteresis_gpus=hysteresis)
        t0, c0 = time.perf_counter(), time.process_time()
        plan = plan_quotas(problem, limits)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(f"{queues:>5} x {len(FLAVORS)}        | {cap:>5}, {hysteresis}        | {wall:6.2f} | {cpu:5.2f} | "
              f"{plan.moved_gpus:10d} | {plan.weighted_shortfall_before:.1f} -> {plan.weighted_shortfall:.1f}")
        for note in plan.notes:
            if note.startswith("the solver"):
                print(f"      {note}")
        first = first or f"{queues} x {len(FLAVORS)} plan in {wall:.2f} s wall, {cpu:.2f} s CPU"
    headline(first)
    return 0


if __name__ == "__main__":
    sys.exit(run(main, "bench_quota_plan"))
