"""20 overlapping on-demand runs (collect and reclaim dry-run, alternately) against one embedded
cluster and one store, on SQLite and on PostgreSQL: wall time, peak RSS of one run, database errors,
snapshots stored, the most copies of one audit decision.

The Prefect server is a real one on PostgreSQL (``--prefect-sqlite``: Prefect's test harness, whose
SQLite answers 503 to this many concurrent flow processes; the failures are counted, not hidden).

    python -m bench.bench_overlap [RUNS] [--prefect-sqlite] [--smoke]

``--smoke``: 2 runs on the SQLite store, on the Prefect API of ``PREFECT_API_URL`` when it is set.
"""

from __future__ import annotations

import os
import sys
from contextlib import nullcontext

from bench._overlap import overlapping_runs
from bench._run import BenchFailed, headline, parser, run, scratch
from bench._servers import prefect_server_on_postgres, smoke_prefect_api
from gpuaas.cluster.services import fresh_schema_url, postgres_server
from gpuaas.cluster.testbed import reclaim_cluster, write_policy


def main(argv: list[str]) -> int:
    cli = parser(__doc__)
    cli.add_argument("runs", nargs="?", type=int, default=20)
    cli.add_argument("--prefect-sqlite", action="store_true", help="Prefect's test harness (SQLite) as the API")
    args = cli.parse_args(argv)
    runs = 2 if args.smoke else args.runs
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    os.environ.setdefault("PREFECT_HOME", str(scratch("bench-prefect-")))
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    base = scratch("bench-overlap-")
    ok = True
    walls = []
    given = smoke_prefect_api(args.smoke)
    with postgres_server() as pg, reclaim_cluster(base / "cluster") as cluster, \
            (nullcontext() if given else prefect_test_harness(server_startup_timeout=180) if args.prefect_sqlite
             else prefect_server_on_postgres(pg)):
        kind = "given" if given else "SQLite" if args.prefect_sqlite else "PostgreSQL"
        print(f"Prefect API {PREFECT_API_URL.value()} ({kind})")
        print(f"{'backend':>10} {'runs':>5} {'wall s':>7} {'peak RSS MiB':>12} {'failed':>6} {'503s':>5} "
              f"{'db errors':>9} {'snapshots':>9} {'max rows per key':>16}")
        for backend in ("sqlite",) if args.smoke else ("sqlite", "postgresql"):
            data = base / backend
            data.mkdir()
            url = f"sqlite:///{data / 'gpuaas.db'}" if backend == "sqlite" else fresh_schema_url(pg, "bench_overlap")
            env = {**cluster.settings_env(), "GPUAAS_NVML": "off", "GPUAAS_DATABASE_URL": url,
                   "GPUAAS_DATA_DIR": str(data), "PREFECT_API_URL": str(PREFECT_API_URL.value()),
                   "GPUAAS_POLICY_FILE": str(write_policy(data / "policy.yaml", max_actions_per_run=20)),
                   "PREFECT_LOGGING_LEVEL": "WARNING"}
            outcome = overlapping_runs(runs, cluster.clock.now().isoformat(), env, url)
            failed = sum(1 for rc in outcome.returncodes if rc != 0)
            copies = max(outcome.audit_keys.values(), default=0)
            print(f"{backend:>10} {runs:>5} {outcome.wall_s:>7.1f} {outcome.peak_rss_mb:>12.0f} {failed:>6} "
                  f"{outcome.unavailable:>5} {len(outcome.errors):>9} {outcome.snapshots:>9} {copies:>16}")
            walls.append(f"{backend} {outcome.wall_s:.1f} s ({failed} failed, {copies} row(s) per key)")
            ok &= failed == 0 and not outcome.errors and outcome.snapshots == runs and copies == 1
    print("OK" if ok else "FAILED")
    headline(f"{runs} overlapping runs: " + ", ".join(walls))
    if not ok:
        raise BenchFailed("a run failed, a database error was seen, or a decision was stored twice (table above)")
    return 0


if __name__ == "__main__":
    sys.exit(run(main, "bench_overlap"))
