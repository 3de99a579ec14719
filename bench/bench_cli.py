"""Command-line overhead: how long ``gpuaas --help`` takes, and what a ``collect`` costs beyond its own work.

An operator runs single commands at a terminal; seconds of start-up on every one of them is what
they notice first. Two figures, each the median of a few runs of the installed console script
in a fresh process (wall clock, and the process's CPU time, which a busy host does not inflate):

- ``gpuaas --help``: start-up alone (target: under 1 s);
- ``gpuaas collect`` on an embedded cluster: the whole command against the collect's own work
  (the "done in" of its progress line, which times the flow from its start to its summary),
  the difference being imports and set-up (target: within 2 s).

    python -m bench.bench_cli           # 3 runs each
    python -m bench.bench_cli --smoke   # 1 run each, a short history: checks it works
"""

from __future__ import annotations

import os
import re
import resource
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

from bench._run import BenchFailed, headline, parser, run, scratch
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.scenario import default_scenario

GPUAAS = Path(sys.executable).with_name("gpuaas")
DONE = re.compile(r"collecting a snapshot: done in ([0-9.]+) s")


def _timed(argv: list[str], env: dict[str, str], ok: tuple[int, ...] = (0,)) -> tuple[float, float, str]:
    """(wall s, CPU s of the child, its stderr); a failed command stops the bench. ``ok``: the exit codes of a
    complete run (a collect on a short history is degraded, exit 3: its telemetry does not cover the window)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in ok:
        raise BenchFailed(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stderr


def main(argv: list[str]) -> int:
    args = parser(__doc__).parse_args(argv)
    runs = 1 if args.smoke else 3
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUAAS_", "PREFECT_API_URL"))}

    helps = [_timed([str(GPUAAS), "--help"], env) for _ in range(runs)]
    help_wall = statistics.median(w for w, _, _ in helps)
    print(f"gpuaas --help: {help_wall:.2f} s wall, "
          f"{statistics.median(c for _, c, _ in helps):.2f} s CPU (median of {runs})")

    data = scratch("bench-cli-")
    history = timedelta(minutes=20 if args.smoke else 60)
    with EmbeddedCluster(default_scenario(), data / "cluster", history=history) as cluster:
        env |= cluster.settings_env() | {"GPUAAS_DATA_DIR": str(data / "gpuaas"), "GPUAAS_NVML": "off"}
        rows = []
        for _ in range(runs):
            wall, cpu, err = _timed([str(GPUAAS), "collect", "--format", "json"], env, ok=(0, 3))
            match = DONE.search(err)
            if match is None:
                raise BenchFailed(f"no 'done in' line in collect's stderr: {err.strip()[-300:]}")
            rows.append((wall, cpu, float(match.group(1))))
    wall = statistics.median(r[0] for r in rows)
    work = statistics.median(r[2] for r in rows)
    print(f"gpuaas collect: {wall:.2f} s wall of which the collect's work {work:.2f} s: overhead {wall - work:.2f} s; "
          f"{statistics.median(r[1] for r in rows):.2f} s CPU (median of {runs}, no Prefect API: runs directly)")
    headline(f"gpuaas --help {help_wall:.2f} s; collect {wall:.2f} s wall for {work:.2f} s of work "
             f"(overhead {wall - work:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(run(main, "bench_cli"))
