"""OpenCost's ``__idle__`` read with the costs: kept apart from the workloads' rows, checked, and end to end.

Cases: the ``__idle__`` rows of an allocation answer (one per set, or ``<cluster>/<node>/__idle__`` per node, as
OpenCost writes them unaggregated) are no workload's and are added per period apart from the workloads' rows; their
figures are checked as every allocation's: null is unknown (NaN), an infinite one refuses the answer, naming
``__idle__``, and one below 0 (OpenCost's "negative idle") is read, for the report to call unknown. On the embedded cluster (``tests/cost_fleet.py``: 6 H100 nodes at $4, 6 A100 nodes at $2.5
per GPU-hour, 8 GPUs each, CPU and RAM priced), the one ``/allocation`` request asks ``includeIdle`` and the idle
GPU cost is the nodes' GPU-hours at their price less the GPU-hours the pods held at theirs, computed here from the
scenario and the ledger; an OpenCost that prices no node, and OpenCost's metrics in its place, leave it unknown.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from gpuaas.cluster.opencost import fleet_nodes
from gpuaas.cluster.prometheus import free_port
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.errors import MalformedResponse
from gpuaas.models import IdlePeriod
from gpuaas.policies.cost import build_cost_report
from gpuaas.sources._cost_allocation import idle_periods
from gpuaas.sources.cost_window import allocation_rows, read_cost_inputs
from gpuaas.sources.opencost import parse_allocation
from reports.cost_report import cost_report_json, node_cost_line
from tests.cost_fleet import COST_HISTORY, cost_cluster, cost_settings

START = datetime(2026, 11, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


def _alloc(end: datetime, namespace: str | None = None, **figures: Any) -> dict[str, Any]:
    props = {"cluster": "c1", **({"namespace": namespace, "pod": f"{namespace}-0"} if namespace else {})}
    return {"properties": props, "window": {"start": f"{end - HOUR:%Y-%m-%dT%H:%M:%SZ}",
                                            "end": f"{end:%Y-%m-%dT%H:%M:%SZ}"}, "minutes": 60.0, **figures}


def _answer(idle_gpu_cost: Any = 7.0) -> dict[str, Any]:
    """Two hourly sets: the first with one ``__idle__``, the second with two per-node idle rows (one without a
    ``totalCost``: the sum of its parts, each of which OpenCost writes, known)."""
    first, second = START + HOUR, START + 2 * HOUR
    unpriced: dict[str, Any] = dict.fromkeys((
        "cpuCostAdjustment", "ramCostAdjustment", "pvCost", "pvCostAdjustment", "networkCost", "networkCostAdjustment",
        "loadBalancerCost", "loadBalancerCostAdjustment", "sharedCost", "externalCost"), 0.0)
    return {"code": 200, "data": [
        {"a/deployment:web/a-0": _alloc(first, "a", gpuHours=1.0, gpuCost=3.0, totalCost=4.0),
         "__idle__": _alloc(first, gpuCost=idle_gpu_cost, cpuCost=1.0, ramCost=2.0, totalCost=10.0)},
        {"a/deployment:web/a-0": _alloc(second, "a", gpuHours=1.0, gpuCost=3.0, totalCost=4.0),
         "c1/n1/__idle__": _alloc(second, gpuCost=3.0, totalCost=3.5),
         "c1/n2/__idle__": _alloc(second, gpuCost=4.0, gpuCostAdjustment=-1.0, cpuCost=0.5, ramCost=0.5,
                                  **unpriced)}]}


def test_idle_rows_are_kept_apart_per_period() -> None:
    frame = parse_allocation(_answer())
    rows = allocation_rows(frame, START, 3600.0, 2)
    assert list(rows["pod"]) == ["a-0", "a-0"] and rows["gpu_cost"].sum() == 6.0  # no idle row is a workload's
    assert idle_periods(frame, START, 3600.0, 2) == [IdlePeriod(0, 7.0, 10.0), IdlePeriod(1, 6.0, 7.5)]
    assert idle_periods(frame[~frame["name"].str.contains("__idle__")], START, 3600.0, 2) == []


def test_a_null_idle_figure_is_unknown() -> None:
    [first, second] = idle_periods(parse_allocation(_answer(None)), START, 3600.0, 2)
    assert math.isnan(first.gpu_cost) and first.total_cost == 10.0 and second.gpu_cost == 6.0


def test_an_infinite_idle_figure_refuses_the_answer() -> None:
    with pytest.raises(MalformedResponse, match=r"field 'data\[0\].__idle__': gpuCost is inf, not a finite number"):
        parse_allocation(_answer(math.inf))


def test_an_idle_cost_below_0_is_read_and_leaves_the_workloads_costs_as_they_are() -> None:
    """OpenCost writes ``__idle__`` as the nodes' cost less what it allocated, below 0 where its node and allocation
    prices disagree (its "negative idle"): the report says the idle cost is unknown (``_node_cost``), and the
    workloads' costs of the same answer are read, where refusing the answer would have lost them too."""
    frame = parse_allocation(_answer(-5.0))
    assert allocation_rows(frame, START, 3600.0, 2)["gpu_cost"].sum() == 6.0
    assert idle_periods(frame, START, 3600.0, 2)[0] == IdlePeriod(0, -5.0, 10.0)
    workload = _answer()
    workload["data"][0]["a/deployment:web/a-0"]["gpuCost"] = -5.0  # a workload's cost below 0 still refuses it
    with pytest.raises(MalformedResponse, match=r"field 'data\[0\].a/deployment:web/a-0': gpuCost is -5, below 0"):
        parse_allocation(workload)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with cost_cluster(tmp_path_factory.mktemp("idle")) as cluster:
        yield cluster


def _expected_idle_gpu_cost(fleet: EmbeddedCluster, start: datetime, end: datetime) -> float:
    """Every node's GPUs x hours x its pool's price, less each pod's GPU-hours x its node's price."""
    price = {node.node: node.gpu_price for node in fleet_nodes(fleet.scenario, start)}
    hours = (end - start).total_seconds() / 3600
    nodes = sum(pool.count * pool.gpus_per_node * hours * pool.gpu_hourly_price for pool in fleet.scenario.pools)
    held = sum(acc.gpu_hours * price[key.node] for key, acc in fleet.sim.ledger.allocations(start, end).items())
    return nodes - held


@pytest.mark.integration
def test_the_embedded_opencost_prices_the_gpus_nobody_held(fleet: EmbeddedCluster) -> None:
    settings = cost_settings(fleet)
    inputs = read_cost_inputs(settings, fleet.clock.now(), COST_HISTORY.total_seconds())
    expected = _expected_idle_gpu_cost(fleet, inputs.start, inputs.end)
    assert expected > 100  # the default scenario leaves a third of its 96 GPUs free
    [period] = inputs.idle or ()
    assert period.day == 0 and period.gpu_cost == pytest.approx(expected, abs=0.01)
    report = build_cost_report(inputs, settings.policy)
    node = cost_report_json(report, None)["node_cost"]
    nodes_gpu = sum(p.count * p.gpus_per_node * 2 * p.gpu_hourly_price for p in fleet.scenario.pools)  # 2 h
    assert node["gpu_cost"] == pytest.approx(nodes_gpu, abs=0.01)  # allocated + idle: what the GPUs cost
    assert round(node["allocated_gpu_cost"] + node["idle_gpu_cost"], 2) == node["gpu_cost"]
    assert round(node["allocated_total_cost"] + node["idle_total_cost"], 2) == node["total_cost"]
    assert node["idle_unknown"] is None and node["unheld_gpu_hours"] > 0
    assert node_cost_line(report).startswith(f"The nodes' GPUs cost ${nodes_gpu:,.2f} at OpenCost's prices: ")


@pytest.mark.integration
def test_an_opencost_without_idle_and_its_metrics_leave_the_idle_cost_unknown(fleet: EmbeddedCluster) -> None:
    end, window = fleet.clock.now(), COST_HISTORY.total_seconds()
    fleet.opencost.price_nodes(())  # an OpenCost that prices no node answers includeIdle without __idle__
    try:
        settings = cost_settings(fleet)
        api = build_cost_report(read_cost_inputs(settings, end, window), settings.policy)
    finally:
        fleet.opencost.price_nodes(fleet_nodes(fleet.scenario, fleet.sim.epoch))
    metrics_settings = cost_settings(fleet, opencost_url=f"http://127.0.0.1:{free_port()}")
    metrics = build_cost_report(read_cost_inputs(metrics_settings, end, window), metrics_settings.policy)
    assert api.cost_source == "opencost-allocation-api" and metrics.cost_source == "opencost-prometheus-metrics"
    for report, why in ((api, "OpenCost's allocation answer held no __idle__"),
                        (metrics, "OpenCost's metrics in Prometheus, which do not price idle capacity")):
        node = cost_report_json(report, None)["node_cost"]
        assert node["idle_gpu_cost"] is None and node["gpu_cost"] is None and node["allocated_gpu_cost"] > 0
        assert why in node["idle_unknown"]
        assert node_cost_line(report).startswith("The nodes' GPUs cost unknown at OpenCost's prices: ")
