"""``python -m bench [NAME ...] [--smoke] [--timeout S]``: run benchmarks, then print one summary.

Each benchmark runs in a process of its own (``python -m bench.bench_NAME``), one after the other so
that they do not share the cores they measure; their output streams through as it comes. A smoke run
(``--smoke``) runs them in this process instead, on one PostgreSQL and one Prefect server
(``bench._smoke``): its figures mean nothing, and most of its time was imports and server starts. A failed
benchmark does not stop the others: the summary at the end names it, with the last line it wrote
to stderr, and the exit status is 1. The summary is one line per benchmark (status, wall time, its
headline) followed by every JSON line the benchmarks printed (the cycle's figures, one per size).
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from contextlib import nullcontext
from pathlib import Path
from typing import IO

from bench._run import ROOT, Outcome
from bench._smoke import run_here, shared_servers

__all__ = ["NAMES", "Outcome", "main", "run_one"]

NAMES = sorted(p.stem.removeprefix("bench_") for p in (ROOT / "bench").glob("bench_*.py"))


def _pump(stream: IO[str], sink: IO[str], lines: list[str]) -> None:
    for line in stream:
        sink.write(line)
        sink.flush()
        lines.append(line.rstrip("\n"))


def run_one(name: str, smoke: bool, timeout_s: float) -> Outcome:
    """One benchmark in its own process, its output passed through and kept for the summary."""
    cmd = [sys.executable, "-m", f"bench.bench_{name}", *(["--smoke"] if smoke else [])]
    began, began_cpu = time.perf_counter(), _children_cpu_s()
    child = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, bufsize=1, start_new_session=True)
    out: list[str] = []
    err: list[str] = []
    pumps = [threading.Thread(target=_pump, args=(child.stdout, sys.stdout, out), daemon=True),
             threading.Thread(target=_pump, args=(child.stderr, sys.stderr, err), daemon=True)]
    for pump in pumps:
        pump.start()
    try:
        returncode = child.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)  # its own session: the servers it started go with it
        child.wait()
        err.append(f"timed out after {timeout_s:g} s")
        returncode = 124
    except KeyboardInterrupt:  # Ctrl-C reaches only this process: the benchmark is in a session of its own
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        raise
    for pump in pumps:
        pump.join(timeout=10)
    return Outcome.of(name, returncode, time.perf_counter() - began, _children_cpu_s() - began_cpu, out, err)


def _children_cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def summary(outcomes: list[Outcome], smoke: bool) -> str:
    width = max(len(o.name) for o in outcomes)
    total, cpu = sum(o.seconds for o in outcomes), sum(o.cpu_s for o in outcomes)
    lines = [f"== summary: {len(outcomes)} benchmark(s){' (smoke)' if smoke else ''} in {total / 60:.1f} min "
             f"({cpu / 60:.1f} CPU min)"]
    for o in outcomes:
        status = "ok" if o.ok else f"FAILED ({o.returncode})"
        lines.append(f"{status:<12} {o.name:<{width}} {o.seconds:7.1f} s {o.cpu_s:6.1f} CPU s  "
                     f"{o.headline if o.ok else o.last_error}")
    lines += [f"{o.name}: {line}" for o in outcomes for line in o.json_lines]
    failed = [o.name for o in outcomes if not o.ok]
    if failed:
        lines.append(f"failed: {', '.join(failed)}")
    return "\n".join(lines)


def _said(exc: Exception) -> str:
    """An exception in one line: a failed command's own last words where it left some (``initdb``'s)."""
    said = " ".join(str(exc).split())
    output = getattr(exc, "stderr", None) or getattr(exc, "output", None)
    if isinstance(output, bytes):
        output = output.decode(errors="replace")
    if isinstance(output, str) and output.strip():
        said += ": " + " ".join(output.strip().splitlines()[-1].split())
    return f"{type(exc).__name__}: {said}"[:600]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"some of: {' '.join(NAMES)} (default: all)")
    parser.add_argument("--smoke", action="store_true", help="every benchmark at its smallest size (seconds each)")
    parser.add_argument("--timeout", type=float, help="seconds per benchmark (default 300 with --smoke, else 2 h)")
    args = parser.parse_args(argv)
    names = [Path(n).stem.removeprefix("bench_") for n in args.names] or NAMES
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        parser.error(f"unknown benchmark {', '.join(unknown)}; expected some of {', '.join(NAMES)}")
    timeout = args.timeout or (300.0 if args.smoke else 7200.0)
    outcomes: list[Outcome] = []
    try:
        with shared_servers() if args.smoke else nullcontext():
            for name in names:
                print(f"== {name}", flush=True)
                outcomes.append(run_here(name, timeout) if args.smoke else run_one(name, args.smoke, timeout))
    except KeyboardInterrupt:
        outcomes.append(Outcome(name, 130, last_error="interrupted"))
        print(summary(outcomes, args.smoke), flush=True)
        return 130
    except Exception as exc:  # noqa: BLE001 - the shared servers' start: one line, as a benchmark's failure is
        print(f"bench: the shared servers did not start: {_said(exc)}", file=sys.stderr, flush=True)
        return 1
    print(summary(outcomes, args.smoke), flush=True)
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
