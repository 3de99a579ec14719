"""A reclaim fleet behind four fault proxies (API, Prometheus, OpenCost, Pushgateway).

``fleet`` is the module's own reclaim fleet (a kill test writes to it); a module that only reads
(the network matrix, the overlapping dry-runs) overrides it with ``dry_fleet``, one for the package.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuaas.cluster.fault_proxy import FaultProxy, fault_proxy
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.testbed import write_policy

TARGETS = ("kube", "prometheus", "opencost", "pushgateway")


@pytest.fixture(scope="package")
def dry_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    """One reclaim fleet for every module that never writes to it."""
    from gpuaas.cluster.testbed import reclaim_cluster

    with reclaim_cluster(tmp_path_factory.mktemp("dry-fleet")) as running:
        yield running


@pytest.fixture(scope="module")
def fleet(reclaim_fleet: EmbeddedCluster) -> EmbeddedCluster:
    return reclaim_fleet


@pytest.fixture(scope="module")
def proxies(fleet: EmbeddedCluster, pushgateway_url: str,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, FaultProxy]]:
    upstreams = {"kube": fleet.api_url, "prometheus": fleet.prometheus_url, "opencost": fleet.opencost_url, "pushgateway": pushgateway_url}
    with fault_proxy(upstreams["kube"]) as kube, fault_proxy(upstreams["prometheus"]) as prom, \
            fault_proxy(upstreams["opencost"]) as cost, fault_proxy(upstreams["pushgateway"]) as push:
        yield {"kube": kube, "prometheus": prom, "opencost": cost, "pushgateway": push}


@pytest.fixture(scope="module")
def policy_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reclaim scenario's policy (team-g's 2 h grace), a cap wide enough for every target."""
    return write_policy(tmp_path_factory.mktemp("policy") / "policy.yaml", max_actions_per_run=20)


@pytest.fixture()
def through_proxies(policy_file: Path, fleet: EmbeddedCluster, proxies: dict[str, FaultProxy], tmp_path: Path,
                    monkeypatch: pytest.MonkeyPatch) -> dict[str, FaultProxy]:
    """Settings pointed at the proxies (1 s timeout, 2 retries, no backoff); faults cleared before and after."""
    for proxy in proxies.values():
        proxy.clear()
    env = {**fleet.settings_env(), "GPUAAS_NVML": "off", "GPUAAS_POLICY_FILE": str(policy_file),
           "GPUAAS_KUBECONFIG": str(proxies["kube"].kubeconfig(fleet.kubeconfig, tmp_path / "kubeconfig")),
           "GPUAAS_PROMETHEUS_URL": proxies["prometheus"].url, "GPUAAS_OPENCOST_URL": proxies["opencost"].url,
           "GPUAAS_PUSHGATEWAY_URL": proxies["pushgateway"].url, "GPUAAS_REQUEST_TIMEOUT_SECONDS": "1",
           "GPUAAS_RETRIES": "2", "GPUAAS_RETRY_BACKOFF_SECONDS": "0"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    yield proxies
    for proxy in proxies.values():
        proxy.clear()
