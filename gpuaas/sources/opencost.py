"""OpenCost source: GPU cost per namespace/controller/pod over a window.

The allocation API (``/allocation?aggregate=namespace,controller,pod&accumulate=true``) is
read with ``httpx``. Both response generations are accepted: the older flat GPU fields
(``gpuCount``, ``gpuHours``, ``gpuCost``, top-level ``gpuUsageAverage``) and the newer nested
``gpuAllocation``. Without an OpenCost URL the same figures are computed in PromQL from
OpenCost's own metrics (``container_gpu_allocation`` x ``node_gpu_hourly_cost``).
Note: OpenCost's GPU cost is requested GPUs x hours x price, whatever the utilisation.

Its figures are checked before anything adds them (``checked_figure``): null (OpenCost writes null for a figure it
could not compute) or NaN is unknown; a negative cost, amount of hours, GPUs or minutes, a value that is not finite
(``Infinity``) and one past ``MAX_FIGURE`` is no figure a bill holds, and the whole answer is refused
(``MalformedResponse``, naming the field and the allocation), so that nothing is summed from it. A ``totalCost``
below 0 is a bill only where the credits of its adjustments take it there (``_total``). An answer whose envelope
says OpenCost failed (``"code": 500, "status": "error"`` under HTTP 200, as OpenCost's ``WrapData`` writes one) is
a failed source as an HTTP 5xx is (``_envelope_failure``), never data. The figures
computed from OpenCost's metrics go through the same check (``checked_metric``, naming the series and the metrics
it came from), in the snapshot's reading here and in the cost report's (``gpuaas.sources._cost_allocation``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urljoin, urlsplit

import pandas as pd

from gpuaas._https import auth_headers, httpx_verify
from gpuaas.errors import ConfigError, MalformedResponse, SourceError, SourceUnavailable, redact_endpoint
from gpuaas.settings import GpuaasSettings
from gpuaas.sources._bounded_get import bounded_get
from gpuaas.sources._json_answer import UnreadableJSON, read_json
from gpuaas.sources._prom_client import PromClient, sample_value
from gpuaas.sources._promql import duration, priced_nodes_query, tag, union
from gpuaas.sources._retry_after import retry_after_seconds
from gpuaas.sources.failures import in_words

__all__ = ["COST_COLUMNS", "MAX_FIGURE", "METRIC_SOURCES", "NO_METRICS_ALLOCATION", "PRICED_NODES", "TOTAL_PARTS",
           "checked_figure", "checked_metric", "fetch_allocation", "parse_allocation", "read_opencost",
           "read_opencost_metrics"]

SOURCE = "opencost"
COST_COLUMNS = [
    "name", "namespace", "controller_kind", "controller", "pod", "node", "window_start", "window_end",
    "minutes", "gpu_count", "gpu_hours", "gpu_cost", "cpu_cost", "ram_cost", "total_cost", "parts_cost",
    "total_efficiency", "gpu_usage_average", "gpu_request_average", "gpu_model", "labels",
]


IDLE = "__idle__"
"""OpenCost's name segment for capacity nobody requested."""
NO_NAMESPACE = frozenset({"__unallocated__", "__unmounted__", IDLE})
"""What OpenCost writes where a namespace would be for cost no workload holds."""


MAX_FIGURE = 10_000_000.0
"""The most dollars, GPU-hours, GPUs or minutes one allocation of one answer may hold. An allocation is one pod's
(at most one namespace's) share of one step, and a step is at most a day in the cost report (its whole window,
at most a year, in a collect): ten million GPU-hours in a day is over 400,000 GPUs in one pod, and ten million
dollars a pod-day is no bill. Bounded so, a million allocations still add up in a float to the exact cent, far
from the overflow that ``1e308`` brings; the policy file bounds GPU counts at the same ten million."""
_NEVER_NEGATIVE = ("minutes", "gpuCount", "gpuHours", "gpuCost", "cpuCost", "ramCost")
"""The figures that are amounts: a negative one is no cost, hour or count. An adjustment (``gpuCostAdjustment``, a
reconciled bill's credit) may be below 0, within the bound; so may ``totalCost`` where such credits explain it
(``_total``)."""
TOTAL_PARTS = ("cpuCost", "cpuCostAdjustment", "gpuCost", "gpuCostAdjustment", "ramCost", "ramCostAdjustment",
               "pvCost", "pvCostAdjustment", "networkCost", "networkCostAdjustment", "loadBalancerCost",
               "loadBalancerCostAdjustment", "sharedCost", "externalCost")
"""Every figure OpenCost's ``Allocation.TotalCost()`` adds (``core/pkg/opencost/allocation.go``: CPU, GPU, RAM, PV,
network and load balancer costs with their adjustments, the shared and the external cost). What stands in for a
``totalCost`` OpenCost left null must add all of them: GPU, CPU and RAM alone would leave a pod's volumes, traffic,
load balancers and shared costs out of the bill, as $0, without a word."""
_CENT = 0.01
"""How far a ``totalCost`` may fall below the sum of its parts: OpenCost rounds every figure it writes to 5
decimals, so its parts add up to its total within a few hundred-thousandths, never a cent."""


def _num(value: Any) -> float:
    return float("nan") if value is None else float(value)


def checked_figure(field: str, value: Any, *, may_be_negative: bool = False) -> float:
    """OpenCost's ``field`` as a float: NaN for null or NaN (unknown); a ``ValueError`` saying what is wrong for a
    value no bill holds (not finite, negative where it is an amount, past ``MAX_FIGURE``)."""
    number = _num(value)
    if math.isnan(number):
        return number
    if math.isinf(number):
        raise ValueError(f"{field} is {number:g}, not a finite number")
    if number < 0 and not may_be_negative:
        raise ValueError(f"{field} is {number:g}, below 0: a cost, an amount of hours, GPUs or minutes never is")
    if abs(number) > MAX_FIGURE:
        raise ValueError(f"{field} is {number:g}, past {MAX_FIGURE:,.0f}, the most one allocation of one window may "
                         "hold")
    return number


METRIC_SOURCES = {
    "gpu_count": "container_gpu_allocation",
    "gpu_hours": "container_gpu_allocation",
    "cost_per_hour": "container_gpu_allocation x node_gpu_hourly_cost",
    "gpu_cost": "container_gpu_allocation x node_gpu_hourly_cost",
    "cpu_cost": "container_cpu_allocation x node_cpu_hourly_cost",
    "ram_cost": "container_memory_allocation_bytes x node_ram_hourly_cost",
}
"""Each figure gpuaas computes from OpenCost's metrics (its ``gpuaas_stat``), with the metrics it is computed from."""


def checked_metric(labels: Mapping[str, str], stat: str, value: Any, *, url: str | None) -> float:
    """``checked_figure`` for the ``stat`` (one of ``METRIC_SOURCES``) of the series ``labels`` of an answer on
    OpenCost's metrics: the same figures as the allocation API's, held to the same bounds; ``MalformedResponse``
    naming the series and the metrics it came from where one is no figure a bill holds."""
    try:
        return checked_figure(stat, value)
    except ValueError as exc:
        who = _printable("/".join(labels.get(k) or "-" for k in ("namespace", "pod")))[:160]  # the cluster's names
        raise MalformedResponse(f"series '{who}' of OpenCost's metrics ({METRIC_SOURCES[stat]}): {exc}", source=SOURCE,
                                url=url) from exc


def _figure(alloc: Mapping[str, Any], field: str, idle: bool = False) -> float:
    """``checked_figure`` of ``field``. An ``__idle__`` row's costs may be below 0: OpenCost computes them as the
    nodes' cost less what it allocated on them, and does not stop there when its node and allocation prices disagree
    (its own issues call such "negative idle" possible); the report reads it as an unknown idle cost, and it must not
    refuse the workloads' costs in the same answer."""
    negative = field not in _NEVER_NEGATIVE or (idle and field.endswith("Cost"))
    return checked_figure(field, alloc.get(field), may_be_negative=negative)


def _adjusted(alloc: Mapping[str, Any], field: str, idle: bool = False) -> float:
    """``fooCost + fooCostAdjustment``: OpenCost's own total of a resource (its ``totalCost`` adds the
    adjustments too: a reconciled bill or a discount), and the cost alone where no adjustment is given."""
    adjustment = _figure(alloc, f"{field}CostAdjustment")
    return _figure(alloc, f"{field}Cost", idle) + (0.0 if math.isnan(adjustment) else adjustment)


def _parts_sum(alloc: Mapping[str, Any], idle: bool = False) -> float:
    """The sum of ``TOTAL_PARTS``, each checked as every figure is: what OpenCost's ``TotalCost()`` adds up. NaN
    (unknown) as soon as one of them is null or absent (read as null): OpenCost writes null for a NaN part, which makes
    its own total NaN too, so an unknown part is never $0 in a total that stands in for one."""
    return sum((_figure(alloc, field, idle) for field in TOTAL_PARTS), 0.0)


def _total(alloc: Mapping[str, Any], idle: bool = False) -> float:
    """OpenCost's ``totalCost``, checked. Below 0 it is a bill only where the credits (negative ``*CostAdjustment``)
    explain it: it must not fall below the sum of its parts with their adjustments (within ``_CENT``; an unknown part
    adds nothing there, as the smallest amount it could be), else it is a broken answer and refused as any negative
    amount is. An ``__idle__`` row's total may be below 0 as its other costs may (``_figure``)."""
    total = checked_figure("totalCost", alloc.get("totalCost"), may_be_negative=True)
    if idle or math.isnan(total) or total >= 0:
        return total
    parts = [_figure(alloc, field) for field in TOTAL_PARTS]
    explained = sum((part for part in parts if not math.isnan(part)), 0.0)
    if total < explained - _CENT:
        raise ValueError(f"totalCost is {total:g}, below 0, and its parts with their adjustments add up to "
                         f"{explained:g}: only a credit (a negative adjustment) takes a total below 0")
    return total


def _row(name: str, alloc: Mapping[str, Any]) -> dict[str, Any]:
    idle = IDLE in name.split("/")
    props = alloc.get("properties") or {}
    window = alloc.get("window") or {}
    nested = alloc.get("gpuAllocation") or {}
    return {
        "name": name,
        "namespace": props.get("namespace") or "",  # null reads as absent
        "controller_kind": props.get("controllerKind") or "",
        "controller": props.get("controller") or "",
        "pod": props.get("pod") or "",
        "node": props.get("node") or "",
        "window_start": window.get("start", alloc.get("start")),
        "window_end": window.get("end", alloc.get("end")),
        "minutes": _figure(alloc, "minutes"),
        "gpu_count": _figure(alloc, "gpuCount"),
        "gpu_hours": _figure(alloc, "gpuHours"),
        "gpu_cost": _adjusted(alloc, "gpu", idle),
        "cpu_cost": _adjusted(alloc, "cpu", idle),
        "ram_cost": _adjusted(alloc, "ram", idle),
        "total_cost": _total(alloc, idle),
        # what stands in for a null totalCost: its parts' sum, unknown where one of them is
        "parts_cost": _parts_sum(alloc, idle),
        "total_efficiency": _num(alloc.get("totalEfficiency")),
        "gpu_usage_average": _num(nested.get("gpuUsageAverage", alloc.get("gpuUsageAverage"))),
        "gpu_request_average": _num(nested.get("gpuRequestAverage", alloc.get("gpuRequestAverage"))),
        "gpu_model": nested.get("gpuModel") or "",
        # the pod's labels (OpenCost writes their keys as Prometheus does): what a service's pod_labels select
        "labels": {str(k): str(v) for k, v in (props.get("labels") or {}).items()},
    }


def parse_allocation(payload: Any, *, url: str | None = None) -> pd.DataFrame:
    """One row per allocation in every step set of an ``/allocation`` answer (``COST_COLUMNS``): ``total_cost`` is
    OpenCost's ``totalCost`` (NaN where it left it null), ``parts_cost`` the sum of the parts it adds
    (``_parts_sum``)."""
    if not isinstance(payload, Mapping):
        raise MalformedResponse("answer is not a JSON object", source=SOURCE, url=url)
    data = payload.get("data")
    if not isinstance(data, list):
        raise MalformedResponse("missing field 'data' (expected a list of allocation sets)", source=SOURCE, url=url)
    rows = []
    for i, step in enumerate(data):
        if step is None:
            continue
        if not isinstance(step, Mapping):
            raise MalformedResponse(f"field 'data[{i}]' is not an object", source=SOURCE, url=url)
        for name, alloc in step.items():
            if not isinstance(alloc, Mapping):
                raise MalformedResponse(f"field 'data[{i}].{name}' is not an object", source=SOURCE, url=url)
            try:
                rows.append(_row(str(name), alloc))
            except (TypeError, ValueError, AttributeError) as exc:  # AttributeError: an object that is not one
                raise MalformedResponse(f"field 'data[{i}].{_printable(str(name))}': {_printable(str(exc))}"[:300],
                                        source=SOURCE, url=url) from exc
    return pd.DataFrame(rows, columns=COST_COLUMNS)


def _printable(text: str) -> str:
    """``text`` on one line, its control characters escaped (``\\x1b``): an allocation's name is the cluster's, and
    the line that names it goes to a terminal and a log."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def _rfc3339(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_opencost(settings: GpuaasSettings, now: datetime, window_minutes: float) -> pd.DataFrame:
    """Allocation over ``[now - window, now]``; falls back to OpenCost metrics in Prometheus."""
    if not settings.opencost_url:
        return read_opencost_metrics(settings, now, window_minutes)
    params = {
        "window": f"{_rfc3339(now - timedelta(minutes=window_minutes))},{_rfc3339(now)}",
        "aggregate": "namespace,controller,pod",
        "accumulate": "true",
    }
    return fetch_allocation(settings, params)


def fetch_allocation(settings: GpuaasSettings, params: Mapping[str, str]) -> pd.DataFrame:
    """``GET /allocation`` with ``params``, parsed; errors mapped (5xx/429/transport: transient). The whole answer is
    bounded in time and size (``bounded_get``): a server that drips it never holds the run, nor its thread."""
    import httpx  # here: a collect imports it in the thread that reads OpenCost, not before its work starts

    assert settings.opencost_url
    url = settings.opencost_url.rstrip("/") + "/allocation"
    try:
        resp = bounded_get(url, source=SOURCE, params=params, headers=auth_headers(settings, "opencost"),
                           timeout=settings.request_timeout_seconds, verify=httpx_verify(settings))
    except httpx.LocalProtocolError as exc:  # a request this client cannot send: no retry sends it either
        raise SourceError(in_words(exc), source=SOURCE, url=url) from None
    except httpx.RemoteProtocolError as exc:
        if "location header" not in str(exc).lower():
            raise SourceUnavailable(f"{type(exc).__name__}: {exc}"[:300], source=SOURCE, url=url) from exc
        raise SourceError(_redirect(None, url, None), source=SOURCE, url=url) from None
    except httpx.TransportError as exc:
        raise SourceUnavailable(f"{type(exc).__name__}: {exc}"[:300], source=SOURCE, url=url) from exc
    except httpx.RequestError as exc:  # an answer that came but cannot be read as sent (DecodingError)
        raise MalformedResponse(f"answer unreadable ({type(exc).__name__}: {exc})"[:300], source=SOURCE,
                                url=url) from exc
    if resp.status_code == 429 or resp.status_code >= 500:
        retry_after = resp.headers.get("Retry-After")
        raise SourceUnavailable(
            f"HTTP {resp.status_code}", source=SOURCE, url=url,
            retry_after=retry_after_seconds(retry_after),
        )
    if resp.status_code >= 400:
        raise SourceError(f"HTTP {resp.status_code}", source=SOURCE, url=url)
    if 300 <= resp.status_code < 400:
        raise SourceError(_redirect(resp.status_code, url, resp.headers.get("Location")), source=SOURCE, url=url)
    try:
        payload = read_json(resp.content)  # not ``resp.json()``: its ``RecursionError`` would end the report
    except UnreadableJSON as exc:
        raise MalformedResponse(f"answer is {exc}", source=SOURCE, url=url) from exc
    _envelope_failure(payload, url)
    return parse_allocation(payload, url=url)


def _envelope_failure(payload: Any, url: str) -> None:
    """Raise where OpenCost's envelope (``{"code": 200, "status": "success", "data": ...}``) says it failed, though
    the HTTP status said 200: its ``WrapData`` writes ``"code": 500, "status": "error"`` and its error's message with
    whatever data it had (a partial answer, or none), and a proxy may pass that on as HTTP 200. Its data is then no
    bill, so the source fails as under an HTTP 5xx (``SourceUnavailable``; a 4xx ``code`` other than 429 as a refusal,
    ``SourceError``), in one line with OpenCost's own message. A ``code`` or ``status`` that is absent or null
    (OpenCost's newer ``HTTPProtocol`` envelope has no ``status``) says nothing either way."""
    if not isinstance(payload, Mapping):
        return  # ``parse_allocation`` names that
    code, status = payload.get("code"), payload.get("status")
    number = _status_code(code)
    code_failed = code is not None and not (number is not None and 200 <= number < 300)
    status_failed = status is not None and str(status).strip().lower() != "success"
    if not (code_failed or status_failed):
        return
    if code is not None and number is None:
        raise MalformedResponse(f"field 'code' is {_printable(repr(code))[:60]}, not an HTTP status", source=SOURCE,
                                url=url)
    said = [f"code {number}"] if number is not None else []
    said += [f"status '{_printable(str(status))[:40]}'"] if status is not None else []
    message = payload.get("message")
    words = _printable(" ".join(str(message).split()))[:200] if message not in (None, "") else "no message"
    detail = f"its answer says {', '.join(said)}: {words}"
    if number is not None and (300 <= number < 500) and number != 429:
        raise SourceError(detail, source=SOURCE, url=url)
    raise SourceUnavailable(detail, source=SOURCE, url=url)


def _status_code(code: Any) -> int | None:
    """The envelope's ``code`` as an int (OpenCost writes one; a proxy may write ``"500"`` or ``500.0``), else None."""
    if isinstance(code, bool):
        return None
    if isinstance(code, int):
        return code
    if isinstance(code, float) and code.is_integer():
        return int(code)
    if isinstance(code, str) and code.strip().isdigit():
        return int(code.strip())
    return None


def _redirect(status: int | None, url: str, location: str | None) -> str:
    """Where a redirect pointed: its server, or its path on this one, never its query (a login page's carries a
    state or a token). Not followed, since the credentials are for the configured server alone. ``status`` is
    None where the client refused the redirect's Location before its status could be read."""
    if location is None and status is not None:
        what = f"HTTP {status}: a redirect without a Location"
    elif not (went := _where(url, location)):
        what = "a redirect to an unreadable Location"
    else:
        what = f"HTTP {status}: redirected to {went}"
    return (f"{what}, not followed (an auth proxy asking to log in: set GPUAAS_OPENCOST_TOKEN, or point "
            "GPUAAS_OPENCOST_URL where it sends)")


def _where(url: str, location: str | None) -> str | None:
    """``this server's /login`` or ``https://login.example`` (credentials hidden); None for no URL at all."""
    if location is None:
        return None
    try:
        went, asked = urlsplit(urljoin(url, location)), urlsplit(url)
    except ValueError:  # ``http://[::1/login``
        return None
    if not went.netloc:
        return None
    if (went.scheme, went.netloc) == (asked.scheme, asked.netloc):
        return f"this server's {went.path or '/'}"
    return redact_endpoint(f"{went.scheme}://{went.netloc}")


NO_METRICS_ALLOCATION = "no allocation in OpenCost's metrics (container_gpu_allocation)"
"""What OpenCost's metrics hold where they price nodes and no pod: the snapshot's and the cost report's words."""

PRICED_NODES = "gpuaas_priced_nodes"
"""The ``attrs`` key of a reading from OpenCost's metrics: how many nodes OpenCost priced (``node_gpu_hourly_cost``,
which it writes for every node) in the window. 0: OpenCost's metrics are not in Prometheus at all (OpenCost not
installed, or not scraped) and their empty answer is no answer; some, with no allocation while running pods held
GPUs, is OpenCost answering nothing while it ran, a failed source as the allocation API's empty answer is
(``gpuaas.snapshot_health``)."""


_OVER_THE_WINDOW = {"gpu_count": "gpu_hours", "cost_per_hour": "gpu_cost"}
"""The figures the snapshot's query reads per pod, with what each adds up to over the window."""


def read_opencost_metrics(settings: GpuaasSettings, now: datetime, window_minutes: float) -> pd.DataFrame:
    """GPU count and cost per pod from ``container_gpu_allocation`` and ``node_gpu_hourly_cost``, in one query, each
    figure held to the allocation API's bounds (``checked_metric``); the nodes priced in ``attrs[PRICED_NODES]``."""
    if not settings.prometheus_url:
        raise ConfigError("neither opencost_url nor prometheus_url is configured", field="opencost_url")
    w = duration(window_minutes * 60)
    alloc = f"avg_over_time(container_gpu_allocation[{w}])"
    price = f"max by (node) (avg_over_time(node_gpu_hourly_cost[{w}]))"
    expr = union([
        tag(f"sum by (namespace, pod, node) ({alloc})", "gpuaas_stat", "gpu_count"),
        tag(f"sum by (namespace, pod, node) ({alloc} * on (node) group_left () {price})", "gpuaas_stat", "cost_per_hour"),
        priced_nodes_query(w),
    ])
    prom = PromClient(settings, source=SOURCE)
    try:
        results = prom.query(expr, now)
    finally:
        prom.close()
    hours = window_minutes / 60
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    priced = 0.0
    for r in results:
        labels, stat = r["metric"], r["metric"].get("gpuaas_stat", "")
        if stat == "priced_nodes":
            priced = sample_value(r)
        if stat not in _OVER_THE_WINDOW:
            continue
        key = (labels.get("namespace", ""), labels.get("pod", ""), labels.get("node", ""))
        row = rows.setdefault(key, {"name": "/".join(key[:2]), "namespace": key[0], "pod": key[1], "node": key[2]})
        row[stat] = checked_metric(labels, stat, sample_value(r), url=prom.url)
        # and what it adds up to over the window, held to the bound of an allocation of the API's answer
        checked_metric(labels, _OVER_THE_WINDOW[stat], row[stat] * hours, url=prom.url)
    frame = pd.DataFrame(list(rows.values()), columns=["name", "namespace", "pod", "node", "gpu_count", "cost_per_hour"])
    frame["gpu_hours"] = frame["gpu_count"] * hours
    frame["gpu_cost"] = frame["cost_per_hour"] * hours
    frame["minutes"] = float(window_minutes)
    frame["window_start"] = _rfc3339(now - timedelta(minutes=window_minutes))
    frame["window_end"] = _rfc3339(now)
    out = frame.reindex(columns=COST_COLUMNS)
    out.attrs[PRICED_NODES] = priced
    return out
