"""Backtest benchmark: ``gpuaas replay reclaim --from-prometheus`` on a 2,000-GPU embedded fleet.

The fleet is the collect benchmark's (250 nodes x 8 GPUs, 40 ClusterQueues, 1,000
RayClusters of 1-4 GPUs), but every RayCluster's GPUs follow a pod of the public GenAI
duty-cycle trace (40 trace pods, one per tenant, repeating), so the history has real idle
spells. ``HOURS`` of history are backfilled into the real Prometheus; then the command
runs as a subprocess, exactly as an operator runs it, once for the replay and once for
the frontier, and the benchmark prints its wall time, the child's peak RSS and the
number of range queries (one per ``--chunk-hours``).

    python -m bench.bench_backtest [HOURS] [--smoke]

``--smoke``: a 5-node fleet (40 GPUs, 10 RayClusters), 20 minutes of history, the replay alone
(``bench_frontier`` covers the frontier).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

from bench._run import TRACES, headline, parser, run, scratch
from bench.bench_cluster import fleet
from gpuaas.cluster.clock import ManualClock
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.scenario import TraceProfile
from gpuaas.sources.traces import load_utilization

TRACE = TRACES / "alibaba-genai-2026"


def _profiles(count: int) -> list[TraceProfile]:
    util = load_utilization([TRACE / "pod_gpu_duty_cycle_part1.csv"])
    out = []
    for pod in sorted(util["pod"].unique())[:count]:
        values = util.loc[util["pod"] == pod, "value"].to_numpy() / 100.0
        points = [(timedelta(minutes=k), float(v)) for k, v in enumerate(values)]
        out.append(TraceProfile(profile="trace", points=points, period=timedelta(minutes=len(points))))
    return out


# The command in its own process, reporting its own peak RSS at exit (RUSAGE_CHILDREN would also
# count promtool's backfill, which this process ran before).
_WRAP = ("import atexit, resource, sys; atexit.register(lambda: sys.stderr.write("
         "f'\\nmaxrss_kib={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\\n')); "
         "sys.argv = ['gpuaas', *sys.argv[1:]]; from gpuaas.cli.app import main; main()")


def _run(args: list[str], env: dict[str, str]) -> tuple[float, float, dict[str, object]]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _WRAP, *args], env=env, capture_output=True, text=True,
                          check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        last = [line for line in done.stderr.splitlines() if line.strip() and "maxrss_kib=" not in line][-1:] or [
            "no output"]
        raise RuntimeError(f"gpuaas {' '.join(args)} exited {done.returncode}: {last[0]}")
    peak = float(done.stderr.rsplit("maxrss_kib=", 1)[1].split()[0]) / 2**10
    sys.stderr.write(done.stderr[-600:])
    kube = re.search(r"Kubernetes read in ([\d.]+)s", done.stderr)
    pulled = re.search(r"(\d+) range queries in ([\d.]+)s", done.stderr)
    if kube and pulled:
        print(f"  {pulled.group(1)} range queries in {pulled.group(2)} s; Kubernetes read {kube.group(1)} s")
    return elapsed, peak, json.loads(done.stdout)


def main(argv: list[str]) -> int:
    cli = parser(__doc__)
    cli.add_argument("hours", nargs="?", type=float, default=3.0, help="hours of history (default 3)")
    args = cli.parse_args(argv)
    hours = 1 / 3 if args.smoke else args.hours
    nodes, queues, jobs = (5, 2, 10) if args.smoke else (250, 40, 1000)
    base = fleet(nodes, queues, jobs, kind="RayCluster")
    profiles = _profiles(len(base.workloads))
    scenario = base.model_copy(update={"workloads": [
        w.model_copy(update={"utilisation": profiles[i % len(profiles)], "noise": 0.0})
        for i, w in enumerate(base.workloads)]})
    history = timedelta(hours=hours)
    start = datetime.now(UTC).replace(second=0, microsecond=0) - history
    data = scratch("bench-backtest-")
    t0 = time.perf_counter()
    with EmbeddedCluster(scenario, data, history=history, clock=ManualClock(start),
                         progress=lambda m: sys.stderr.write(m + "\n")) as cluster:
        print(f"fleet: {nodes} nodes, {nodes * 8} GPUs, {jobs} RayClusters; {hours:g} h of history backfilled in "
              f"{time.perf_counter() - t0:.0f} s")
        env = {**os.environ, **cluster.settings_env(), "GPUAAS_NVML": "off",
               "GPUAAS_DATA_DIR": str(data / "gpuaas")}
        since = start.strftime("%Y-%m-%dT%H:%M:%S")
        common = ["replay", "reclaim", "--from-prometheus", "--since", since, "--chunk-hours", "1",
                  "--format", "json"]
        replay_s, replay_rss, replay = _run([*common, "--adaptive"], env)
        print(f"replay (fixed + adaptive): {replay_s:.1f} s, peak RSS {replay_rss:.0f} MiB, "
              f"{replay['pods']} workloads, {replay['observed_gpu_hours']:.0f} observed GPU-hours, "
              f"{replay['idle_runs']} idle runs; adaptive {replay['reclaimed_gpu_hours']:.1f} GPU-h / "
              f"{replay['wakeups']} wake-ups, fixed 30 min "
              f"{replay['fixed']['reclaimed_gpu_hours']:.1f} / {replay['fixed']['wakeups']}")  # type: ignore[index]
        if args.smoke:
            headline(f"replay of {nodes * 8:,} GPUs x {hours:.2g} h: {replay_s:.1f} s, peak RSS {replay_rss:.0f} MiB")
            return 0
        secs, rss, front = _run([*common, "--frontier", "--plot", str(data / "frontier.png")], env)
        print(f"frontier (9 windows + 7 budgets): {secs:.1f} s, peak RSS {rss:.0f} MiB, "
              f"{len(front['frontier'])} rows")  # type: ignore[arg-type]
        headline(f"replay of {nodes * 8:,} GPUs x {hours:g} h: {replay_s:.1f} s, peak RSS {replay_rss:.0f} MiB; "
                 f"frontier {secs:.1f} s, {rss:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(run(main, "bench_backtest"))
