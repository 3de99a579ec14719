"""Preflight: whether the settings reach every source, and whether what is there is what gpuaas needs.

Set up on a new cluster, gpuaas fails safe in ways a collect reports only as numbers: a DCGM metric
renamed by the install, or a dcgm-exporter that does not label its series with the pod, leaves every
GPU workload ``unknown`` (never idle: nothing is ever reclaimed, and nothing says why). A preflight
reads each source once, as a collect does, and says per check what holds and what to set where it
does not. It writes nothing: no snapshot is stored, the database is opened read-only.

``read`` does the reading (I/O): each source once, as a collect reads it; where no GPU workload has a
sample, a few instant queries that find out why (whether the metrics exist, and which of the pod labels
their series carry, ``gpu_series_census``); and the API server's answer to each access the flows need.
``plan`` turns what was read into the checks, purely; each check is a function callable in a REPL
(``kube_check``, ``telemetry_check``...).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import pandas as pd

from gpuaas.errors import StoreError
from gpuaas.models import SourceStatus
from gpuaas.operations.collect import other_cluster
from gpuaas.permissions import BINDINGS, READS, ROLES, WRITES, Access, allowed
from gpuaas.policy import Mode, Policy
from gpuaas.settings import GpuaasSettings, MetricNames
from gpuaas.snapshot import SOURCES, assemble_snapshot, failed_source, read_source, snapshot_windows
from gpuaas.sources.kube import KubeState
from gpuaas.sources.prometheus import gpu_series_census

__all__ = ["Check", "Findings", "SeriesCensus", "Verdict", "applying", "database_check", "headline", "kube_check",
           "permissions_check", "plan", "policy_check", "preflight", "prometheus_check", "pushgateway_check", "read",
           "source_check", "telemetry_check"]


class Verdict(StrEnum):
    """How a check went: its own words, not a decision's ``Outcome``."""

    ok = "ok"
    warning = "warning"
    failed = "failed"
    skipped = "skipped"


@dataclass(frozen=True)
class Check:
    """One thing the preflight looked at: what, how it went, and in words what was found or what to set."""

    name: str
    verdict: Verdict
    detail: str

    def as_dict(self) -> dict[str, str]:
        """What JSON output and a run's result carry."""
        return {"check": self.name, "verdict": self.verdict.value, "detail": self.detail}


@dataclass(frozen=True)
class SeriesCensus:
    """What Prometheus holds of the GPU activity metrics: series per metric, and per pod label."""

    series: dict[str, int]
    """Metric name -> how many series of it there are now (absent: none)."""
    labelled: dict[str, int]
    """Pod label -> how many of those series carry it."""


def source_check(name: str, status: SourceStatus) -> Check:
    """A source answered, or its failure in the words a degraded collect leads with."""
    if status.ok:
        return Check(name, Verdict.ok, f"answered in {status.latency_s:.2f} s")
    return Check(name, Verdict.failed, status.error or "no answer")


def prometheus_check(status: SourceStatus, max_staleness_s: float) -> Check:
    """Prometheus answered with data fresh enough to act on (``collect.max_staleness_seconds``): the age is the
    stalest of its newest DCGM, Kueue and vLLM samples, as the reclaim flow reads it."""
    name = "Prometheus"
    if not status.ok or status.staleness_s is None:
        return source_check(name, status)
    age = f"answered in {status.latency_s:.2f} s, its data {status.staleness_s:.0f} s old"
    if status.staleness_s > max_staleness_s:
        return Check(name, Verdict.failed, f"{age}, over the {max_staleness_s:.0f} s collect.max_staleness_seconds "
                                           "allows: no action is taken on it (is the scrape failing?)")
    return Check(name, Verdict.ok, age)


def kube_check(state: KubeState | None, status: SourceStatus) -> Check:
    """The Kubernetes API answered, Kueue is served, and what gpuaas can act on is installed."""
    name = "Kubernetes API and Kueue"
    if state is None:
        return source_check(name, status)
    if state.kueue_version is None:
        return Check(name, Verdict.failed, "the API answers, but Kueue is not served (no kueue.x-k8s.io/v1beta2 or "
                                           "v1beta1): install Kueue v0.15 or newer")
    found = (f"kueue.x-k8s.io/{state.kueue_version}: {len(state.cluster_queues)} ClusterQueues, "
             f"{len(state.local_queues)} LocalQueues, {len(state.workloads)} Workloads")
    missing = f"; not installed: {', '.join(state.not_installed)} (not reclaimed)" if state.not_installed else ""
    if state.kueue_version != "v1beta2":
        return Check(name, Verdict.warning, f"{found}{missing}; only {state.kueue_version} is served, read as a "
                                            "fallback: Kueue v0.15 or newer serves v1beta2")
    if not state.cluster_queues:
        return Check(name, Verdict.warning,
                     f"{found}{missing}: no ClusterQueue, so no quota to plan or backlog to read")
    return Check(name, Verdict.ok, f"{found}{missing}")


def policy_check(policy: Policy, state: KubeState | None) -> Check:
    """What the policy names exists in the cluster: a misspelt ClusterQueue or cohort is otherwise silent
    (the tenant owns nothing there, the cohort is never rebalanced)."""
    name = "policy against the cluster"
    if state is None or state.kueue_version is None:
        return Check(name, Verdict.skipped, "needs the Kubernetes API and Kueue, above")
    if not policy.tenants and not policy.rebalance.cohorts:
        return Check(name, Verdict.skipped, "the policy names no tenant and no cohort")
    queues = {q.name for q in state.cluster_queues}
    cohorts = {q.cohort for q in state.cluster_queues if q.cohort} | {c.name for c in state.cohorts}
    queued = {q.namespace for q in state.local_queues} | {w.namespace for w in state.workloads}
    problems = []
    for tenant in policy.tenants:
        missing = [q for q in tenant.cluster_queues if q not in queues]
        if missing:
            problems.append(f"tenant {tenant.name} names ClusterQueue {', '.join(missing)}, which the cluster lacks")
        idle = [n for n in tenant.namespaces if n not in queued]
        if idle:
            problems.append(f"tenant {tenant.name}'s namespace {', '.join(idle)} has no LocalQueue and no Workload")
    unknown = [c for c in policy.rebalance.cohorts if c not in cohorts]
    if unknown:
        problems.append(f"rebalance.cohorts names {', '.join(unknown)}, which no ClusterQueue belongs to")
    if problems:
        return Check(name, Verdict.warning, "; ".join(problems) + " (a typo in the policy file?)")
    return Check(name, Verdict.ok, f"the {len(policy.tenants)} tenants' ClusterQueues and namespaces and the "
                                   "cohorts it names are in the cluster")


def telemetry_check(workloads: pd.DataFrame, metrics: MetricNames, found: SeriesCensus | None) -> Check:
    """Whether the GPU workloads holding GPUs have DCGM samples: without, they stay ``unknown``, never idle.

    ``found`` is the census, taken only where no workload has a sample (the case a setting fixes).
    """
    name = "GPU telemetry"
    holding = _holding(workloads)
    if holding.empty:
        return Check(name, Verdict.skipped, "no workload holds GPUs now: nothing to match telemetry to")
    unknown = holding[holding["telemetry"] == "unknown"]
    unseen = int((holding["gpus_observed"].fillna(0) == 0).sum())
    total = len(holding)
    names = f"{metrics.gpu_activity} or {metrics.gpu_util_fallback}"
    if unknown.empty:
        return Check(name, Verdict.ok, f"{total} of {total} GPU workloads have complete telemetry ({names})")
    if unseen < total or found is None:
        shown = [_owner(row) for row in unknown.head(3).itertuples()]
        more = f" and {len(unknown) - len(shown)} more" if len(unknown) > len(shown) else ""
        return Check(name, Verdict.warning, f"{len(unknown)} of {total} GPU workloads have incomplete telemetry in "
                                            f"the window ({', '.join(shown)}{more}; {unseen} with no sample of "
                                            f"{names} at all): they stay unknown, never counted as idle")
    if not found.series:
        return Check(name, Verdict.failed, f"no series of {names} in Prometheus: is dcgm-exporter scraped? A renamed "
                                           "metric is set with GPUAAS_METRICS__GPU_ACTIVITY and "
                                           "GPUAAS_METRICS__GPU_UTIL_FALLBACK")
    series = sum(found.series.values())
    labels = ", ".join(metrics.pod_labels)
    if not any(found.labelled.values()):
        return Check(name, Verdict.failed, f"the {series} series of {names} carry none of the pod labels {labels}: "
                                           "set GPUAAS_METRICS__POD_LABELS to the label that names the pod "
                                           "(dcgm-exporter maps GPUs to pods with its Kubernetes option)")
    return Check(name, Verdict.failed, f"none of the {total} GPU workloads' pods is named by the {series} series of "
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


def _bind(role: str) -> str:
    return f"bind {role} (kubectl apply -f deployments/kubernetes/{BINDINGS[role]})"


def permissions_check(answers: Mapping[Access, bool], writes_of: Sequence[str]) -> Check:
    """The reads every flow makes, and the writes of ``writes_of`` (the flows that apply), each allowed or not;
    a refusal names the shipped role that grants it."""
    name = "permissions"
    problems = []
    refused = [a for a in READS if not answers[a]]
    if refused:
        problems.append(f"{len(refused)} of the {len(READS)} reads every flow makes are refused ({_few(refused)}): "
                        f"{_bind(ROLES['reads'])}")
    for flow in writes_of:
        refused = [a for a in WRITES[flow] if not answers[a]]
        if refused:
            problems.append(f"{flow} would write, but {_few(refused)} {'is' if len(refused) == 1 else 'are'} refused: "
                            f"{_bind(ROLES[flow])}")
    if problems:
        return Check(name, Verdict.failed, "; ".join(dict.fromkeys(problems)))
    writes = (f" and the writes of {', '.join(writes_of)}" if writes_of
              else "; no flow applies, so no write was asked about (--all-writes, or all_writes for the flow, asks)")
    return Check(name, Verdict.ok, f"allowed: the {len(READS)} reads every flow makes{writes}")


def pushgateway_check(settings: GpuaasSettings) -> Check:
    """The Pushgateway answers its readiness probe, with the same trust the pushes use."""
    import httpx

    from gpuaas._https import httpx_verify
    from gpuaas.sources.failures import describe_failure

    if not settings.pushgateway_url:
        return Check("Pushgateway", Verdict.skipped, "GPUAAS_PUSHGATEWAY_URL not set: nothing is pushed")
    url = settings.pushgateway_url.rstrip("/") + "/-/ready"
    try:
        answer = httpx.get(url, timeout=settings.request_timeout_seconds, verify=httpx_verify(settings))
        answer.raise_for_status()
    except (httpx.HTTPError, OSError) as exc:
        return Check("Pushgateway", Verdict.failed, describe_failure(settings, "pushgateway", exc))
    return Check("Pushgateway", Verdict.ok, "ready")


def database_check(settings: GpuaasSettings, cluster: str | None = None) -> Check:
    """The database opens read-only at this gpuaas's schema and holds no other cluster's history than ``cluster``'s
    (the one the settings read); a missing one is created by the first run."""
    from gpuaas.store import Store, redact_url, sqlite_file

    name, where = "database", redact_url(settings.database_url_value)
    file = sqlite_file(settings.database_url_value)
    if file is not None and not file.is_file():
        return Check(name, Verdict.ok, f"{where}: no database there yet; the first flow run creates it")
    try:
        store = Store(settings.database_url_value, migrate=False, read_only=True)
        try:
            current, head = store.current_revision(), store.head_revision()
            stored = store.latest_cluster() if current == head else None
        finally:
            store.close()
    except StoreError as exc:
        return Check(name, Verdict.failed, str(exc))
    if current == head:
        problem = other_cluster(cluster, stored)
        if problem:
            return Check(name, Verdict.failed, f"{where}: {problem}")
        return Check(name, Verdict.ok, f"{where}: schema {current}, up to date"
                     + (", the history of this cluster" if stored else ""))
    if current is None or (head is not None and current < head):
        return Check(name, Verdict.warning, f"{where}: schema {current or '(empty)'}, behind {head}: the next flow "
                                            "run upgrades it, or gpuaas db upgrade")
    return Check(name, Verdict.failed, f"{where}: schema {current}, newer than the {head} this gpuaas reads: "
                                       "upgrade gpuaas")


def headline(checks: Sequence[Check]) -> str:
    """``Preflight: 8 checks: 5 ok, 1 warning, 1 failed (GPU telemetry), 1 skipped.``: what the command and the flow
    lead with."""
    counts = {verdict: sum(c.verdict is verdict for c in checks) for verdict in Verdict}
    failed = [c.name for c in checks if c.verdict is Verdict.failed]
    said = [f"{counts[o]} {o.value}{'s' if o is Verdict.warning and counts[o] > 1 else ''}"
            + (f" ({', '.join(failed)})" if o is Verdict.failed else "")
            for o in Verdict if counts[o]]
    return f"Preflight: {len(checks)} checks: {', '.join(said)}."


def applying(settings: GpuaasSettings) -> list[str]:
    """The flows the policy switches to ``apply``: the ones whose writes a preflight asks about."""
    return [flow.value for flow, mode in settings.policy.modes.items() if mode is Mode.apply]


@dataclass(frozen=True)
class Findings:
    """What a preflight read, before any verdict: the input of ``plan``."""

    kube: KubeState | None
    sources: dict[str, SourceStatus]
    """``kube``, ``prometheus`` and ``opencost``, as a collect's snapshot has them."""
    workloads: pd.DataFrame | None
    """The snapshot's workloads (their telemetry matched), where the Kubernetes API and Prometheus answered."""
    census: SeriesCensus | None
    """Taken only where no GPU workload has a sample."""
    census_error: str | None
    answers: dict[Access, bool] | None
    """Whether each access asked about is allowed; None where it could not be asked."""
    answers_error: str | None
    writes_of: tuple[str, ...]
    pushgateway: Check
    database: Check
    """The two probes whose answer is already their verdict."""
    metrics: MetricNames
    max_staleness_s: float
    policy: Policy


def read(settings: GpuaasSettings, now: datetime | None = None, writes_of: Sequence[str] | None = None) -> Findings:
    """Each source once as a collect reads it (no retries, nothing stored), and what the checks then ask.

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
    sources = {name: status for name, (_, status) in readings.items()}
    workloads, found, census_error = None, None, None
    if sources["kube"].ok and sources["prometheus"].ok:
        workloads = assemble_snapshot(settings.model_copy(update={"nvml": "off"}), now, windows, readings).workloads
        if _none_seen(workloads):
            try:
                found = SeriesCensus(*gpu_series_census(settings, now))
            except Exception as exc:  # noqa: BLE001 - the census only explains; its failure is said, not raised
                census_error = str(exc)
    flows = tuple(applying(settings) if writes_of is None else writes_of)
    kube: KubeState | None = readings["kube"][0]
    answers, answers_error = _ask(settings, sources["kube"], flows)
    return Findings(kube, sources, workloads, found, census_error, answers, answers_error, flows,
                    pushgateway_check(settings), database_check(settings, kube.cluster_uid if kube else None),
                    settings.metrics,
                    settings.policy.collect.max_staleness_seconds, settings.policy)


def plan(found: Findings) -> list[Check]:
    """Every check's verdict on what was read, in the order a person fixes them: pure."""
    return [
        kube_check(found.kube, found.sources["kube"]),
        _permissions(found),
        policy_check(found.policy, found.kube),
        prometheus_check(found.sources["prometheus"], found.max_staleness_s),
        _telemetry(found),
        source_check("OpenCost", found.sources["opencost"]),
        found.pushgateway,
        found.database,
    ]


def preflight(settings: GpuaasSettings, now: datetime | None = None,
              writes_of: Sequence[str] | None = None) -> list[Check]:
    """``plan(read(...))``: every check."""
    return plan(read(settings, now, writes_of))


def _holding(workloads: pd.DataFrame) -> pd.DataFrame:
    """The workloads that hold GPUs now: the ones telemetry is matched to."""
    return workloads[workloads["telemetry"] != "n/a"] if "telemetry" in workloads else workloads.iloc[0:0]


def _none_seen(workloads: pd.DataFrame) -> bool:
    """Workloads hold GPUs and not one has a sample: the case a census explains (a setting, not a workload)."""
    holding = _holding(workloads)
    return not holding.empty and bool((holding["gpus_observed"].fillna(0) == 0).all())


def _ask(settings: GpuaasSettings, kube: SourceStatus,
         flows: Sequence[str]) -> tuple[dict[Access, bool] | None, str | None]:
    if not kube.ok and "HTTP 403" not in (kube.error or ""):  # a refused read is what the answers explain
        return None, None
    from gpuaas.sources.failures import describe_failure

    try:
        return allowed(settings, [*READS, *(a for flow in flows for a in WRITES[flow])]), None
    except Exception as exc:  # noqa: BLE001 - a server that will not say is a warning, not a refusal
        return None, describe_failure(settings, "kube", exc)


def _telemetry(found: Findings) -> Check:
    if found.workloads is None:
        return Check("GPU telemetry", Verdict.skipped, "needs the Kubernetes API and Prometheus, above")
    if found.census_error is not None:
        return Check("GPU telemetry", Verdict.failed,
                     f"no GPU workload has a sample, and asking why failed: {found.census_error}")
    return telemetry_check(found.workloads, found.metrics, found.census)


def _permissions(found: Findings) -> Check:
    if found.answers_error is not None:
        return Check("permissions", Verdict.warning,
                     f"could not ask what is allowed (SelfSubjectAccessReview): {found.answers_error}")
    if found.answers is None:
        return Check("permissions", Verdict.skipped, "needs the Kubernetes API, above")
    return permissions_check(found.answers, found.writes_of)
