"""Prometheus source: GPU activity per GPU and window, device health, Kueue gauges, vLLM traffic.

A fixed number of instant queries per cycle, ``2 * len(windows) + 4``, whatever the
fleet size (see ``_promql``): one probe for GPUs that only have GPU_UTIL (none: the other
queries leave it out), one activity query and one vLLM query per window, then one each for
device stats, Kueue gauges and staleness. Each query is evaluated at the
snapshot's ``now``.

Coverage is observed samples over expected samples (window / sample interval, capped at 1);
``longest_gap_s`` is the longest stretch of the window without a sample (between samples, before
the first one and after the newest one, which is the GPU's ``age_s``), so a GPU whose series
has a hole in the window is visibly partial even when most samples are there: missing data is
never read as idle (the rule that uses both: ``gpuaas.policies.reclaim.coverage``).

Activity is a duty cycle, 0 to 1 (``ACTIVITY_SCALE``), and is bounded here, before any arithmetic
(``bounded_activity``): a value below 0 is no reading a GPU can give (a recording rule that subtracts, a
``GPUAAS_METRICS__GPU_ACTIVITY`` naming another metric, a proxy rewriting answers), so it is kept as
evidence, floored at -1, and makes that GPU's window unknown, as NaN does (``worst_activity``), never idle;
a value above 1 (``+Inf``, ``1e308``) is busy, read as 1, fully active, so that no mean or sum overflows.
Serving counts are bounded the same way (``MAX_COUNT``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pandas as pd

from gpuaas.settings import GpuaasSettings
from gpuaas.sources import _promql as q
from gpuaas.sources._concurrent import at_once
from gpuaas.sources._prom_client import PromClient, sample_value

__all__ = [
    "ACTIVITY_SCALE",
    "GPU_COLUMNS",
    "KUEUE_PENDING",
    "KUEUE_SCRAPE_LOOKBACK_S",
    "MAX_COUNT",
    "WORST_ACTIVITY",
    "PrometheusReading",
    "bounded_activity",
    "fraction_under",
    "gpu_series_census",
    "pod_activity",
    "queries_per_cycle",
    "read_prometheus",
    "with_unknown_flag",
    "worst_activity",
]


KUEUE_PENDING = q.KUEUE_PENDING
"""Kueue's gauge of pending Workloads per ClusterQueue: present in Prometheus only where Kueue's metrics are scraped."""

_KEY_RENAME = {
    "gpuaas_host": "host", "gpu": "gpu", "modelName": "model", "GPU_I_ID": "gpu_instance",
    "gpuaas_namespace": "namespace", "gpuaas_pod": "pod", "gpuaas_container": "container",
}
KEYS = ["host", "gpu", "uuid", "model", "gpu_instance", "namespace", "pod", "container"]
STATS = ["activity_avg", "activity_max", "coverage", "gap"]
DEVICE_STATS = ["fb_used_mib", "power_w", "temperature_c", "xid", "age_s"]
GPU_COLUMNS = [*KEYS, "window_minutes", "activity_avg", "activity_max", "coverage", "longest_gap_s", "signal",
               *DEVICE_STATS]


@dataclass(frozen=True)
class PrometheusReading:
    """What Prometheus said this cycle; every frame is long/tidy and may be empty."""

    gpus: pd.DataFrame
    """One row per GPU (per pod on a shared GPU) and window: ``GPU_COLUMNS``."""
    kueue: pd.DataFrame
    """``cluster_queue, flavor, resource, stat (pending_workloads|usage|nominal), value``."""
    serving: pd.DataFrame
    """``namespace, pod, model_name, window_minutes, stat (requests|latency_bucket), finished_reason, le, value``."""
    staleness: dict[str, float] = field(default_factory=dict)
    queries: int = 0
    sample_interval_s: float = 15.0
    """The scrape interval the coverage and gap figures were computed against."""
    clock_ahead_s: tuple[float, float] | None = None
    """How far this worker's clock ran ahead of Prometheus's, (at least, at most) seconds, by the answers' ``Date``
    headers (``PromClient.clock_ahead_s``); None where none carried one."""


ACTIVITY_SCALE = 1.0
"""The top of the activity scale: ``DCGM_FI_PROF_*`` ratios are 0 to 1, and GPU_UTIL is divided by 100 in PromQL."""
INVALID_ACTIVITY = -1.0
"""Where a reading below 0 is floored: still below 0 (so still unknown), and finite, as the stored snapshot (JSON,
which has no infinity) and the reason that quotes it need."""
MAX_COUNT = 1e15
"""The most requests (or latency-bucket counts) one pod's series may add in one window: a million billion, which no
fleet serves; a larger count (``1e308``, ``+Inf``) is read as this, still "served requests", so sums never
overflow."""


def bounded_activity(values: pd.Series) -> pd.Series:
    """Activity readings as the decisions may use them: above the scale read as fully active (busy, never idle);
    below 0 floored at ``INVALID_ACTIVITY`` (unknown, see ``worst_activity``); NaN stays NaN (unknown)."""
    return pd.to_numeric(values, errors="coerce").astype(float).clip(INVALID_ACTIVITY, ACTIVITY_SCALE)


WORST_ACTIVITY = {"activity_max": ("activity_max", "max"), "activity_low": ("activity_max", "min"),
                  "activity_unknown": ("activity_unknown", "any")}
"""The named aggregations ``worst_activity`` reads: give them to ``.agg`` of a frame ``with_unknown_flag`` made."""


def with_unknown_flag(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with ``activity_unknown``, per row whether its ``activity_max`` is missing (for ``WORST_ACTIVITY``)."""
    return frame.assign(activity_unknown=frame["activity_max"].isna())


def worst_activity(aggregated: pd.DataFrame) -> pd.DataFrame:
    """The groups of ``WORST_ACTIVITY`` with one ``activity_max``: the maximum, unless a member cannot be trusted:
    NaN where any member is NaN (its samples held no value), else the lowest reading where any is below 0 (no duty
    cycle reads so). A pod's maximum over its GPUs, or a Workload's over its pods, must not let a quiet GPU speak
    for one whose reading is missing or impossible."""
    top, low = aggregated["activity_max"].astype(float), aggregated["activity_low"].astype(float)
    worst = top.where(~(low < 0), low).where(~aggregated["activity_unknown"].astype(bool))
    return aggregated.assign(activity_max=worst).drop(columns=["activity_low", "activity_unknown"])


LOOKBACK_S = 300.0
"""Prometheus' default ``--query.lookback-delta``."""
KUEUE_SCRAPE_LOOKBACK_S = 6 * 3600.0
"""How far back the age of Kueue's newest gauge sample is looked for: a scrape that stopped within it has its real
age (reported; no decision reads Kueue's gauges, so it holds no action back); none in it reads as a cluster that
does not scrape Kueue, which the flows do without (``gpuaas config preflight`` warns)."""


def queries_per_cycle(windows: Sequence[float]) -> int:
    return 2 * len(windows) + 4


def _gpu_rows(results: list[dict[str, Any]], extra: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for r in results:
        labels = r["metric"]
        row = {new: labels.get(old, "") for old, new in _KEY_RENAME.items()}
        row["uuid"] = labels.get("UUID") or labels.get("uuid", "")
        row.update(extra, stat=labels.get("gpuaas_stat", ""), signal=labels.get("gpuaas_signal", ""))
        row["value"] = sample_value(r)
        rows.append(row)
    return rows


def _wide(rows: list[dict[str, Any]], index: list[str], stats: list[str]) -> pd.DataFrame:
    if not rows:
        return pd.DataFrame(columns=[*index, *stats])
    frame = pd.DataFrame(rows)
    wide = frame.pivot_table(index=index, columns="stat", values="value", aggfunc="max").reset_index()
    wide.columns.name = None
    for stat in stats:
        if stat not in wide:
            wide[stat] = float("nan")
    return wide[[*index, *stats]]


def _gpu_frame(activity: list[dict[str, Any]], devices: list[dict[str, Any]]) -> pd.DataFrame:
    wide = _wide(activity, [*KEYS, "window_minutes"], STATS)
    if activity:
        signal = pd.DataFrame(activity).groupby(KEYS, as_index=False)["signal"].first()
        wide = wide.merge(signal, on=KEYS, how="left")
    else:
        wide["signal"] = pd.Series(dtype=object)
    dev = _wide(devices, KEYS, DEVICE_STATS)
    merged = wide.merge(dev, on=KEYS, how="outer") if len(dev) else wide.assign(**{s: float("nan") for s in DEVICE_STATS})
    merged["longest_gap_s"] = longest_gap(merged)
    for stat in ("activity_avg", "activity_max"):
        merged[stat] = bounded_activity(merged[stat])
    return merged.reindex(columns=GPU_COLUMNS).reset_index(drop=True)


def longest_gap(gpus: pd.DataFrame) -> pd.Series:
    """Per GPU and window: the longer of the gap inside the window (from its start) and the age.

    NaN where neither was measured (no series in the window): unknown, never "no gap".
    """
    parts = pd.concat([gpus["gap"].astype(float), gpus["age_s"].astype(float).clip(lower=0)], axis=1)
    return parts.max(axis=1, skipna=True).where(parts.notna().any(axis=1))


def _label_frame(results: list[dict[str, Any]], columns: list[str], extra: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for r in results:
        labels = r["metric"]
        row = {c: labels.get(c, "") for c in columns}
        row.update({k: labels.get(f"gpuaas_{k}", "") for k in ("namespace", "pod")})
        row.update(extra, stat=labels.get("gpuaas_stat", ""), value=sample_value(r))
        rows.append(row)
    return rows


def read_prometheus(
    settings: GpuaasSettings,
    now: datetime,
    windows_minutes: Sequence[float],
    *,
    sample_interval_s: float | None = None,
) -> PrometheusReading:
    """Run the cycle's queries at ``now``; raises ``SourceError`` subclasses on failure."""
    m = settings.metrics
    sample_interval_s = sample_interval_s or m.sample_interval_seconds
    prom = PromClient(settings)
    longest_s = max(windows_minutes) * 60
    fallback = True  # until the probe below says no GPU needs GPU_UTIL

    def per_window() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        activity: list[dict[str, Any]] = []
        serving: list[dict[str, Any]] = []
        for minutes in windows_minutes:
            extra = {"window_minutes": float(minutes)}
            query = q.gpu_activity_query(m, minutes * 60, sample_interval_s, now.timestamp(), fallback)
            activity += _gpu_rows(prom.query(query, now), extra)
            serving += _label_frame(
                prom.query(q.vllm_query(m, minutes * 60), now), ["model_name", "finished_reason", "le"], extra
            )
        return activity, serving

    def per_gpu_and_queue() -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, float]]:
        devices = _gpu_rows(prom.query(q.device_query(m, longest_s, fallback), now), {})
        kueue = _label_frame(prom.query(q.kueue_query(), now), ["cluster_queue", "flavor", "resource"], {})
        staleness = {
            r["metric"].get("gpuaas_source", ""): sample_value(r)
            for r in prom.query(q.staleness_query(m, max(longest_s + LOOKBACK_S, KUEUE_SCRAPE_LOOKBACK_S)), now)
        }
        return devices, kueue, staleness

    try:  # the windows' activity (the heaviest query) and the device query go out together
        # The device query's age looks back one lookback (5 min) past its window.
        fallback = bool(prom.query(q.fallback_probe_query(m, [*(w * 60 for w in windows_minutes),
                                                               longest_s + LOOKBACK_S]), now))
        (activity, serving), (devices, kueue, staleness) = at_once([per_window, per_gpu_and_queue])
    finally:
        prom.close()
    gpus = _gpu_frame(activity, devices)
    ages = gpus["age_s"].astype(float)
    if ages.notna().any():
        staleness["dcgm"] = float(ages.min())  # the newest GPU sample: the per-GPU ages, already fetched
    serving_cols = ["namespace", "pod", "model_name", "window_minutes", "stat", "finished_reason", "le", "value"]
    kueue_cols = ["cluster_queue", "flavor", "resource", "stat", "value"]
    return PrometheusReading(
        gpus=gpus,
        sample_interval_s=sample_interval_s,
        kueue=pd.DataFrame(kueue, columns=kueue_cols),
        serving=_bounded_counts(pd.DataFrame(serving, columns=serving_cols)),
        staleness=staleness,
        queries=prom.queries,
        clock_ahead_s=prom.clock_ahead_s,
    )


def _bounded_counts(serving: pd.DataFrame) -> pd.DataFrame:
    """The serving counts with anything past ``MAX_COUNT`` (``1e308``, ``+Inf``) read as it: still requests served,
    and a sum over pods or buckets stays finite (pandas warns on an overflow; 0 and NaN keep their meaning)."""
    return serving.assign(value=pd.to_numeric(serving["value"], errors="coerce").astype(float).clip(upper=MAX_COUNT))


def gpu_series_census(settings: GpuaasSettings, now: datetime) -> tuple[dict[str, int], dict[str, int]]:
    """The GPU activity metrics' series at ``now`` (metric -> count) and how many carry each configured pod label.

    What a preflight asks when no GPU workload has a sample: whether the metrics exist at all, and
    whether their series name pods with a label gpuaas reads. One query, plus one per pod label. Read as the collect
    reads them: only the series ``GPUAAS_METRICS__DCGM_SELECTOR`` selects, and a GPU's copies that differ only by the
    scrape (an HA pair's ``prometheus_replica``) counted once.
    """
    m = settings.metrics
    names = q.any_of("__name__", [m.gpu_activity, m.gpu_util_fallback])
    one_each = f"max by (__name__, {q.gpu_source_labels(m)})"
    prom = PromClient(settings)
    try:
        series = {str(r["metric"].get("__name__", "")): int(sample_value(r)) for r in prom.query(
            f"count by (__name__) ({one_each} ({q.selector('', m.dcgm_matchers, names)}))", now)}
        labelled = {}
        for label in (label for label in m.pod_labels if _LABEL_NAME.fullmatch(label)):
            named = q.selector("", m.dcgm_matchers, names, label + '!=""')
            answer = prom.query(f"count({one_each} ({named}))", now)
            labelled[label] = int(sample_value(answer[0])) if answer else 0
    finally:
        prom.close()
    return series, labelled


_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
"""A Prometheus label name: a configured one that is not cannot be asked about (and names no series)."""


def _devices(mapped: pd.DataFrame) -> pd.Series:
    """The GPU device of each row: ``UUID`` plus ``GPU_I_ID`` (empty for a whole GPU), NaN for none counted.

    dcgm-exporter labels a MIG instance with its parent GPU's ``UUID`` and its ``GPU_I_ID``, and a pod
    is given instances as it is given GPUs, so each instance is one device. A parent GPU's own series
    (no ``GPU_I_ID``) beside the pod's instances on it is no device of its own: it must not stand in
    for an instance that sent nothing.
    """
    instance = mapped["gpu_instance"].fillna("").astype(str)
    keys = [mapped["namespace"], mapped["pod"], mapped["window_minutes"], mapped["uuid"]]
    has_instances = (instance != "").groupby(keys, dropna=False).transform("any")
    device = mapped["uuid"].astype(object) + "/" + instance
    return device.where(mapped["uuid"].notna() & ~(has_instances & (instance == "")))


def pod_activity(gpus: pd.DataFrame) -> pd.DataFrame:
    """Per pod and window across its GPUs: mean of averages, max of maxima (unknown where a GPU's is unknown or
    below 0: ``worst_activity``), worst coverage, longest gap and oldest newest sample (infinite when a GPU's
    figure is missing: unknown is never "no gap"), and ``gpus_observed``, the GPU devices seen (a MIG instance
    counts as one, see ``_devices``). Activity is bounded first (``bounded_activity``), whoever built the frame."""
    mapped = gpus[(gpus["pod"].fillna("") != "") & gpus["window_minutes"].notna()]
    mapped = mapped.assign(**{col: pd.to_numeric(mapped[col], errors="coerce").fillna(float("inf"))
                              for col in ("longest_gap_s", "age_s")},
                           **{col: bounded_activity(mapped[col]) for col in ("activity_avg", "activity_max")})
    mapped = with_unknown_flag(mapped.assign(device=_devices(mapped)))
    return worst_activity(
        mapped.groupby(["namespace", "pod", "window_minutes"], as_index=False)
        .agg(
            activity_avg=("activity_avg", "mean"),
            **WORST_ACTIVITY,
            coverage=("coverage", "min"),
            longest_gap_s=("longest_gap_s", "max"),
            age_s=("age_s", "max"),
            gpus_observed=("device", "nunique"),
        )
    )


def fraction_under(serving: pd.DataFrame, threshold_s: float) -> pd.DataFrame:
    """Share of requests per pod/model/window whose e2e latency is within ``threshold_s``.

    Uses the largest histogram bucket bound at or below the threshold, so the share is never
    overstated when the SLO falls between bucket bounds.
    """
    hist = serving[serving["stat"] == "latency_bucket"].copy()
    keys = ["namespace", "pod", "model_name", "window_minutes"]
    if hist.empty:
        return pd.DataFrame(columns=[*keys, "requests", "within_slo", "fraction"])
    hist["bound"] = hist["le"].astype(float)
    total = hist[hist["bound"] == float("inf")].groupby(keys)["value"].sum().rename("requests")
    under = hist[hist["bound"] <= threshold_s]
    best = under[under["bound"] == under.groupby(keys)["bound"].transform("max")]
    within = best.groupby(keys)["value"].sum().rename("within_slo")
    out = pd.concat([total, within], axis=1).fillna({"within_slo": 0.0}).reset_index()
    out["fraction"] = out["within_slo"] / out["requests"].where(out["requests"] > 0)
    return out
