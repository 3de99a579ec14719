"""Preflight: whether the settings reach every source, and whether what is there is what gpuaas needs.

Set up on a new cluster, gpuaas fails safe in ways a collect reports only as numbers: a DCGM metric
renamed by the install, or a dcgm-exporter that does not label its series with the pod, leaves every
GPU workload ``unknown`` (never idle: nothing is ever reclaimed, and nothing says why). A preflight
reads each source once, as a collect does, and says per check what holds and what to set where it
does not. It writes nothing: no snapshot is stored, the database is opened read-only.

``read`` does the reading (I/O): each source once, as a collect reads it; where no GPU workload has a
sample, a few instant queries that find out why (whether the metrics exist, and which of the pod labels
their series carry, ``gpu_series_census``); the API server's answer to each access the flows need, and
to a fixed list of accesses gpuaas should not have (``CANARIES``); and, where a flow applies or a writer role's
patch is allowed, the kit's admission policy and its binding (``admission_policy``: two GETs).
``plan`` turns what was read into the checks, purely; each check is a function callable in a REPL
(``kube_check``, ``telemetry_check``...).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd

from gpuaas.errors import StoreError
from gpuaas.models import SourceStatus
from gpuaas.operations.collect import other_cluster
from gpuaas.permissions import CANARIES, READS, WRITES, Access, AdmissionPolicy, admission_policy, allowed_as
from gpuaas.policy import Mode, Policy
from gpuaas.preflight_checks import (
    Check,
    SeriesCensus,
    Verdict,
    admission_check,
    excess_check,
    headline,
    holding_gpus,
    kube_check,
    kueue_metrics_check,
    permissions_check,
    policy_check,
    prometheus_check,
    source_check,
    telemetry_check,
    writer_rights,
)
from gpuaas.preflight_gaps import gap_check, kube_gaps
from gpuaas.settings import GpuaasSettings, MetricNames
from gpuaas.snapshot import SOURCES, assemble_snapshot, failed_source, read_source, snapshot_windows
from gpuaas.sources.kube import KubeState
from gpuaas.sources.prometheus import PrometheusReading, gpu_series_census

__all__ = ["Check", "Findings", "SeriesCensus", "Verdict", "admission_check", "applying", "database_check",
           "excess_check", "headline", "kube_check", "kueue_metrics_check", "permissions_check", "plan", "policy_check",
           "preflight", "prometheus_check", "pushgateway_check", "read", "source_check", "telemetry_check"]


def pushgateway_check(settings: GpuaasSettings) -> Check:
    """The Pushgateway answers its readiness probe, with the same trust and credentials the pushes use (behind basic
    auth or a token proxy, a probe without them would read as refused while every push lands)."""
    import httpx

    from gpuaas import pushgateway
    from gpuaas._https import httpx_verify
    from gpuaas.sources.failures import describe_failure

    if not settings.pushgateway_url:
        return Check("Pushgateway", Verdict.skipped, "GPUAAS_PUSHGATEWAY_URL not set: nothing is pushed")
    url = pushgateway.base_url(settings).rstrip("/") + "/-/ready"
    try:
        answer = httpx.get(url, timeout=settings.request_timeout_seconds, verify=httpx_verify(settings),
                           headers=pushgateway.auth_headers(settings))
        answer.raise_for_status()
    except (httpx.HTTPError, OSError) as exc:
        return Check("Pushgateway", Verdict.failed, describe_failure(settings, "pushgateway", exc))
    return Check("Pushgateway", Verdict.ok, "ready")


def database_check(settings: GpuaasSettings, cluster: str | None = None) -> Check:
    """The database opens read-only at this gpuaas's schema and holds no other cluster's history than ``cluster``'s
    (the one the settings read). What the next flow run would do decides the verdict: it creates a missing or empty
    one (ok) and upgrades a SQLite file that is behind (a warning), and it fails on a newer schema, on a shared
    database that is behind, which only ``gpuaas db upgrade`` migrates, and on a shared database that refuses
    writes (a user granted SELECT only, a standby: ``write_problem``, a write rolled back) (failed)."""
    from gpuaas.store import Store, known_revisions, redact_url, schema_problem, sqlite_file

    name, where = "database", redact_url(settings.database_url_value)
    file = sqlite_file(settings.database_url_value)
    if file is not None and not file.is_file():
        return Check(name, Verdict.ok, f"{where}: no database there yet; the first flow run creates it")
    try:
        store = Store(settings.database_url_value, migrate=False, read_only=True)
        try:
            current, head = store.current_revision(), store.head_revision()
            stored = store.latest_cluster() if current == head else None
            refused = store.write_problem() if current == head and file is None else None
        finally:
            store.close()
    except StoreError as exc:
        return Check(name, Verdict.failed, str(exc))
    if current == head:
        problem = other_cluster(cluster, stored)
        if problem:
            return Check(name, Verdict.failed, f"{where}: {problem}")
        if refused:  # every flow run writes its snapshot, history and audit rows
            return Check(name, Verdict.failed, f"{refused}: every flow run writes to it (grant the user INSERT, "
                                               "UPDATE and DELETE on gpuaas's tables, and point at the primary, "
                                               "not a standby)")
        return Check(name, Verdict.ok, f"{where}: schema {current}, up to date"
                     + (", the history of this cluster" if stored else ""))
    if current is None:
        return Check(name, Verdict.ok, f"{where}: no gpuaas schema yet; the first flow run creates it")
    problem = str(schema_problem(settings.database_url_value, current, head))
    if current not in known_revisions():
        return Check(name, Verdict.failed, problem)
    if file is not None:
        return Check(name, Verdict.warning, problem)
    return Check(name, Verdict.failed, f"{problem}; until then every flow run fails on it (a flow does not migrate a "
                                       "shared database)")


def applying(settings: GpuaasSettings) -> list[str]:
    """The flows the policy switches to ``apply``: the ones whose writes a preflight asks about."""
    return _applies(settings.policy)


def _applies(policy: Policy) -> list[str]:
    return [flow.value for flow, mode in policy.modes.items() if mode is Mode.apply]


@dataclass(frozen=True)
class Findings:
    """What a preflight read, before any verdict: the input of ``plan``."""

    kube: KubeState | None
    prometheus: PrometheusReading | None
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
    identity: str | None = None
    """The user the API server took the credentials for (``SelfSubjectReview``), where it said."""
    gaps: tuple[str, ...] | None = None
    """What gpuaas reads in Kueue but cannot act on, in the collect's words (``kube_gaps``); None without the API."""
    admission: AdmissionPolicy | None = None
    """The kit's admission policy as read; None where it was not (nothing to guard, no API, or ``admission_error``)."""
    admission_error: str | None = None
    window_start: datetime | None = None
    """The start of the shortest telemetry window: a workload that began to hold GPUs after it has no whole window."""


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
    answers, answers_error, identity = _ask(settings, sources["kube"], flows)
    admission, admission_error = _admission(settings, answers)
    return Findings(kube, readings["prometheus"][0], sources, workloads, found, census_error, answers, answers_error, flows,
                    pushgateway_check(settings), database_check(settings, kube.cluster_uid if kube else None),
                    settings.metrics,
                    settings.policy.collect.max_staleness_seconds, settings.policy, identity,
                    kube_gaps(kube, now, settings.policy), admission, admission_error,
                    now - timedelta(minutes=min(windows)) if windows else None)


def plan(found: Findings) -> list[Check]:
    """Every check's verdict on what was read, in the order a person fixes them: pure."""
    return [
        kube_check(found.kube, found.sources["kube"]),
        _permissions(found),
        excess_check(found.answers, _applies(found.policy), found.identity, found.kube),
        admission_check(found.admission, found.answers, _applies(found.policy), found.admission_error),
        policy_check(found.policy, found.kube),
        gap_check(found.gaps),
        prometheus_check(found.sources["prometheus"], found.max_staleness_s, found.prometheus),
        kueue_metrics_check(found.prometheus),
        _telemetry(found),
        source_check("OpenCost", found.sources["opencost"]),
        found.pushgateway,
        found.database,
    ]


def preflight(settings: GpuaasSettings, now: datetime | None = None,
              writes_of: Sequence[str] | None = None) -> list[Check]:
    """``plan(read(...))``: every check."""
    return plan(read(settings, now, writes_of))


def _none_seen(workloads: pd.DataFrame) -> bool:
    """Workloads hold GPUs and not one has a sample: the case a census explains (a setting, not a workload)."""
    holding = holding_gpus(workloads)
    return not holding.empty and bool((holding["gpus_observed"].fillna(0) == 0).all())


def _ask(settings: GpuaasSettings, kube: SourceStatus,
         flows: Sequence[str]) -> tuple[dict[Access, bool] | None, str | None, str | None]:
    """The answers, why there are none, and whose they are."""
    if not kube.ok and "HTTP 403" not in (kube.error or ""):  # a refused read is what the answers explain
        return None, None, None
    from gpuaas.sources.failures import describe_failure

    try:
        answers, identity = allowed_as(settings, [*READS, *(a for flow in flows for a in WRITES[flow]), *CANARIES])
    except Exception as exc:  # noqa: BLE001 - a server that will not say is a warning, not a refusal
        return None, describe_failure(settings, "kube", exc), None
    return answers, None, identity


def _admission(settings: GpuaasSettings,
               answers: dict[Access, bool] | None) -> tuple[AdmissionPolicy | None, str | None]:
    """The admission policy, read only where the check judges it: a flow applies, or a writer role's patch is
    allowed (a role left bound while its flow is dry-run can still be used by whoever holds the token)."""
    if answers is None or not (applying(settings) or writer_rights(answers)):
        return None, None
    from gpuaas.sources.failures import describe_failure

    try:
        return admission_policy(settings), None
    except Exception as exc:  # noqa: BLE001 - an unreadable policy is the check's warning, never a traceback
        return None, describe_failure(settings, "kube", exc)


def _telemetry(found: Findings) -> Check:
    if found.workloads is None:
        return Check("GPU telemetry", Verdict.skipped, "needs the Kubernetes API and Prometheus, above")
    if found.census_error is not None:
        return Check("GPU telemetry", Verdict.failed,
                     f"no GPU workload has a sample, and asking why failed: {found.census_error}")
    return telemetry_check(found.workloads, found.metrics, found.census, found.window_start)


def _permissions(found: Findings) -> Check:
    if found.answers_error is not None:
        return Check("permissions", Verdict.warning,
                     f"could not ask what is allowed (SelfSubjectAccessReview): {found.answers_error}")
    if found.answers is None:
        return Check("permissions", Verdict.skipped, "needs the Kubernetes API, above")
    return permissions_check(found.answers, found.writes_of, found.identity)
