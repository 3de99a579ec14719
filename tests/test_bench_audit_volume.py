"""``python -m bench.bench_audit_volume --smoke`` runs and prints its table on both backends, or fails in one line.

The figures the docs give for PostgreSQL come from this benchmark, so a run that quietly measured SQLite alone
would leave them unchecked: the table must hold a SQLite and a PostgreSQL time for every read, the rows each
read got (the same on both, or the benchmark fails), and the sizes. A PostgreSQL that cannot be reached is the
benchmark's failure (exit 1, one line naming it), never a table without that column and never a skip here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuaas.cluster.prometheus import free_port

ROOT = Path(__file__).resolve().parents[1]
READS = ("reclaim: newest rows", "reclaim: already decided", "reclaim: recently restored",
         "reclaim: open stop intents", "reclaim: open restore intents", "reclaim: one object's stops",
         "deadlines: hold proofs", "deadlines: settle sweep", "rebalance: recovery", "audit list (newest 200)",
         "audit list --object (owner)", "audit list --object (count)", "audit list --object (name only)",
         "db status", "db archive (dry run)",
         "db archive --apply (once)", "audit log size")


def _smoke(postgres_url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUAAS_", "PREFECT_"))}
    env["GPUAAS_TEST_POSTGRES_URL"] = postgres_url
    return subprocess.run([sys.executable, "-m", "bench.bench_audit_volume", "--smoke"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.integration
def test_the_smoke_run_prints_every_read_on_both_backends(postgres_url: str) -> None:
    done = _smoke(postgres_url)
    assert done.returncode == 0, done.stderr[-1500:]
    assert "Traceback" not in done.stderr
    lines = done.stdout.splitlines()
    [header] = [i for i, line in enumerate(lines) if line.startswith("read ")]
    assert lines[header].split()[1:] == ["SQLite", "ms", "PostgreSQL", "ms", "rows", "read"]
    table = lines[header + 1:header + 1 + len(READS)]
    assert [next((r for r in READS if line.startswith(r)), line) for line in table] == list(READS)
    for line in table:
        sqlite_ms, postgres_ms, rows = line.split()[-3:]
        assert float(sqlite_ms) > 0 and float(postgres_ms) > 0, line
        assert int(rows.replace(",", "")) >= 0, line
    archived = table[READS.index("db archive --apply (once)")].split()[-1]
    assert int(archived.replace(",", "")) > 0  # the smoke size reaches past the archive's 30-day minimum
    assert lines[-1].startswith("headline: ") and "PostgreSQL" in lines[-1]


@pytest.mark.integration
def test_a_postgresql_that_cannot_be_reached_fails_the_run_in_one_line() -> None:
    done = _smoke(f"postgresql+psycopg2://postgres@127.0.0.1:{free_port()}/gpuaas")
    assert done.returncode == 1
    assert "read " not in done.stdout and "Traceback" not in done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.strip()]
    assert line.startswith("bench_audit_volume: failed: OperationalError") and "127.0.0.1" in line, line


def test_a_fleet_of_no_gpus_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.bench_audit_volume import main

    with pytest.raises(SystemExit) as ended:
        main(["--gpus", "-5"])
    assert ended.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
        "error: argument --gpus: a fleet holds at least 1 GPU, got -5")
