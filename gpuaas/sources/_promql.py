"""PromQL builders: every query gpuaas sends, as pure functions of the metric names.

The queries carry the aggregation (``avg_over_time``, ``max_over_time``,
``count_over_time``, ``sum by``) so the answer has one row per GPU (or per pod, or per
queue) whatever the fleet size, and the number of queries per cycle is fixed. Several
results are folded into one query with ``or``, each tagged with a ``gpuaas_stat`` label.

Label variants are normalised inside the query with ``label_replace`` into ``gpuaas_*``
labels: ``pod``/``exported_pod`` (later names in ``MetricNames.pod_labels`` win, because
``exported_*`` only exists when the exporter's own label lost the collision), the same for
namespaces and ``Hostname``/``hostname``. A series whose ``pod`` is the dcgm-exporter pod
itself (``honorLabels: true`` on an unallocated GPU, or any series scraped without it) gets no pod.

The activity metrics are read at their own scale (``Signal``): a reading divided by it is 0-1,
whichever setting names the metric.

GPU series are selected with ``MetricNames.dcgm_selector``'s matchers, serving series with ``vllm_selector``'s
(``dcgm_series``, ``vllm_series``). Serving counters are folded to one series per server before they are added
(``one_per_server``), as a GPU's series are folded to one per GPU: an HA pair's two copies are one counter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from gpuaas.models import MAX_GAP_INTERVALS
from gpuaas.settings import LabelMatcher, MetricNames

__all__ = ["GPU_IDENTITY", "GPU_KEYS", "SERVER_IDENTITY", "Signal", "activity", "any_of", "dcgm_series",
           "device_query", "duration", "fallback_probe_query", "gpu_activity_query", "gpu_source_labels", "kueue_once",
           "kueue_query", "last_sample_time", "matcher", "normalise", "one_per_server", "pod_source_labels",
           "priced_nodes_query", "quote", "scaled", "selector", "signals", "staleness_query", "tag", "under", "union",
           "vllm_query", "vllm_series"]

GPU_KEYS = ("gpuaas_host", "gpu", "UUID", "uuid", "modelName", "GPU_I_ID",
            "gpuaas_namespace", "gpuaas_pod", "gpuaas_container")
GPU_IDENTITY = ("UUID", "uuid", "gpu", "GPU_I_ID")
"""dcgm-exporter's labels that name one GPU or MIG instance (``uuid`` with ``--use-old-namespace``): with the pod
labels, what two series of one GPU share; ``instance``, ``job``, ``prometheus_replica`` and the hostname label are
not (a backfilled and a live series, a double scrape, an HA pair, ``Hostname`` renamed ``hostname``)."""
EXPORTER_CONTAINER = "exporter|.*dcgm-exporter.*"
"""The dcgm-exporter's own container: ``exporter`` in its Helm chart (``deployment/templates/daemonset.yaml``),
``nvidia-dcgm-exporter`` in the GPU Operator; a series carries it where no pod holds the GPU (``honorLabels: true``)
and on every series scraped without ``honorLabels``."""
EXPORTER_POD = ".*dcgm-exporter.*"
"""Its pod, by name (the chart's ``<release>-dcgm-exporter-…`` unless ``fullnameOverride``, the GPU Operator's
``nvidia-dcgm-exporter-…``): an install that renamed the container or the pod is still known by the other."""
CONTAINER_LABELS = ("container", "exported_container")
KUEUE_PENDING = "kueue_pending_workloads"
KUEUE_USAGE = "kueue_cluster_queue_resource_usage"
KUEUE_NOMINAL = "kueue_cluster_queue_nominal_quota"


def duration(seconds: float) -> str:
    """A PromQL duration from seconds: ``1800s``, or ``1500ms`` where there is a fraction of a second.

    Always whole digits and one unit, whatever the size: Prometheus parses ``<integer><unit>`` and
    refuses the exponent form that ``:g`` writes from a million seconds on (``1.2096e+06s`` for 14
    days), and rounding a fraction to whole seconds would send ``0s`` for half a second, which it
    refuses too. Milliseconds are the finest unit Prometheus keeps.
    """
    ms = int(round(seconds * 1000))
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


_STRING_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_RE2_SPECIAL = set("\\.+*?()|[]{}^$")


def quote(value: str) -> str:
    """``value`` as a PromQL double-quoted string literal: the one way any text enters a query.

    Kubernetes names and label values come from the cluster, and Prometheus label values may
    hold any character; unescaped, ``a"}) or vector(1) or ({x="`` would end the string and
    add series of its own. PromQL strings take Go's escapes, so ``\\``, ``"`` and control
    characters are escaped and everything else is literal.
    """
    out = []
    for ch in value:
        if ch in _STRING_ESCAPES:
            out.append(_STRING_ESCAPES[ch])
        elif ord(ch) < 0x20:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def matcher(label: str, value: str) -> str:
    """``label="value"`` with the value quoted (label names are ours, never the cluster's)."""
    return f"{label}={quote(value)}"


def any_of(label: str, values: Sequence[str]) -> str:
    """``label=~"v1|v2"`` matching exactly these values: each is a literal, not a regex
    (``nvidia.com/gpu`` must not match ``nvidiaXcom/gpu``)."""
    alternatives = "|".join("".join(f"\\{c}" if c in _RE2_SPECIAL else c for c in v) for v in values)
    return f"{label}=~{quote(alternatives)}"


def selector(metric: str, matchers: Sequence[LabelMatcher], *more: str) -> str:
    """``metric{...}`` with ``matchers`` (a setting's, each value quoted here) and ``more`` (already written ones);
    the bare name where there are none."""
    inside = [*(f"{label}{op}{quote(value)}" for label, op, value in matchers), *more]
    return f"{metric}{{{', '.join(inside)}}}" if inside else metric


def dcgm_series(m: MetricNames, metric: str, *more: str) -> str:
    """A GPU metric's selector: only the series ``dcgm_selector`` admits (the exporter's, where it names it)."""
    return selector(metric, m.dcgm_matchers, *more)


def vllm_series(m: MetricNames, metric: str, *more: str) -> str:
    """A serving metric's selector: only the series ``vllm_selector`` admits."""
    return selector(metric, m.vllm_matchers, *more)


def tag(expr: str, label: str, value: str) -> str:
    """Add a constant label (the source label does not exist, so the empty regex matches)."""
    return f'label_replace({expr}, "{label}", {quote(value)}, "gpuaas_none", "")'


def union(exprs: Sequence[str]) -> str:
    return " or ".join(f"({e})" for e in exprs)


def under(seconds: float) -> str:
    """A range one millisecond shorter than ``seconds``: ``[t - r, t]`` is closed at both ends (Prometheus 2), so a
    range of a whole sample interval at each step of a subquery at that interval would see some samples twice."""
    return f"{max(int(round(seconds * 1000)) - 1, 1)}ms"


def _copy(expr: str, dst: str, labels: Sequence[str]) -> str:
    # ``(?s)``: RE2's ``.`` stops at a newline, and a label value may hold one.
    for label in labels:
        expr = f'label_replace({expr}, "{dst}", "$1", "{label}", "(?s)(.+)")'
    return expr


def pod_source_labels(m: MetricNames) -> str:
    """The source labels ``normalise`` reads for a pod's identity, for a ``by`` clause: folding a
    pod's GPUs by them first leaves ``normalise`` one series a pod to relabel, not one a GPU
    (relabelling is most of what a range query over a large fleet costs)."""
    return ", ".join(dict.fromkeys([*m.pod_labels, *m.namespace_labels, *CONTAINER_LABELS]))


def normalise(expr: str, m: MetricNames) -> str:
    """Canonical ``gpuaas_pod``/``gpuaas_namespace``/``gpuaas_container``/``gpuaas_host`` labels."""
    first, rest = CONTAINER_LABELS[0], CONTAINER_LABELS[1:]
    expr = _copy(expr, "gpuaas_pod", m.pod_labels[:1])
    expr = _copy(expr, "gpuaas_namespace", m.namespace_labels[:1])
    expr = _copy(expr, "gpuaas_container", (first,))
    # The exporter's own pod is no workload: known by its container or its pod (the exporter's labels, never the
    # ``exported_*`` ones, which name the workload's pod and are copied after).
    for source, exporter in ((first, EXPORTER_CONTAINER), (m.pod_labels[0], EXPORTER_POD)):
        for dst in ("gpuaas_pod", "gpuaas_namespace", "gpuaas_container"):
            expr = f'label_replace({expr}, "{dst}", "", "{source}", "(?s){exporter}")'
    expr = _copy(expr, "gpuaas_pod", m.pod_labels[1:])
    expr = _copy(expr, "gpuaas_namespace", m.namespace_labels[1:])
    expr = _copy(expr, "gpuaas_container", rest)
    return _copy(expr, "gpuaas_host", m.hostname_labels)


def _by(keys: Sequence[str]) -> str:
    return ", ".join(keys)


class Signal(NamedTuple):
    """One of the two activity metrics, as the queries read it."""

    metric: str
    scale: float
    """Its full scale (``MetricNames.gpu_activity_full_scale``), the metric's whichever setting names it."""
    fallback: bool
    """Whether it is the fallback, read only for a GPU without the preferred metric."""
    selector: str
    """What a query reads it with: the metric and ``dcgm_selector``'s matchers (``dcgm_series``)."""


def signals(m: MetricNames) -> tuple[Signal, Signal]:
    """The preferred activity metric and the fallback, each with its scale."""
    return (Signal(m.gpu_activity, m.gpu_activity_full_scale, False, dcgm_series(m, m.gpu_activity)),
            Signal(m.gpu_util_fallback, m.gpu_util_fallback_full_scale, True, dcgm_series(m, m.gpu_util_fallback)))


def scaled(expr: str, scale: float) -> str:
    """``expr`` (readings of a metric, or a statistic of them that keeps their unit) at 0-1."""
    return expr if scale == 1 else f"{expr} / {scale:.12g}"


def _per_signal(make: Callable[[Signal], str], m: MetricNames, fallback: bool = True) -> str:
    """``make(signal)`` of the preferred activity metric, else of the fallback, per GPU series;
    the preferred one alone with ``fallback=False`` (``fallback_probe_query`` found no GPU needing
    the fallback: Prometheus evaluates both sides of ``or`` in full, the discarded one too)."""
    preferred, fallen_back = signals(m)
    first = tag(make(preferred), "gpuaas_signal", preferred.metric)
    if not fallback:
        return first
    return f"{first} or ignoring(gpuaas_signal) {tag(make(fallen_back), 'gpuaas_signal', fallen_back.metric)}"


def activity(fn: str, m: MetricNames, window: str, fallback: bool = True) -> str:
    """``fn`` (a statistic that keeps the unit: ``avg_over_time``, ``max_over_time``) of the preferred activity
    metric, else of the fallback, per GPU series, at 0-1 (each divided by its own scale)."""
    return _per_signal(lambda s: scaled(f"{fn}({s.selector}[{window}])", s.scale), m, fallback)


def fallback_probe_query(m: MetricNames, ranges_s: Sequence[float]) -> str:
    """How many GPU series have GPU_UTIL but not the preferred metric over any of the ranges (matched
    on their labels, as ``_per_signal``'s ``or`` matches them); no answer: none, and the cycle's
    queries leave GPU_UTIL out. Each query's ranges are among ``ranges_s`` or inside the longest."""
    preferred, fallen_back = signals(m)
    return union([f"count(present_over_time({fallen_back.selector}[{duration(r)}])"
                  f" unless present_over_time({preferred.selector}[{duration(r)}]))" for r in sorted(set(ranges_s))])


SCRAPE_LABELS = ("job", "instance")
"""Labels the scrape adds: a GPU's backfilled history lacks them, its live series has them."""


AGE_STEP_S = 240
"""Step of the subquery that finds samples older than the 5-minute lookback: any step under 300 s
sees every such sample (each stays visible for 5 minutes), so the newest one is found exactly."""


def last_sample_time(metric: str, window: str) -> str:
    """Per series, the time of its newest sample within the window: the instant selector finds one
    only within Prometheus's 5-minute lookback, older ones are found by a coarse subquery. A GPU's
    several series (history and live ones) are joined by the caller's ``min by`` on the age."""
    return f"(timestamp({metric}) or max_over_time(timestamp({metric})[{window}:{AGE_STEP_S}s]))"


DECISIVE_RUNG = int(MAX_GAP_INTERVALS) - 1
"""The rung whose bound, ``(k + 1)`` intervals, is the coverage rule's gap limit: the only one joined across
a GPU's series (see ``_gaps``), so that a GPU whose exporter came back under new labels is judged exactly."""


def _gap_rungs(window_s: float, sample_interval_s: float) -> list[int]:
    """The ladder's ranges, in sample intervals: 1, the coverage rule's decisive one, then doubling while
    shorter than the window (``[1, 2, 4, 8, 16]`` for 30 minutes at 60 s)."""
    rungs, k = [1, DECISIVE_RUNG], 4
    while k * sample_interval_s < window_s:
        rungs.append(k)
        k *= 2
    return sorted(set(rungs))


def _gaps(m: MetricNames, window_s: float, sample_interval_s: float, at: float, fallback: bool = True) -> str:
    """``gap`` per GPU (see ``gpu_activity_query``): a ladder of presence checks, no timestamps.

    Rung ``k``: at every step of a subquery at the sample interval, the series has a sample in the
    ``k`` intervals before the step. If it holds at every step, no two consecutive samples are more
    than ``k + 1`` intervals apart (a longer hole would contain a step whose whole range is empty),
    the first sample comes at most that long after the window's start and the newest is at most
    ``k`` intervals old; so ``(k + 1) x interval`` bounds the longest gap from above, and the
    smallest rung that holds is the answer (``or`` keeps the left, smaller one). A series with
    samples in the window that holds no rung (one that starts late, a hole half the window long)
    gets the window plus one interval.

    Why a ladder: ``present_over_time`` in a subquery walks each series once, while
    ``timestamp()`` in one re-reads every series at every step: at 16,000 GPUs the timestamp
    form took Prometheus 10 s a window, the ladder about 4 s. Rungs hold per series; a GPU's
    several series (history and live ones, an exporter restarted under a new ``instance``) are
    joined by the caller's ``min by``, an upper bound (more samples can only shorten a gap), and
    the decisive rung is also evaluated on their union (``max without`` the scrape labels at every
    step: the one rung that pays for it), so the rule passes such a GPU exactly when its samples
    together leave no longer gap.

    The fallback's rungs read only the series of GPUs without the preferred metric in the window
    (``unless``, matched on the exporter's labels): ``or`` would discard the rest.
    """
    w, step, i = duration(window_s), duration(sample_interval_s), sample_interval_s
    has_preferred = f"count_over_time({signals(m)[0].selector}[{w}] @ {at:.3f})"
    steps = f"scalar(count_over_time(vector(1)[{w}:{step}]))"

    def gap(signal: Signal) -> str:
        metric = signal.selector
        only = f" unless {has_preferred}" if signal.fallback else ""

        def rung(k: int, joined: bool) -> str:
            present = f"present_over_time({metric}[{duration(k * i)}]){only}"
            if joined:
                present = f"max without ({_by(SCRAPE_LABELS)}) ({present})"
            return f"(count_over_time(({present})[{w}:{step}]) == {steps}) * 0 + {(k + 1) * i:g}"

        ladder = [rung(k, joined=k == DECISIVE_RUNG) for k in _gap_rungs(window_s, i)]
        seen = f"(count_over_time({metric}[{w}]){only}) * 0 + {window_s + i:g}"
        return union([*ladder, seen])

    gaps = tag(f"({_per_signal(gap, m, fallback)})", "gpuaas_stat", "gap")
    # Series that still differ after normalising (history and live ones, both pod labels set, ...) are one
    # GPU: the smallest bound is the GPU's (more samples can only shorten a gap).
    return f"min by ({_by(GPU_KEYS)}, gpuaas_stat, gpuaas_signal) ({normalise(gaps, m)})"


def gpu_source_labels(m: MetricNames) -> str:
    """The labels ``normalise`` makes ``GPU_KEYS`` of, for a ``by`` clause: a GPU's series that differ only by the
    scrape (``job``, ``instance``, ``prometheus_replica``) are one under them."""
    return _by(list(dict.fromkeys([*GPU_IDENTITY, "modelName", *pod_source_labels(m).split(", "), *m.hostname_labels])))


def _samples_seen(m: MetricNames, window_s: float, sample_interval_s: float, fallback: bool = True) -> str:
    """Per GPU, its samples in the window, counted a sample interval at a time (the steps of a subquery at the
    interval) on its series merged: at each step the most any of them holds (``max by`` its
    ``gpu_source_labels``).

    Why merged per step: two series of one GPU that differ only by the scrape (an HA pair's
    ``prometheus_replica``, two jobs scraping one exporter) hold the same samples twice; added up, a feed at half
    the scrape rate would read as full coverage. A backfilled and a live series, or an exporter restarted under
    a new ``instance``, still add up, each in the steps it holds; and a late sample is still counted, in the
    step it fell in (counting the steps with a sample would miss one of two samples that share a step).
    """
    w, step, last = duration(window_s), duration(sample_interval_s), under(sample_interval_s)
    return _per_signal(lambda s: f"sum_over_time((max by ({gpu_source_labels(m)})"
                                 f" (count_over_time({s.selector}[{last}])))[{w}:{step}])", m, fallback)


def gpu_activity_query(m: MetricNames, window_s: float, sample_interval_s: float, at: float,
                       fallback: bool = True) -> str:
    """Per GPU over the window ending at ``at`` (Unix s): activity avg and max (0-1), coverage
    (observed/expected samples, ``_samples_seen``) and ``gap``, the longest stretch without a sample.

    ``gap`` is an upper bound, in whole sample intervals (``_gaps``): never smaller than the longest
    stretch between two samples, from the window's start to the first or from the newest to ``at``,
    and at most one interval larger where it matters (up to the coverage rule's limit); beyond that it
    only says how far over the limit. All aggregated in PromQL: one query per window.
    """
    w = duration(window_s)
    expected = max(window_s / sample_interval_s, 1.0)
    parts = [
        tag(f"({activity('avg_over_time', m, w, fallback=fallback)})", "gpuaas_stat", "activity_avg"),
        tag(f"({activity('max_over_time', m, w, fallback=fallback)})", "gpuaas_stat", "activity_max"),
    ]
    by = f"{_by(GPU_KEYS)}, gpuaas_stat, gpuaas_signal"
    # What is still apart after the merge (a GPU under ``Hostname``, then ``hostname``) is added up.
    seen = tag(_samples_seen(m, window_s, sample_interval_s, fallback), "gpuaas_stat", "coverage")
    counted = f"sum by ({by}) ({normalise(seen, m)})"
    coverage = f"clamp_max({counted} / {expected:g}, 1)"
    return (f"max by ({by}) ({normalise(union(parts), m)}) or {coverage}"
            f" or ({_gaps(m, window_s, sample_interval_s, at, fallback)})")


def device_query(m: MetricNames, xid_window_s: float, fallback: bool = True) -> str:
    """Per GPU, latest framebuffer used (MiB), power (W), temperature (C); last XID in the window; and
    ``age_s``, the seconds since the GPU's newest activity sample (within the window)."""
    window = duration(xid_window_s)
    age = _per_signal(lambda s: f"time() - {last_sample_time(s.selector, window)}", m, fallback)
    parts = [
        tag(dcgm_series(m, m.fb_used), "gpuaas_stat", "fb_used_mib"),
        tag(dcgm_series(m, m.power), "gpuaas_stat", "power_w"),
        tag(dcgm_series(m, m.temperature), "gpuaas_stat", "temperature_c"),
        tag(f"max_over_time({dcgm_series(m, m.xid_errors)}[{window}])", "gpuaas_stat", "xid"),
    ]
    newest = f"min by ({_by(GPU_KEYS)}, gpuaas_stat) ({normalise(tag(f'({age})', 'gpuaas_stat', 'age_s'), m)})"
    return f"max by ({_by(GPU_KEYS)}, gpuaas_stat) ({normalise(union(parts), m)}) or {newest}"


def kueue_once(expr: str, keys: str) -> str:
    """Kueue's gauge ``expr`` once per ``keys`` (what names one of its values), whatever the replicas.

    With leader election every Kueue replica exports the ClusterQueue gauges (kubernetes-sigs/kueue#6772),
    as ``replica_role="leader"`` and ``"follower"`` series under their own ``instance``: a ``sum`` over them
    counts a queue once per replica. Their values are the same cell's, so ``max`` keeps one."""
    return f"max by ({keys}) ({expr})"


def kueue_query() -> str:
    """Kueue's own gauges: pending workloads per ClusterQueue, usage and nominal quota per flavor/resource."""
    cells = "cluster_queue, flavor, resource"
    return union([
        tag(f"sum by (cluster_queue) ({kueue_once(KUEUE_PENDING, 'cluster_queue, status')})", "gpuaas_stat",
            "pending_workloads"),
        tag(kueue_once(KUEUE_USAGE, cells), "gpuaas_stat", "usage"),
        tag(kueue_once(KUEUE_NOMINAL, cells), "gpuaas_stat", "nominal"),
    ])


SERVER_IDENTITY = ("instance", "model_name", "engine")
"""With the pod's labels, what names one serving counter: ``engine`` (a pod's data-parallel vLLM engines count apart)
and ``instance`` (a StatefulSet pod recreated under its name has a new address and new counters); ``job`` and an HA
pair's replica label (``prometheus_replica``, ``replica``, ...) are not: copies that differ by the scrape are one."""


def one_per_server(expr: str, m: MetricNames, *labels: str) -> str:
    """``expr`` (an ``increase`` or ``rate`` per series) once per server (``SERVER_IDENTITY``, the pod's labels) and
    ``labels`` (``finished_reason``, ``le``), ``normalise``d. An HA pair nothing deduplicates (Thanos without a replica label, Mimir
    without its HA tracker, federation) holds each counter twice, and summed they doubled a pod's requests; the
    copies hold the same increase, so ``max`` keeps the counter's."""
    return normalise(f"max by ({pod_source_labels(m)}, {_by([*SERVER_IDENTITY, *labels])}) ({expr})", m)


def vllm_query(m: MetricNames, window_s: float) -> str:
    """Requests finished in the window by reason, and e2e latency bucket increases, per pod and model."""
    w = duration(window_s)
    who = "gpuaas_namespace, gpuaas_pod, model_name"

    def served(metric: str, label: str) -> str:
        return f"sum by ({who}, {label}) ({one_per_server(f'increase({vllm_series(m, metric)}[{w}])', m, label)})"

    return union([
        tag(served(m.vllm_request_success, "finished_reason"), "gpuaas_stat", "requests"),
        tag(served(f"{m.vllm_e2e_latency}_bucket", "le"), "gpuaas_stat", "latency_bucket"),
    ])


def staleness_query(m: MetricNames, window_s: float) -> str:
    """Seconds since the newest sample, per sub-source (kueue, vllm); absent when none.

    Kueue's is the age of its newest sample within ``window_s`` (``last_sample_time``): a scrape that stopped
    8 minutes ago is 480 s old, not absent as Prometheus' 5-minute lookback alone would make it, so the age
    is judged against ``collect.max_staleness_seconds``; absent means no sample in the whole window.
    The GPU telemetry's staleness is the smallest of the per-GPU ages that ``device_query`` already
    returns (``read_prometheus``): ``time() - max(timestamp(A or B))`` answered 0 whatever the age,
    because ``timestamp()`` of anything but a plain selector is the evaluation time.
    """
    return union([
        tag(f"time() - max({last_sample_time(KUEUE_PENDING, duration(window_s))})", "gpuaas_source", "kueue"),
        tag(f"time() - max(timestamp({vllm_series(m, m.vllm_request_success)}))", "gpuaas_source", "vllm"),
    ])


def priced_nodes_query(window: str) -> str:
    """How many nodes OpenCost priced in the ``window`` up to the evaluation time (``node_gpu_hourly_cost``, which
    it writes for every node; tagged ``gpuaas_stat="priced_nodes"``); no answer where OpenCost's metrics are not in
    Prometheus. It tells an OpenCost that priced nothing while pods held GPUs (a failed source) from no OpenCost."""
    return tag(f"count(max by (node) (max_over_time(node_gpu_hourly_cost[{window}])))", "gpuaas_stat", "priced_nodes")
