"""The OpenCost emulator: windows, aggregation, steps, the response shape and its metrics.

Cases: cost = GPUs x hours x node GPU price, whatever the utilisation; every field of the
real swagger example is present, plus the nested ``gpuAllocation``; aggregate by namespace,
controller, label and comma lists; ``step`` splits into sets and ``accumulate`` merges them;
``includeIdle`` adds the nodes' cost less the allocations' (one ``__idle__`` aggregated, one per node not), and
nothing for a set without allocations, for a server without nodes, or without ``includeIdle``;
windows (``24h``, RFC3339 and unix pairs) and the 400 for a bad one over HTTP; OpenCost's
Prometheus metrics carry the labels of the real scraper test data.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from gpuaas.cluster.opencost import (
    AllocationKey,
    CostLedger,
    NodeCapacity,
    OpenCostServer,
    WindowError,
    allocation_response,
    opencost_samples,
    parse_window,
)
from gpuaas.cluster.scenario import parse_scenario

T0 = datetime(2026, 11, 1, tzinfo=UTC)
NOW = T0 + timedelta(hours=4)


def _key(ns: str, pod: str, gpus: int, price: float, app: str, kind: str = "raycluster") -> AllocationKey:
    return AllocationKey(cluster="embedded", node="n1", namespace=ns, pod=pod, container="main", controller=app,
                         controller_kind=kind, provider_id="p1", labels=(("app", app),), annotations=(),
                         gpu_model="NVIDIA H100 80GB HBM3", gpu_uuids=tuple(f"GPU-{pod}-{i}" for i in range(gpus)),
                         gpu_price=price, cpu_cores=4, ram_bytes=32 * 2**30, cpu_price=0.0, ram_gib_price=0.0)


@pytest.fixture()
def ledger() -> CostLedger:
    """a/p1: 2 GPUs x 4 h at $3 = $24 (idle, still charged); a/p2: 1 GPU x 2 h at $3 = $6; b/p3: 4 x 1 h x $2 = $8."""
    led = CostLedger()
    for minute in range(240):
        t = T0 + timedelta(minutes=minute)
        led.record(_key("a", "p1", 2, 3.0, "ray"), t, t + timedelta(minutes=1), 0.0)
        if minute < 120:
            led.record(_key("a", "p2", 1, 3.0, "nb", "statefulset"), t, t + timedelta(minutes=1), 0.5)
    led.record(_key("b", "p3", 4, 2.0, "svc", "deployment"), T0 + timedelta(hours=3), NOW, None)
    return led


def test_costs_are_price_times_gpu_hours(ledger: CostLedger) -> None:
    data = allocation_response(ledger, {"window": "4h", "aggregate": "namespace"}, NOW)["data"]
    assert len(data) == 1
    a, b = data[0]["a"], data[0]["b"]
    assert a["gpuHours"] == 10.0 and a["gpuCost"] == 30.0 and a["totalCost"] == 30.0
    assert b["gpuHours"] == 4.0 and b["gpuCost"] == 8.0
    # usage: p2 is busy 0.5 for 2 of the 10 GPU-hours with data -> 1 busy GPU-hour / 10 = 0.1
    assert a["gpuAllocation"]["gpuUsageAverage"] == pytest.approx(0.1)
    assert b["gpuUsageAverage"] == 0.0  # no DCGM data: OpenCost reports 0, gpuaas must not trust it


def test_shape_matches_the_real_response(shared_dir: Path, ledger: CostLedger) -> None:
    import json

    real = json.loads((shared_dir / "fixtures/telemetry/opencost/allocation-compute.aggregate-namespace"
                       ".swagger-example.json").read_text())
    real_fields = set(next(iter(real["data"][0].values())))
    ours = allocation_response(ledger, {"window": "4h"}, NOW)
    assert set(ours) == set(real) and ours["code"] == 200 and ours["status"] == "success"
    one = ours["data"][0]["embedded/n1/a/p1/main"]
    assert real_fields <= set(one), real_fields - set(one)
    assert {"gpuDevice", "gpuModel", "gpuUUID", "isGPUShared", "gpuUsageAverage", "gpuRequestAverage"} == set(
        one["gpuAllocation"])
    assert one["properties"]["controllerKind"] == "raycluster" and one["properties"]["labels"] == {"app": "ray"}


def test_aggregations(ledger: CostLedger) -> None:
    by_ctrl = allocation_response(ledger, {"window": "4h", "aggregate": "controller"}, NOW)["data"][0]
    assert set(by_ctrl) == {"raycluster:ray", "statefulset:nb", "deployment:svc"}
    by_label = allocation_response(ledger, {"window": "4h", "aggregate": "label:app"}, NOW)["data"][0]
    assert by_label["app=ray"]["gpuCost"] == 24.0
    multi = allocation_response(ledger, {"window": "4h", "aggregate": "namespace,pod"}, NOW)["data"][0]
    assert set(multi) == {"a/p1", "a/p2", "b/p3"}
    with pytest.raises(WindowError):
        allocation_response(ledger, {"window": "4h", "aggregate": "colour"}, NOW)


def test_step_and_accumulate(ledger: CostLedger) -> None:
    steps = allocation_response(ledger, {"window": "4h", "aggregate": "namespace", "step": "1h"}, NOW)["data"]
    assert len(steps) == 4
    assert [s["a"]["gpuCost"] for s in steps] == [9.0, 9.0, 6.0, 6.0]
    assert "b" not in steps[0] and steps[3]["b"]["gpuCost"] == 8.0
    acc = allocation_response(ledger, {"window": "4h", "aggregate": "namespace", "step": "1h",
                                       "accumulate": "true"}, NOW)["data"]
    assert len(acc) == 1 and acc[0]["a"]["gpuCost"] == 30.0


NODES = (NodeCapacity("embedded", "n1", 8, 3.0, 4, 0.5, 32, 0.0, T0),
         NodeCapacity("embedded", "n2", 4, 2.0, 0, 0.0, 0, 0.0, T0 - timedelta(days=1)))
"""n1: 8 GPUs at $3 and 4 cores at $0.5 (the ledger's pods run there); n2: 4 GPUs at $2, up a day before, no pod."""


def test_include_idle_prices_what_no_allocation_held(ledger: CostLedger) -> None:
    """Per hour: n1's 8 GPUs x $3 = $24 less its pods' GPU cost (p1 $6; p2 $3 in hours 0-1; p3 $8 in hour 3), plus n2's
    4 x $2 = $8 that nobody held; CPU: n1's 4 cores x $0.5 = $2 an hour less p1's and p2's 4 cores each at $0."""
    params = {"window": "4h", "aggregate": "namespace,controller,pod", "step": "1h", "includeIdle": "true"}
    sets = allocation_response(ledger, params, NOW, NODES)["data"]
    held = [6 + 3, 6 + 3, 6, 6 + 8]
    assert [s["__idle__"]["gpuCost"] for s in sets] == [24 - h + 8 for h in held] == [23, 23, 26, 18]
    idle = sets[0]["__idle__"]
    assert (idle["cpuCost"], idle["ramCost"], idle["totalCost"], idle["gpuHours"], idle["minutes"]) == (
        2.0, 0.0, 25.0, 0.0, 60.0)
    assert idle["properties"] == {"cluster": "embedded"}  # the nodes' idle rows merged: only the cluster is common
    assert not any("__idle__" in name for s in sets for name in s if name != "__idle__")
    whole = allocation_response(ledger, {"window": "4h", "aggregate": "namespace", "includeIdle": "true"}, NOW, NODES)
    assert whole["data"][0]["__idle__"]["gpuCost"] == 4 * (24 + 8) - sum(held) == 90
    per_node = allocation_response(ledger, {"window": "4h", "includeIdle": "true"}, NOW, NODES)["data"][0]
    assert (per_node["embedded/n1/__idle__"]["gpuCost"], per_node["embedded/n2/__idle__"]["gpuCost"]) == (58.0, 32.0)
    # no idle without includeIdle, from a server that prices no node, or in a set without any allocation
    assert "__idle__" not in allocation_response(ledger, {"window": "4h", "aggregate": "namespace"}, NOW, NODES)[
        "data"][0]
    assert "__idle__" not in allocation_response(ledger, {**params, "step": "4h"}, NOW)["data"][0]
    before = f"{int((T0 - timedelta(hours=2)).timestamp())},{int(T0.timestamp())}"
    assert allocation_response(ledger, {**params, "window": before}, NOW, NODES)["data"] == [{}, {}]
    with pytest.raises(WindowError, match="shareIdle is not emulated"):
        allocation_response(ledger, {**params, "shareIdle": "true"}, NOW, NODES)


def test_http_api_prices_the_nodes_it_is_given(ledger: CostLedger) -> None:
    server = OpenCostServer(ledger, lambda: NOW)
    server.start()
    try:
        params = {"window": "4h", "aggregate": "namespace", "includeIdle": "true", "shareIdle": "false"}
        assert "__idle__" not in httpx.get(f"{server.url}/allocation", params=params).json()["data"][0]
        server.price_nodes(NODES)
        assert httpx.get(f"{server.url}/allocation", params=params).json()["data"][0]["__idle__"]["gpuCost"] == 90.0
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("window", "start", "end"),
    [("24h", NOW - timedelta(hours=24), NOW), ("1d", NOW - timedelta(days=1), NOW),
     ("2026-11-01T00:00:00Z,2026-11-01T02:00:00Z", T0, T0 + timedelta(hours=2)),
     (f"{int(T0.timestamp())},{int(NOW.timestamp())}", T0, NOW), ("today", T0, NOW)],
    ids=["24h", "1d", "rfc3339-pair", "unix-pair", "today"],
)
def test_windows(window: str, start: datetime, end: datetime) -> None:
    assert parse_window(window, NOW) == (start, end)


def test_http_api(ledger: CostLedger) -> None:
    server = OpenCostServer(ledger, lambda: NOW)
    server.start()
    try:
        ok = httpx.get(f"{server.url}/allocation/compute", params={"window": "4h", "aggregate": "namespace"})
        assert ok.status_code == 200 and ok.json()["data"][0]["a"]["gpuCost"] == 30.0
        bad = httpx.get(f"{server.url}/allocation", params={"window": "yesteryear"})
        assert bad.status_code == 400 and bad.json()["message"].startswith("Error: ")
    finally:
        server.stop()


def test_metrics_labels_match_the_scraper_data(shared_dir: Path) -> None:
    text = (shared_dir / "fixtures/telemetry/opencost/opencost-metrics.scraper-test-data.prom").read_text()

    def real(metric: str) -> set[str]:
        line = next(row for row in text.splitlines() if row.startswith(metric + "{"))
        return set(re.findall(r'(\w+)="', line))

    s = parse_scenario({"flavors": [{"name": "h"}], "pools": [{"name": "h", "count": 1, "flavor": "h",
                                                                "gpu_hourly_price": 3.0}],
                        "tenants": [{"name": "a", "quotas": [{"flavor": "h", "gpus": 8}]}]})
    samples = opencost_samples(s, {}, [_key("a", "p1", 2, 3.0, "ray")], 0.0)
    by_name = {name: (labels, value) for name, labels, value, _ in samples}
    assert set(by_name["node_gpu_hourly_cost"][0]) == real("node_gpu_hourly_cost")
    assert by_name["node_gpu_hourly_cost"][1] == 3.0
    assert set(by_name["container_gpu_allocation"][0]) == real("container_gpu_allocation")
    assert by_name["container_gpu_allocation"][1] == 2.0
