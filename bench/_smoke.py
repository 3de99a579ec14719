"""The smoke run: every benchmark at its smallest size, in this one process, on shared servers.

``make test`` runs the smoke set so that a benchmark cannot rot, and it has to add under a minute to
the suite. Run one process per benchmark, as a full ``make bench`` does, the set spent most of its
time importing Prefect, pandas and gpuaas once per benchmark and starting a PostgreSQL and a Prefect
server per benchmark. Here the imports happen once, and PostgreSQL (``GPUAAS_TEST_POSTGRES_URL``) and
a Prefect server (``PREFECT_API_URL``) are started once for the whole set, unless the caller (the
test suite) already runs them. Each benchmark still runs its own ``main`` with ``--smoke``: its real
code path, so an import error or a changed API fails it. Between benchmarks the environment is put
back as it was, since benchmarks point ``GPUAAS_*`` settings at their own clusters.

Full runs never come here: their figures (peak RSS, CPU seconds) need a process of their own.
"""

from __future__ import annotations

import importlib
import io
import os
import resource
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, redirect_stderr, redirect_stdout
from types import FrameType
from typing import TextIO

from bench._run import Outcome, run, scratch

__all__ = ["SMOKE_WALL_S", "run_here", "shared_servers", "split"]

SMOKE_WALL_S = {"backtest": 60, "overlap": 53, "cycle": 48, "cli": 27, "slot_lease": 14, "loadtest": 12,
                "store": 11, "collect": 9, "apiserver": 8}
"""Seconds each smoke run took in one process at a load of ~8 on two cores (the rest: under 7 s). Only to
balance :func:`split`: a wrong figure costs time, never a result."""


class _Tee(io.TextIOBase):
    """Writes through to ``sink`` and keeps the complete lines, for the summary."""

    def __init__(self, sink: TextIO) -> None:
        self.sink = sink
        self.lines: list[str] = []
        self._partial = ""

    def write(self, text: str) -> int:
        self.sink.write(text)
        self.sink.flush()
        *done, self._partial = (self._partial + text).split("\n")
        self.lines += done
        return len(text)

    def flush(self) -> None:
        self.sink.flush()


@contextmanager
def shared_servers() -> Iterator[None]:
    """PostgreSQL and a Prefect server for every smoke benchmark, each started only if the caller has none."""
    from gpuaas.cluster.services import postgres_server, prefect_server

    with ExitStack() as stack:
        base = scratch("bench-smoke-")
        os.environ.setdefault("PREFECT_HOME", str(base / "prefect"))
        os.environ.setdefault("GPUAAS_DATA_DIR", str(base / "data"))
        os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
        if not os.environ.get("GPUAAS_TEST_POSTGRES_URL"):
            os.environ["GPUAAS_TEST_POSTGRES_URL"] = stack.enter_context(postgres_server())
        if not os.environ.get("PREFECT_API_URL"):
            env = {**os.environ, "PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "false"}
            os.environ["PREFECT_API_URL"] = stack.enter_context(prefect_server(env, base / "prefect-server.log"))
        yield


def split(names: list[str], groups: int) -> list[list[str]]:
    """``names`` in ``groups`` runs of about equal time (longest first, each to the shortest group so far).

    Most of a smoke run is waiting (for a subprocess's imports, a server's start), so two runs side by
    side on two cores take little more than the longer one: the test suite runs two.
    """
    out: list[list[str]] = [[] for _ in range(groups)]
    load = [0.0] * groups
    for name in sorted(names, key=lambda n: -SMOKE_WALL_S.get(n, 5)):
        i = load.index(min(load))
        out[i].append(name)
        load[i] += SMOKE_WALL_S.get(name, 5)
    return [sorted(group) for group in out if group]


def _cpu_s() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _timed_out(signum: int, frame: FrameType | None) -> None:
    raise TimeoutError("the smoke run took too long")


def run_here(name: str, timeout_s: float) -> Outcome:
    """``bench_NAME --smoke`` in this process: its output passed through and kept, its environment undone after."""
    saved = dict(os.environ)
    out, err = _Tee(sys.stdout), _Tee(sys.stderr)
    began, began_cpu = time.perf_counter(), _cpu_s()
    previous = signal.signal(signal.SIGALRM, _timed_out)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                module = importlib.import_module(f"bench.bench_{name}")
            except Exception as exc:  # noqa: BLE001 (an import error is this benchmark's failure, not the run's)
                print(f"bench_{name}: failed to import: {type(exc).__name__}: {exc}", file=sys.stderr)
                returncode = 1
            else:
                returncode = run(module.main, f"bench_{name}", ["--smoke"])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        os.environ.clear()
        os.environ.update(saved)
    return Outcome.of(name, returncode, time.perf_counter() - began, _cpu_s() - began_cpu, out.lines, err.lines)
