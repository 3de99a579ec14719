"""The rebalance test fleet: one cohort of three queues whose quotas no longer match their use.

24 H100 GPUs (3 nodes x 8), cohort ``c``, 90 minutes of history, ManualClock:

=======  =======  ====================================================================
queue    nominal  what runs
=======  =======  ====================================================================
team-a   12       ``a-busy`` 2 GPUs at 0.6; lendingLimit 10 (lends all but 2)
team-b   4        ``b-run`` 4 GPUs at 0.9; ``b-big`` 2 pods x 4 GPUs pending from the start
                  (borrowingLimit 2: it can hold 6 at most, so the 8 GPUs wait)
team-c   8        nothing; lendingLimit 6
=======  =======  ====================================================================
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuaas.actions import KubeWriter
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.settings import GpuaasSettings, load_settings
from tests.scenarios import embedded, point_at

HISTORY = timedelta(minutes=90)
BUSY = {"profile": "constant", "value": 0.6}
SCENARIO: dict[str, Any] = {
    "name": "rebalance",
    "flavors": [{"name": "h100"}],
    "pools": [{"name": "h100", "count": 3, "gpus_per_node": 8, "flavor": "h100", "gpu_hourly_price": 3.0}],
    "tenants": [
        {"name": "team-a", "cohort": "c", "quotas": [{"flavor": "h100", "gpus": 12, "lending_limit": 10}]},
        {"name": "team-b", "cohort": "c", "quotas": [{"flavor": "h100", "gpus": 4, "borrowing_limit": 2}]},
        {"name": "team-c", "cohort": "c", "quotas": [{"flavor": "h100", "gpus": 8, "lending_limit": 6}]},
    ],
    "workloads": [
        {"name": "a-busy", "kind": "RayCluster", "tenant": "team-a", "gpus_per_pod": 2, "utilisation": BUSY},
        {"name": "b-run", "kind": "RayCluster", "tenant": "team-b", "gpus_per_pod": 4,
         "utilisation": {"profile": "constant", "value": 0.9}},
        {"name": "b-big", "kind": "RayCluster", "tenant": "team-b", "pods": 2, "gpus_per_pod": 4,
         "utilisation": BUSY, "submit_at": "1m"},
    ],
}
QUEUES = ("team-a-cq", "team-b-cq", "team-c-cq")
NOMINAL = {"team-a-cq": 12, "team-b-cq": 4, "team-c-cq": 8}


def rebalance_cluster(data_dir: Path) -> EmbeddedCluster:
    return embedded(data_dir, SCENARIO, seed=3, history=HISTORY)


# The fixtures of the modules that write quotas on this fleet (``from tests.actions.rebalance_scenario import
# cluster, settings, writer``): one fleet per module, and every test starts from the scenario's quotas and limits.
@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with rebalance_cluster(tmp_path_factory.mktemp("rebalance")) as running:
        yield running


@pytest.fixture()
def settings(cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch) -> GpuaasSettings:
    point_at(cluster, monkeypatch)
    return load_settings()


@pytest.fixture()
def writer(settings: GpuaasSettings) -> Iterator[KubeWriter]:
    with KubeWriter(settings) as w:
        groups = {q: w.get_cluster_scoped("ClusterQueue", q)["spec"]["resourceGroups"] for q in QUEUES}
        yield w
        for queue in QUEUES:
            obj = w.get_cluster_scoped("ClusterQueue", queue)
            w.patch_cluster_scoped("ClusterQueue", queue, {
                "metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
                "spec": {"resourceGroups": groups[queue]}})
