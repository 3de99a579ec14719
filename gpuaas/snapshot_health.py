"""Sources that answered with data no decision may use: the snapshot counts them failed, and says why.

An answer can be well formed and still not be evidence. ``untrusted_sources`` finds two such: OpenCost answering no
allocation at all while running pods held GPUs (it was not pricing: its silence is not $0), whether through its
allocation API or through its metrics in Prometheus (where no API is configured, and OpenCost's metrics priced
nodes in the window: without any of them OpenCost is not installed, and there is nothing it failed to say), and
Kueue's metrics in Prometheus whose newest sample is after the instant asked about (their age cannot be told), and
Prometheus itself where this worker's clock and Prometheus's disagree by more than ``CLOCK_SLACK_S`` (every window and
age is counted on the worker's clock; see ``clock_problem``). Each is a failed source of the snapshot, named in one line, so that the run is degraded and acts on nothing, as it
is when a source does not answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from gpuaas.errors import MalformedResponse, SourceError, redact_endpoint
from gpuaas.models import SourceStatus
from gpuaas.phrases import duration
from gpuaas.settings import GpuaasSettings
from gpuaas.sources.failures import describe_failure
from gpuaas.sources.opencost import NO_METRICS_ALLOCATION, PRICED_NODES
from gpuaas.sources.prometheus import KUEUE_PENDING, PrometheusReading

__all__ = ["CLOCK_SLACK_S", "KUEUE_METRICS", "clock_problem", "untrusted_sources"]

Readings = dict[str, tuple[Any, SourceStatus]]
KUEUE_METRICS = "kueue_metrics"
"""The snapshot's name for Kueue's own gauges in Prometheus, a source of their own where their age cannot be told."""
CLOCK_SLACK_S = 60.0
"""How far this worker's clock may be from Prometheus's before no data of the cycle is used: a minute, a tenth of the
default ``collect.max_staleness_seconds``. NTP keeps clocks within milliseconds; a minute apart is a clock not kept."""


def untrusted_sources(settings: GpuaasSettings, now: datetime, windows: Sequence[float],
                      readings: Readings) -> dict[str, SourceStatus]:
    """The failed status of each source whose answer cannot be used (by name; none when all can)."""
    found = {"opencost": _no_allocation(settings, now, windows, readings),
             KUEUE_METRICS: _kueue_metrics(settings, windows, readings),
             "prometheus": _clock(settings, readings)}
    return {name: status for name, status in found.items() if status is not None}


def _no_allocation(settings: GpuaasSettings, now: datetime, windows: Sequence[float],
                   readings: Readings) -> SourceStatus | None:
    """The OpenCost status of an answer with no allocation at all while running pods held GPUs: the allocation
    API's (``[]``, ``[null]``, ``[{}]``), or, where no API is configured, OpenCost's metrics in Prometheus pricing
    nodes (``PRICED_NODES``) and no ``container_gpu_allocation``. OpenCost was not pricing then (not running, or its
    own Prometheus without the data), and its silence would price what reclaim frees at nothing known. None when it
    answered something, nothing was held, or Prometheus holds none of OpenCost's metrics (no OpenCost to ask)."""
    costs, status = readings.get("opencost", (None, None))
    kube = readings.get("kube", (None, None))[0]
    if status is None or not status.ok or costs is None or not costs.empty:
        return None
    metrics = not settings.opencost_url
    if metrics and not (costs.attrs.get(PRICED_NODES, 0) > 0 and settings.prometheus_url):
        return None
    held = sum(p.gpus for p in getattr(kube, "pods", ()) if p.gpus > 0)  # OpenCost prices pods, not Workloads
    if held <= 0:
        return None
    end = now.astimezone(UTC)
    start = end - timedelta(minutes=max(windows, default=0.0))
    what = NO_METRICS_ALLOCATION if metrics else "no allocation"
    detail = (f"{what} for the window {start:%Y-%m-%d %H:%M} – {end:%Y-%m-%d %H:%M} UTC, while running pods "
              f"held {held:g} GPUs: their cost is unknown, not $0")
    url = settings.prometheus_url if metrics else (settings.opencost_url or "").rstrip("/") + "/allocation"
    return SourceStatus("opencost", ok=False, latency_s=status.latency_s, error=describe_failure(
        settings, "opencost", MalformedResponse(detail, source="opencost", url=url)))


def _kueue_metrics(settings: GpuaasSettings, windows: Sequence[float],
                   readings: Readings) -> SourceStatus | None:
    """A failed status for Kueue's metrics where Prometheus answered with a newest ``kueue_pending_workloads``
    sample after the instant asked about (a proxy rewriting answers, a broken clock: Prometheus selects no sample
    later than the evaluation time): the age is part of the freshness no action may lack
    (``collect.max_staleness_seconds``), and a negative one cannot be judged, so the snapshot is degraded and says
    why. None otherwise: a sample in the last ``KUEUE_SCRAPE_LOOKBACK_S`` has its age, judged as any staleness, and
    none at all is a cluster that does not scrape Kueue, which the flows do without (the preflight warns)."""
    prom, status = readings.get("prometheus", (None, None))
    if prom is None or status is None or not status.ok:
        return None
    age = prom.staleness.get("kueue")
    if age is None or age >= 0:
        return None
    where = f"Kueue metrics in Prometheus at {redact_endpoint(settings.prometheus_url or '')}"
    why = (f"the newest {KUEUE_PENDING} sample is {-age:.0f} s after the instant asked about: its age cannot be "
           "trusted (a proxy rewriting answers, or a broken clock)")
    return SourceStatus(KUEUE_METRICS, ok=False, error=f"{where}: {why}")


def clock_problem(reading: PrometheusReading | None) -> str | None:
    """Why the answers of a Prometheus whose ``Date`` headers put this worker's clock more than ``CLOCK_SLACK_S``
    from its own cannot be used, in words; None where the clocks agree, or no answer carried a ``Date``.

    The queries are evaluated at this worker's instant and the ages counted from it. A worker behind reads the
    telemetry of minutes ago as current: a workload busy since then reads idle, and its data fresh. One ahead reads
    every sample as old, and a collect would record the past as now."""
    bounds = reading.clock_ahead_s if reading is not None else None
    if bounds is None:
        return None
    low, high = bounds
    off = duration(round(abs(low + high) / 2))  # the middle of what the answers allow: whole seconds, each
    if low > CLOCK_SLACK_S:  # within the 200 characters a failure's words keep (``gpuaas.sources.failures``)
        return (f"this worker's clock runs about {off} ahead of Prometheus's (its Date header), so no age this "
                "cycle counts can be trusted; put both clocks right (NTP)")
    if high < -CLOCK_SLACK_S:
        return (f"this worker's clock runs about {off} behind Prometheus's (its Date header): it would read the "
                f"telemetry of {off} ago as current; put both clocks right (NTP)")
    return None


def _clock(settings: GpuaasSettings, readings: Readings) -> SourceStatus | None:
    """Prometheus failed, for this snapshot, where its clock and this worker's disagree (``clock_problem``)."""
    prom, status = readings.get("prometheus", (None, None))
    if status is None or not status.ok or (problem := clock_problem(prom)) is None:
        return None
    return SourceStatus("prometheus", ok=False, latency_s=status.latency_s, error=describe_failure(
        settings, "prometheus", SourceError(problem, source="prometheus", url=settings.prometheus_url)))
