"""Kueue writes use the API version the reader negotiated.

An embedded cluster whose API server does not serve ``kueue.x-k8s.io/v1beta2`` (an older
Kueue): the snapshot reads Workloads at ``v1beta1``, and the reclaim of a bare Workload
(``spec.active: false``) and its undo are written at ``v1beta1`` too, with Kueue releasing
and then re-admitting its quota.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.settings import GpuaasSettings
from gpuaas.store import Store
from tests.actions.reclaim_scenario import obj, reserved, run, undo, workload_decision
from tests.scenarios import embedded

pytestmark = [pytest.mark.integration]

OLD_KUEUE = {
    "name": "old-kueue",
    "flavors": [{"name": "h100"}],
    "pools": [{"name": "h100", "count": 1, "gpus_per_node": 4, "flavor": "h100", "gpu_hourly_price": 3.0}],
    "tenants": [{"name": "team-a", "cohort": "c", "quotas": [{"flavor": "h100", "gpus": 4}]}],
    "workloads": [{"name": "wl", "kind": "Workload", "tenant": "team-a"}],
}
V1BETA1 = "/apis/kueue.x-k8s.io/v1beta1/namespaces/{namespace}/workloads/{name}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with embedded(tmp_path_factory.mktemp("old-kueue"), OLD_KUEUE, seed=3, history=timedelta(minutes=10),
                  disabled_api_versions=("kueue.x-k8s.io/v1beta2",)) as running:
        yield running


def test_a_workload_is_reclaimed_and_restored_through_v1beta1(settings: GpuaasSettings, cluster: EmbeddedCluster,
                                                              store: Store) -> None:
    assert reserved(cluster, "Workload", "wl") == [True]
    decision = workload_decision(settings, cluster, "wl")
    [result] = run(settings, cluster, store, [decision])
    assert result.result == "applied", result.reason
    assert obj(cluster, "Workload", "wl")["spec"]["active"] is False
    assert reserved(cluster, "Workload", "wl") == [False]
    assert cluster.api.requests[f"PATCH {V1BETA1}"] == 1

    [restored] = undo(settings, store, [int(result.audit_id)])
    assert restored.result == "restored", restored.message
    assert obj(cluster, "Workload", "wl")["spec"]["active"] is True
    assert reserved(cluster, "Workload", "wl") == [True]
    assert cluster.api.requests[f"PATCH {V1BETA1}"] == 2
    assert cluster.api.requests["PATCH /apis/kueue.x-k8s.io/v1beta2"] == 0
    assert decision.api_version == "kueue.x-k8s.io/v1beta1"
