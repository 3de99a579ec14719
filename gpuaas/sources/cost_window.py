"""Everything the cost report reads for one window, as ``CostInputs``: a fixed number of requests.

Prometheus: a probe for GPUs that only have GPU_UTIL, then the GPU hours observed and busy (each,
the probe too, in at most ``GPU_CHUNKS`` range queries over consecutive days), serving, Kueue (with the span
of the GPU telemetry per period, ``data_span``), plus OpenCost's metrics when its allocation API is not
configured or did not answer; OpenCost: one ``/allocation`` request
with ``step`` = the report period; Kubernetes: one paginated list of Kueue Workloads. The
count does not grow with the fleet, the number of services or the number of days. The store
(and each sweep file the policy names) is read for the serving services' measured capacity.

A cost source that does not answer leaves the money unknown (``costs=None``) with the reason
in ``notes``; the GPU-hour funnel is still read. An answer of OpenCost's, its allocation API's or its metrics', that
holds figures no bill holds, or no allocation for a period the fleet held GPUs in, is a failed source too
(``_cost_allocation``). A Kubernetes API that does not answer leaves batch outcomes unknown. Prometheus is
required: without telemetry there is no funnel, and an answer of its with a time or a figure its query cannot
compute (a time outside what was asked, GPU-hours past ``MAX_GPUS`` all period long) ends the read with one
``MalformedResponse`` naming the field; serving counts past ``MAX_COUNT`` are read as it, as the snapshot reads them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd

from gpuaas.errors import ConfigError, GpuaasError
from gpuaas.loadtest import serving_capacity
from gpuaas.models import (
    GPU_COLS,
    MAX_GPUS,
    SERVING_COLS,
    SERVING_KEYS,
    CapacityEstimate,
    CostInputs,
    SourceStatus,
    selects,
)
from gpuaas.policy import ServiceOutcome
from gpuaas.settings import GpuaasSettings, MetricNames
from gpuaas.sources import _promql_cost as q
from gpuaas.sources._concurrent import at_once
from gpuaas.sources._cost_allocation import PodLabels, allocation_gaps, allocation_rows, points, read_costs
from gpuaas.sources._cost_jobs import DEADLINE_ANNOTATION, finished_jobs, read_jobs, running_at, running_jobs
from gpuaas.sources._cost_quality import requests_while_held
from gpuaas.sources._prom_client import PromClient
from gpuaas.sources._promql import union
from gpuaas.sources.bulk import collector_paused
from gpuaas.sources.kube import DEFAULT_GPU_RESOURCES
from gpuaas.sources.prometheus import MAX_COUNT
from gpuaas.store import Store, open_store

__all__ = ["DEADLINE_ANNOTATION", "MAX_WINDOW_DAYS", "align_end", "allocation_rows", "finished_jobs", "gpu_rows", "read_cost_inputs",
           "report_periods", "running_jobs", "serving_rows"]

DAY_S = 86400.0


MAX_WINDOW_DAYS = 366
"""The longest report window: a year of daily periods. Longer reaches before any Prometheus' retention and,
far enough, past the dates Python can represent."""


def _days(window_s: float) -> str:
    """A window's days as a person reads them: ``99,999,999``, and a number past any calendar as ``7e+300``."""
    days = window_s / DAY_S
    return f"{days:,.0f}" if days < 1e12 else f"{days:.3g}"


def report_periods(window_s: float, step_s: float | None = None) -> tuple[int, float]:
    """(number of periods, period seconds): days, or one period for a window of a day or less.

    ``step_s``, the GPU sample interval, is the shortest window: the GPU-hours are counted in whole
    sample steps, so a window shorter than one would be charged a whole step it does not span. A window
    of a day or less is whole minutes: OpenCost's ``step`` (one set per period) is sent in minutes, and
    OpenCost does not cut its last step at the window's end, so a 100 s window with a 1-minute step
    would be charged 120 s.
    """
    if window_s <= 0:
        raise ConfigError(f"the window must be positive, got {window_s:g}s", field="window")
    if step_s is not None and window_s < step_s:
        raise ConfigError(f"a window must span at least one GPU sample step, {step_s:g} s "
                          "(metrics.sample_interval_seconds): GPU-hours are counted in whole steps", field="window")
    if window_s > MAX_WINDOW_DAYS * DAY_S:
        raise ConfigError(f"a window of at most {MAX_WINDOW_DAYS} days, not {_days(window_s)} days",
                          field="window")
    if window_s <= DAY_S:
        if window_s % 60:
            raise ConfigError(f"a window must be whole minutes, not {window_s:g} s: OpenCost prices in steps of whole "
                              "minutes, so its last step would run past the window's end",
                              field="window")
        return 1, window_s
    days = window_s / DAY_S
    if abs(days - round(days)) > 1e-9:
        raise ConfigError(f"a window longer than a day must be whole days, not {days:g} days", field="window")
    return int(round(days)), DAY_S


def align_end(end: datetime, step_s: float) -> datetime:
    """``end`` floored to a whole multiple of ``step_s`` (and to a whole second).

    Every query of the report is evaluated at period ends counted from this instant, and the
    Prometheus client sends whole seconds: a "now" with a fraction of a second would otherwise be
    rounded on the way out, differently for each query, and a point could land in the wrong period.
    Flooring once here makes the report the same for any "now" within one sample step.
    """
    step = max(step_s, 1.0)
    return datetime.fromtimestamp(math.floor(math.floor(end.timestamp()) / step) * step, UTC)


def gpu_rows(results: list[dict[str, Any]], start: datetime, period_s: float, days: int) -> pd.DataFrame:
    cells: dict[tuple[str, str, int], dict[str, Any]] = {}
    for labels, day, value in points(results, start, period_s, days):
        key = (labels.get("gpuaas_namespace", ""), labels.get("gpuaas_pod", ""), day)
        row = cells.setdefault(key, {"namespace": key[0], "pod": key[1], "day": day,
                                     **dict.fromkeys(GPU_COLS[3:], 0.0)})
        stat = labels.get("gpuaas_stat", "")
        if stat in row:
            row[stat] += value  # added, never assigned: two points of one period must not overwrite each other
    return pd.DataFrame(list(cells.values()), columns=GPU_COLS)


def serving_rows(results: list[dict[str, Any]], start: datetime, period_s: float, days: int) -> pd.DataFrame:
    """vLLM series in tidy rows; series without a namespace (a live endpoint) get ``namespace=""``. A count past
    ``MAX_COUNT`` (``1e308``, ``+Inf``) is read as it, as the snapshot reads serving counts: still requests served,
    and no sum over pods, buckets or days overflows."""
    rows = []
    for labels, day, raw in points(results, start, period_s, days):
        value = min(raw, MAX_COUNT)
        stat = labels.get("gpuaas_stat", "")
        rows.append({"namespace": labels.get("gpuaas_namespace", ""), "model_name": labels.get("model_name", ""),
                     "day": day, "stat": stat, "finished_reason": labels.get("finished_reason", ""),
                     "le": labels.get("le", ""), "value": value, "pod": labels.get("gpuaas_pod", ""),
                     "service": labels.get("gpuaas_service", ""), "hist": labels.get("gpuaas_hist", "")})
    return pd.DataFrame(rows, columns=[*SERVING_COLS, *SERVING_KEYS, "hist"])


def _pod_labels(prom: PromClient, m: MetricNames, namespaces: Sequence[str], end: datetime, window_s: float,
                known: PodLabels) -> PodLabels:
    """The pods' labels for the services keyed by ``pod_labels``: OpenCost's, then ``kube_pod_labels`` for the
    pods it did not label (one instant query; none without such services)."""
    if not namespaces:
        return known
    out = {key: dict(labels) for key, labels in known.items() if key[0] in namespaces}
    for r in prom.query(q.pod_labels_query(m, namespaces, window_s), end):
        metric = r["metric"]
        ns = next((metric[k] for k in reversed(m.namespace_labels) if metric.get(k)), "")
        pod = next((metric[k] for k in reversed(m.pod_labels) if metric.get(k)), "")
        if ns and pod and (ns, pod) not in known:
            out.setdefault((ns, pod), {}).update({k[6:]: v for k, v in metric.items() if k.startswith("label_")})
    return out


def _service_pods(policy_services: Sequence[ServiceOutcome], labels: PodLabels) -> dict[str, list[tuple[str, str]]]:
    """Per serving service keyed by ``pod_labels``: the pods it selects (the report refuses a pod two select)."""
    return {s.name: [key for key, lab in labels.items() if selects(s, key[0], lab)]
            for s in policy_services if s.kind == "serving" and s.pod_labels}


GPU_CHUNKS = 3
"""The GPU-hour queries are each sent as at most this many range queries over consecutive days: the
same work, but a month of 16,000 GPUs stays well inside Prometheus' 2-minute limit per query."""


def _chunked(prom: PromClient, expr: str, first: datetime, days: int, period_s: float,
             chunks: int = GPU_CHUNKS) -> list[dict[str, Any]]:
    """``expr`` at one point per period from ``first``, as min(days, chunks) range queries."""
    out: list[dict[str, Any]] = []
    chunks = max(min(days, chunks), 1)
    bounds = [round(i * days / chunks) for i in range(chunks + 1)]
    for lo, hi in zip(bounds, bounds[1:]):
        out += prom.query_range(expr, first + timedelta(seconds=lo * period_s),
                                first + timedelta(seconds=(hi - 1) * period_s), period_s)
    return out


def read_cost_inputs(settings: GpuaasSettings, end: datetime, window_s: float,
                     gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES, chunks: int = GPU_CHUNKS) -> CostInputs:
    """Read the window ``(end - window_s, end]``, ``end`` floored to the sample step (``align_end``);
    raises ``SourceError`` when Prometheus fails."""
    interval_s = settings.metrics.sample_interval_seconds
    days, period_s = report_periods(window_s, interval_s)
    policy = settings.policy
    end = align_end(end, interval_s)
    start = end - timedelta(seconds=window_s)
    notes: list[str] = []
    sources: dict[str, SourceStatus] = {}
    first = start + timedelta(seconds=period_s)
    prom = PromClient(settings)
    offset_s = end.timestamp() % interval_s  # every period ends at this phase when a period is whole intervals
    m = settings.metrics
    threshold = policy.reclaim.activity_threshold

    def gpu_hours() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        fallback = bool(_chunked(prom, q.fallback_probe_query(m, period_s, offset_s), first, days, period_s, chunks))
        observed, busy = at_once([
            lambda: _chunked(prom, union([q.gpu_observed_query(m, period_s, interval_s, offset_s, fallback),
                                          q.gpu_active_query(m, period_s, interval_s, offset_s, fallback)]),
                             first, days, period_s, chunks),
            lambda: _chunked(prom, q.gpu_busy_query(m, threshold, period_s, interval_s, offset_s, fallback), first,
                             days, period_s, chunks),
        ])
        return observed, busy

    batch_namespaces = sorted({s.namespace for s in policy.services if s.kind == "batch"})
    keyed_namespaces = sorted({s.namespace for s in policy.services if s.pod_labels})

    def serving_and_costs() -> tuple[list[dict[str, Any]], tuple[pd.DataFrame | None, int], PodLabels]:
        """Costs first: their pod labels (and ``kube_pod_labels``) decide which pods a label-keyed service's
        series are; then the serving series for the window."""
        costs, requests, known = read_costs(settings, prom, start, end, period_s, days, interval_s, notes, sources)
        labels = _pod_labels(prom, m, keyed_namespaces, end, window_s, known)
        expr = q.serving_window_query(m, policy.services, period_s, policy.cost.forecast_quantile,
                                      _service_pods(policy.services, labels), end.timestamp())
        return prom.query_range(expr, first, end, period_s), (costs, requests), labels

    # The GPU-hour queries (the heaviest, after their probe) two at a time; the Kubernetes lists from the
    # start, and the light queries in a third lane (with OpenCost's API, or its metrics when there is none).
    try:
        with collector_paused():
            kube, (observed, busy), ((serving_raw, (costs, opencost_requests), pod_labels), kueue, last_seen) = at_once([
                lambda: read_jobs(settings),
                gpu_hours,
                lambda: (serving_and_costs(),
                         prom.query_range(union([q.kueue_hours_query(gpu_resources, period_s, interval_s),
                                                 q.data_span_query(m, period_s, interval_s)]), first, end, period_s),
                         _last_seen(prom, m, batch_namespaces, end, window_s, interval_s)),
            ], workers=3)
        most_hours = MAX_GPUS * period_s / 3600  # every GPU a fleet may hold, all period long
        prom.check_bounded([*observed, *busy], most_hours, "GPU-hours")
        prom.check_bounded([r for r in kueue if "gpuaas_stat" not in r["metric"]], most_hours, "Kueue's GPU-hours")
        spans = [r for r in kueue if "gpuaas_stat" in r["metric"]]  # the data span rides in the Kueue query
        # times, not figures: each the time of a step of its period with telemetry (read as a date by ``data_span``)
        prom.check_sample_times(spans, period_s + q.span_step(period_s, interval_s), "data span")
        gpu = gpu_rows([*observed, *busy], start, period_s, days)
        costs = allocation_gaps(settings, prom, costs, gpu, kueue, (start, end, period_s, days, interval_s), notes,
                                 sources)
    finally:
        prom.close()
    serving = requests_while_held(serving_rows(serving_raw, start, period_s, days), policy.services, notes)
    if not gpu.empty:
        notes.append(f"GPU hours: a GPU is read from {m.gpu_activity} in each period it has that metric, else from "
                     f"{m.gpu_util_fallback}; its {m.gpu_util_fallback}-only steps in such a period count as unknown "
                     "(never idle), so its observed and busy hours are low by at most those steps")
    kueue_hours = pd.DataFrame([{"cluster_queue": labels.get("cluster_queue", ""), "allocated_h": value}
                                for labels, _, value in points(kueue, start, period_s, days) if "gpuaas_stat" not in labels],
                               columns=["cluster_queue", "allocated_h"])
    if kube.why:
        notes.append(kube.why)
    notes.extend(kube.notes)
    # a failing Prometheus ends the read; one that answers says how much of the window its telemetry spans, and where
    span = data_span(spans, start, period_s, days, q.span_step(period_s, interval_s))
    sources["prometheus"] = SourceStatus("prometheus", ok=True, details=(
        *span, ("gpu_metrics", m.activity_names)))
    if kube.failure is not None:
        sources["kube"] = SourceStatus("kube", ok=False, error=kube.failure)
    elif settings.kubeconfig or settings.in_cluster:
        sources["kube"] = SourceStatus("kube", ok=True)
    serving = _latency_for_services(serving, settings)
    return CostInputs(start=start, end=end, days=days, gpu=gpu, costs=costs, serving=serving, jobs=kube.finished,
                      running=running_at(kube.finished, kube.running, end), last_seen=last_seen, pod_owners=kube.pod_owners, kueue_hours=kueue_hours,
                      pod_labels=pod_labels,
                      notes=notes, queries=prom.queries + opencost_requests + kube.requests,
                      capacity=_read_capacity(settings, end, notes), sources=dict(sorted(sources.items())))


def data_span(results: list[dict[str, Any]], start: datetime, period_s: float, days: int,
              step_s: float) -> tuple[tuple[str, str], ...]:
    """``data_span_query``'s answer as ``SourceStatus.details``: ``data_from`` (the window's first telemetry, ISO),
    ``span_step_s``, and per period ``covered_s:<period>``: its first to last step with telemetry, plus one step."""
    first: dict[int, float] = {}
    last: dict[int, float] = {}
    for labels, day, value in points(results, start, period_s, days):
        (first if labels.get("gpuaas_stat") == "data_first" else last)[day] = value
    covered = {day: min(max(last.get(day, first[day]) - first[day] + step_s, 0.0), period_s) for day in first}
    out = [("span_step_s", f"{step_s:g}"), *(("covered_s:" + str(day), f"{covered.get(day, 0.0):g}")
                                            for day in range(days))]
    if first:
        out.insert(0, ("data_from", datetime.fromtimestamp(max(min(first.values()) - step_s, start.timestamp()),
                                                           UTC).isoformat()))
    return tuple(out)


def _last_seen(prom: PromClient, m: MetricNames, namespaces: Sequence[str], end: datetime, window_s: float,
               interval_s: float) -> dict[tuple[str, str], float]:
    """When each GPU pod of the batch services' namespaces was last seen in the window (no query without any)."""
    if not namespaces:
        return {}
    rows = prom.query_range(q.last_seen_query(m, namespaces, window_s, interval_s), end, end, window_s)
    # times, compared with Workloads' creation; a raw selector's sample may precede the window's first step by
    # Prometheus' lookback (5 minutes unless --query.lookback-delta says more): a day past the window allows any
    prom.check_sample_times(rows, window_s + DAY_S, "last seen")
    out: dict[tuple[str, str], float] = {}
    for r in rows:
        values = [float(v) for _, v in r["values"] if not math.isnan(float(v))]
        if values:
            out[(r["metric"].get("gpuaas_namespace", ""), r["metric"].get("gpuaas_pod", ""))] = max(values)
    return out


def _read_capacity(settings: GpuaasSettings, end: datetime, notes: list[str]) -> dict[str, CapacityEstimate | None]:
    """Each serving service's sustainable per-replica rate, aged at the window's end.

    A sweep file that cannot be read, or a store that cannot be opened, leaves that capacity
    unknown with the reason in ``notes``: the rest of the report does not depend on it.
    """
    serving = [s for s in settings.policy.services if s.kind == "serving"]
    out: dict[str, CapacityEstimate | None] = {}
    if not serving:
        return out

    def read(group: list[ServiceOutcome], store: Store | None) -> None:
        for svc in group:
            try:
                out[svc.name] = serving_capacity(settings, svc.namespace, svc.name, model_name=svc.model_name,
                                                 now=end, store=store)
            except GpuaasError as exc:
                out[svc.name] = None
                notes.append(f"service {svc.name}: capacity unreadable ({exc})")

    read([s for s in serving if s.capacity is not None], None)  # their sweep files: no store asked
    measured = [s for s in serving if s.capacity is None]  # their latest load test, in the store
    if measured:
        try:
            with open_store(settings) as store:
                read(measured, store)
        except GpuaasError as exc:
            notes.append(f"capacity unknown: the store did not open ({exc})")
    return {svc.name: out.get(svc.name) for svc in serving}


def _latency_for_services(serving: pd.DataFrame, settings: GpuaasSettings) -> pd.DataFrame:
    """Keep, per service, only the latency histogram it is judged on (the others' buckets are dropped)."""
    default = settings.metrics.vllm_e2e_latency
    wanted = {(s.namespace, s.model_name or ""): s.latency_metric or default
              for s in settings.policy.services if s.kind == "serving"}
    if serving.empty:
        return serving.drop(columns=["hist"])
    hist = serving["stat"] == "latency_bucket"
    judged = pd.Series([h == wanted.get((ns, mdl), wanted.get((ns, ""), default))
                        for ns, mdl, h in zip(serving["namespace"], serving["model_name"], serving["hist"])],
                       index=serving.index, dtype=bool)
    keep = ~hist | judged
    return serving[keep].drop(columns=["hist"]).reset_index(drop=True)
