"""The money the cost report reads: OpenCost's allocation per pod and period, else OpenCost's metrics in Prometheus.

``allocation_rows`` keeps a null or NaN figure as NaN (OpenCost writes null for a figure it could not compute): a
GPU cost nobody computed is not $0, and GPU-hours nobody counted are not 0 (the report then takes DCGM's hours for
the pod, as for a pod OpenCost does not list). ``unpriced_periods`` finds the periods OpenCost's answer holds no
allocation for while the fleet held GPUs: an empty answer (``[]``, ``[null]``, ``[{}]``) for a window GPUs ran in
is a failed source, never a window that cost $0. Either way the costs are then read as when the API fails: from
OpenCost's metrics in Prometheus, else unknown.

OpenCost's metrics are held to the same rules, through the same functions: each figure to the API's bounds
(``checked_metric``; NaN, a figure Prometheus could not compute, is unknown as a null is, and so is the GPU cost of
a pod with GPU-hours and no node price), and their answer, where it holds any of OpenCost's metrics, to
``unpriced_periods``. A refused figure or a period without an allocation fails the OpenCost source (where no API
is configured; beside the API's failure where one is) and leaves the money unknown: there is nothing further to
fall back on. A Prometheus without any of OpenCost's metrics has no OpenCost to have failed: the money is unknown
and a note says why.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd

from gpuaas.errors import GpuaasError, MalformedResponse
from gpuaas.models import COST_COLS, IdlePeriod, SourceStatus, with_idle
from gpuaas.phrases import first_few
from gpuaas.settings import GpuaasSettings
from gpuaas.sources import _promql_cost as q
from gpuaas.sources._prom_client import PromClient
from gpuaas.sources.failures import describe_failure
from gpuaas.sources.opencost import (
    IDLE,
    METRIC_SOURCES,
    NO_METRICS_ALLOCATION,
    NO_NAMESPACE,
    checked_metric,
    fetch_allocation,
)

__all__ = ["IDLE_PARAMS", "PodLabels", "allocation_gaps", "allocation_rows", "idle_periods", "no_allocation_detail",
           "period_of", "points", "read_costs", "unpriced_periods"]

IDLE_PARAMS = {"includeIdle": "true", "shareIdle": "false"}
"""Asked of the allocation API with the costs, in the same request: ``includeIdle`` adds, per set, OpenCost's
``__idle__`` (node cost less allocated cost, per resource: ``computeIdleAllocations`` in
``pkg/costmodel/costmodel.go``); ``shareIdle`` false keeps it a row of its own, never spread over the workloads'
rows (``QueryAllocation`` then aggregates with ``ShareNone``), so their costs stay what they were allocated."""


def period_of(ts: float, start: datetime, period_s: float, days: int) -> int:
    """The period a range-query point (or an OpenCost set ending at ``ts``) closes: the nearest
    period end, so a point a little off its period end (a rounded timestamp) still lands in it."""
    return min(max(int(round((ts - start.timestamp()) / period_s)) - 1, 0), days - 1)


def points(results: list[dict[str, Any]], start: datetime, period_s: float, days: int) -> list[tuple[dict[str, str],
                                                                                                        int, float]]:
    """``(labels, period, value)`` for every point of a range answer; NaN points (no data there) are left out."""
    out = []
    for r in results:
        for ts, value in r["values"]:
            if not math.isnan(float(value)):  # NaN: no data at that point, not a number to add
                out.append((r["metric"], period_of(float(ts), start, period_s, days), float(value)))
    return out


def allocation_rows(frame: pd.DataFrame, start: datetime, period_s: float, days: int) -> pd.DataFrame:
    """``parse_allocation`` rows (one per set and allocation) as ``COST_COLS``: the GPU-hours, the GPU cost, and the
    total OpenCost charges (GPU, CPU, RAM and the rest; where ``totalCost`` is null, ``_total``). A figure OpenCost
    left null is NaN here, unknown, never 0; the report says whose it was.

    OpenCost's ``__idle__`` (capacity nobody requested: ``idle_periods`` reads it apart) and what no namespace holds
    (``__unallocated__``, ``__unmounted__`` volumes) are left out: the funnel starts at what workloads hold. A pod whose
    controller OpenCost does not know (it names Deployments, StatefulSets, DaemonSets, Jobs and
    Rollouts only, so every RayCluster, PyTorchJob or bare pod) is ``<namespace>/__unallocated__/<pod>``
    and is kept: that segment says no controller, not no owner. A row without a pod (coarser
    aggregation) is kept as namespace cost, so the tenant still pays for it.
    """
    namespace = frame["namespace"].fillna("").astype(str)
    keep = frame[~_is_idle(frame) & (namespace != "") & ~namespace.isin(NO_NAMESPACE)]
    ends = pd.to_datetime(keep["window_end"], utc=True)
    gpu_cost = keep["gpu_cost"].astype(float)
    out = pd.DataFrame({
        "namespace": keep["namespace"], "controller_kind": keep["controller_kind"], "controller": keep["controller"],
        "pod": keep["pod"], "day": [period_of(t.timestamp(), start, period_s, days) for t in ends],
        "gpu_hours": keep["gpu_hours"].astype(float),
        "gpu_cost": gpu_cost,
        "total_cost": _total(keep),
    })
    return out.reindex(columns=COST_COLS).reset_index(drop=True)


def _is_idle(frame: pd.DataFrame) -> pd.Series:
    """OpenCost's idle rows: ``__idle__``, or ``<cluster>/<node>/__idle__`` where it keeps them apart."""
    return frame["name"].astype(str).str.split("/").map(lambda parts: IDLE in parts).astype(bool)


def idle_periods(frame: pd.DataFrame, start: datetime, period_s: float, days: int) -> list[IdlePeriod]:
    """The ``__idle__`` rows of ``parse_allocation``'s answer per period (the set they close), added where OpenCost
    keeps several (per node or cluster): the GPU cost (``gpuCost`` + ``gpuCostAdjustment``) and the total
    (``totalCost``, else ``_total``'s sum of its parts). Their figures were checked as every allocation's
    (``checked_figure``); a null one is NaN, and the period's idle cost is unknown. A period without a row has none
    here: unknown too."""
    idle = frame[_is_idle(frame)]
    if idle.empty:
        return []
    ends = pd.to_datetime(idle["window_end"], utc=True)
    rows = pd.DataFrame({"day": [period_of(t.timestamp(), start, period_s, days) for t in ends],
                         "gpu_cost": idle["gpu_cost"].astype(float).to_numpy(),
                         "total_cost": _total(idle).to_numpy()})
    sums = rows.groupby("day")[["gpu_cost", "total_cost"]].sum(min_count=1, skipna=False)
    return [IdlePeriod(int(r.Index), float(r.gpu_cost), float(r.total_cost)) for r in sums.itertuples()]


def _total(frame: pd.DataFrame) -> pd.Series:
    """The allocation API's total of each row: OpenCost's ``totalCost``, else (null: OpenCost writes null for a NaN,
    and a NaN part makes its ``TotalCost()`` NaN) the sum of every part ``TotalCost()`` adds (``parts_cost``: CPU,
    GPU, RAM, PV, network and load balancer costs with their adjustments, shared and external costs), NaN as soon as
    one of them is unknown. GPU, CPU and RAM alone would count a pod's volumes, traffic and shared costs as $0, and an
    unknown CPU or RAM cost as $0 too; NaN is said as unknown by the report, never $0."""
    return frame["total_cost"].astype(float).fillna(frame["parts_cost"].astype(float))


def _parts(frame: pd.DataFrame) -> pd.Series:
    """The total of OpenCost's metrics for a pod: its GPU cost (unknown, NaN, makes the total unknown) and its CPU and
    RAM cost (a missing one adds nothing). The metrics price nothing else (``METRIC_SOURCES``), so this is their whole
    total; the allocation API's is ``_total``."""
    return frame["gpu_cost"].astype(float) + frame[["cpu_cost", "ram_cost"]].astype(float).fillna(0.0).sum(axis=1)


def unpriced_periods(costs: pd.DataFrame, gpu: pd.DataFrame, kueue: Sequence[tuple[int, float]],
                     days: int) -> dict[int, float]:
    """The periods (and the GPU-hours held in each) that the fleet held GPUs in, by DCGM (a pod's observed hours) or
    by Kueue (quota in use), and that OpenCost's answer holds no allocation for."""
    held: dict[int, float] = {}
    seen = gpu[(gpu["namespace"].fillna("") != "") & (gpu["observed_h"].astype(float) > 0)]
    for day, hours in seen.groupby("day")["observed_h"].sum().items():
        held[int(day)] = float(hours)
    quota: dict[int, float] = {}
    for day, hours in kueue:  # one point per ClusterQueue and period
        quota[day] = quota.get(day, 0.0) + max(hours, 0.0)
    for day, hours in quota.items():
        if hours > 0:
            held[day] = max(held.get(day, 0.0), hours)
    priced = set(costs["day"].astype(int)) if not costs.empty else set()
    return {day: hours for day, hours in sorted(held.items()) if day not in priced and 0 <= day < days}


def no_allocation_detail(periods: dict[int, float], start: datetime, period_s: float, days: int,
                         what: str = "no allocation") -> str:
    """What the answer lacked, in words: ``no allocation for the window 2026-12-07 06:00 – 08:00 UTC, while the
    fleet held 40.0 GPU-hours in it``, or for the days of a longer window, the first few of them. ``what``: where
    no allocation was (the API's answer, or OpenCost's metrics)."""
    hours = sum(periods.values())
    if days == 1:
        end = start + timedelta(seconds=period_s)
        where = f"the window {start:%Y-%m-%d %H:%M} – {end:%Y-%m-%d %H:%M} UTC"
    else:
        ends = [f"{start + timedelta(seconds=(day + 1) * period_s):%Y-%m-%d %H:%M}" for day in periods]
        where = (f"{len(periods)} of the window's {days} days (those ending {first_few(ends)} UTC)"
                 if len(periods) > 1 else f"the day ending {ends[0]} UTC")
    return (f"{what} for {where}, while the fleet held {hours:,.1f} GPU-hours in it: its cost is unknown, "
            "not $0")


def _opencost_metric_rows(results: list[dict[str, Any]], start: datetime, period_s: float, days: int,
                          url: str) -> pd.DataFrame:
    """``opencost_hours_query``'s answer as ``COST_COLS`` rows, one per pod and period, each figure checked as the
    API's are (``checked_metric``: ``MalformedResponse`` naming the series). NaN (a figure Prometheus could not
    compute) is unknown, and so is the GPU cost of a pod with GPU-hours and no node price: no GPU cost is not $0."""
    cells: dict[tuple[str, str, int], dict[str, Any]] = {}
    for r in results:
        labels = r["metric"]
        stat = labels.get("gpuaas_stat", "")
        if stat not in METRIC_SOURCES:  # the nodes priced: OpenCost's presence, no money
            continue
        for ts, raw in r["values"]:
            value = checked_metric(labels, stat, raw, url=url)
            day = period_of(float(ts), start, period_s, days)
            key = (labels.get("namespace", ""), labels.get("pod", ""), day)
            # no container_gpu_allocation is no GPU held: 0 GPU-hours (a NaN one is unknown, as a null gpuHours)
            row = cells.setdefault(key, {"namespace": key[0], "controller_kind": "", "controller": "", "pod": key[1],
                                         "day": day, "gpu_hours": 0.0})
            row[stat] = row.get(stat, 0.0) + value  # NaN stays NaN: a sum with an unknown term is unknown
    frame = pd.DataFrame(list(cells.values()), columns=[*COST_COLS, "cpu_cost", "ram_cost"])
    held = frame["gpu_hours"].astype(float) != 0.0  # NaN included: hours nobody counted may have been held
    frame["gpu_cost"] = frame["gpu_cost"].astype(float).where(held | frame["gpu_cost"].notna(), 0.0)
    frame["total_cost"] = _parts(frame)
    return frame.reindex(columns=COST_COLS)


PodLabels = dict[tuple[str, str], dict[str, str]]


def _allocation_labels(frame: pd.DataFrame) -> PodLabels:
    """(namespace, pod) -> labels, from the allocation API's ``properties.labels``."""
    out: PodLabels = {}
    for ns, pod, labels in zip(frame["namespace"], frame["pod"], frame["labels"]):
        if ns and pod and isinstance(labels, dict) and labels:
            out.setdefault((str(ns), str(pod)), {}).update(labels)
    return out


def read_costs(settings: GpuaasSettings, prom: PromClient, start: datetime, end: datetime, period_s: float,
               days: int, interval_s: float, notes: list[str],
               sources: dict[str, SourceStatus]) -> tuple[pd.DataFrame | None, int, PodLabels]:
    """The costs per pod and period (the API's, else OpenCost's metrics), the requests sent, and the pod
    labels the API gave (the metrics carry none). A configured allocation API that fails is recorded in
    ``sources``: the report falls back to the metrics, but a person must learn that the API is down.

    The API's ``__idle__`` rows, asked for in the same request (``IDLE_PARAMS``), travel with its costs
    (``with_idle``); the metrics price no idle capacity, so costs read from them carry none (unknown)."""
    requests = 0
    if settings.opencost_url:
        rfc = "%Y-%m-%dT%H:%M:%SZ"
        params = {"window": f"{start.astimezone(UTC).strftime(rfc)},{end.astimezone(UTC).strftime(rfc)}",
                  "aggregate": "namespace,controller,pod", "step": f"{round(period_s / 60)}m",  # whole minutes
                  **IDLE_PARAMS}
        requests += 1
        try:
            frame = fetch_allocation(settings, params)
            sources["opencost"] = SourceStatus("opencost", ok=True)
            rows = with_idle(allocation_rows(frame, start, period_s, days), idle_periods(frame, start, period_s, days))
            return rows, requests, _allocation_labels(frame)
        except GpuaasError as exc:
            failed = describe_failure(settings, "opencost", exc)
            sources["opencost"] = SourceStatus("opencost", ok=False, error=failed)
            notes.append(f"{failed}; the costs are read from OpenCost's metrics in Prometheus instead")
    return _metric_costs(settings, prom, start, end, period_s, days, interval_s, notes, sources), requests, {}


def _metric_costs(settings: GpuaasSettings, prom: PromClient, start: datetime, end: datetime, period_s: float,
                  days: int, interval_s: float, notes: list[str],
                  sources: dict[str, SourceStatus]) -> pd.DataFrame | None:
    """The costs per pod and period from OpenCost's metrics in Prometheus; None (money unknown) without them, or
    where a figure of theirs is no figure a bill holds (a failed source: ``_metrics_failed``)."""
    results = prom.query_range(q.opencost_hours_query(period_s, interval_s), start + timedelta(seconds=period_s), end,
                               period_s)
    if not results:
        why = "no OpenCost allocation API configured" if not settings.opencost_url else "OpenCost API failed"
        notes.append(f"OpenCost unknown: {why} and no OpenCost metrics (container_gpu_allocation) in Prometheus")
        return None
    try:
        return _opencost_metric_rows(results, start, period_s, days, prom.url)
    except MalformedResponse as exc:
        _metrics_failed(settings, exc, notes, sources)
        return None


def _metrics_failed(settings: GpuaasSettings, exc: MalformedResponse, notes: list[str],
                    sources: dict[str, SourceStatus]) -> None:
    """Say that OpenCost's metrics cannot be used, and why: the OpenCost source's failure where they are the source
    (no API configured), else beside the API's failure, which stays the source's. The money is then unknown."""
    if settings.opencost_url:
        said = f"OpenCost's metrics in Prometheus at {exc.url}: {exc.detail}"
    else:
        said = describe_failure(settings, "opencost", exc)
        sources["opencost"] = SourceStatus("opencost", ok=False, error=said)
    notes.append(f"{said}; the costs are unknown, not $0")


def allocation_gaps(settings: GpuaasSettings, prom: PromClient, costs: pd.DataFrame | None, gpu: pd.DataFrame,
                    kueue: list[dict[str, Any]], window: tuple[datetime, datetime, float, int, float],
                    notes: list[str], sources: dict[str, SourceStatus]) -> pd.DataFrame | None:
    """``costs``, unless their answer holds no allocation for a period the fleet held GPUs in (``unpriced_periods``).

    The allocation API's answer (``[]``, ``[null]``, ``[{}]``: OpenCost not running then, or its own Prometheus
    without that data): the API is a failed source naming the period, and the costs are read as when it fails,
    from OpenCost's metrics in Prometheus. OpenCost's metrics (read because no API is configured, or in its place)
    held no allocation there either: the money is unknown and the metrics' failure is said (``_metrics_failed``);
    never $0 for hours that were held."""
    start, end, period_s, days, interval_s = window
    if costs is None:
        return costs
    held = [(day, value) for labels, day, value in points(kueue, start, period_s, days) if "gpuaas_stat" not in labels]
    gaps = unpriced_periods(costs, gpu, held, days)
    if not gaps:
        return costs
    if settings.opencost_url and sources.get("opencost", SourceStatus("opencost", False)).ok:  # the API's answer
        url = settings.opencost_url.rstrip("/") + "/allocation"
        failed = describe_failure(settings, "opencost", MalformedResponse(
            no_allocation_detail(gaps, start, period_s, days), source="opencost", url=url))
        sources["opencost"] = SourceStatus("opencost", ok=False, error=failed)
        notes.append(f"{failed}; the costs are read from OpenCost's metrics in Prometheus instead")
        costs = _metric_costs(settings, prom, start, end, period_s, days, interval_s, notes, sources)
        gaps = unpriced_periods(costs, gpu, held, days) if costs is not None else {}
        if not gaps:
            return costs
    _metrics_failed(settings, MalformedResponse(no_allocation_detail(gaps, start, period_s, days,
                                                                     NO_METRICS_ALLOCATION),
                                                source="opencost", url=prom.url), notes, sources)
    return None
