"""Idle runs per workload from the fleet's Prometheus history: what the adaptive window learns from.

``gpuaas.sources.history`` reads the activity per pod, a chunk at a time; here each chunk is mapped
to workloads (pods through their Kueue Workload and its owner, as the snapshot links them; a pod
gpuaas cannot link stays itself, ``Pod ns/name``), reduced to one value per workload and step (the
maximum: a workload is idle only when all its pods are; a step in which one of its pods reported fewer
GPUs than it holds is no idle evidence, and is a gap like a missing sample), and fed to a
:class:`~gpuaas.policies.reclaim.RunStream` per threshold, which keeps per workload only its last
sample and open run. Memory is the chunks in hand (the one being mapped and the ones being read)
plus the idle runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import pandas as pd

from gpuaas.models import MAX_GAP_S
from gpuaas.policies.reclaim import RunStream
from gpuaas.settings import GpuaasSettings
from gpuaas.snapshot import workload_pods
from gpuaas.sources.history import pod_history
from gpuaas.sources.kube import read_kube

__all__ = ["HistoryReading", "read_activity_history", "read_fleet_history"]


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


def _per_workload(frame: pd.DataFrame, links: pd.DataFrame, key: str) -> pd.DataFrame:
    """One sample per workload and step: the maximum over its pods, and ``partial`` where one of its pods
    reported fewer GPUs than it holds (``links``' ``gpus``).

    A partial step's maximum bounds the reported GPUs only: at or below a threshold it is no evidence of
    idleness and is dropped as a missing sample would be (``_observed``); above it, it is busy whatever the
    others did. A pod gpuaas cannot link has no known GPU count and is read as it reports."""
    if frame.empty:
        return pd.DataFrame({"pod": pd.Series(dtype=object), "t": pd.Series(dtype=float),
                             "value": pd.Series(dtype=float), "partial": pd.Series(dtype=bool)})
    held = links.reindex(columns=["namespace", "pod", key, "gpus"]).drop_duplicates(["namespace", "pod"])
    mapped = frame.merge(held.rename(columns={"gpus": "gpus_held"}), on=["namespace", "pod"], how="left")
    mapped[key] = mapped[key].fillna("Pod " + mapped["namespace"] + "/" + mapped["pod"])
    seen = mapped["gpus_observed"] if "gpus_observed" in mapped else pd.Series(float("nan"), index=mapped.index)
    # A count the answer lacks is no proof that every GPU reported.
    mapped["partial"] = mapped["gpus_held"].notna() & ~(seen.astype(float) >= mapped["gpus_held"].astype(float))
    return (mapped.groupby([key, "t"], as_index=False, sort=False).agg(value=("value", "max"),
                                                                       partial=("partial", "any"))
            .rename(columns={key: "pod"}))


def _observed(frame: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """``frame`` less the partial steps that would read as idle at ``threshold``: a gap, like a missing sample."""
    return frame[~(frame["partial"] & (frame["value"] <= threshold))]


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
    streams = {float(t): RunStream(float(t), max(MAX_GAP_S, 2 * step_s)) for t in thresholds_pct}
    series = queries = samples = 0
    started = time.monotonic()
    for chunk in pod_history(settings, start, end, namespaces=namespaces, step_s=step_s, chunk_s=chunk_s):
        series = max(series, int(chunk.samples[["namespace", "pod"]].drop_duplicates().shape[0]))
        queries = chunk.queries
        frame = _per_workload(chunk.samples, links, key)
        samples += len(frame)
        for stream in streams.values():
            stream.add(_observed(frame, stream.threshold))
        if progress is not None and _tenth(chunk.index, chunk.count):
            progress(f"history chunk {chunk.index}/{chunk.count} (up to {chunk.end:%Y-%m-%d %H:%M}): {series} series, "
                     f"{samples:,} workload samples so far")
    return HistoryReading(streams, start, end, queries, series, time.monotonic() - started)


def _tenth(index: int, count: int) -> bool:
    """Whether chunk ``index`` of ``count`` ends a tenth of them (the first and last included): a progress line
    per chunk would be 2,160 lines for 90 days of history, most of them alike."""
    return index in (1, count) or index * 10 // count != (index - 1) * 10 // count


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
