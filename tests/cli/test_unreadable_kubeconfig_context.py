"""A kubeconfig context that does not exist is the snapshot's failure, said once, whichever command meets it.

Every reading command reads the Kubernetes API through the snapshot, and the deciding ones also open a
writer; a writer that loaded its credentials at once failed the run (exit 1) with the cause said twice, where
``collect`` called the same cause a degraded snapshot (exit 3). The writer loads them at its first request:
a run that writes nothing needs none.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from gpuaas.cli._common import EXIT_DEGRADED
from gpuaas.cli.app import app
from gpuaas.cluster.runner import EmbeddedCluster
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
