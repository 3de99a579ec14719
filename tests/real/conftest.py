"""One real control plane per test session (etcd, kube-apiserver, the Kueue manager), with the
conformance scenario loaded; the differential cases add their own queues in their own namespaces.

The binaries are built on first use (``make real-cluster`` does it ahead, with progress lines); a
build or start that fails fails the tests loudly: a skipped conformance test would hide it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuaas.cluster.real import KubeHTTP, RealCluster
from gpuaas.cluster.scenario import parse_scenario
from gpuaas.settings import GpuaasSettings, load_settings

pytestmark = [pytest.mark.real]

# team-a (8 GPUs, lends all) and team-b (4 GPUs, borrows nothing) in cohort c: team-b's 8-GPU job waits.
# team-c (2 GPUs, no cohort) runs a Deployment (serving 2 requests/s) and a StatefulSet of one 1-GPU replica each.
CONFORMANCE: dict[str, Any] = {
    "name": "conformance",
    "flavors": [{"name": "h100"}],
    "pools": [{"name": "h100", "count": 2, "gpus_per_node": 8, "flavor": "h100", "gpu_hourly_price": 3.0}],
    "tenants": [
        {"name": "team-a", "cohort": "c", "quotas": [{"flavor": "h100", "gpus": 8}]},
        {"name": "team-b", "cohort": "c", "quotas": [{"flavor": "h100", "gpus": 4, "borrowing_limit": 0}]},
        {"name": "team-c", "quotas": [{"flavor": "h100", "gpus": 2}]},
    ],
    "workloads": [
        {"name": "wl", "kind": "Workload", "tenant": "team-a", "gpus_per_pod": 2},
        {"name": "ray", "kind": "RayCluster", "tenant": "team-a", "gpus_per_pod": 2},
        {"name": "b-run", "kind": "Workload", "tenant": "team-b", "gpus_per_pod": 2},
        {"name": "b-big", "kind": "Workload", "tenant": "team-b", "pods": 2, "gpus_per_pod": 4},
        {"name": "b-late", "kind": "Workload", "tenant": "team-b", "gpus_per_pod": 4, "submit_at": "1m"},
        {"name": "eray", "kind": "RayCluster", "tenant": "team-a",
         "annotations": {"kueue.x-k8s.io/elastic-job": "true"}},
        {"name": "nb", "kind": "Notebook", "tenant": "team-a"},
        {"name": "isvc", "kind": "InferenceService", "tenant": "team-a",
         "serving": {"model_name": "m", "requests_per_second": {"profile": "constant", "value": 0}}},
        {"name": "dep", "kind": "Deployment", "tenant": "team-c",
         "serving": {"model_name": "dep-m", "requests_per_second": {"profile": "constant", "value": 2}}},
        {"name": "sts", "kind": "StatefulSet", "tenant": "team-c"},
    ],
}


@pytest.fixture(scope="session")
def real_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    started = time.monotonic()
    cluster = RealCluster(parse_scenario(CONFORMANCE), tmp_path_factory.mktemp("real-cluster"),
                          progress=lambda message: print(f"real-cluster: {message}", flush=True))
    with cluster:
        print(f"real-cluster: up in {time.monotonic() - started:.1f} s", flush=True)
        yield cluster


@pytest.fixture(scope="session")
def api(real_cluster: RealCluster) -> KubeHTTP:
    assert real_cluster.api is not None
    return real_cluster.api


def owned_workloads(api: KubeHTTP, kind: str, name: str, namespace: str) -> list[dict[str, Any]]:
    """The Workloads Kueue created for the object ``kind/name``."""
    return [w for w in api.list("Workload", namespace)
            if any(o.get("kind") == kind and o.get("name") == name for o in w["metadata"].get("ownerReferences") or [])]


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), {})


def is_true(obj: dict[str, Any], kind: str) -> bool:
    return condition(obj, kind).get("status") == "True"


def wait_until(what: str, check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s: {what}")
        time.sleep(0.2)


def workload_of(api: KubeHTTP, kind: str, name: str, namespace: str) -> dict[str, Any]:
    """The one Workload of ``kind/name`` (waits until Kueue has created it)."""
    found: list[dict[str, Any]] = []

    def there() -> bool:
        found[:] = owned_workloads(api, kind, name, namespace)
        return len(found) == 1

    wait_until(f"Kueue creates the Workload of {kind} {namespace}/{name}", there)
    return found[0]


@pytest.fixture()
def settings(real_cluster: RealCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GpuaasSettings:
    for key, value in {**real_cluster.settings_env(), "GPUAAS_NVML": "off"}.items():
        monkeypatch.setenv(key, value)
    return load_settings()
