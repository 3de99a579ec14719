"""20 overlapping on-demand runs (collect and reclaim dry-run, alternately) against one embedded
cluster and one store, on SQLite and on PostgreSQL: wall time, peak RSS of one run, database errors,
snapshots stored, the most copies of one audit decision.

The Prefect server is a real one on PostgreSQL (``--prefect-sqlite``: Prefect's test harness, whose
SQLite answers 503 to this many concurrent flow processes; the failures are counted, not hidden).

    PYTHONPATH=. .venv/bin/python bench/bench_overlap.py [RUNS] [--prefect-sqlite]
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.actions.reclaim_scenario import reclaim_cluster, write_policy  # noqa: E402
from tests.faults.overlap import overlapping_runs, prefect_server_on_postgres  # noqa: E402
from tests.services import fresh_schema_url, postgres_server  # noqa: E402


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    runs = int(args[0]) if args else 20
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="bench-prefect-"))
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    base = Path(tempfile.mkdtemp(prefix="bench-overlap-"))
    ok = True
    with postgres_server() as pg, reclaim_cluster(base / "cluster") as cluster, \
            (prefect_test_harness(server_startup_timeout=180) if "--prefect-sqlite" in sys.argv
             else prefect_server_on_postgres(pg)):
        print(f"Prefect API {PREFECT_API_URL.value()} ({'SQLite' if '--prefect-sqlite' in sys.argv else 'PostgreSQL'})")
        print(f"{'backend':>10} {'runs':>5} {'wall s':>7} {'peak RSS MiB':>12} {'failed':>6} {'503s':>5} "
              f"{'db errors':>9} {'snapshots':>9} {'max rows per key':>16}")
        for backend in ("sqlite", "postgresql"):
            data = base / backend
            data.mkdir()
            url = f"sqlite:///{data / 'gpuaas.db'}" if backend == "sqlite" else fresh_schema_url(pg, "bench_overlap")
            env = {**cluster.settings_env(), "GPUAAS_NVML": "off", "GPUAAS_DATABASE_URL": url,
                   "GPUAAS_DATA_DIR": str(data), "PREFECT_API_URL": str(PREFECT_API_URL.value()),
                   "GPUAAS_POLICY_FILE": str(write_policy(data / "policy.yaml", max_actions_per_run=20)),
                   "PREFECT_LOGGING_LEVEL": "WARNING"}
            run = overlapping_runs(runs, cluster.clock.now().isoformat(), env, url)
            failed = sum(1 for rc in run.returncodes if rc != 0)
            copies = max(run.audit_keys.values(), default=0)
            print(f"{backend:>10} {runs:>5} {run.wall_s:>7.1f} {run.peak_rss_mb:>12.0f} {failed:>6} "
                  f"{run.unavailable:>5} {len(run.errors):>9} {run.snapshots:>9} {copies:>16}")
            ok &= failed == 0 and not run.errors and run.snapshots == runs and copies == 1
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
