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
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
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
    "AllocationKey",
    "CostLedger",
    "OpenCostServer",
    "WindowError",
    "allocation_response",
    "opencost_samples",
    "parse_window",
]

Sample = tuple[str, dict[str, str], float, float]
_REL = re.compile(r"^(\d+)([mhdw])$")
_UNIT = {"m": timedelta(minutes=1), "h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}
_PLAIN = ("cluster", "node", "namespace", "controllerKind", "controller", "pod", "container")


class WindowError(ValueError):
    """A ``window``/``step``/``aggregate`` parameter OpenCost would reject with 400."""


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


def _one_set(ledger: CostLedger, window: tuple[datetime, datetime], aggregate: list[str]) -> dict[str, Any]:
    groups: dict[str, Accumulator] = {}
    for key, acc in sorted(ledger.allocations(*window).items(), key=lambda kv: kv[0].name):
        name = "/".join(_agg_part(p, acc.properties or {}) for p in aggregate) if aggregate else key.name
        if name in groups:
            groups[name].merge(acc)
        else:
            groups[name] = acc
    return {name: _render(name, acc, window) for name, acc in groups.items()}


def allocation_response(ledger: CostLedger, params: dict[str, str], now: datetime) -> dict[str, Any]:
    """The JSON body OpenCost returns for ``/allocation`` with ``params``; ``WindowError`` means 400."""
    if "window" not in params:
        raise WindowError("missing required parameter 'window'")
    start, end = parse_window(params["window"], now)
    aggregate = [p.strip() for p in params.get("aggregate", "").split(",") if p.strip()]
    for prop in aggregate:
        _agg_part(prop, {})
    accumulate = params.get("accumulate", "false").lower() in ("true", "1", "all")
    step = parse_duration(params["step"]) if params.get("step") and not accumulate else end - start
    windows = []
    t = start
    while t < end:
        windows.append((t, min(t + step, end)))
        t += step
    return {"code": 200, "status": "success", "data": [_one_set(ledger, w, aggregate) for w in windows]}


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
                body = allocation_response(self.server.ledger, params, self.server.now())
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


class OpenCostServer:
    """The allocation API on ``127.0.0.1:<port>``, answering from a ``CostLedger``."""

    def __init__(self, ledger: CostLedger, clock: Callable[[], datetime], lock: threading.Lock | None = None,
                 port: int = 0) -> None:
        self._httpd = _Server(("127.0.0.1", port), _Handler)
        self._httpd.ledger = ledger
        self._httpd.now = clock
        self._httpd.lock = lock or threading.Lock()
        self._thread: threading.Thread | None = None

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
