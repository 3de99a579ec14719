"""An undo with the kubeconfig of another cluster than the one whose history the database holds.

The uid guard keeps that cluster's objects as they are, but the restores it would record would go into this
database's audit log: such an undo is refused as a collect refuses such a database, before anything is recorded
or written, in the collect's line, exit 1; through ``gpuaas undo``, ``gpuaas incident --undo`` and the deadlines
flow's undo alike.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.testbed import write_policy
from gpuaas.operations.collect import other_cluster
from gpuaas.settings import load_settings
from gpuaas.store import open_store
from tests.actions.reclaim_scenario import writes
from tests.scenarios import point_at

pytestmark = [pytest.mark.integration, pytest.mark.flow]
runner = CliRunner()


@pytest.fixture(scope="module")
def cluster(reclaim_fleet: EmbeddedCluster) -> EmbeddedCluster:
    return reclaim_fleet


def _audit_rows() -> int:
    with open_store(load_settings()) as store:
        return len(store.audit(limit=None))


def test_an_undo_against_another_clusters_database_records_nothing(
        cluster: EmbeddedCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefect_harness: None) -> None:
    point_at(cluster, monkeypatch, policy_file=write_policy(tmp_path / "policy.yaml", max_actions_per_run=1))
    applied = runner.invoke(app, ["reclaim", "--apply", "--format", "json"])
    assert applied.exit_code == 0, applied.output
    [done] = [d for d in json.loads(applied.stdout)["decisions"] if d["result"] == "applied"]
    # The database's newest snapshot is now another cluster's: this kubeconfig is not the one it was collected with.
    with open_store(load_settings()) as store:
        newest = store.latest_snapshot()
        assert newest is not None
        store.save_snapshot(newest.collected_at + timedelta(minutes=1), {"cluster": "uid-of-cluster-a"}, {})
        stored = store.latest_cluster()
    ours = cluster.store.get("Namespace", "", "kube-system")["metadata"]["uid"]
    refusal = other_cluster(ours, stored)
    assert refusal is not None and "uid-of-cluster-a" in refusal
    rows, written = _audit_rows(), writes(cluster)

    for args in (["undo", str(done["audit_id"])], ["incident", "--from", "1h", "--undo", str(done["audit_id"])]):
        result = runner.invoke(app, args)
        assert result.exit_code == 1, (args, result.output)
        assert result.stderr.strip().splitlines()[-1] == f"error: GPUAAS_DATA_DIR: {refusal}", args
        assert "Traceback" not in result.output
        assert (_audit_rows(), writes(cluster)) == (rows, written), args  # nothing recorded, nothing written

    from flows.deadlines import deadlines

    state = deadlines(undo=[done["audit_id"]], return_state=True)
    assert state.is_failed() and str(state.result(raise_on_failure=False)) == f"GPUAAS_DATA_DIR: {refusal}"
    assert (_audit_rows(), writes(cluster)) == (rows, written)
