"""Cost per verified outcome over a window: the report as a pure function of what the sources read.

``build_cost_report(inputs, policy)`` joins the per-pod GPU hours (DCGM), the costs
(OpenCost), the serving series (vLLM, quality) and the finished batch Workloads (Kueue) into
the funnel per tenant, the outcomes and cost per outcome per service, the top wasters and a
per-day series for the plots. Nothing here does I/O, so a report can be rebuilt from stored
inputs and tested with numbers worked out by hand.

Which pods belong to a service: pods in the service's namespace whose controller (OpenCost's
``properties.controller``, e.g. KServe's ``<name>-predictor``), or failing that whose pod name,
is the service's name or starts with ``<name>-``; the longest matching name wins, so
``chat-eval`` does not take ``chat``'s pods. Pods of no service are still in their tenant's funnel.

A value that cannot be known is None, with the reason in ``notes``; a service with cost and no
verified outcome has ``cost_per_outcome`` None and the note "no verified outcome".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import pandas as pd

from gpuaas.policies.capacity import replicas_needed
from gpuaas.policies.funnel import FUNNEL_COLUMNS, POD_COLUMNS, aggregate_funnel, pod_funnel
from gpuaas.policies.outcomes import (
    BatchOutcome,
    FinishedJob,
    SloFraction,
    batch_outcomes,
    fraction_within,
    verified_requests,
)
from gpuaas.policy import Policy, ServiceOutcome

if TYPE_CHECKING:
    from gpuaas.sources.capacity import CapacityEstimate

__all__ = ["CostInputs", "CostReport", "build_cost_report", "cost_per_outcome"]

NO_OUTCOME = "no verified outcome"
GPU_COLS = ["namespace", "pod", "day", "observed_h", "busy_h"]
COST_COLS = ["namespace", "controller_kind", "controller", "pod", "day", "gpu_hours", "cost"]
SERVING_COLS = ["namespace", "model_name", "day", "stat", "finished_reason", "le", "value"]


@dataclass(frozen=True)
class CostInputs:
    """What the sources read for one window, split into ``days`` equal periods ending at ``end``."""

    start: datetime
    end: datetime
    days: int
    gpu: pd.DataFrame
    """``GPU_COLS``: GPU-hours with telemetry and busy GPU-hours per pod and period."""
    costs: pd.DataFrame | None
    """``COST_COLS`` per pod and period; None when no cost source answered (money unknown)."""
    serving: pd.DataFrame
    """``SERVING_COLS``; ``stat`` is ``requests`` (by reason), ``latency_bucket`` (by ``le``) or
    ``quality_ok:<metric>`` (requests by reason while the metric held its threshold)."""
    jobs: list[FinishedJob] | None
    """Finished Kueue Workloads; None when the Kubernetes API did not answer."""
    kueue_hours: pd.DataFrame | None = None
    """``cluster_queue, allocated_h``: GPU quota in use x hours, the allocation floor without OpenCost."""
    notes: list[str] = field(default_factory=list)
    queries: int = 0
    capacity: dict[str, CapacityEstimate | None] = field(default_factory=dict)
    """Per serving service name: its sustainable per-replica rate (sweep file or load test), None if unmeasured."""

    @property
    def period(self) -> timedelta:
        return (self.end - self.start) / max(self.days, 1)


@dataclass(frozen=True)
class CostReport:
    window_s: float
    start: datetime
    end: datetime
    tenants: list[dict[str, Any]]
    services: list[dict[str, Any]]
    cluster: dict[str, Any]
    wasters: list[dict[str, Any]]
    daily: list[dict[str, Any]]
    """Per service and period: ``service, tenant, day_end, cost, verified_outcomes, cost_per_outcome``."""
    batch: list[dict[str, Any]]
    notes: list[str]
    queries: int = 0


def cost_per_outcome(cost: float | None, outcomes: float | None) -> float | None:
    """Money per verified outcome; None (never inf, never 0) when either is unknown or there is none."""
    if cost is None or outcomes is None or outcomes <= 0 or math.isnan(cost):
        return None
    return cost / outcomes


def _num(value: Any) -> float | None:
    """Six significant digits (a cost per outcome can be $0.0002); None for unknown."""
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else float(f"{value:.6g}")


def _owner(services: list[ServiceOutcome], namespace: str, name: str) -> str | None:
    matches = [s.name for s in services if s.namespace == namespace and (name == s.name or name.startswith(s.name + "-"))]
    return max(matches, key=len) if matches else None


def _tenant(policy: Policy, namespace: str) -> str:
    tenant = policy.tenant_for(namespace)
    return tenant.name if tenant else namespace


def _pods(inputs: CostInputs, policy: Policy) -> pd.DataFrame:
    """One row per pod over the window: hours, cost, controller, service, tenant."""
    gpu = inputs.gpu.groupby(["namespace", "pod"], as_index=False)[["observed_h", "busy_h"]].sum()
    if inputs.costs is not None and not inputs.costs.empty:
        costs = inputs.costs.groupby(["namespace", "pod"], as_index=False).agg(
            controller=("controller", "first"), allocated_h=("gpu_hours", "sum"), cost=("cost", "sum"))
        pods = gpu.merge(costs, on=["namespace", "pod"], how="outer")
    else:
        pods = gpu.assign(controller="", allocated_h=float("nan"), cost=float("nan"))
    pods = pods[pods["namespace"].fillna("") != ""].reset_index(drop=True)  # "": a free GPU, held by nobody
    pods["pod"] = pods["pod"].fillna("").astype(str)
    pods["controller"] = pods["controller"].fillna("").astype(str)
    pods["workload"] = [c or p or "(namespace)" for c, p in zip(pods["controller"], pods["pod"])]
    pods["tenant"] = [_tenant(policy, ns) for ns in pods["namespace"]]
    pods["service"] = [_owner(policy.services, ns, w) or _owner(policy.services, ns, p)
                       for ns, w, p in zip(pods["namespace"], pods["workload"], pods["pod"])]
    return pods


@dataclass
class _Service:
    spec: ServiceOutcome
    tenant: str
    requests: float | None = None
    good: float | None = None
    slo: SloFraction | None = None
    verified: float | None = None
    daily_verified: dict[int, float | None] = field(default_factory=dict)
    daily_requests: dict[int, float] = field(default_factory=dict)
    outcomes: list[BatchOutcome] = field(default_factory=list)


def _serving_rows(serving: pd.DataFrame, spec: ServiceOutcome) -> pd.DataFrame:
    """The service's series: its namespace (or none, from an endpoint scraped without one) and model."""
    rows = serving[serving["namespace"].isin([spec.namespace, ""])]
    if spec.model_name:
        rows = rows[rows["model_name"] == spec.model_name]
    return rows


def _serving(svc: _Service, serving: pd.DataFrame, days: int, notes: list[str]) -> None:
    spec = svc.spec
    assert spec.latency_slo_seconds is not None
    rows = _serving_rows(serving, spec)
    reqs = rows[rows["stat"] == "requests"]
    if rows.empty:
        notes.append(f"service {spec.name}: no serving series in the window (requests and outcomes unknown)")
        return
    good_stat = f"quality_ok:{spec.quality.metric}" if spec.quality else "requests"
    good_rows = rows[(rows["stat"] == good_stat) & rows["finished_reason"].isin(spec.good_finished_reasons)]
    hist = rows[rows["stat"] == "latency_bucket"]

    def slo_of(frame: pd.DataFrame) -> SloFraction:
        return fraction_within(zip(frame["le"].astype(float), frame["value"].astype(float)), spec.latency_slo_seconds
                               or 0.0)

    svc.requests = float(reqs["value"].sum())
    svc.good = float(good_rows["value"].sum())
    svc.slo = slo_of(hist)
    svc.verified = verified_requests(svc.good, svc.slo)
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


def _batch(svc: _Service, outcomes: list[BatchOutcome], start: datetime, period: timedelta, days: int) -> None:
    mine = [o for o in outcomes if o.namespace == svc.spec.namespace
            and (o.job == svc.spec.name or o.job.startswith(svc.spec.name + "-"))]
    svc.outcomes = mine
    svc.requests = float(len(mine))
    svc.verified = float(sum(o.verified for o in mine))
    svc.slo = SloFraction(svc.requests, svc.verified, svc.verified / svc.requests if mine else None,
                          0.0 if mine else None, (0.0, 0.0))
    for day in range(days):
        lo, hi = start + day * period, start + (day + 1) * period
        svc.daily_verified[day] = float(sum(o.verified for o in mine if lo < o.finished_at <= hi))


def build_cost_report(inputs: CostInputs, policy: Policy) -> CostReport:
    """The whole report for ``inputs``' window (see the module docstring for the rules)."""
    notes = list(inputs.notes)
    costs_known = inputs.costs is not None
    pods = _pods(inputs, policy)
    tenant_of_ns = {ns: _tenant(policy, ns) for ns in pods["namespace"].unique()}

    outcomes: list[BatchOutcome] = []
    if inputs.jobs is None:
        notes.append("batch outcomes unknown: the Kubernetes API did not answer")
    else:
        reasons = sorted({r for s in policy.services if s.kind == "batch" for r in s.success_reasons} or {"Succeeded"})
        outcomes = batch_outcomes(inputs.jobs, inputs.start, inputs.end, reasons)
    services = [_Service(s, _tenant(policy, s.namespace)) for s in policy.services]
    for svc in services:
        if svc.spec.kind == "batch":
            _batch(svc, outcomes, inputs.start, inputs.period, inputs.days)
        else:
            _serving(svc, inputs.serving, inputs.days, notes)

    # productive share per workload
    share: dict[tuple[str, str], float] = {}
    for svc in services:
        if svc.spec.kind == "serving" and svc.requests and svc.verified is not None:
            share[(svc.spec.namespace, svc.spec.name)] = min(svc.verified / svc.requests, 1.0)
    on_time = {(o.namespace, o.job) for o in outcomes if o.verified}
    pods["share"] = [share[(ns, s)] if (ns, s) in share else (1.0 if (ns, w) in on_time else 0.0)
                     for ns, s, w in zip(pods["namespace"], pods["service"], pods["workload"])]
    funnel = pod_funnel(pods[[*POD_COLUMNS, "service"]], costs_known)

    tenants = aggregate_funnel(funnel, ["tenant"], costs_known).set_index("tenant")
    if not costs_known and inputs.kueue_hours is not None and not inputs.kueue_hours.empty:
        for tenant in policy.tenants:
            kueue = float(inputs.kueue_hours[inputs.kueue_hours["cluster_queue"].isin(tenant.cluster_queues)]
                          ["allocated_h"].sum())
            if tenant.name in tenants.index and kueue > tenants.at[tenant.name, "allocated_gpu_hours"]:
                extra = kueue - tenants.at[tenant.name, "allocated_gpu_hours"]
                tenants.at[tenant.name, "allocated_gpu_hours"] = kueue
                tenants.at[tenant.name, "unknown_gpu_hours"] += extra
    verified_by_tenant: dict[str, float] = {}
    for svc in services:
        if svc.spec.kind == "serving":
            verified_by_tenant[svc.tenant] = verified_by_tenant.get(svc.tenant, 0.0) + (svc.verified or 0.0)
    for o in outcomes:
        if o.verified:
            t = tenant_of_ns.get(o.namespace) or _tenant(policy, o.namespace)
            verified_by_tenant[t] = verified_by_tenant.get(t, 0.0) + 1.0

    def money(value: Any) -> float | None:
        return _num(value) if costs_known else None

    tenant_rows = []
    for name, row in tenants.sort_index().iterrows():
        verified = verified_by_tenant.get(str(name), 0.0)
        cpo = cost_per_outcome(money(row["cost"]), verified)
        if costs_known and cpo is None and verified is not None:
            notes.append(f"tenant {name}: cost {row['cost']:.2f}, {NO_OUTCOME}")
        tenant_rows.append({
            "tenant": str(name),
            **{c: _num(row[c]) for c in FUNNEL_COLUMNS if c.endswith("_hours")},
            "cost": money(row["cost"]), "waste_cost": money(row["waste_cost"]),
            "verified_outcomes": _num(verified), "cost_per_outcome": _num(cpo),
        })
    if not costs_known:
        notes.append("cost unknown: " + ("; ".join(n for n in inputs.notes if "opencost" in n.lower())
                                         or "no cost source answered") + " (the funnel is still shown, in GPU-hours)")

    svc_cost = funnel.groupby("service")["cost"].sum(min_count=1) if costs_known else pd.Series(dtype=float)
    service_rows = []
    for svc in services:
        cost = _num(svc_cost.get(svc.spec.name, 0.0)) if costs_known else None
        cpo = cost_per_outcome(cost, svc.verified)
        if cost is not None and cpo is None and svc.verified is not None:
            notes.append(f"service {svc.spec.name}: cost {cost:.2f}, {NO_OUTCOME}")
        service_rows.append({
            "service": svc.spec.name, "tenant": svc.tenant, "kind": svc.spec.kind,
            "requests": _num(svc.requests), "good_requests": _num(svc.good),
            "verified_outcomes": _num(svc.verified),
            "slo_fraction": _num(svc.slo.fraction) if svc.slo else None,
            "slo_error_bound": _num(svc.slo.error_bound) if svc.slo else None,
            "slo_bucket": list(svc.slo.bucket) if svc.slo and svc.spec.kind == "serving" else None,
            "cost": cost, "cost_per_outcome": _num(cpo),
            "busy_gpu_hours": _num(funnel.loc[funnel["service"] == svc.spec.name, "busy_gpu_hours"].sum()),
            **_replicas(svc, inputs, notes),
        })

    daily = _daily(inputs, services, costs_known, pods)
    wasters = _wasters(funnel, costs_known)
    cluster = {c: _num(funnel[c].sum(min_count=1)) if c.endswith("_hours") else money(funnel[c].sum(min_count=1))
               for c in FUNNEL_COLUMNS}
    cluster["verified_outcomes"] = _num(sum(verified_by_tenant.values()))
    if not tenant_rows:
        notes.append("no GPU workload was seen in the window")
    batch = [{"namespace": o.namespace, "job": o.job, "kind": o.owner_kind, "finished_at": o.finished_at.isoformat(),
              "deadline": o.deadline.isoformat() if o.deadline else None, "verdict": o.verdict} for o in outcomes]
    return CostReport(
        window_s=(inputs.end - inputs.start).total_seconds(), start=inputs.start, end=inputs.end,
        tenants=tenant_rows, services=service_rows, cluster=cluster, wasters=wasters, daily=daily, batch=batch,
        notes=list(dict.fromkeys(notes)), queries=inputs.queries,
    )


def _replicas(svc: _Service, inputs: CostInputs, notes: list[str]) -> dict[str, Any]:
    """Replicas the forecast needs at the service's measured per-replica rate (serving only).

    The forecast is the busiest period's mean request rate in the window (all finished requests,
    aborted and failed ones too: they were load): demand like the window's worst day again.
    """
    out: dict[str, Any] = {"forecast_rps": None, "per_replica_rps": None, "replicas_needed": None,
                           "capacity_source": None, "capacity_age_s": None}
    if svc.spec.kind != "serving":
        return out
    period_s = inputs.period.total_seconds()
    if svc.daily_requests:
        out["forecast_rps"] = _num(max(svc.daily_requests.values()) / period_s)
    estimate = inputs.capacity.get(svc.spec.name)
    why = None
    if estimate is None:
        why = "no capacity sweep in the policy and no load test of it in the store"
    else:
        out["capacity_source"], out["capacity_age_s"] = estimate.source, _num(estimate.age_seconds)
        out["per_replica_rps"] = _num(estimate.per_replica_rps)
        if not estimate.met or not estimate.per_replica_rps:
            why = f"its capacity ({estimate.source}) never met the SLO: {estimate.reason}"
    if why is None and out["forecast_rps"] is None:
        why = "no request rate in the window to forecast from"
    if why is not None:
        notes.append(f"service {svc.spec.name}: replicas needed unknown: {why}")
        return out
    assert estimate is not None and estimate.per_replica_rps is not None
    out["replicas_needed"] = replicas_needed(out["forecast_rps"], estimate.per_replica_rps)
    return out


def _daily(inputs: CostInputs, services: list[_Service], costs_known: bool, pods: pd.DataFrame) -> list[dict[str, Any]]:
    costs = inputs.costs if costs_known and inputs.costs is not None else pd.DataFrame(columns=COST_COLS)
    owner = pods.set_index(["namespace", "pod"])["service"].to_dict()
    by_service_day: dict[tuple[str, int], float] = {}
    if not costs.empty:
        costs = costs.assign(service=[owner.get((ns, p)) for ns, p in zip(costs["namespace"], costs["pod"])])
        by_service_day = costs.dropna(subset=["service"]).groupby(["service", "day"])["cost"].sum().to_dict()
    out = []
    for svc in services:
        for day in range(inputs.days):
            cost = float(by_service_day.get((svc.spec.name, day), 0.0)) if costs_known else None
            verified = svc.daily_verified.get(day)
            out.append({
                "service": svc.spec.name, "tenant": svc.tenant, "day": day,
                "day_end": (inputs.start + (day + 1) * inputs.period).isoformat(),
                "cost": _num(cost), "verified_outcomes": _num(verified),
                "cost_per_outcome": _num(cost_per_outcome(cost, verified)),
            })
    return out


def _wasters(funnel: pd.DataFrame, costs_known: bool, top: int = 10) -> list[dict[str, Any]]:
    per = aggregate_funnel(funnel, ["tenant", "namespace", "workload"], costs_known)
    key = "waste_cost" if costs_known else "idle_gpu_hours"
    per = per[per["idle_gpu_hours"] > 0].sort_values([key, "workload"], ascending=[False, True]).head(top)
    return [{"tenant": r.tenant, "namespace": r.namespace, "workload": r.workload,
             "idle_gpu_hours": _num(r.idle_gpu_hours), "allocated_gpu_hours": _num(r.allocated_gpu_hours),
             "waste_cost": _num(r.waste_cost) if costs_known else None} for r in per.itertuples()]
