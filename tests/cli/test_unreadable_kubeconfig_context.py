"""A kubeconfig context that does not exist is the snapshot's failure, said once, whichever command meets it.

Every reading command reads the Kubernetes API through the snapshot, and the deciding ones also open a
writer: its credentials are loaded at its first request, so a deciding run that writes nothing needs none
and degrades as ``collect`` does (exit 3, the cause said once, first). An undo always asks the cluster: it
loads them before it records anything, and ends (exit 1) with the audit log as it was.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli._common import EXIT_DEGRADED
from gpuaas.cli.app import app
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.testbed import write_policy
from gpuaas.settings import load_settings
from gpuaas.store import open_store
from tests.scenarios import point_at

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(("command", "then"), [
    (["collect"], "Snapshot"),
    (["reclaim"], "Nothing decided: no workload could be read."),
    (["rebalance"], "Nothing rebalanced: no ClusterQueue could be read."),
    (["plan", "deadlines", "--from-cluster"], "Nothing planned: no ClusterQueue could be read."),
], ids=["collect", "reclaim", "rebalance", "plan-deadlines"])
def test_an_unknown_context_degrades_every_command_alike(reclaim_fleet: EmbeddedCluster,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          command: list[str], then: str) -> None:
    point_at(reclaim_fleet, monkeypatch, kube_context="nope", retries=0)
    result = CliRunner().invoke(app, command, env={"COLUMNS": "400"})
    assert result.exit_code == EXIT_DEGRADED, result.output
    first = result.stdout.splitlines()[0]
    cause = "context 'nope' of GPUAAS_KUBE_CONTEXT is not in the kubeconfig (it has: gpuaas-embedded)"
    assert first.startswith(f"Degraded: Kubernetes API at kubeconfig {reclaim_fleet.kubeconfig}: cannot load the "
                            f"credentials: {cause}. {then}"), first
    assert "error:" not in result.stderr and cause not in result.stderr
    if command == ["rebalance"]:
        assert "Quota plan" not in result.stdout  # no empty table of headers under "nothing rebalanced"


def test_an_undo_that_cannot_reach_the_cluster_records_nothing(reclaim_fleet: EmbeddedCluster, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """An undo always asks the cluster: with no credentials it ends before it records a restore, so a retry with
    the setting mended finds the audit log as it was."""
    point_at(reclaim_fleet, monkeypatch, retries=0, data_dir=tmp_path / "data",
             policy_file=write_policy(tmp_path / "policy.yaml", max_actions_per_run=1))
    applied = CliRunner().invoke(app, ["reclaim", "--apply", "--format", "json"])
    assert applied.exit_code == 0, applied.output
    [audit_id] = [d["audit_id"] for d in json.loads(applied.stdout)["decisions"] if d["result"] == "applied"]
    rows = _audit_rows()
    monkeypatch.setenv("GPUAAS_KUBE_CONTEXT", "nope")
    undo = CliRunner().invoke(app, ["undo", str(audit_id)])
    assert undo.exit_code == 1, undo.output
    assert "context 'nope' of GPUAAS_KUBE_CONTEXT is not in the kubeconfig" in undo.stderr
    assert _audit_rows() == rows


def _audit_rows() -> int:
    store = open_store(load_settings())
    try:
        return len(store.audit(limit=None))
    finally:
        store.close()
