"""Overlapping on-demand runs: N flow processes started together against one cluster and one store.

Shared by the test (``tests/faults/test_overlap.py``: a few runs, the invariants) and ``bench/bench_overlap.py``
(20 runs, against a Prefect server whose own database is PostgreSQL: the figures). It lives with the
benchmarks because a benchmark must never import the test suite (a fresh checkout runs them alone).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

__all__ = ["Overlap", "overlapping_runs"]


@dataclass
class Overlap:
    wall_s: float
    peak_rss_mb: float
    returncodes: list[int]
    errors: list[str]
    results: list[dict[str, Any]]
    snapshots: int
    audit_keys: Counter[str]
    """Audit rows per idempotency key: 1 when overlapping dry-runs of one window duplicated nothing."""
    unavailable: int = 0
    """Prefect API answers ``503 Service Unavailable`` seen in the runs' output."""


def overlapping_runs(n: int, at: str, env: dict[str, str], database_url: str) -> Overlap:
    """Start ``n`` processes at once, alternately collect and reclaim (dry-run); wait for all."""
    from sqlalchemy import create_engine, text

    started = time.perf_counter()
    children = []
    for i in range(n):
        cmd = [sys.executable, "-c", "import resource, runpy, sys; sys.argv = sys.argv[1:]; "
               "sys.path.insert(0, '.'); "
               "exec('try:\\n runpy.run_module(\"bench._flow_process\", run_name=\"__main__\")\\n"
               "finally:\\n print(\"RSS_KB\", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "
               "file=sys.stderr)')",
               "flow_process", "collect" if i % 2 == 0 else "dry", at]
        children.append(subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True))
    outputs = [c.communicate(timeout=600) for c in children]
    wall = time.perf_counter() - started
    rss = [int(line.split()[1]) for _, err in outputs for line in err.splitlines() if line.startswith("RSS_KB")]
    errors = [line for _, err in outputs for line in err.splitlines()
              if any(w in line for w in ("OperationalError", "IntegrityError", "database is locked", "DeadlockDetected"))]
    failures = [err[-1500:] for (_, err), c in zip(outputs, children, strict=True) if c.returncode != 0]
    if failures:
        print(f"{len(failures)} runs failed; the first: {failures[0]}", file=sys.stderr)
    results = []
    for out, _ in outputs:
        lines = [line for line in out.splitlines() if line.startswith("{")]
        if lines:
            results.append(json.loads(lines[-1]))
    engine = create_engine(database_url)
    with engine.connect() as conn:
        snapshots = int(conn.execute(text("SELECT count(*) FROM snapshots")).scalar_one())
        keys = Counter(str(k) for (k,) in conn.execute(
            text("SELECT idempotency_key FROM audit_log WHERE idempotency_key IS NOT NULL")))
    engine.dispose()
    unavailable = sum(err.count("503") for _, err in outputs)
    return Overlap(wall, max(rss, default=0) / 1024, [c.returncode for c in children], errors, results, snapshots,
                   keys, unavailable)
