"""PromQL for the cost report: a fixed set of range queries, aggregated in Prometheus.

Each query is evaluated as a range query with one point per report period (a day, or the
whole window when it is shorter), so the answer is one value per pod / service / queue and
period, whatever the fleet size or the number of days: five expressions per window (GPU hours
observed, GPU hours busy, serving, Kueue, and OpenCost's metrics when its API is not used; the
reader sends each GPU-hour one in at most three day chunks, after one probe for GPUs that only have
the fallback metric: when there are none the fallback is left out), never one per workload, per
service or per day.

* GPU hours per pod: subqueries at the sample interval counting the steps where the activity
  series has a sample (observed) and where it is above the threshold (busy), x the interval:
  counting steps rather than raw samples keeps the figure right when a live scrape is denser
  than the backfilled history. Inner ranges are a millisecond short of the step so a sample is
  counted once, and a series that ended is not carried on for Prometheus' 5-minute lookback.
  What runs at every sample step is only ``max_over_time`` and one comparison used as a filter (busy:
  above the threshold; observed and active: at or above 0, so that a reading below 0 or NaN is unknown, never
  idle): the activity-or-GPU_UTIL choice is made once per GPU and period (outside the
  subquery), and GPUs are summed to pods before their labels are normalised. At 16,000 GPUs x
  30 days that is what lets the query finish (the per-step ``or`` and ``bool``, and relabelling
  every GPU series every day, ran past Prometheus' 2-minute timeout). The choice per period
  differs from a choice per step only for a GPU that has the activity metric for part of a
  period and only GPU_UTIL for the rest: its GPU_UTIL-only steps count as unknown (never idle),
  so observed and busy hours are low by at most those steps (``tests/sources/test_cost_gpu_hours.py``).
  Each sample step keeps one series per GPU and pod (``max by`` the GPU's identity, ``GPU_IDENTITY``, and
  the pod's labels): a backfilled and a live series, or a double scrape, of one GPU are one sample.
* Data span: per period, the first and last step with any GPU telemetry (``data_span_query``), sent with
  the Kueue query: how much of the window the data covers.
* Serving per namespace and model: ``increase`` of ``request_success_total`` by reason, of the
  latency histogram's buckets by ``le``, and, per quality metric, the requests finished while
  the metric's minimum over each quality step was at or above the service's threshold (the
  thresholds travel inside the query as ``vector()`` literals, one per service), with the same
  steps' requests ungated (``quality_span``): the steps partition the period exactly (``_quality_gate``),
  and ``gpuaas.sources._cost_quality`` applies the share that quality held for to the period's requests. Each
  counter is read once per server (``one_per_server``) before the sum: an HA pair's two copies are one.
* Kueue: GPU quota in use x hours per ClusterQueue. OpenCost fallback: GPU-hours per pod from
  ``container_gpu_allocation``, and GPU, CPU and RAM cost from each allocation x its node's price
  (``node_gpu_hourly_cost``, ``node_cpu_hourly_cost``, ``node_ram_hourly_cost``), so that the
  fallback's total means what the allocation API's ``totalCost`` means; with the nodes OpenCost priced in each
  period, which tell an OpenCost that priced no allocation from a Prometheus without OpenCost.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from gpuaas.policy import ServiceOutcome
from gpuaas.settings import MetricNames
from gpuaas.sources._promql import (
    GPU_IDENTITY,
    KUEUE_USAGE,
    Signal,
    any_of,
    dcgm_series,
    duration,
    kueue_once,
    normalise,
    one_per_server,
    pod_source_labels,
    priced_nodes_query,
    quote,
    signals,
    tag,
    union,
    vllm_series,
)
from gpuaas.sources._promql import under as _under

__all__ = [
    "QUALITY_STEP_S",
    "RATE_STEP_S",
    "SPAN_STEPS",
    "data_span_query",
    "fallback_probe_query",
    "gpu_active_query",
    "gpu_busy_query",
    "gpu_keys",
    "gpu_observed_query",
    "kueue_hours_query",
    "last_seen_query",
    "opencost_hours_query",
    "pod_labels_query",
    "quality_metrics",
    "serving_window_query",
    "span_step",
]

QUALITY_STEP_S = 300.0
"""Resolution at which a quality gate is applied: requests of a 5-minute step count only if the
metric held its threshold for the whole step. The steps are counted back from the period's end
(``_quality_gate``), so they never reach outside it."""
_WHO = "gpuaas_namespace, model_name"


def _per_hour(expr: str, step_s: float) -> str:
    return f"({expr}) * {step_s / 3600:.10g}"


def gpu_keys(m: MetricNames) -> str:
    """The ``by`` clause of one GPU series per pod and sample step: the GPU's identity and the pod's source labels."""
    return ", ".join(dict.fromkeys([*GPU_IDENTITY, *pod_source_labels(m).split(", ")]))


def _one_per_gpu(expr: str, m: MetricNames) -> str:
    """``expr`` (a per-series sample step) with one series per GPU and pod: two series of one GPU in the same
    step (a backfilled and a live series, a double scrape) are one sample, never added."""
    return f"max by ({gpu_keys(m)}) ({expr})"


def _per_pod(expr: str, m: MetricNames, interval_s: float) -> str:
    by = "gpuaas_namespace, gpuaas_pod"
    return _per_hour(f"sum by ({by}) ({normalise(f'sum by ({pod_source_labels(m)}) ({expr})', m)})", interval_s)


def _presence(metric: str, period_s: float, offset_s: float) -> str:
    """``metric`` (a selector) present in the period, over exactly the span the subquery's steps cover: they are
    aligned to multiples of the interval, so that span ends ``offset_s`` (the period end modulo the
    interval) early."""
    offset_ms = int(round(offset_s * 1000))
    offset = f" offset {offset_ms}ms" if offset_ms > 0 else ""
    return f"present_over_time({metric}[{_under(period_s)}]{offset})"


def _signal(m: MetricNames, period_s: float, offset_s: float, make: Callable[[Signal], str],
            fallback: bool = True) -> str:
    """``make(signal)`` of the activity metric for the GPUs that have it in the period, else of the
    fallback, each with its own scale (``Signal.scale``: 100 for a percentage, whichever setting names it). The
    choice is made per GPU and period, outside the subquery, so it costs one match per GPU and period instead of
    one per sample step.

    ``fallback=False`` (``fallback_probe_query`` found no GPU that would use it) leaves the fallback
    out: Prometheus evaluates both sides of ``or`` in full, and the fallback's subquery for GPUs that
    have the activity metric was half of the query's time.
    """
    first, second = signals(m)
    preferred = make(first)
    if not fallback:
        return f"({preferred})"
    return (f"({preferred}) or (({make(second)}) unless on ({gpu_keys(m)}) "
            f"{_presence(first.selector, period_s, offset_s)})")


def fallback_probe_query(m: MetricNames, period_s: float, offset_s: float = 0.0) -> str:
    """Per period, how many GPUs the GPU-hour queries would read from the fallback metric (with it, without
    the activity metric, matched as ``_signal`` matches them: one per GPU and pod); no answer: none."""
    preferred, fallen_back = signals(m)
    return (f"count({_one_per_gpu(_presence(fallen_back.selector, period_s, offset_s), m)}"
            f" unless on ({gpu_keys(m)}) {_presence(preferred.selector, period_s, offset_s)})")


def gpu_observed_query(m: MetricNames, period_s: float, interval_s: float, offset_s: float = 0.0,
                       fallback: bool = True) -> str:
    """Per pod and period: GPU-hours with telemetry, i.e. the sample steps where the GPU's series has a sample that
    is a reading: one below 0 (no duty cycle reads so) or NaN is no telemetry, so its step is unknown, never idle."""
    sub = f"[{_under(period_s)}:{duration(interval_s)}]"
    return tag(_per_pod(_signal(m, period_s, offset_s, lambda s: (
        f"count_over_time(({_one_per_gpu(f'max_over_time({s.selector}[{_under(interval_s)}])', m)} >= 0){sub})"),
        fallback), m, interval_s),
        "gpuaas_stat", "observed_h")


def gpu_active_query(m: MetricNames, period_s: float, interval_s: float, offset_s: float = 0.0,
                     fallback: bool = True) -> str:
    """Per pod and period: activity-weighted GPU-hours (each reading over its metric's scale, summed over the
    sample steps x the interval): the effective utilisation that the thresholded busy hours round up. The steps are
    those ``gpu_observed_query`` counts, each at most fully active: a reading past the scale (``1e308``) adds one
    step's hours, not an overflow."""
    sub = f"[{_under(period_s)}:{duration(interval_s)}]"
    return tag(_per_pod(_signal(m, period_s, offset_s, lambda s: (
        f"sum_over_time(clamp_max({_one_per_gpu(f'max_over_time({s.selector}[{_under(interval_s)}])', m)} >= 0, "
        f"{s.scale:.12g}){sub}) / {s.scale:.12g}"),
        fallback), m, interval_s),
        "gpuaas_stat", "active_h")


def gpu_busy_query(m: MetricNames, threshold: float, period_s: float, interval_s: float,
                   offset_s: float = 0.0, fallback: bool = True) -> str:
    """Per pod and period: GPU-hours above ``threshold``.

    One comparison per sample step, as a filter (``bool`` would relabel every sample), counted by
    ``count_over_time``; a GPU never busy in the period has no series (0 busy hours).
    """
    sub = f"[{_under(period_s)}:{duration(interval_s)}]"
    return tag(_per_pod(_signal(m, period_s, offset_s, lambda s: (
        f"count_over_time(({_one_per_gpu(f'max_over_time({s.selector}[{_under(interval_s)}])', m)}"
        f" > {threshold * s.scale:.12g}){sub})"),
        fallback), m, interval_s), "gpuaas_stat", "busy_h")


def quality_metrics(services: Sequence[ServiceOutcome]) -> list[str]:
    """The distinct quality metrics the policy's services are gated on, in a stable order."""
    return sorted({s.quality.metric for s in services if s.quality is not None})


def _thresholds(services: Sequence[ServiceOutcome], metric: str) -> str:
    parts = []
    for s in services:
        if s.quality is None or s.quality.metric != metric:
            continue
        for ns in (s.namespace, ""):  # "": an endpoint scraped without a namespace label
            expr = f"vector({s.quality.threshold:g})"
            expr = tag(tag(expr, "gpuaas_namespace", ns), "model_name", s.model_name or "")  # quoted by tag
            parts.append(expr)
    return union(parts)


RATE_STEP_S = 300.0
"""The request rate a service is sized on is measured over 5 minutes: short enough to see the daily peak,
long enough that one burst of seconds does not set the replica count."""


def _pod_set(pods: Sequence[tuple[str, str]]) -> str:
    """The pods as a vector of ``gpuaas_namespace, gpuaas_pod`` (value 1), to keep series with ``and on``."""
    return union([tag(tag("vector(1)", "gpuaas_namespace", ns), "gpuaas_pod", pod) for ns, pod in sorted(pods)])


def _service_rates(m: MetricNames, services: Sequence[ServiceOutcome], service_pods: dict[str, list[tuple[str, str]]],
                   period_s: float, rate_quantile: float) -> list[str]:
    """Per label-keyed service with pods: the quantile of its pods' summed 5-minute request rate
    (tagged ``gpuaas_service``): a sum of per-pod quantiles would overstate the peak."""
    r = duration(RATE_STEP_S)
    parts = []
    for s in services:
        pods = service_pods.get(s.name)
        if s.kind != "serving" or not s.pod_labels or not pods:
            continue
        model = [f"model_name={quote(s.model_name)}"] if s.model_name else []
        rate = one_per_server(f"rate({vllm_series(m, m.vllm_request_success, *model)}[{r}])", m, "finished_reason")
        total = f"sum(({rate}) and on (gpuaas_namespace, gpuaas_pod) ({_pod_set(pods)}))"
        expr = f"quantile_over_time({rate_quantile:g}, ({total})[{_under(period_s)}:{r}])"
        parts.append(tag(tag(expr, "gpuaas_stat", "rate_quantile"), "gpuaas_service", s.name))
    return parts


def serving_window_query(m: MetricNames, services: Sequence[ServiceOutcome], period_s: float,
                         rate_quantile: float = 0.95,
                         service_pods: dict[str, list[tuple[str, str]]] | None = None, end_s: float = 0.0) -> str:
    """Per namespace, model and period: requests by reason, latency buckets, requests in the quality steps where
    quality held and in all of them (``quality_ok:`` / ``quality_span:``, steps ending at the period end ``end_s``,
    unix seconds), and the ``rate_quantile`` of the 5-minute request rate (``stat="rate_quantile"``, requests per
    second).

    With a service keyed by ``pod_labels`` the counts are also split by pod (``gpuaas_pod``: the rows
    it sums are its pods'), and its rate quantile is its own pods' (``service_pods``, tagged ``gpuaas_service``).
    """
    who = f"{_WHO}, gpuaas_pod" if any(s.pod_labels for s in services if s.kind == "serving") else _WHO
    p = duration(period_s)
    r = duration(RATE_STEP_S)
    hists = sorted({s.latency_metric or m.vllm_e2e_latency for s in services if s.kind == "serving"}
                   or {m.vllm_e2e_latency})
    def served(fn: str, metric: str, window: str, *labels: str) -> str:
        return one_per_server(f"{fn}({vllm_series(m, metric)}[{window}])", m, *labels)

    parts = [tag(f"sum by ({who}, finished_reason) ({served('increase', m.vllm_request_success, p, 'finished_reason')})",
                 "gpuaas_stat", "requests")]
    for hist in hists:
        bucket = f"sum by ({who}, le) ({served('increase', f'{hist}_bucket', p, 'le')})"
        parts.append(tag(tag(bucket, "gpuaas_stat", "latency_bucket"), "gpuaas_hist", hist))
    rate = f"sum by ({_WHO}) ({served('rate', m.vllm_request_success, r, 'finished_reason')})"
    parts.append(tag(f"quantile_over_time({rate_quantile:g}, ({rate})[{_under(period_s)}:{r}])", "gpuaas_stat",
                     "rate_quantile"))
    parts += _service_rates(m, services, service_pods or {}, period_s, rate_quantile)
    for metric in quality_metrics(services):
        for stat, gated in ((f"quality_ok:{metric}", True), (f"quality_span:{metric}", False)):
            expr = _quality_gate(m, services, metric, gated, period_s, end_s)
            parts.append(tag(f"sum by ({who}, finished_reason) ({expr})", "gpuaas_stat", stat))
    return union(parts)


def _quality_piece(m: MetricNames, services: Sequence[ServiceOutcome], metric: str, gated: bool, range_s: float,
                   offset_s: float) -> str:
    """Per series, the requests finished in ``(t - offset_s - range_s, t - offset_s]``; ``gated``: only where the
    ``metric``'s every sample in that span is at or above the service's threshold (none: not held), else
    (the span) wherever the service has a threshold for ``metric``."""
    off = f" offset {duration(offset_s)}" if offset_s else ""
    served = one_per_server(f"increase({vllm_series(m, m.vllm_request_success)}[{duration(range_s)}]{off})", m,
                            "finished_reason")
    thresholds = _thresholds(services, metric)
    if not gated:
        return f"{served} and on ({_WHO}) ({thresholds})"
    quality = f"min by ({_WHO}) ({normalise(f'min_over_time({metric}[{_under(range_s)}]{off})', m)})"
    return f"{served} and on ({_WHO}) (({quality}) >= on ({_WHO}) ({thresholds}))"


def _quality_gate(m: MetricNames, services: Sequence[ServiceOutcome], metric: str, gated: bool, period_s: float,
                  end_s: float) -> str:
    """The period's requests in quality steps (``_quality_piece``), per series and step kind (``gpuaas_piece``).

    A subquery's steps are aligned to multiples of its step since 1970, not to the period's end, so
    ``increase(...[5m])`` summed over ``[P:5m]`` would count the 5 minutes before its first step (all 5 of them for
    a period under 5 minutes) and drop those after its last. Here the steps end at the period's end and every
    5 minutes before it: the subquery runs ``shift`` late (a negative offset: Prometheus 2.33 or later) and reads
    ``shift`` early, ``shift`` taking the period's end (``end_s``; all of a range query's period ends have the same
    time past a 5-minute mark, a period being one or whole days) to the next mark. What is left at the period's
    start, shorter than a step, is one step of its own, judged on its own samples, so the steps partition the period.
    """
    step = QUALITY_STEP_S
    whole = math.floor(period_s / step) * step
    shift = -(end_s % step) % step
    pieces = []
    if whole:
        sub = f"[{_under(whole)}:{duration(step)}]" + (f" offset -{duration(shift)}" if shift else "")
        steps = f"sum_over_time(({_quality_piece(m, services, metric, gated, step, shift)}){sub})"
        pieces.append(tag(steps, "gpuaas_piece", "steps"))
    if period_s > whole:
        pieces.append(tag(_quality_piece(m, services, metric, gated, period_s - whole, whole), "gpuaas_piece", "head"))
    return union(pieces)


def kueue_hours_query(gpu_resources: Sequence[str], period_s: float, interval_s: float) -> str:
    """Per ClusterQueue and period: GPU quota in use x hours (Kueue's own usage gauge)."""
    inner = kueue_once(f"max_over_time({KUEUE_USAGE}{{{any_of('resource', gpu_resources)}}}[{_under(interval_s)}])",
                       "cluster_queue, flavor, resource")
    expr = f"sum by (cluster_queue) (sum_over_time({inner}[{_under(period_s)}:{duration(interval_s)}]))"
    return _per_hour(expr, interval_s)


_CONTAINER = "namespace, pod, container, node"
"""What names one allocation in OpenCost's metrics (``container_gpu_allocation`` and its CPU and RAM siblings)."""


def opencost_hours_query(period_s: float, interval_s: float) -> str:
    """Per pod and period, from OpenCost's metrics: GPU-hours allocated, and the GPU, CPU and RAM cost
    (allocation x the node's hourly price; RAM priced per GiB, as OpenCost does); and per period the nodes OpenCost
    priced (``priced_nodes_query``), so that a period it priced nodes in and no allocation tells an OpenCost that
    priced nothing from a Prometheus without OpenCost."""
    sub = f"[{_under(period_s)}:{duration(interval_s)}]"

    def one(allocation: str) -> str:
        """One series per container and step: a double scrape or a backfilled and a live series of one
        allocation (other ``instance`` or ``job``) are one allocation, not two."""
        return f"max by ({_CONTAINER}) (max_over_time({allocation}[{_under(interval_s)}]))"

    def priced(allocation: str, price: str, scale: str = "") -> str:
        alloc = f"{one(allocation)}{scale}"
        return _per_hour(f"sum by (namespace, pod) (sum_over_time(({alloc} * on (node) group_left () "
                         f"max by (node) ({price})){sub}))", interval_s)

    gpu_alloc = f"({one('container_gpu_allocation')})"
    return union([
        tag(_per_hour(f"sum by (namespace, pod) (sum_over_time({gpu_alloc}{sub}))", interval_s), "gpuaas_stat",
            "gpu_hours"),
        tag(priced("container_gpu_allocation", "node_gpu_hourly_cost"), "gpuaas_stat", "gpu_cost"),
        tag(priced("container_cpu_allocation", "node_cpu_hourly_cost"), "gpuaas_stat", "cpu_cost"),
        tag(priced("container_memory_allocation_bytes", "node_ram_hourly_cost", f" / {2**30}"), "gpuaas_stat",
            "ram_cost"),
        priced_nodes_query(_under(period_s)),
    ])


SPAN_STEPS = 1440
"""The data span of a period is read at this many steps at most (a minute for a day), never finer than the
sample interval: it only has to tell a period held from its start from one that began hours late."""


def span_step(period_s: float, interval_s: float) -> float:
    """The step at which ``data_span_query`` looks for telemetry: a whole number of sample intervals."""
    return max(math.ceil(period_s / SPAN_STEPS / interval_s), 1) * interval_s


def data_span_query(m: MetricNames, period_s: float, interval_s: float) -> str:
    """Per period: the first and the last step (``span_step``) at which any GPU had telemetry
    (``gpuaas_stat`` ``data_first`` / ``data_last``, unix seconds); no answer: no telemetry in the period.

    What tells how much of the window the report's data covers: Prometheus may hold 6 h of a 24 h window,
    or the previous period only its last minutes. One series per period (``count`` first, then the time
    of the step), so its cost does not grow with the fleet beyond the selector.
    """
    sub = f"[{_under(period_s)}:{duration(span_step(period_s, interval_s))}]"
    preferred, fallen_back = signals(m)
    seen = f"timestamp(count({preferred.selector}) or count({fallen_back.selector}))"
    return union([tag(f"min_over_time({seen}{sub})", "gpuaas_stat", "data_first"),
                  tag(f"max_over_time({seen}{sub})", "gpuaas_stat", "data_last")])


def last_seen_query(m: MetricNames, namespaces: Sequence[str], window_s: float, interval_s: float) -> str:
    """Per pod of ``namespaces`` (the batch services'): the time of its last GPU sample in the window.

    A batch job's pods of an attempt that failed stopped before the next attempt's Workload was
    created; this is what tells them apart from the pods of the attempt that produced the outcome.
    ``timestamp`` is applied to each raw selector, where it is the sample's own time.
    """
    sub = f"[{_under(window_s)}:{duration(interval_s)}]"
    parts = [f"max_over_time(timestamp({dcgm_series(m, metric, any_of(label, namespaces))}){sub})"
             for metric in (m.gpu_activity, m.gpu_util_fallback) for label in m.namespace_labels]
    return f"max by (gpuaas_namespace, gpuaas_pod) ({normalise(union(parts), m)})"


def pod_labels_query(m: MetricNames, namespaces: Sequence[str], window_s: float) -> str:
    """The labels of every pod of ``namespaces`` seen in the window, from kube-state-metrics'
    ``kube_pod_labels`` (keys as ``label_<key>``): the Prometheus side of a service's ``pod_labels``
    when OpenCost's allocation API (which carries them) is not used. Instant query at the window's end."""
    w = duration(window_s)
    return union([f"last_over_time(kube_pod_labels{{{any_of(label, namespaces)}}}[{w}])"
                  for label in m.namespace_labels])
