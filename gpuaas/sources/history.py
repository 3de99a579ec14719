"""GPU activity history per workload from Prometheus: range queries in time chunks.

Why: the adaptive reclaim policy learns from each workload's past idle spells, and an
operator backtests a policy on the fleet's own history before switching to apply. Both
need the same thing: for every workload, its activity at 1-minute steps over days.

How it stays bounded:

* PromQL does the aggregation. One range query per time chunk (``chunk_s``, e.g. 6 h)
  returns one series per pod, the maximum over the pod's GPUs of the preferred activity
  metric's ``max_over_time`` over the step (falling back to GPU_UTIL / 100), with the
  label variants normalised as in collect. The number of queries is
  ``ceil(span / chunk_s)`` whatever the fleet size: never one per workload or GPU. A chunk
  Prometheus is too slow to answer (a read timeout, or its own query timeout) is asked again
  in halves, up to ``MAX_HALVINGS`` times, so a big fleet on a busy server still gets its
  history, at a few more queries.
* Each chunk is mapped to workloads (pods through their Kueue Workload and its owner, as
  the snapshot links them; a pod gpuaas cannot link stays itself, ``Pod ns/name``), reduced
  to one value per workload and step (the maximum: a workload is idle only when all its
  pods are), and fed to a :class:`~gpuaas.policies.run_stream.RunStream`, which keeps per
  workload only its last sample and open run. Memory is one chunk plus the idle runs.

Values are percent (0-100), the unit of the trace replay, so one replay serves both.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import pandas as pd

from gpuaas.errors import SourceUnavailable
from gpuaas.policies.replay import MAX_GAP_S
from gpuaas.policies.run_stream import RunStream
from gpuaas.settings import GpuaasSettings, MetricNames
from gpuaas.snapshot import workload_pods
from gpuaas.sources import _promql as q
from gpuaas.sources._prom_client import PromClient
from gpuaas.sources.kube import read_kube

__all__ = ["MAX_HALVINGS", "HistoryReading", "activity_history_query", "history_chunks", "query_range_halving",
           "read_activity_history", "read_fleet_history"]


@dataclass
class HistoryReading:
    """What the history pull produced: the idle runs and how they were obtained."""

    streams: dict[float, RunStream]
    """One per idle threshold (percent) asked for: every stream reads the same chunks."""
    start: datetime
    end: datetime
    queries: int
    series: int
    """Most pod series one chunk returned (free GPUs and other namespaces left out)."""
    seconds: float = 0.0
    """How long the range queries and their reduction took."""

    @property
    def stream(self) -> RunStream:
        """The only stream, when one threshold was asked for."""
        (only,) = self.streams.values()
        return only


def activity_history_query(m: MetricNames, step_s: float) -> str:
    """Per pod: the max over its GPUs of each GPU's activity maximum over the step (0-1)."""
    # A window one second shorter than the step: Prometheus 2 closes range selectors on both ends,
    # and a full-step window would also take the previous step's sample.
    expr = q.normalise(q._activity("max_over_time", m, q.duration(max(step_s - 1, 1))), m)  # noqa: SLF001
    return f"max by (gpuaas_namespace, gpuaas_pod) ({expr})"


def history_chunks(start: datetime, end: datetime, step_s: float, chunk_s: float) -> list[tuple[datetime, datetime]]:
    """Inclusive ``[a, b]`` ranges on the step grid that tile ``[start, end]`` without overlap."""
    first = math.ceil(start.timestamp() / step_s) * step_s
    last = math.floor(end.timestamp() / step_s) * step_s
    per_chunk = max(int(chunk_s // step_s), 1)
    out = []
    t = first
    while t <= last:
        b = min(t + (per_chunk - 1) * step_s, last)
        out.append((datetime.fromtimestamp(t, start.tzinfo), datetime.fromtimestamp(b, start.tzinfo)))
        t = b + step_s
    return out


MAX_HALVINGS = 3
"""A chunk is split at most into 2**3 pieces: past that, the server is down, not slow."""


def query_range_halving(prom: PromClient, expr: str, a: datetime, b: datetime, step_s: float,
                        halvings: int = MAX_HALVINGS) -> list[dict[str, object]]:
    """``prom.query_range`` over the inclusive grid ``[a, b]``, asked again in two halves when the
    answer is too slow to come. A series of both halves is two rows, which ``_chunk_frame`` adds up."""
    try:
        return prom.query_range(expr, a, b, step_s)
    except SourceUnavailable as exc:
        steps = round((b - a).total_seconds() / step_s) + 1
        if not exc.too_slow or halvings <= 0 or steps < 2:
            raise
    mid = a + timedelta(seconds=(steps // 2 - 1) * step_s)
    return [*query_range_halving(prom, expr, a, mid, step_s, halvings - 1),
            *query_range_halving(prom, expr, mid + timedelta(seconds=step_s), b, step_s, halvings - 1)]


def _chunk_frame(result: list[dict[str, object]], namespaces: Sequence[str]) -> pd.DataFrame:
    rows_ns: list[str] = []
    rows_pod: list[str] = []
    rows_t: list[float] = []
    rows_v: list[float] = []
    for series in result:
        labels = series["metric"]
        assert isinstance(labels, dict)
        pod, namespace = str(labels.get("gpuaas_pod", "")), str(labels.get("gpuaas_namespace", ""))
        if not pod or (namespaces and namespace not in namespaces):
            continue  # a free GPU, or a namespace the operator did not ask for
        values = series["values"]
        assert isinstance(values, list)
        for ts, value in values:
            v = float(value)
            if math.isnan(v):
                continue
            rows_ns.append(namespace)
            rows_pod.append(pod)
            rows_t.append(float(ts))
            rows_v.append(round(v * 100.0, 6))
    return pd.DataFrame({"namespace": rows_ns, "pod": rows_pod, "t": rows_t, "value": rows_v})


def _per_workload(frame: pd.DataFrame, links: pd.DataFrame, key: str) -> pd.DataFrame:
    """One sample per workload and step: the maximum over its pods."""
    if frame.empty:
        return pd.DataFrame({"pod": pd.Series(dtype=object), "t": pd.Series(dtype=float),
                             "value": pd.Series(dtype=float)})
    mapped = frame.merge(links[["namespace", "pod", key]].drop_duplicates(["namespace", "pod"]),
                         on=["namespace", "pod"], how="left")
    mapped[key] = mapped[key].fillna("Pod " + mapped["namespace"] + "/" + mapped["pod"])
    return (mapped.groupby([key, "t"], as_index=False, sort=False)["value"].max()
            .rename(columns={key: "pod"}))


def read_activity_history(
    settings: GpuaasSettings,
    start: datetime,
    end: datetime,
    *,
    links: pd.DataFrame,
    thresholds_pct: Sequence[float],
    key: str = "workload",
    namespaces: Sequence[str] = (),
    step_s: float = 60.0,
    chunk_s: float = 3600.0,
    progress: Callable[[str], None] | None = None,
) -> HistoryReading:
    """Pull ``[start, end]`` chunk by chunk into idle runs per workload (``links``: ``workload_pods``),
    one run stream per threshold.

    ``key`` is the ``links`` column that names a workload (``workload`` or ``uid``).
    Raises ``SourceError`` subclasses as the instant queries do.
    """
    expr = activity_history_query(settings.metrics, step_s)
    streams = {float(t): RunStream(float(t), max(MAX_GAP_S, 2 * step_s)) for t in thresholds_pct}
    chunks = history_chunks(start, end, step_s, chunk_s)
    prom = PromClient(settings)
    series = 0
    started = time.monotonic()
    try:
        for i, (a, b) in enumerate(chunks, 1):
            result = query_range_halving(prom, expr, a, b, step_s)
            samples = _chunk_frame(result, namespaces)
            series = max(series, int(samples[["namespace", "pod"]].drop_duplicates().shape[0]))
            frame = _per_workload(samples, links, key)
            del result
            for stream in streams.values():
                stream.add(frame)
            if progress is not None:
                progress(f"history chunk {i}/{len(chunks)} ({a:%Y-%m-%d %H:%M} .. {b:%H:%M}): "
                         f"{series} series, {len(frame):,} workload samples")
    finally:
        prom.close()
    return HistoryReading(streams, start, end, prom.queries, series, time.monotonic() - started)


def read_fleet_history(
    settings: GpuaasSettings,
    start: datetime,
    end: datetime,
    *,
    thresholds_pct: Sequence[float],
    key: str = "workload",
    namespaces: Sequence[str] = (),
    chunk_s: float = 3600.0,
    progress: Callable[[str], None] | None = None,
) -> tuple[HistoryReading, pd.DataFrame]:
    """The Kubernetes links (``workload_pods``, read now) and the history pulled through them."""
    started = time.monotonic()
    links = workload_pods(read_kube(settings))
    if progress is not None:
        progress(f"Kubernetes read in {time.monotonic() - started:.1f}s: {len(links)} GPU pods linked to "
                 f"{links['workload'].nunique()} workloads; reading "
                 f"{start:%Y-%m-%d %H:%M} .. {end:%Y-%m-%d %H:%M} UTC at 1-minute steps")
    reading = read_activity_history(settings, start, end, links=links, thresholds_pct=thresholds_pct, key=key,
                                    namespaces=namespaces, chunk_s=chunk_s, progress=progress)
    return reading, links
