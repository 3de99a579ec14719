"""PromQL builders: every query gpuaas sends, as pure functions of the metric names.

The queries carry the aggregation (``avg_over_time``, ``max_over_time``,
``count_over_time``, ``sum by``) so the answer has one row per GPU (or per pod, or per
queue) whatever the fleet size, and the number of queries per cycle is fixed. Several
results are folded into one query with ``or``, each tagged with a ``gpuaas_stat`` label.

Label variants are normalised inside the query with ``label_replace`` into ``gpuaas_*``
labels: ``pod``/``exported_pod`` (later names in ``MetricNames.pod_labels`` win, because
``exported_*`` only exists when the exporter's own label lost the collision), the same for
namespaces and ``Hostname``/``hostname``. A series whose ``pod`` is the dcgm-exporter pod
itself (``honorLabels: true`` on an unallocated GPU) gets no pod.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuaas.settings import MetricNames

__all__ = [
    "GPU_KEYS",
    "any_of",
    "device_query",
    "duration",
    "gpu_activity_query",
    "kueue_query",
    "matcher",
    "quote",
    "staleness_query",
    "tag",
    "union",
    "vllm_query",
]

GPU_KEYS = ("gpuaas_host", "gpu", "UUID", "uuid", "modelName", "GPU_I_ID",
            "gpuaas_namespace", "gpuaas_pod", "gpuaas_container")
EXPORTER_CONTAINER = ".*dcgm-exporter.*"
CONTAINER_LABELS = ("container", "exported_container")
KUEUE_PENDING = "kueue_pending_workloads"
KUEUE_USAGE = "kueue_cluster_queue_resource_usage"
KUEUE_NOMINAL = "kueue_cluster_queue_nominal_quota"


def duration(seconds: float) -> str:
    """A PromQL duration (``1800s``) from seconds."""
    return f"{int(round(seconds))}s"


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


def tag(expr: str, label: str, value: str) -> str:
    """Add a constant label (the source label does not exist, so the empty regex matches)."""
    return f'label_replace({expr}, "{label}", {quote(value)}, "gpuaas_none", "")'


def union(exprs: Sequence[str]) -> str:
    return " or ".join(f"({e})" for e in exprs)


def _copy(expr: str, dst: str, labels: Sequence[str]) -> str:
    # ``(?s)``: RE2's ``.`` stops at a newline, and a label value may hold one.
    for label in labels:
        expr = f'label_replace({expr}, "{dst}", "$1", "{label}", "(?s)(.+)")'
    return expr


def normalise(expr: str, m: MetricNames) -> str:
    """Canonical ``gpuaas_pod``/``gpuaas_namespace``/``gpuaas_container``/``gpuaas_host`` labels."""
    first, rest = CONTAINER_LABELS[0], CONTAINER_LABELS[1:]
    expr = _copy(expr, "gpuaas_pod", m.pod_labels[:1])
    expr = _copy(expr, "gpuaas_namespace", m.namespace_labels[:1])
    expr = _copy(expr, "gpuaas_container", (first,))
    for dst in ("gpuaas_pod", "gpuaas_namespace", "gpuaas_container"):
        expr = f'label_replace({expr}, "{dst}", "", "{first}", "{EXPORTER_CONTAINER}")'
    expr = _copy(expr, "gpuaas_pod", m.pod_labels[1:])
    expr = _copy(expr, "gpuaas_namespace", m.namespace_labels[1:])
    expr = _copy(expr, "gpuaas_container", rest)
    return _copy(expr, "gpuaas_host", m.hostname_labels)


def _by(keys: Sequence[str]) -> str:
    return ", ".join(keys)


def _activity(fn: str, m: MetricNames, window: str, percent: bool = True) -> str:
    """``fn`` of the preferred activity metric, else of GPU_UTIL (scaled from percent), per GPU series."""
    util = f"{fn}({m.gpu_util_fallback}[{window}])" + (" / 100" if percent else "")
    return (
        f"{tag(f'{fn}({m.gpu_activity}[{window}])', 'gpuaas_signal', m.gpu_activity)}"
        f" or ignoring(gpuaas_signal) {tag(util, 'gpuaas_signal', m.gpu_util_fallback)}"
    )


def gpu_activity_query(m: MetricNames, window_s: float, sample_interval_s: float) -> str:
    """Per GPU over one window: activity avg and max (0-1) and coverage (observed/expected samples)."""
    w = duration(window_s)
    expected = max(window_s / sample_interval_s, 1.0)
    parts = [
        tag(f"({_activity('avg_over_time', m, w)})", "gpuaas_stat", "activity_avg"),
        tag(f"({_activity('max_over_time', m, w)})", "gpuaas_stat", "activity_max"),
        tag(
            f"clamp_max(({_activity('count_over_time', m, w, percent=False)}) / {expected:g}, 1)",
            "gpuaas_stat", "coverage",
        ),
    ]
    return f"max by ({_by(GPU_KEYS)}, gpuaas_stat, gpuaas_signal) ({normalise(union(parts), m)})"


def device_query(m: MetricNames, xid_window_s: float) -> str:
    """Per GPU, latest framebuffer used (MiB), power (W), temperature (C); last XID in the window."""
    parts = [
        tag(m.fb_used, "gpuaas_stat", "fb_used_mib"),
        tag(m.power, "gpuaas_stat", "power_w"),
        tag(m.temperature, "gpuaas_stat", "temperature_c"),
        tag(f"max_over_time({m.xid_errors}[{duration(xid_window_s)}])", "gpuaas_stat", "xid"),
    ]
    return f"max by ({_by(GPU_KEYS)}, gpuaas_stat) ({normalise(union(parts), m)})"


def kueue_query() -> str:
    """Kueue's own gauges: pending workloads per ClusterQueue, usage and nominal quota per flavor/resource."""
    cells = "cluster_queue, flavor, resource"
    return union([
        tag(f"sum by (cluster_queue) ({KUEUE_PENDING})", "gpuaas_stat", "pending_workloads"),
        tag(f"sum by ({cells}) ({KUEUE_USAGE})", "gpuaas_stat", "usage"),
        tag(f"sum by ({cells}) ({KUEUE_NOMINAL})", "gpuaas_stat", "nominal"),
    ])


def vllm_query(m: MetricNames, window_s: float) -> str:
    """Requests finished in the window by reason, and e2e latency bucket increases, per pod and model."""
    w = duration(window_s)
    who = "gpuaas_namespace, gpuaas_pod, model_name"
    return union([
        tag(
            f"sum by ({who}, finished_reason) ({normalise(f'increase({m.vllm_request_success}[{w}])', m)})",
            "gpuaas_stat", "requests",
        ),
        tag(
            f"sum by ({who}, le) ({normalise(f'increase({m.vllm_e2e_latency}_bucket[{w}])', m)})",
            "gpuaas_stat", "latency_bucket",
        ),
    ])


def staleness_query(m: MetricNames) -> str:
    """Seconds since the newest sample, per sub-source (dcgm, kueue, vllm); absent when none."""
    return union([
        tag(f"time() - max(timestamp({m.gpu_activity} or {m.gpu_util_fallback}))", "gpuaas_source", "dcgm"),
        tag(f"time() - max(timestamp({KUEUE_PENDING}))", "gpuaas_source", "kueue"),
        tag(f"time() - max(timestamp({m.vllm_request_success}))", "gpuaas_source", "vllm"),
    ])
