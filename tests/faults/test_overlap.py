"""Overlapping on-demand runs of collect and reclaim (dry-run) on SQLite and on PostgreSQL (issue 14, point 5).

Four processes start together against one embedded cluster and one store: each exits 0 with no
database error, every collect (the reclaim runs collect too) stores its snapshot, and nothing is
written to the cluster. Found and NOT yet fixed: overlapping dry-runs of the same window each
record the window's dry-run decision (check-then-insert on the idempotency key, unlocked in
dry-run), so a key appears once per overlapping dry-run; the test holds that bound, an apply
run is serialised by the ``cluster-writes`` lock. ``bench/bench_overlap.py`` runs 20 and prints the time and the peak memory.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuaas.cluster.runner import EmbeddedCluster
from tests.actions.reclaim_scenario import write_policy, writes
from tests.faults.overlap import overlapping_runs
from tests.services import fresh_schema_url

pytestmark = [pytest.mark.integration, pytest.mark.flow]


@pytest.fixture(scope="module")
def fleet(dry_fleet: EmbeddedCluster) -> EmbeddedCluster:
    """Only read here: the package's shared fleet."""
    return dry_fleet
RUNS = 4


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_overlapping_runs_lose_nothing_and_duplicate_nothing(
        backend: str, fleet: EmbeddedCluster, postgres_url: str, prefect_harness: None,
        tmp_path: Path) -> None:
    from prefect.settings import PREFECT_API_URL

    url = (f"sqlite:///{tmp_path / 'gpuaas.db'}" if backend == "sqlite"
           else fresh_schema_url(postgres_url, "overlap"))
    env = {**fleet.settings_env(), "GPUAAS_NVML": "off", "GPUAAS_DATABASE_URL": url,
           "GPUAAS_DATA_DIR": str(tmp_path), "PREFECT_API_URL": str(PREFECT_API_URL.value()),
           "GPUAAS_POLICY_FILE": str(write_policy(tmp_path / "policy.yaml", max_actions_per_run=20)),
           "PREFECT_LOGGING_LEVEL": "WARNING"}
    before = writes(fleet)
    run = overlapping_runs(RUNS, fleet.clock.now().isoformat(), env, url)
    assert run.returncodes == [0] * RUNS and not run.errors, run.errors
    assert run.snapshots == RUNS, "a snapshot was lost"
    assert run.audit_keys and max(run.audit_keys.values()) <= RUNS // 2, run.audit_keys.most_common(3)
    dry = [r for r in run.results if "decisions" in r]
    assert len(dry) == RUNS // 2 and len(run.results) == RUNS
    assert writes(fleet) == before
