"""Fixtures of the reclaim action tests: the module's cluster and settings pointed at it (the root gives the store).

A module that needs another cluster (a Kueue serving only v1beta1) overrides ``cluster``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.testbed import write_policy
from gpuaas.settings import GpuaasSettings, load_settings
from tests.scenarios import point_at


@pytest.fixture(scope="module")
def cluster(reclaim_fleet: EmbeddedCluster) -> EmbeddedCluster:
    return reclaim_fleet


@pytest.fixture()
def settings(cluster: EmbeddedCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GpuaasSettings:
    point_at(cluster, monkeypatch, policy_file=write_policy(tmp_path / "policy.yaml", max_actions_per_run=20))
    return load_settings()
