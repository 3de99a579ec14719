"""Each service's outcomes and size in one window: serving requests, batch jobs, replicas. Pure.

A serving service's series are its namespace's with its ``model_name`` (the policy refuses two
services whose series would overlap, so no request is counted twice). Series scraped without a
namespace (a live endpoint) are the service's only when no other service has that model. A service
with ``pod_labels`` is keyed by them instead: its pods are those that carry the labels (OpenCost's
allocation labels, or ``kube_pod_labels``), its series those of its pods, and a pod two services
select is an error naming both (``select_pods``), never a request or a GPU-hour counted twice.

A batch service's outcomes are its namespace's jobs whose name is the service's or starts with
``<name>-``. Its pods are the job's: OpenCost's controller, the running pod's ``ownerReferences``, or
the pod's name under the job's (controllers name pods ``<job>-…``; a finished pod is gone). Only the pods of the attempt that produced the outcome are
productive: a pod belongs to the attempt (Workload) created last at or before its last sample, so a pod
of an attempt that failed, or of one run after the outcome, is not. A job still running at the end of
the window (an admitted, unfinished Workload) has no outcome yet: its pods' busy hours are *in
progress*, neither productive nor wasted, a retry's after a failed attempt too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import pandas as pd

from gpuaas.errors import ConfigError
from gpuaas.models import CostInputs, FinishedJob, RunningJob, selects
from gpuaas.policies.cost.capacity import replicas_needed
from gpuaas.policies.cost.outcomes import (
    BatchOutcome,
    SloFraction,
    fraction_within,
    verified_bounds,
    verified_requests,
)
from gpuaas.policy import CostPolicy, ServiceOutcome

if TYPE_CHECKING:
    from gpuaas.models import CapacityEstimate

__all__ = ["ServiceTally", "attempt_starts", "batch_tally", "job_of", "pod_share", "replicas", "retried",
           "select_pods", "serves", "serving_tally"]


@dataclass
class ServiceTally:
    spec: ServiceOutcome
    tenant: str
    requests: float | None = None
    good: float | None = None
    slo: SloFraction | None = None
    verified: float | None = None
    verified_range: tuple[float, float] | None = None
    """Where the true number of verified requests lies (``verified_bounds``): the histogram counts bad ones too."""
    rate_quantile: float | None = None
    daily_verified: dict[int, float | None] = field(default_factory=dict)
    daily_requests: dict[int, float] = field(default_factory=dict)
    outcomes: list[BatchOutcome] = field(default_factory=list)

    def outcomes_unknown(self, jobs_known: bool) -> bool:
        """Whether the service did work whose verified outcomes cannot be known: a batch service's without the
        Kubernetes API, a serving service's requests without a latency histogram. Its productive hours are then
        unknown too, never 0 (which would call its busy hours work without an outcome)."""
        if self.spec.kind == "batch":
            return not jobs_known
        return self.verified is None and (self.requests or 0.0) > 0


def select_pods(services: Sequence[ServiceOutcome], pod_labels: Mapping[tuple[str, str], Mapping[str, str]],
                policy_file: str | None = None) -> dict[tuple[str, str], str]:
    """(namespace, pod) -> the label-keyed service that selects it; a pod two services select is a
    ``ConfigError`` naming both (their requests and GPU-hours would otherwise be counted twice)."""
    out: dict[tuple[str, str], str] = {}
    keyed = [s for s in services if s.pod_labels]
    for (namespace, pod), labels in sorted(pod_labels.items()):
        names = [s.name for s in keyed if selects(s, namespace, labels)]
        if len(names) > 1:
            raise ConfigError(f"services {names[0]!r} and {names[1]!r} both select pod {namespace}/{pod} by their "
                              "pod_labels; give each a label the other's pods do not carry",
                              file=policy_file, field="services")
        if names:
            out[(namespace, pod)] = names[0]
    return out


def _serving_rows(serving: pd.DataFrame, spec: ServiceOutcome, models: dict[str, int],
                  pods: set[tuple[str, str]]) -> pd.DataFrame:
    """The service's series: its namespace and model; unlabelled-namespace series only if its model is
    unique. A label-keyed service's: its pods' (and its model's, if it names one), and its own rate rows."""
    if spec.pod_labels:
        mine = [(ns, p) in pods or svc == spec.name
                for ns, p, svc in zip(serving["namespace"], serving["pod"], serving["service"])]
        rows = serving[pd.Series(mine, index=serving.index, dtype=bool)]
        return rows[rows["model_name"] == spec.model_name] if spec.model_name else rows
    serving = serving[serving["service"] == ""]
    namespaces = [spec.namespace]
    if spec.model_name and models.get(spec.model_name, 0) == 1:
        namespaces.append("")
    rows = serving[serving["namespace"].isin(namespaces)]
    if spec.model_name:
        rows = rows[rows["model_name"] == spec.model_name]
    return rows


def serving_tally(svc: ServiceTally, serving: pd.DataFrame, days: int, models: dict[str, int],
                  notes: list[str], pods: set[tuple[str, str]] | None = None) -> None:
    """Requests, good requests, the SLO share and the verified outcomes of one serving service, per period.

    ``serving`` has the optional columns ``pod`` and ``service`` (a label-keyed service's own rate
    rows); ``pods`` are the pods its ``pod_labels`` select."""
    spec = svc.spec
    assert spec.latency_slo_seconds is not None
    rows = _serving_rows(serving, spec, models, pods or set())
    reqs = rows[rows["stat"] == "requests"]
    if rows.empty:
        notes.append(f"service {spec.name}: no serving series in the window (requests and outcomes unknown)")
        return
    good_stat = f"quality_ok:{spec.quality.metric}" if spec.quality else "requests"
    good_rows = rows[(rows["stat"] == good_stat) & rows["finished_reason"].isin(spec.good_finished_reasons)]
    hist = rows[rows["stat"] == "latency_bucket"]
    rates = rows[rows["stat"] == "rate_quantile"]

    def slo_of(frame: pd.DataFrame) -> SloFraction:
        return fraction_within(zip(frame["le"].astype(float), frame["value"].astype(float)), spec.latency_slo_seconds
                               or 0.0)

    svc.requests = float(reqs["value"].sum())
    svc.good = float(good_rows["value"].sum())
    svc.slo = slo_of(hist)
    svc.verified = verified_requests(svc.good, svc.slo)
    svc.verified_range = verified_bounds(svc.good, svc.slo)
    # the busiest period's quantile: per period one value, summed over the namespace-less and labelled series
    svc.rate_quantile = float(rates.groupby("day")["value"].sum().max()) if not rates.empty else None
    if svc.slo.fraction is None and svc.requests > 0:
        notes.append(f"service {spec.name}: no latency histogram, so no request can be verified against the SLO")
    # one pass per frame, not a filter per day: a month of 50 services is 1,500 service-days
    req_by_day = reqs.groupby("day")["value"].sum().to_dict()
    good_by_day = good_rows.groupby("day")["value"].sum().to_dict()
    hist_by_day = dict(iter(hist.groupby("day")))
    for day in range(days):
        svc.daily_requests[day] = float(req_by_day.get(day, 0.0))
        svc.daily_verified[day] = verified_requests(float(good_by_day.get(day, 0.0)),
                                                    slo_of(hist_by_day.get(day, hist.iloc[0:0])))


def _named(job: str, name: str) -> bool:
    return job == name or job.startswith(name + "-")


def serves(spec: ServiceOutcome, namespace: str, job: str) -> bool:
    """Whether a batch job is one of a batch service's: its namespace, and its name or ``<name>-…``."""
    return spec.kind == "batch" and spec.namespace == namespace and _named(job, spec.name)


def batch_tally(svc: ServiceTally, outcomes: list[BatchOutcome], start: datetime, period: timedelta,
                days: int) -> None:
    mine = [o for o in outcomes if serves(svc.spec, o.namespace, o.job)]
    svc.outcomes = mine
    svc.requests = float(len(mine))
    svc.verified = float(sum(o.verified for o in mine))
    svc.slo = SloFraction(svc.requests, svc.verified, svc.verified / svc.requests if mine else None,
                          0.0 if mine else None, (0.0, 0.0))
    for day in range(days):
        lo, hi = start + day * period, start + (day + 1) * period
        svc.daily_verified[day] = float(sum(o.verified for o in mine if lo < o.finished_at <= hi))


def job_of(namespace: str, controller: str, pod: str, jobs: dict[str, list[str]]) -> str | None:
    """The batch job a pod ran for: its controller (OpenCost's, or the running pod's ``ownerReferences``)
    when it is a known job, else the longest known job name the pod's name is, or starts with ``<job>-``
    (how KubeRay, Job and ReplicaSet name pods: a finished pod is gone from the API)."""
    names = jobs.get(namespace, [])
    if controller in names:
        return controller
    matches = [j for j in names if _named(pod, j)]
    return max(matches, key=len) if matches else None


def pod_share(job: str | None, namespace: str, last_seen: float | None, outcomes: dict[tuple[str, str], BatchOutcome],
              running: dict[tuple[str, str], RunningJob], starts: Sequence[datetime] = ()) -> tuple[float, bool]:
    """(productive share, in progress) of a batch pod's busy hours.

    A pod belongs to the job's attempt created last at or before its last sample: ``starts`` are the creation
    times of all of the job's Workloads (attempts) the report read, the producing and the running one included.
    1 for a pod of the attempt that produced an on-time outcome; in progress for a pod of the attempt still
    running at the end of the window (a retry after a failed attempt too); 0 for a pod of any other attempt
    (one that failed, or ran again after the outcome) or of a late or failed job. Where the times do not tell
    (no last sample, no creation time), the finished attempt's verdict decides, as for a job with one attempt.
    """
    if job is None:
        return 0.0, False
    outcome, attempt = outcomes.get((namespace, job)), running.get((namespace, job))
    made = [c for c in (*starts, outcome.attempt_created_at if outcome else None,
                        attempt.created_at if attempt else None) if c is not None]

    def of_attempt(created: datetime | None, unknown: bool) -> bool:
        if created is None or last_seen is None:
            return unknown
        return created.timestamp() <= last_seen and not any(created < c and c.timestamp() <= last_seen for c in made)

    if attempt is not None and of_attempt(attempt.created_at, unknown=outcome is None):
        return 0.0, True
    if outcome is not None:
        return (1.0 if outcome.verified and of_attempt(outcome.attempt_created_at, unknown=True) else 0.0), False
    return 0.0, False


def attempt_starts(inputs: CostInputs) -> dict[tuple[str, str], list[datetime]]:
    """(namespace, job) -> the creation times of every Workload (attempt) of the job that the report read: what
    tells a pod of a failed attempt from one of the attempt after it."""
    out: dict[tuple[str, str], list[datetime]] = {}
    attempts: list[FinishedJob | RunningJob] = [*(inputs.jobs or []), *inputs.running]
    for attempt in attempts:
        if attempt.created_at is not None:
            out.setdefault((attempt.namespace, attempt.owner_name), []).append(attempt.created_at)
    return out


def retried(outcome: BatchOutcome, attempt: RunningJob) -> bool:
    """Whether a job's running attempt began after the attempt that gave its verdict (a retry, or a run
    again): it is then listed as in progress too, as its pods' hours are."""
    made = outcome.attempt_created_at
    return made is not None and attempt.created_at is not None and attempt.created_at > made


def replicas(svc: ServiceTally, capacity: CapacityEstimate | None, cost: CostPolicy, notes: list[str]
             ) -> dict[str, Any]:
    """Replicas a serving service needs: its ``forecast_quantile`` 5-minute request rate (all finished
    requests, aborted and failed ones too: they were load) plus the policy's headroom, at its measured
    sustainable per-replica rate. The peak, not the mean: a daily cycle's mean is half its peak."""
    out: dict[str, Any] = {"forecast_rps": None, "peak_rps": None, "per_replica_rps": None, "replicas_needed": None,
                           "capacity_source": None, "capacity_age_s": None}
    if svc.spec.kind != "serving":
        return out
    if svc.rate_quantile is not None:
        out["peak_rps"] = float(f"{svc.rate_quantile:.6g}")
        out["forecast_rps"] = float(f"{svc.rate_quantile * (1 + cost.headroom):.6g}")
    why = None
    if capacity is None:
        why = ("its capacity sweep could not be read (its note says why)" if svc.spec.capacity is not None
               else "no capacity sweep in the policy and no load test of it in the store")
    else:
        out["capacity_source"] = capacity.source
        out["capacity_age_s"] = float(f"{capacity.age_seconds:.6g}") if capacity.age_seconds is not None else None
        out["per_replica_rps"] = capacity.per_replica_rps
        if not capacity.met or not capacity.per_replica_rps:
            why = f"its capacity ({capacity.source}) never met the SLO: {capacity.reason}"
    if why is None and out["forecast_rps"] is None:
        why = "no request rate in the window to forecast from"
    if why is not None:
        notes.append(f"service {svc.spec.name}: replicas needed unknown: {why}")
        return out
    assert capacity is not None and capacity.per_replica_rps is not None
    out["replicas_needed"] = replicas_needed(out["forecast_rps"], capacity.per_replica_rps)
    return out
