"""The load generator against the embedded endpoint's default latency model: found vs computed.

Run: ``python -m bench.bench_loadtest [STEP_SECONDS] [--smoke]`` (default 5, after a 10 s warm-up;
``--smoke``: one replica, two rates, 0.5 s steps after 0.5 s warm-ups). The endpoint (one and two
replicas, the default ``EngineModel``: 16 sequences, 30 ms per token) runs in this process; the
sweep runs in a child process, as ``gpuaas loadtest`` would, so the two do not share a GIL.
Prints, per replica count: the model's saturation rate, the sustainable rate the sweep found
(p95 <= 1 s, 128 prompt / 16 output tokens), the client's lateness p99 and the wall time.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from bench._run import headline, parser, run
from gpuaas.cluster.scenario import Serving
from gpuaas.cluster.serving import EngineModel, ServingEndpoint, model_capacity_rps

PROMPT, OUTPUT, SLO = 128, 16, 1.0
CHILD = """
import json, sys
from gpuaas.loadtest import LoadTestConfig, json_safe
from gpuaas.operations import load_test
url, rates, step, replicas = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
SLO, PROMPT, OUTPUT = float(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
warmup = {"warmup_seconds": float(sys.argv[8])} if sys.argv[8:] else {}  # the smoke run's; else the default
config = LoadTestConfig(url=url, model="bench", rates=tuple(map(float, rates.split(","))), slo_quantile="p95",
                        slo_seconds=SLO, prompt_tokens=PROMPT, output_tokens=OUTPUT, step_seconds=step,
                        max_requests_per_step=5000, **warmup, replicas=replicas, gpus=replicas)
plan = load_test.plan(load_test.sweep(config))
run, capacity = plan.run, plan.capacity
print(json.dumps(json_safe({"capacity": capacity.to_dict(), "lateness_p99_s": run.lateness_p99_s,
                            "requests": len(run.requests), "limited": run.client_limited_rates})))
"""


def main(argv: list[str]) -> int:
    cli = parser(__doc__)
    cli.add_argument("step", nargs="?", type=float, default=5.0, help="seconds per rate step (default 5)")
    args = cli.parse_args(argv)
    step = 0.5 if args.smoke else args.step
    warmup = ["0.5"] if args.smoke else []  # the smoke run checks the code path, not the figure: no 10 s warm-ups
    factors = (0.6, 1.2) if args.smoke else (0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2)
    model = EngineModel()
    found_by: list[str] = []
    for replicas in (1,) if args.smoke else (1, 2):
        serving = Serving.model_validate({"model_name": "bench", "engine": model.model_dump(),
                                          "requests_per_second": {"profile": "constant", "value": 0}})
        endpoint = ServingEndpoint("bench", "bench", serving)
        endpoint.engine.set_pods([f"bench-{i}" for i in range(replicas)])
        endpoint.start()
        try:
            computed = model_capacity_rps(model, PROMPT, OUTPUT, SLO, replicas)
            rates = ",".join(f"{computed * f:.1f}" for f in factors)
            began = time.perf_counter()
            child = subprocess.run([sys.executable, "-c", CHILD, endpoint.url, rates, str(step), str(replicas),
                                    str(SLO), str(PROMPT), str(OUTPUT), *warmup],
                                   capture_output=True, text=True, check=False, timeout=600)
            wall = time.perf_counter() - began
        finally:
            endpoint.stop()
        if child.returncode != 0:
            last = child.stderr.strip().splitlines()[-1:] or ["no output"]
            raise RuntimeError(f"the load generator exited {child.returncode}: {last[0]}")
        out = json.loads(child.stdout)
        found = out["capacity"]["sustainable_rate_rps"]
        print(f"{replicas} replica(s): model {computed:.1f} rps, found {found} rps "
              f"({(found or 0) / computed - 1:+.0%}); {out['requests']} requests, lateness p99 "
              f"{out['lateness_p99_s'] * 1000:.0f} ms, client-limited at {out['limited'] or 'none'}; {wall:.0f} s")
        found_by.append(f"{replicas} replica(s) {found} rps (model {computed:.1f})")
    headline("sustainable rate found: " + ", ".join(found_by))
    return 0


if __name__ == "__main__":
    sys.exit(run(main, "bench_loadtest"))
