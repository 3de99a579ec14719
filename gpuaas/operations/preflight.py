"""Preflight: whether the settings reach every source, and whether what is there is what gpuaas needs.

Set up on a new cluster, gpuaas fails safe in ways a collect reports only as numbers: a DCGM metric
renamed by the install, or a dcgm-exporter that does not label its series with the pod, leaves every
GPU workload ``unknown`` (never idle: nothing is ever reclaimed, and nothing says why). A preflight
reads each source once, as a collect does, and says per check what holds and what to set where it
does not. It writes nothing: no snapshot is stored, the database is opened read-only.

The checks are pure functions of what was read (``kube_check``, ``telemetry_check``...), callable in
a REPL; ``preflight`` does the reading. A GPU workload without telemetry leads to at most a few
instant queries that find out why (``census``): whether the metrics exist, and which of the pod
labels their series carry.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import pandas as pd

from gpuaas.errors import StoreError
from gpuaas.models import SourceStatus
from gpuaas.permissions import READS, ROLES, WRITES, Access, allowed
from gpuaas.policy import Mode
from gpuaas.settings import GpuaasSettings, MetricNames
from gpuaas.snapshot import SOURCES, assemble_snapshot, failed_source, read_source, snapshot_windows
from gpuaas.sources.kube import KubeState

__all__ = ["Check", "Outcome", "SeriesCensus", "applying", "census", "database_check", "kube_check",
           "permissions_check", "preflight", "prometheus_check", "pushgateway_check", "source_check",
           "telemetry_check"]


class Outcome(StrEnum):
    ok = "ok"
    warning = "warning"
    failed = "failed"
    skipped = "skipped"


@dataclass(frozen=True)
class Check:
    """One thing the preflight looked at: what, how it went, and in words what was found or what to set."""

    name: str
    outcome: Outcome
    detail: str


@dataclass(frozen=True)
class SeriesCensus:
    """What Prometheus holds of the GPU activity metrics: series per metric, and per pod label."""

    series: dict[str, int]
    """Metric name -> how many series of it there are now (absent: none)."""
    labelled: dict[str, int]
    """Pod label -> how many of those series carry it."""


_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def source_check(name: str, status: SourceStatus) -> Check:
    """A source answered, or its failure in the words a degraded collect leads with."""
    if status.ok:
        return Check(name, Outcome.ok, f"answered in {status.latency_s:.2f} s")
    return Check(name, Outcome.failed, status.error or "no answer")


def prometheus_check(status: SourceStatus, max_staleness_s: float) -> Check:
    """Prometheus answered with data fresh enough to act on (``collect.max_staleness_seconds``): the age is the
    stalest of its newest DCGM, Kueue and vLLM samples, as the reclaim flow reads it."""
    name = "Prometheus"
    if not status.ok or status.staleness_s is None:
        return source_check(name, status)
    age = f"answered in {status.latency_s:.2f} s, its data {status.staleness_s:.0f} s old"
    if status.staleness_s > max_staleness_s:
        return Check(name, Outcome.failed, f"{age}, over the {max_staleness_s:.0f} s collect.max_staleness_seconds "
                                           "allows: no action is taken on it (is the scrape failing?)")
    return Check(name, Outcome.ok, age)


def kube_check(state: KubeState | None, status: SourceStatus) -> Check:
    """The Kubernetes API answered, Kueue is served, and what gpuaas can act on is installed."""
    name = "Kubernetes API and Kueue"
    if state is None:
        return source_check(name, status)
    if state.kueue_version is None:
        return Check(name, Outcome.failed, "the API answers, but Kueue is not served (no kueue.x-k8s.io/v1beta2 or "
                                           "v1beta1): install Kueue v0.15 or newer")
    found = (f"kueue.x-k8s.io/{state.kueue_version}: {len(state.cluster_queues)} ClusterQueues, "
             f"{len(state.local_queues)} LocalQueues, {len(state.workloads)} Workloads")
    missing = f"; not installed: {', '.join(state.not_installed)} (not reclaimed)" if state.not_installed else ""
    if state.kueue_version != "v1beta2":
        return Check(name, Outcome.warning, f"{found}{missing}; only {state.kueue_version} is served, read as a "
                                            "fallback: Kueue v0.15 or newer serves v1beta2")
    if not state.cluster_queues:
        return Check(name, Outcome.warning,
                     f"{found}{missing}: no ClusterQueue, so no quota to plan or backlog to read")
    return Check(name, Outcome.ok, f"{found}{missing}")


def telemetry_check(workloads: pd.DataFrame, metrics: MetricNames, found: SeriesCensus | None) -> Check:
    """Whether the GPU workloads holding GPUs have DCGM samples: without, they stay ``unknown``, never idle.

    ``found`` is the census, taken only where no workload has a sample (the case a setting fixes).
    """
    name = "GPU telemetry"
    holding = workloads[workloads["telemetry"] != "n/a"] if "telemetry" in workloads else workloads.iloc[0:0]
    if holding.empty:
        return Check(name, Outcome.skipped, "no workload holds GPUs now: nothing to match telemetry to")
    unknown = holding[holding["telemetry"] == "unknown"]
    unseen = int((holding["gpus_observed"].fillna(0) == 0).sum())
    total = len(holding)
    names = f"{metrics.gpu_activity} or {metrics.gpu_util_fallback}"
    if unknown.empty:
        return Check(name, Outcome.ok, f"{total} of {total} GPU workloads have complete telemetry ({names})")
    if unseen < total or found is None:
        shown = [_owner(row) for row in unknown.head(3).itertuples()]
        more = f" and {len(unknown) - len(shown)} more" if len(unknown) > len(shown) else ""
        return Check(name, Outcome.warning, f"{len(unknown)} of {total} GPU workloads have incomplete telemetry in "
                                            f"the window ({', '.join(shown)}{more}; {unseen} with no sample of "
                                            f"{names} at all): they stay unknown, never counted as idle")
    if not found.series:
        return Check(name, Outcome.failed, f"no series of {names} in Prometheus: is dcgm-exporter scraped? A renamed "
                                           "metric is set with GPUAAS_METRICS__GPU_ACTIVITY and "
                                           "GPUAAS_METRICS__GPU_UTIL_FALLBACK")
    series = sum(found.series.values())
    labels = ", ".join(metrics.pod_labels)
    if not any(found.labelled.values()):
        return Check(name, Outcome.failed, f"the {series} series of {names} carry none of the pod labels {labels}: "
                                           "set GPUAAS_METRICS__POD_LABELS to the label that names the pod "
                                           "(dcgm-exporter maps GPUs to pods with its Kubernetes option)")
    return Check(name, Outcome.failed, f"none of the {total} GPU workloads' pods is named by the {series} series of "
                                       f"{names} (labels {labels}, namespace labels "
                                       f"{', '.join(metrics.namespace_labels)}): check GPUAAS_METRICS__POD_LABELS "
                                       "and GPUAAS_METRICS__NAMESPACE_LABELS")


def _owner(row: Any) -> str:
    """``Deployment platform/embed-batch``: the object an operator knows, else the Workload."""
    kind, name = (row.owner_kind, row.owner_name) if isinstance(row.owner_name, str) and row.owner_name else (
        row.kind, row.name)
    return f"{kind} {row.namespace}/{name}"


def _few(accesses: Sequence[Access]) -> str:
    shown = ", ".join(str(a) for a in accesses[:3])
    return shown + (f" and {len(accesses) - 3} more" if len(accesses) > 3 else "")


def permissions_check(answers: Mapping[Access, bool], writes_of: Sequence[str]) -> Check:
    """The reads every flow makes, and the writes of ``writes_of`` (the flows that apply), each allowed or not;
    a refusal names the shipped role that grants it."""
    name = "permissions"
    problems = []
    refused = [a for a in READS if not answers[a]]
    if refused:
        problems.append(f"{len(refused)} of the {len(READS)} reads every flow makes are refused ({_few(refused)}): "
                        f"bind {ROLES['reads']}")
    for flow in writes_of:
        refused = [a for a in WRITES[flow] if not answers[a]]
        if refused:
            problems.append(f"{flow} would write, but {_few(refused)} {'is' if len(refused) == 1 else 'are'} refused: "
                            f"bind {ROLES[flow]}")
    if problems:
        return Check(name, Outcome.failed, "; ".join(problems) + " (deployments/kubernetes/rbac.yaml)")
    writes = (f" and the writes of {', '.join(writes_of)}" if writes_of
              else "; no flow applies, so no write was asked about (--all-writes asks)")
    return Check(name, Outcome.ok, f"allowed: the {len(READS)} reads every flow makes{writes}")


def census(settings: GpuaasSettings, now: datetime) -> SeriesCensus:
    """The activity metrics' series now, and how many carry each pod label: one query, plus one per label."""
    from gpuaas.sources._prom_client import PromClient, sample_value
    from gpuaas.sources._promql import any_of

    m = settings.metrics
    selector = "{" + any_of("__name__", [m.gpu_activity, m.gpu_util_fallback])
    prom = PromClient(settings)
    try:
        series = {str(r["metric"].get("__name__", "")): int(sample_value(r))
                  for r in prom.query(f"count by (__name__) ({selector}}})", now)}
        labelled = {}
        for label in (label for label in m.pod_labels if _LABEL.fullmatch(label)):
            answer = prom.query(f'count({selector}, {label}!=""}})', now)
            labelled[label] = int(sample_value(answer[0])) if answer else 0
    finally:
        prom.close()
    return SeriesCensus(series, labelled)


def pushgateway_check(settings: GpuaasSettings) -> Check:
    """The Pushgateway answers its readiness probe, with the same trust the pushes use."""
    import httpx

    from gpuaas._https import ssl_context
    from gpuaas.sources.failures import describe_failure

    if not settings.pushgateway_url:
        return Check("Pushgateway", Outcome.skipped, "GPUAAS_PUSHGATEWAY_URL not set: nothing is pushed")
    url = settings.pushgateway_url.rstrip("/") + "/-/ready"
    try:
        answer = httpx.get(url, timeout=settings.request_timeout_seconds, verify=ssl_context(settings) or True)
        answer.raise_for_status()
    except (httpx.HTTPError, OSError) as exc:
        return Check("Pushgateway", Outcome.failed, describe_failure(settings, "pushgateway", exc))
    return Check("Pushgateway", Outcome.ok, "ready")


def database_check(settings: GpuaasSettings) -> Check:
    """The database opens read-only at this gpuaas's schema; a missing one is created by the first run."""
    from gpuaas.store import Store, redact_url, sqlite_file

    name, where = "database", redact_url(settings.database_url_value)
    file = sqlite_file(settings.database_url_value)
    if file is not None and not file.is_file():
        return Check(name, Outcome.ok, f"{where}: no database there yet; the first flow run creates it")
    try:
        store = Store(settings.database_url_value, migrate=False, read_only=True)
        try:
            current, head = store.current_revision(), store.head_revision()
        finally:
            store.close()
    except StoreError as exc:
        return Check(name, Outcome.failed, str(exc))
    if current == head:
        return Check(name, Outcome.ok, f"{where}: schema {current}, up to date")
    if current is None or (head is not None and current < head):
        return Check(name, Outcome.warning, f"{where}: schema {current or '(empty)'}, behind {head}: the next flow "
                                            "run upgrades it, or gpuaas db upgrade")
    return Check(name, Outcome.failed, f"{where}: schema {current}, newer than the {head} this gpuaas reads: "
                                       "upgrade gpuaas")


def applying(settings: GpuaasSettings) -> list[str]:
    """The flows the policy switches to ``apply``: the ones whose writes a preflight asks about."""
    policy = settings.policy
    modes = {"reclaim": policy.reclaim.mode, "rebalance": policy.rebalance.mode, "deadlines": policy.deadlines.mode}
    return [flow for flow, mode in modes.items() if mode is Mode.apply]


def preflight(settings: GpuaasSettings, now: datetime | None = None,
              writes_of: Sequence[str] | None = None) -> list[Check]:
    """Every check, each source read once as a collect reads it (no retries, nothing stored).

    ``writes_of``: the flows whose writes are asked about; by default the ones the policy applies.
    """
    now = now or datetime.now(UTC)
    windows = snapshot_windows(settings)
    readings: dict[str, tuple[Any, SourceStatus]] = {}
    for source in SOURCES:
        started = time.monotonic()
        try:
            readings[source] = read_source(source, settings, now, windows)
        except Exception as exc:  # noqa: BLE001 - a failed source is a failed check, named, never a traceback
            readings[source] = None, failed_source(settings, source, exc, time.monotonic() - started)
    checks = [kube_check(readings["kube"][0], readings["kube"][1]),
              _permissions(settings, readings["kube"][1], applying(settings) if writes_of is None else writes_of),
              prometheus_check(readings["prometheus"][1], settings.policy.collect.max_staleness_seconds),
              _telemetry(settings, now, windows, readings),
              source_check("OpenCost", readings["opencost"][1])]
    return [*checks, pushgateway_check(settings), database_check(settings)]


def _telemetry(settings: GpuaasSettings, now: datetime, windows: Sequence[float],
               readings: dict[str, tuple[Any, SourceStatus]]) -> Check:
    if not (readings["kube"][1].ok and readings["prometheus"][1].ok):
        return Check("GPU telemetry", Outcome.skipped, "needs the Kubernetes API and Prometheus, above")
    snapshot = assemble_snapshot(settings.model_copy(update={"nvml": "off"}), now, windows, readings)
    workloads = snapshot.workloads
    holding = workloads[workloads["telemetry"] != "n/a"] if "telemetry" in workloads else workloads.iloc[0:0]
    nothing_seen = not holding.empty and bool((holding["gpus_observed"].fillna(0) == 0).all())
    try:
        found = census(settings, now) if nothing_seen else None
    except Exception as exc:  # noqa: BLE001 - the census only explains; its failure is said, not raised
        return Check("GPU telemetry", Outcome.failed, f"no GPU workload has a sample, and asking why failed: {exc}")
    return telemetry_check(workloads, settings.metrics, found)


def _permissions(settings: GpuaasSettings, kube: SourceStatus, writes_of: Sequence[str]) -> Check:
    if not kube.ok and "HTTP 403" not in (kube.error or ""):  # a refused read is what this check explains
        return Check("permissions", Outcome.skipped, "needs the Kubernetes API, above")
    from gpuaas.sources.failures import describe_failure

    try:
        answers = allowed(settings, [*READS, *(a for flow in writes_of for a in WRITES[flow])])
    except Exception as exc:  # noqa: BLE001 - a server that will not say is a warning, not a refusal
        why = describe_failure(settings, "kube", exc)
        return Check("permissions", Outcome.warning, f"could not ask what is allowed (SelfSubjectAccessReview): {why}")
    return permissions_check(answers, writes_of)
