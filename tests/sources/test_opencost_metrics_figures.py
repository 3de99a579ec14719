"""OpenCost's metrics in Prometheus, read in place of its allocation API, held to the API's rules.

The embedded cluster (``tests/cost_fleet.py``: 2 h of history, every tenant's GPUs priced in OpenCost's metrics) is
read with no ``opencost_url``, through a relay in front of its real Prometheus that rewrites the answer to the
OpenCost query alone (``tests/rewriting_prometheus.py``). As ``test_cost_opencost_figures`` holds the API's answers,
each answer of the metrics must give, in the cost report and in a collect's snapshot:

* a negative, infinite or absurd figure (past ten million): the OpenCost source failed, naming the series, the
  metrics it came from and the figure; nothing is summed from it (the report's money is unknown, never the figure),
  and no warning reaches the terminal;
* a NaN GPU cost (Prometheus' word for a figure it could not compute, as null is OpenCost's): that cost unknown for
  the pod's tenant and the cluster, never $0; the other tenants keep theirs;
* OpenCost's metrics pricing nodes and holding no allocation while GPUs were held: the source failed, naming the
  window; the money unknown, never $0;
* no OpenCost metric at all: no OpenCost to have failed (not installed); the money unknown with the reason.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.errors import MalformedResponse
from gpuaas.models import CostInputs, Snapshot
from gpuaas.operations.collect import read_snapshot
from gpuaas.policies.cost import CostReport, build_cost_report
from gpuaas.settings import GpuaasSettings
from gpuaas.sources.cost_window import read_cost_inputs
from gpuaas.sources.opencost import read_opencost
from tests.cost_fleet import COST_HISTORY, cost_cluster, cost_settings
from tests.rewriting_prometheus import each_point, rewriting_prometheus

pytestmark = pytest.mark.integration
Change = Callable[[dict[str, str], float, str], tuple[float, str] | None]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with cost_cluster(tmp_path_factory.mktemp("opencost-metrics")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def relay(fleet: EmbeddedCluster) -> Iterator[Callable[[Change], str]]:
    """``relay(change)``: the URL of a Prometheus whose answers are the fleet's, but for OpenCost's query, whose
    points pass through ``change(labels, time, value)`` (None: the point is left out)."""
    with rewriting_prometheus(str(fleet.prometheus_url)) as point:
        def through(change: Change) -> str:
            def rewrite(query: str, answer: dict[str, Any]) -> dict[str, Any]:
                return each_point(answer, change) if "container_gpu_allocation" in query else answer
            return point(rewrite)

        yield through


def _unchanged(_labels: dict[str, str], t: float, v: str) -> tuple[float, str]:
    return t, v


def _settings_for(fleet: EmbeddedCluster, url: str) -> GpuaasSettings:
    return cost_settings(fleet, prometheus_url=url, opencost_url=None)


def _report(fleet: EmbeddedCluster, url: str) -> tuple[CostInputs, CostReport]:
    settings = _settings_for(fleet, url)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's overflow warnings would reach the operator's terminal
        inputs = read_cost_inputs(settings, fleet.clock.now(), COST_HISTORY.total_seconds())
        return inputs, build_cost_report(inputs, settings.policy)


def _snapshot(fleet: EmbeddedCluster, url: str) -> Snapshot:
    return read_snapshot(_settings_for(fleet, url), fleet.clock.now())


def _set(stat: str, value: str, namespace: str = "forecast") -> Change:
    """Each point of ``stat`` of ``namespace``'s pods as ``value``; every other point as it was."""
    def change(labels: dict[str, str], t: float, v: str) -> tuple[float, str]:
        return (t, value) if labels.get("gpuaas_stat") == stat and labels.get("namespace") == namespace else (t, v)
    return change


def test_the_metrics_give_the_money_when_nothing_is_wrong(fleet: EmbeddedCluster,
                                                          relay: Callable[[Change], str]) -> None:
    """What the cases below change: the metrics price every tenant, and no OpenCost source failed."""
    inputs, report = _report(fleet, relay(_unchanged))
    assert "opencost" not in inputs.sources or inputs.sources["opencost"].ok
    assert report.cluster["gpu_cost"] > 0 and report.cluster["total_cost"] > report.cluster["gpu_cost"]
    snapshot = _snapshot(fleet, relay(_unchanged))
    assert snapshot.sources["opencost"].ok and not snapshot.costs.empty


REFUSED = {  # (stat in the cost report, in the snapshot, the value, what the line says of it)
    "negative-cost": ("gpu_cost", "cost_per_hour", "-1000", "is -1000, below 0"),
    "negative-hours": ("gpu_hours", "gpu_count", "-2", "is -2, below 0"),
    "infinite-cost": ("gpu_cost", "cost_per_hour", "+Inf", "is inf, not a finite number"),
    "huge-cost": ("gpu_cost", "cost_per_hour", "1e308", "is 1e+308, past 10,000,000"),
    "huge-hours": ("gpu_hours", "gpu_count", "1e308", "is 1e+308, past 10,000,000"),
    "huge-cpu-cost": ("cpu_cost", None, "1e308", "is 1e+308, past 10,000,000"),
}


@pytest.mark.parametrize(("stat", "snapshot_stat", "value", "says"), REFUSED.values(), ids=REFUSED.keys())
def test_a_figure_no_bill_holds_fails_the_source_naming_the_series(
        fleet: EmbeddedCluster, relay: Callable[[Change], str], stat: str, snapshot_stat: str | None, value: str,
        says: str) -> None:
    """The cost report: one line naming OpenCost (at Prometheus' URL), the series, the metrics and the figure; the
    money unknown, not summed from it. The snapshot of a collect: the same source failed, the same words."""
    url = relay(_set(stat, value))
    inputs, report = _report(fleet, url)
    status = inputs.sources["opencost"]
    assert not status.ok and status.error is not None and "\n" not in status.error
    assert status.error.startswith(f"OpenCost at {url}: series 'forecast/") and f": {stat} {says}" in status.error
    assert "of OpenCost's metrics (container_" in status.error
    assert inputs.costs is None and report.cluster["gpu_cost"] is None and report.cluster["total_cost"] is None
    assert f"{status.error}; the costs are unknown, not $0" in inputs.notes
    if snapshot_stat is None:
        return
    snapshot = _snapshot(fleet, relay(_set(snapshot_stat, value)))
    error = snapshot.sources["opencost"].error
    assert not snapshot.sources["opencost"].ok and error is not None
    assert error.startswith(f"OpenCost at {url}: series 'forecast/") and f": {snapshot_stat} {says}" in error
    assert snapshot.degraded


def test_what_the_window_adds_up_to_is_held_to_the_bound_too(fleet: EmbeddedCluster,
                                                            relay: Callable[[Change], str]) -> None:
    """9,000,000 GPUs is within the bound; over a 2-hour window it is 18,000,000 GPU-hours, which no allocation of
    the API's answer may hold either."""
    url = relay(_set("gpu_count", "9e6"))
    with pytest.raises(MalformedResponse) as refused:
        read_opencost(_settings_for(fleet, url), fleet.clock.now(), 120)
    assert str(refused.value).startswith(f"OpenCost at {url}: series 'forecast/")
    assert str(refused.value).endswith("(container_gpu_allocation): gpu_hours is 1.8e+07, past 10,000,000, the most "
                                       "one allocation of one window may hold")


def test_a_nan_gpu_cost_is_unknown_for_its_tenant_and_the_cluster(fleet: EmbeddedCluster,
                                                                   relay: Callable[[Change], str]) -> None:
    """The platform tenant's pods have a NaN GPU cost: its GPU cost, its waste and the cluster's are unknown (not
    $0); the forecast tenant keeps its GPU cost; no source failed (an unknown figure is said, not guessed)."""
    _, before = _report(fleet, relay(_unchanged))
    inputs, report = _report(fleet, relay(_set("gpu_cost", "NaN", namespace="platform")))
    assert "opencost" not in inputs.sources
    tenants = {t["tenant"]: t for t in report.tenants}
    was = {t["tenant"]: t for t in before.tenants}
    assert (tenants["platform"]["gpu_cost"], tenants["platform"]["waste_cost"]) == (None, None)
    assert tenants["forecast"]["gpu_cost"] == was["forecast"]["gpu_cost"] > 0
    assert (report.cluster["gpu_cost"], report.cluster["waste_cost"]) == (None, None)
    assert any(n.startswith("OpenCost gave no gpuCost") and "platform" in n for n in report.notes)


def test_a_gpu_cost_without_a_node_price_is_unknown_not_zero(fleet: EmbeddedCluster,
                                                             relay: Callable[[Change], str]) -> None:
    """No ``gpu_cost`` series for the platform tenant's pods (their nodes unpriced: the join with
    ``node_gpu_hourly_cost`` finds nothing) while they hold GPU-hours: their GPU cost is unknown, as a missing
    ``gpuCost`` in the API's answer is; a pod that held no GPU costs nothing on GPUs."""
    def unpriced(labels: dict[str, str], t: float, v: str) -> tuple[float, str] | None:
        return None if labels.get("gpuaas_stat") == "gpu_cost" and labels.get("namespace") == "platform" else (t, v)

    inputs, report = _report(fleet, relay(unpriced))
    assert inputs.costs is not None
    platform = inputs.costs[inputs.costs["namespace"] == "platform"]
    assert (platform["gpu_hours"] > 0).all() and platform["gpu_cost"].isna().all()
    assert next(t for t in report.tenants if t["tenant"] == "platform")["gpu_cost"] is None


def _no_allocation(labels: dict[str, str], t: float, v: str) -> tuple[float, str] | None:
    """OpenCost running (its node prices there) and pricing no allocation."""
    return (t, v) if labels.get("gpuaas_stat") == "priced_nodes" else None


def test_no_allocation_while_gpus_were_held_fails_the_source_naming_the_window(
        fleet: EmbeddedCluster, relay: Callable[[Change], str]) -> None:
    url = relay(_no_allocation)
    inputs, report = _report(fleet, url)
    status = inputs.sources["opencost"]
    assert not status.ok and status.error is not None
    assert status.error.startswith(f"OpenCost at {url}: no allocation in OpenCost's metrics (container_gpu_allocation) "
                                   "for the window ")
    assert "GPU-hours in it: its cost is unknown, not $0" in status.error
    assert inputs.costs is None and report.cluster["total_cost"] is None  # unknown, never $0
    snapshot = _snapshot(fleet, url)
    error = snapshot.sources["opencost"].error
    assert not snapshot.sources["opencost"].ok and error is not None
    assert error.startswith(f"OpenCost at {url}: no allocation in OpenCost's metrics (container_gpu_allocation) for "
                            "the window ")
    assert "while running pods held " in error and "GPUs: their cost is unknown, not $0" in error


def test_no_opencost_metric_at_all_is_no_failed_source(fleet: EmbeddedCluster,
                                                       relay: Callable[[Change], str]) -> None:
    """Not even a node price: OpenCost is not installed (or not scraped), and there is no OpenCost to have failed.
    The money is unknown, with the reason; the snapshot's OpenCost reading is empty and answered."""
    url = relay(lambda _labels, _t, _v: None)
    inputs, report = _report(fleet, url)
    assert "opencost" not in inputs.sources and inputs.costs is None
    assert any(n.startswith("cost unknown: OpenCost unknown: no OpenCost allocation API configured and no OpenCost "
                            "metrics") for n in report.notes)
    snapshot = _snapshot(fleet, url)
    assert snapshot.sources["opencost"].ok and snapshot.costs.empty


def test_the_apis_failure_stays_the_sources_and_the_metrics_failure_is_said_beside_it(
        fleet: EmbeddedCluster, relay: Callable[[Change], str]) -> None:
    """The API is down and its metrics hold a negative GPU cost: the source's error is the API's (what to fix
    first), a note says why the metrics could not stand in, and the money is unknown."""
    url = relay(_set("gpu_cost", "-1000"))
    settings = cost_settings(fleet, prometheus_url=url, opencost_url="http://127.0.0.1:9")
    inputs = read_cost_inputs(settings, fleet.clock.now(), COST_HISTORY.total_seconds())
    refused = "OpenCost at http://127.0.0.1:9: connection refused (nothing listens on that port)"
    assert inputs.sources["opencost"].error == refused
    assert inputs.costs is None
    said = [n for n in inputs.notes if n.startswith(f"OpenCost's metrics in Prometheus at {url}: series 'forecast/")]
    assert len(said) == 1 and "gpu_cost is -1000, below 0" in said[0] and said[0].endswith("unknown, not $0")
