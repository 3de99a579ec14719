"""GPU activity history per pod from Prometheus: range queries in time chunks.

Why: the adaptive reclaim policy learns from each workload's past idle spells, and an
operator backtests a policy on the fleet's own history before switching to apply. Both
need the same thing: for every workload, its activity at 1-minute steps over days. This
module reads it per pod, a chunk at a time; ``gpuaas.idle_history`` maps the pods to their
workloads and turns the chunks into idle runs.

How it stays bounded:

* PromQL does the aggregation. One range query per time chunk (``chunk_s``, e.g. 6 h)
  returns two series per pod: the maximum over the pod's GPUs of the preferred activity
  metric's ``max_over_time`` over the step (falling back to GPU_UTIL, each over its own
  scale), and how many of its GPUs (devices: a MIG instance is one) had a sample in the step
  (a step in which some did not is no evidence of idleness), with the label variants
  normalised as in collect (after the GPUs are folded to pods: relabelling every GPU series
  at every step was most of the query's time). The count roughly doubles the query's time
  in Prometheus (the per-GPU selection is evaluated once per fold), not the number of
  queries. The number of queries is
  ``ceil(span / chunk_s)`` whatever the fleet size: never one per workload or GPU. No chunk
  asks for more than ``MAX_POINTS`` steps, the most a range query may hold (a longer ``chunk_s``
  is split). A chunk Prometheus is too slow to answer (a read timeout, or its own query
  timeout), or refuses as over one of its limits (samples, series, chunks), is asked again
  in halves, up to ``MAX_HALVINGS`` times, so a big fleet on a busy server still gets its
  history, at a few more queries.
* Chunks are yielded one at a time, in order, while the next one is being asked for
  (``PROMQL_AT_ONCE`` queries in flight: Prometheus evaluates each on one core): memory is
  that many chunks.

Values are percent (0-100), the unit of the trace replay, so one replay serves both.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

import pandas as pd

from gpuaas.errors import SourceError
from gpuaas.settings import GpuaasSettings, MetricNames
from gpuaas.sources import _promql as q
from gpuaas.sources._concurrent import PROMQL_AT_ONCE
from gpuaas.sources._prom_client import MAX_POINTS, PromClient, smaller_may_answer

__all__ = ["GPUS_SERIES", "MAX_HALVINGS", "MAX_POINTS", "HistoryChunk", "RangeQueries", "activity_history_query",
           "history_chunks", "pod_history", "query_range_halving"]


@dataclass(frozen=True)
class HistoryChunk:
    """One chunk's samples per pod (``namespace``, ``pod``, ``t``, ``value`` in percent, ``gpus_observed``: its GPUs
    that reported in the step) and where it lies."""

    index: int
    """1-based, of ``count``."""
    count: int
    start: datetime
    end: datetime
    samples: pd.DataFrame
    queries: int
    """Range queries asked so far, this chunk's included (more than one a chunk when it was halved)."""


GPUS_SERIES = "gpus"
"""The ``gpuaas_stat`` label of a pod's second series in the history query: how many of its GPUs (devices, not
series) had a sample in the step (its first series, without the label, is the activity)."""


def activity_history_query(m: MetricNames, step_s: float) -> str:
    """Per pod: the max over its GPUs of each GPU's activity maximum over the step (0-1), and, tagged
    ``gpuaas_stat="gpus"``, how many of its GPUs had a sample in the step.

    The activity-or-GPU_UTIL choice is made per GPU series and step; the GPUs are then folded by
    the labels that name their pod before those are normalised, which gives the same maximum
    with one series a pod to relabel at every step instead of one a GPU. The count is what tells a
    pod with 4 GPUs of which 2 reported apart from one whose 4 did: the maximum of 2 idle GPUs says
    nothing of the other 2. It counts devices, not series: a GPU's series that differ only by the
    scrape (an HA pair's ``prometheus_replica``, two jobs scraping one exporter, a backfilled and a live
    series) are merged first (``max by`` its identity, ``GPU_IDENTITY``, and its pod's labels), or one
    GPU seen twice would stand in for another that sent nothing. It is asked in the same query (one
    request a chunk, as before); Prometheus evaluates the per-GPU selection once for each of the two folds."""
    # A window one second shorter than the step: Prometheus 2 closes range selectors on both ends,
    # and a full-step window would also take the previous step's sample.
    per_gpu = q.activity("max_over_time", m, q.duration(max(step_s - 1, 1)))
    pod = q.pod_source_labels(m)
    devices = f"max by ({', '.join(q.GPU_IDENTITY)}, {pod}) ({per_gpu})"

    def per_pod(fold: str, of: str, across_label_variants: str) -> str:
        folded = q.normalise(f"{fold} by ({pod}) ({of})", m)
        return f"{across_label_variants} by (gpuaas_namespace, gpuaas_pod) ({folded})"

    # A pod's GPUs may come under two label variants (pod, exported_pod): maxima are folded by max, counts added.
    return (f"{per_pod('max', per_gpu, 'max')}"
            f" or {q.tag(per_pod('count', devices, 'sum'), 'gpuaas_stat', GPUS_SERIES)}")


def history_chunks(start: datetime, end: datetime, step_s: float, chunk_s: float) -> list[tuple[datetime, datetime]]:
    """Inclusive ``[a, b]`` ranges on the step grid that tile ``[start, end]`` without overlap, each of at most
    ``MAX_POINTS`` steps."""
    first = math.ceil(start.timestamp() / step_s) * step_s
    last = math.floor(end.timestamp() / step_s) * step_s
    per_chunk = min(max(int(chunk_s // step_s), 1), MAX_POINTS)
    out = []
    t = first
    while t <= last:
        b = min(t + (per_chunk - 1) * step_s, last)
        out.append((datetime.fromtimestamp(t, start.tzinfo), datetime.fromtimestamp(b, start.tzinfo)))
        t = b + step_s
    return out


MAX_HALVINGS = 3
"""A chunk is split at most into 2**3 pieces: past that, the server is down or its limits far too small."""


class RangeQueries(Protocol):
    """What :func:`query_range_halving` asks: a :class:`PromClient`, or anything that answers as one."""

    def query_range(self, expr: str, start: datetime, end: datetime, step_s: float) -> list[dict[str, Any]]: ...


def query_range_halving(prom: RangeQueries, expr: str, a: datetime, b: datetime, step_s: float,
                        halvings: int = MAX_HALVINGS) -> list[dict[str, Any]]:
    """``prom.query_range`` over the inclusive grid ``[a, b]``, asked again in two halves when the
    answer is too slow to come or refused as over a query limit (``smaller_may_answer``): half the
    range reads about half the samples and chunks. A series of both halves is two rows, which
    ``_chunk_frame`` adds up."""
    try:
        return prom.query_range(expr, a, b, step_s)
    except SourceError as exc:
        steps = round((b - a).total_seconds() / step_s) + 1
        if not smaller_may_answer(exc) or halvings <= 0 or steps < 2:
            raise
    mid = a + timedelta(seconds=(steps // 2 - 1) * step_s)
    return [*query_range_halving(prom, expr, a, mid, step_s, halvings - 1),
            *query_range_halving(prom, expr, mid + timedelta(seconds=step_s), b, step_s, halvings - 1)]


def _chunk_frame(result: list[dict[str, object]], namespaces: Sequence[str]) -> pd.DataFrame:
    """``namespace, pod, t, value`` (percent) and ``gpus_observed`` (its GPUs with a sample in the step;
    NaN where the answer has no count for it) per pod and step with a value."""
    rows: dict[str, list[tuple[str, str, float, float]]] = {"": [], GPUS_SERIES: []}
    for series in result:
        labels = series["metric"]
        assert isinstance(labels, dict)
        pod, namespace = str(labels.get("gpuaas_pod", "")), str(labels.get("gpuaas_namespace", ""))
        if not pod or (namespaces and namespace not in namespaces):
            continue  # a free GPU, or a namespace the operator did not ask for
        values = series["values"]
        assert isinstance(values, list)
        out = rows.get(str(labels.get("gpuaas_stat", "")))
        if out is not None:
            out.extend((namespace, pod, float(ts), v) for ts, value in values if not math.isnan(v := float(value)))
    keys = ["namespace", "pod", "t"]
    frame = pd.DataFrame(rows[""], columns=[*keys, "value"])
    frame["value"] = (frame["value"] * 100.0).round(6)
    # One count a pod and step (the halves of a halved chunk do not overlap): never a second activity row.
    seen = pd.DataFrame(rows[GPUS_SERIES], columns=[*keys, "gpus_observed"]).drop_duplicates(keys)
    return frame.merge(seen, on=keys, how="left")


def pod_history(
    settings: GpuaasSettings,
    start: datetime,
    end: datetime,
    *,
    namespaces: Sequence[str] = (),
    step_s: float = 60.0,
    chunk_s: float = 3600.0,
) -> Iterator[HistoryChunk]:
    """``[start, end]`` chunk by chunk, one series per pod holding GPUs (free GPUs and namespaces not
    in ``namespaces``, when given, left out). Raises ``SourceError`` subclasses as the instant queries do."""
    expr = activity_history_query(settings.metrics, step_s)
    chunks = history_chunks(start, end, step_s, chunk_s)
    prom = PromClient(settings)

    def fetch(a: datetime, b: datetime) -> tuple[pd.DataFrame, int]:
        counted = _Counted(prom)
        return _chunk_frame(query_range_halving(counted, expr, a, b, step_s), namespaces), counted.queries

    pool = ThreadPoolExecutor(max_workers=PROMQL_AT_ONCE, thread_name_prefix="gpuaas-history")
    in_flight: deque[Future[tuple[pd.DataFrame, int]]] = deque()
    upcoming = iter(chunks)
    queries = 0
    try:
        for i, (a, b) in enumerate(chunks, 1):
            while len(in_flight) < PROMQL_AT_ONCE and (ahead := next(upcoming, None)) is not None:
                in_flight.append(pool.submit(fetch, *ahead))
            samples, asked = in_flight.popleft().result()
            queries += asked
            yield HistoryChunk(i, len(chunks), a, b, samples, queries)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        prom.close()


class _Counted:
    """A client's range queries, counted for one chunk (the client's own count runs across the
    chunks in flight, so it cannot say which chunk was halved)."""

    def __init__(self, prom: PromClient) -> None:
        self._prom = prom
        self.queries = 0

    def query_range(self, expr: str, start: datetime, end: datetime, step_s: float) -> list[dict[str, Any]]:
        self.queries += 1
        return self._prom.query_range(expr, start, end, step_s)
