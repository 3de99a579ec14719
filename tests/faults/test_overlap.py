"""Overlapping on-demand runs of collect and reclaim (dry-run) on SQLite and on PostgreSQL.

Four processes start together against one embedded cluster and one store: each exits 0 with no
database error, every collect (the reclaim runs collect too) stores its snapshot, every decision
of the window is recorded once (the store's unique decision index, ``Store.append_decision``)
and nothing is written to the cluster. The race itself is forced without timing: two dry-runs
of one snapshot window both read the audit log before either appends (the interleaving that
used to record every decision twice). ``bench/bench_overlap.py`` runs 20 processes and prints
the time and the peak memory.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench._overlap import overlapping_runs
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.services import fresh_schema_url
from gpuaas.cluster.testbed import write_policy
from gpuaas.policy import Mode
from gpuaas.settings import load_settings
from gpuaas.store import open_store
from tests.actions.reclaim_scenario import decide, run, writes
from tests.scenarios import point_at

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
    ran = overlapping_runs(RUNS, fleet.clock.now().isoformat(), env, url)
    assert ran.returncodes == [0] * RUNS and not ran.errors, ran.errors
    assert ran.snapshots == RUNS, "a snapshot was lost"
    assert ran.audit_keys and max(ran.audit_keys.values()) == 1, ran.audit_keys.most_common(3)
    dry = [r for r in ran.results if "decisions" in r]
    assert len(dry) == RUNS // 2 and len(ran.results) == RUNS
    assert writes(fleet) == before


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_two_dry_runs_of_one_window_record_each_decision_once(
        backend: str, reclaim_fleet: EmbeddedCluster, postgres_url: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    url = (f"sqlite:///{tmp_path / 'gpuaas.db'}" if backend == "sqlite"
           else fresh_schema_url(postgres_url, "overlap_pair"))
    point_at(reclaim_fleet, monkeypatch, database_url=url, data_dir=tmp_path,
             policy_file=write_policy(tmp_path / "policy.yaml", max_actions_per_run=20))
    settings = load_settings()
    store = open_store(settings)
    try:
        # Both runs judge the same window and read the audit log before either has appended.
        first, second = (decide(settings, reclaim_fleet, store, Mode.dry_run) for _ in range(2))
        assert [d.idempotency_key for d in first] == [d.idempotency_key for d in second]
        a, b = run(settings, reclaim_fleet, store, first, Mode.dry_run), run(settings, reclaim_fleet, store, second,
                                                                           Mode.dry_run)
        rows = store.audit(flow="reclaim", limit=None)
        keys = [r.idempotency_key for r in rows]
        assert sorted(keys) == sorted(d.idempotency_key for d in first), "a decision was recorded twice"
        assert {r.outcome for r in rows} >= {"planned"}
        # The second run's results point at the first run's rows: the decision is the first run's.
        assert [r.audit_id for r in b] == [r.audit_id for r in a]
        planned = [r for r in b if r.decision.outcome == "planned"]
        assert planned and all(r.result == "skipped" and "overlapping run" in r.reason for r in planned)
        # A third run of the window reads the decisions and records nothing new.
        run(settings, reclaim_fleet, store, decide(settings, reclaim_fleet, store, Mode.dry_run), Mode.dry_run)
        assert len(store.audit(flow="reclaim", limit=None)) == len(rows)
    finally:
        store.close()
