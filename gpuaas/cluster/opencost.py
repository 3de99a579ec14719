"""An OpenCost allocation API emulator, on its own loopback port.

``GET /allocation`` and ``/allocation/compute`` take OpenCost's parameters (``window``,
``aggregate``, ``accumulate``, ``step``) and answer in OpenCost's envelope,
``{"code":200,"status":"success","data":[{<name>: Allocation}, ...]}``, one set per step. Each
Allocation has the field names of ``core/pkg/opencost/allocation_json.go``, with both the older
flat GPU fields (``gpuRequestAverage``, ``gpuUsageAverage``) and the newer nested
``gpuAllocation`` object, as the versions in the field differ and gpuaas must read both.

Costs follow OpenCost: ``gpuCost = GPUs requested x hours x node_gpu_hourly_cost``, whatever the
utilisation. The same prices appear as OpenCost's own Prometheus metrics
(``node_gpu_hourly_cost``, ``container_gpu_allocation``, ...) through ``opencost_samples``.

``includeIdle=true`` adds what the nodes cost that no allocation held, as OpenCost does
(``computeIdleAllocations`` in ``pkg/costmodel/costmodel.go``): per node and resource, the node's cost over the
set's window (``NodeCapacity``, from the node pool's prices) less the allocations' cost on it, without GPU-hours.
Aggregated, the nodes' idle rows are one ``__idle__`` per set (``AllocationSet.AggregateBy``, step 11, in
``core/pkg/opencost/allocation.go``); unaggregated, one ``<cluster>/<node>/__idle__`` per node. A set without any
allocation is empty, idle or not, as OpenCost's ``AggregateBy`` leaves it. ``shareIdle=true`` (idle spread over the
allocations' costs) is not emulated: a 400 says so. A server given no nodes answers no idle row, as an OpenCost
without node assets does.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from gpuaas.cluster._http_reply import reply_json
from gpuaas.cluster._http_server import EmbeddedHTTPServer
from gpuaas.cluster._opencost_ledger import Accumulator, AllocationKey, CostLedger
from gpuaas.cluster._scenario_objects import node_names
from gpuaas.cluster.scenario import Scenario
from gpuaas.instant import utc_stamp

__all__ = [
    "IDLE",
    "AllocationKey",
    "CostLedger",
    "NodeCapacity",
    "OpenCostServer",
    "WindowError",
    "allocation_response",
    "fleet_nodes",
    "opencost_samples",
    "parse_window",
]

Sample = tuple[str, dict[str, str], float, float]
_REL = re.compile(r"^(\d+)([mhdw])$")
_UNIT = {"m": timedelta(minutes=1), "h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}
_PLAIN = ("cluster", "node", "namespace", "controllerKind", "controller", "pod", "container")


IDLE = "__idle__"
"""OpenCost's ``IdleSuffix``: the name (or last segment) of an idle allocation."""


class WindowError(ValueError):
    """A ``window``/``step``/``aggregate`` parameter OpenCost would reject with 400."""


@dataclass(frozen=True)
class NodeCapacity:
    """One node as OpenCost's assets price it, from its pool: what ``includeIdle`` compares its allocations with."""

    cluster: str
    node: str
    gpus: int
    gpu_price: float
    """Per GPU-hour (``node_gpu_hourly_cost``)."""
    cpu_cores: float
    cpu_price: float
    ram_gib: float
    ram_gib_price: float
    since: datetime
    """When the node came up: it costs nothing before."""

    def cost(self, start: datetime, end: datetime) -> tuple[float, float, float, float]:
        """(hours up, GPU, CPU, RAM cost) over ``[start, end)``, from when the node came up."""
        hours = max((end - max(start, self.since)).total_seconds(), 0.0) / 3600.0
        return (hours, self.gpus * hours * self.gpu_price, self.cpu_cores * hours * self.cpu_price,
                self.ram_gib * hours * self.ram_gib_price)


def fleet_nodes(scenario: Scenario, since: datetime) -> tuple[NodeCapacity, ...]:
    """Every node of ``scenario``'s pools at its pool's prices, up from ``since`` (the simulation's start)."""
    return tuple(NodeCapacity(scenario.cluster, node, pool.gpus_per_node, pool.gpu_hourly_price, pool.cpu_cores,
                              pool.cpu_hourly_price, pool.memory_gib, pool.ram_gib_hourly_price, since)
                 for pool in scenario.pools for node in node_names(pool))


def _instant(text: str) -> datetime:
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return datetime.fromtimestamp(float(text), UTC)
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError as exc:
        raise WindowError(f"invalid time {text!r}") from exc


def parse_duration(text: str) -> timedelta:
    match = _REL.match(text.strip())
    if not match:
        raise WindowError(f"invalid duration {text!r}")
    return int(match.group(1)) * _UNIT[match.group(2)]


def parse_window(text: str, now: datetime) -> tuple[datetime, datetime]:
    """OpenCost windows: ``30m``/``24h``/``7d``, ``today``, ``yesterday``, ``week``, ``month``, or a pair."""
    text = text.strip()
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if text == "today":
        return midnight, now
    if text == "yesterday":
        return midnight - timedelta(days=1), midnight
    if text == "week":
        return midnight - timedelta(days=midnight.weekday()), now
    if text == "month":
        return midnight.replace(day=1), now
    if "," in text:
        a, b = (_instant(p.strip()) for p in text.split(",", 1))
        if b <= a:
            raise WindowError(f"window end before start: {text!r}")
        return a, b
    return now - parse_duration(text), now


def _agg_part(prop: str, acc_props: dict[str, Any]) -> str:
    if prop.startswith(("label:", "annotation:")):
        kind, _, name = prop.partition(":")
        value = (acc_props.get(f"{kind}s") or {}).get(name)
        return f"{name}={value}" if value else "__unallocated__"
    if prop == "controller":
        controller_kind, controller = acc_props.get("controllerKind"), acc_props.get("controller")
        if controller_kind and controller:
            return f"{controller_kind}:{controller}"
        return str(controller or "__unallocated__")
    if prop not in _PLAIN:
        raise WindowError(f"invalid aggregation property {prop!r}")
    return str(acc_props.get(prop) or "__unallocated__")


def _round(value: float) -> float:
    return round(value, 5)


def _render(name: str, acc: Accumulator, window: tuple[datetime, datetime]) -> dict[str, Any]:
    hours = max(acc.end - acc.start, 0.0) / 3600.0

    def per_hour(value: float) -> float:
        return value / hours if hours > 0 else 0.0

    gpu_request = per_hour(acc.gpu_hours)
    usage = acc.gpu_usage_hours / acc.usage_known_gpu_hours if acc.usage_known_gpu_hours else 0.0
    cpu_cores = per_hour(acc.cpu_core_hours)
    ram_bytes = per_hour(acc.ram_byte_hours)
    cpu_eff, ram_eff = 0.25, 0.5  # synthetic usage/request ratios: the emulator models GPUs, not CPUs
    cpu_ram = acc.cpu_cost + acc.ram_cost
    total = acc.cpu_cost + acc.ram_cost + acc.gpu_cost
    single = acc.members == 1 and len(acc.uuids) == 1

    def iso(ts: float) -> str:
        return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    out: dict[str, Any] = {
        "name": name,
        "properties": acc.properties or {},
        "window": {"start": utc_stamp(window[0]), "end": utc_stamp(window[1])},
        "start": iso(acc.start), "end": iso(acc.end),
        "minutes": _round(hours * 60),
        "cpuCores": _round(cpu_cores), "cpuCoreRequestAverage": _round(cpu_cores),
        "cpuCoreUsageAverage": _round(cpu_cores * cpu_eff), "cpuCoreHours": _round(acc.cpu_core_hours),
        "cpuCost": _round(acc.cpu_cost), "cpuCostAdjustment": 0.0, "cpuCostIdle": 0.0,
        "cpuEfficiency": cpu_eff if cpu_cores else 0.0,
        "gpuCount": _round(gpu_request), "gpuHours": _round(acc.gpu_hours),
        "gpuCost": _round(acc.gpu_cost), "gpuCostAdjustment": 0.0, "gpuCostIdle": 0.0,
        "gpuRequestAverage": _round(gpu_request), "gpuUsageAverage": _round(usage),
        "gpuEfficiency": _round(usage),
        "gpuAllocation": {
            "gpuDevice": "nvidia0" if single else "", "gpuModel": next(iter(acc.models)) if len(acc.models) == 1 else "",
            "gpuUUID": next(iter(acc.uuids)) if single else "", "isGPUShared": False,
            "gpuUsageAverage": _round(usage), "gpuRequestAverage": _round(gpu_request),
        },
        "networkTransferBytes": 0.0, "networkReceiveBytes": 0.0, "networkCost": 0.0,
        "networkCrossZoneCost": 0.0, "networkCrossRegionCost": 0.0, "networkInternetCost": 0.0,
        "networkCostAdjustment": 0.0, "loadBalancerCost": 0.0, "loadBalancerCostAdjustment": 0.0,
        "pvBytes": 0.0, "pvByteHours": 0.0, "pvCost": 0.0, "pvs": None, "pvCostAdjustment": 0.0,
        "ramBytes": _round(ram_bytes), "ramByteRequestAverage": _round(ram_bytes),
        "ramByteUsageAverage": _round(ram_bytes * ram_eff), "ramByteHours": _round(acc.ram_byte_hours),
        "ramCost": _round(acc.ram_cost), "ramCostAdjustment": 0.0, "ramCostIdle": 0.0,
        "ramEfficiency": ram_eff if ram_bytes else 0.0,
        "externalCost": 0.0, "sharedCost": 0.0,
        "totalCost": _round(total),
        "totalEfficiency": _round((acc.cpu_cost * cpu_eff + acc.ram_cost * ram_eff) / cpu_ram) if cpu_ram else 0.0,
        "rawAllocationOnly": None,
    }
    return out


def _idle(nodes: Sequence[NodeCapacity], allocations: dict[AllocationKey, Accumulator],
          window: tuple[datetime, datetime], now: datetime) -> dict[str, Accumulator]:
    """Per node up in ``window`` (until ``now``): its cost less its allocations', per resource, as OpenCost's
    ``computeIdleAllocations`` does (no GPU-hours, properties ``cluster``, ``node``)."""
    held: dict[tuple[str, str], list[Accumulator]] = {}
    for key, acc in allocations.items():
        held.setdefault((key.cluster, key.node), []).append(acc)
    out: dict[str, Accumulator] = {}
    end = min(window[1], now).timestamp()
    for node in nodes:
        hours, gpu, cpu, ram = node.cost(window[0], min(window[1], now))
        if hours <= 0:
            continue
        on = held.get((node.cluster, node.node), [])
        out[f"{node.cluster}/{node.node}/{IDLE}"] = Accumulator(
            start=end - hours * 3600.0, end=end, properties={"cluster": node.cluster, "node": node.node},
            gpu_cost=gpu - sum(a.gpu_cost for a in on), cpu_cost=cpu - sum(a.cpu_cost for a in on),
            ram_cost=ram - sum(a.ram_cost for a in on))
    return out


def _one_set(ledger: CostLedger, window: tuple[datetime, datetime], aggregate: list[str],
             idle: tuple[Sequence[NodeCapacity], datetime] | None = None) -> dict[str, Any]:
    """One step's set; with ``idle`` (the nodes, and now), the nodes' idle rows too, one ``__idle__`` where
    aggregated. Aggregated, a set without any allocation is empty, idle or not (OpenCost's ``AggregateBy``)."""
    allocations = ledger.allocations(*window)
    # the nodes' idle first: aggregating below merges into the allocations' own accumulators
    idle_rows = _idle(idle[0], allocations, window, idle[1]) if idle is not None else {}
    groups: dict[str, Accumulator] = {}
    for key, acc in sorted(allocations.items(), key=lambda kv: kv[0].name):
        name = "/".join(_agg_part(p, acc.properties or {}) for p in aggregate) if aggregate else key.name
        if name in groups:
            groups[name].merge(acc)
        else:
            groups[name] = acc
    if groups or not aggregate:
        for name, acc in idle_rows.items():
            name = IDLE if aggregate else name
            if name in groups:
                groups[name].merge(acc)
            else:
                groups[name] = acc
    return {name: _render(name, acc, window) for name, acc in groups.items()}


def _flag(params: dict[str, str], name: str) -> bool:
    return params.get(name, "false").lower() in ("true", "1")


def allocation_response(ledger: CostLedger, params: dict[str, str], now: datetime,
                        nodes: Sequence[NodeCapacity] = ()) -> dict[str, Any]:
    """The JSON body OpenCost returns for ``/allocation`` with ``params``; ``WindowError`` means 400. ``nodes``: the
    fleet ``includeIdle`` prices (none: no idle row, as an OpenCost without node assets answers)."""
    if "window" not in params:
        raise WindowError("missing required parameter 'window'")
    start, end = parse_window(params["window"], now)
    aggregate = [p.strip() for p in params.get("aggregate", "").split(",") if p.strip()]
    for prop in aggregate:
        _agg_part(prop, {})
    if _flag(params, "shareIdle"):
        raise WindowError("shareIdle is not emulated: ask includeIdle for an __idle__ row of its own")
    idle = (nodes, now) if _flag(params, "includeIdle") and nodes else None
    accumulate = params.get("accumulate", "false").lower() in ("true", "1", "all")
    step = parse_duration(params["step"]) if params.get("step") and not accumulate else end - start
    windows = []
    t = start
    while t < end:
        windows.append((t, min(t + step, end)))
        t += step
    return {"code": 200, "status": "success", "data": [_one_set(ledger, w, aggregate, idle) for w in windows]}


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        url = urlsplit(self.path)
        if url.path in ("/healthz", "/"):
            self._send(200, {"code": 200, "status": "success"})
            return
        if url.path.rstrip("/") not in ("/allocation", "/allocation/compute"):
            self._send(404, {"code": 404, "message": f"Error: no route {url.path}"})
            return
        params = {k: v[-1] for k, v in parse_qs(url.query).items()}
        try:
            with self.server.lock:
                body = allocation_response(self.server.ledger, params, self.server.now(), self.server.nodes)
        except WindowError as exc:
            self._send(400, {"code": 400, "message": f"Error: {exc}"})
            return
        self._send(200, body)

    def _send(self, status: int, body: dict[str, Any]) -> None:
        reply_json(self, status, body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence per-request logging
        return


class _Server(EmbeddedHTTPServer):
    ledger: CostLedger
    now: Callable[[], datetime]
    lock: threading.Lock
    nodes: tuple[NodeCapacity, ...]


class OpenCostServer:
    """The allocation API on ``127.0.0.1:<port>``, answering from a ``CostLedger``; ``nodes`` (``fleet_nodes``)
    are what ``includeIdle`` prices."""

    def __init__(self, ledger: CostLedger, clock: Callable[[], datetime], lock: threading.Lock | None = None,
                 port: int = 0, nodes: Sequence[NodeCapacity] = ()) -> None:
        self._httpd = _Server(("127.0.0.1", port), _Handler)
        self._httpd.ledger = ledger
        self._httpd.now = clock
        self._httpd.lock = lock or threading.Lock()
        self._httpd.nodes = tuple(nodes)
        self._thread: threading.Thread | None = None

    def price_nodes(self, nodes: Sequence[NodeCapacity]) -> None:
        """Price ``nodes`` for ``includeIdle`` from the next request on: a fleet known after the server was built."""
        with self._httpd.lock:
            self._httpd.nodes = tuple(nodes)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> None:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="opencost", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


def opencost_samples(scenario: Scenario, node_provider_ids: dict[str, str],
                     allocations: Iterable[AllocationKey], ts: float) -> list[Sample]:
    """OpenCost's own metrics: node prices and per-container GPU, CPU and RAM allocation; and each pod's
    ``kube_pod_labels`` (``label_<key>``, keys as Prometheus writes them), as kube-state-metrics and
    OpenCost's own KSM metrics publish it, so label-keyed services can be read without the allocation API."""
    out: list[Sample] = []
    pods: set[tuple[str, str]] = set()
    for pool in scenario.pools:
        for node in node_names(pool):
            labels = {"instance": node, "node": node, "instance_type": pool.instance_type, "region": pool.region,
                      "provider_id": node_provider_ids.get(node, node), "arch": "amd64"}
            total = (pool.gpu_hourly_price * pool.gpus_per_node + pool.cpu_hourly_price * pool.cpu_cores
                     + pool.ram_gib_hourly_price * pool.memory_gib)
            out.append(("node_gpu_hourly_cost", labels, pool.gpu_hourly_price, ts))
            out.append(("node_gpu_count", dict(labels), float(pool.gpus_per_node), ts))
            out.append(("node_cpu_hourly_cost", dict(labels), pool.cpu_hourly_price, ts))
            out.append(("node_ram_hourly_cost", dict(labels), pool.ram_gib_hourly_price, ts))
            out.append(("node_total_hourly_cost", dict(labels), total, ts))
    for key in allocations:
        labels = {"namespace": key.namespace, "pod": key.pod, "container": key.container,
                  "instance": key.node, "node": key.node}
        out.append(("container_gpu_allocation", labels, float(len(key.gpu_uuids)), ts))
        out.append(("container_cpu_allocation", dict(labels), float(key.cpu_cores), ts))
        out.append(("container_memory_allocation_bytes", dict(labels), float(key.ram_bytes), ts))
        if (key.namespace, key.pod) not in pods:
            pods.add((key.namespace, key.pod))
            out.append(("kube_pod_labels", {"namespace": key.namespace, "pod": key.pod, "uid": key.pod,
                                            **{"label_" + re.sub(r"[^A-Za-z0-9_]", "_", k): v for k, v in key.labels}},
                        1.0, ts))
    return out
