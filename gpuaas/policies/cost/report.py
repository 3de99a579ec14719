"""Cost per verified outcome over a window: the report as a pure function of what the sources read.

``build_cost_report(inputs, policy)`` joins the per-pod GPU hours (DCGM), the costs
(OpenCost), the serving series (vLLM, quality) and the finished batch Workloads (Kueue) into
the funnel per tenant, the outcomes and cost per outcome per service, the top wasters and a
per-day series for the plots. Nothing here does I/O, so a report can be rebuilt from stored
inputs and tested with numbers worked out by hand.

Which pods belong to a service: for a service with ``pod_labels``, the pods of its namespace that
carry them (a pod two such services select is a ``ConfigError`` naming both); for the others, pods
in the service's namespace whose controller (OpenCost's ``properties.controller``, e.g. KServe's
``<name>-predictor``), or failing that whose pod name, is the service's name or starts with
``<name>-``; the longest matching name wins, so ``chat-eval`` does not take ``chat``'s pods. Pods
of no service are still in their tenant's funnel.

Money has two named columns everywhere: ``gpu_cost`` (the GPUs' share) and ``total_cost``
(everything the cost source charges: GPU, CPU, RAM, CPU-only pods of the namespace too), whichever
source answered (OpenCost's allocation API or its Prometheus metrics). Cost per outcome divides the
one the policy's ``cost.basis`` names (default ``total``); waste is idle GPU-hours at the GPU price.

A value that cannot be known is None, with the reason in ``notes`` (a cost OpenCost left null too, and every sum
that adds it: ``_unknown_money``); a service with cost and no
verified outcome has ``cost_per_outcome`` None and the note "no verified outcome". Without the
Kubernetes API the batch outcomes, the jobs done in time and the productive and in-progress hours of
the tenants and services with batch work are None, never 0. A period without data (before the
telemetry starts) is None in ``daily``, and a note says how much of the window the data covers.

No telemetry is not idleness: where a row (a tenant, a service, the cluster) held GPU-hours none of which had
telemetry, what the telemetry measures (busy, productive, in-progress, idle and active hours, and the
waste) is None, never 0; ``telemetry_missing`` says why where that is the whole cluster. Where part of a
row's hours had telemetry, its figures are those of that part, with the rest in ``unknown_gpu_hours``.

Verified requests are whole numbers that add up: services to their tenant, tenants to the cluster
(``_counts``, the largest-remainder rule); cost per outcome divides the cost shown by the outcomes shown.

Only the jobs of the policy's batch services are outcomes, and only those that finished successfully
by their ``gpuaas.io/deadline`` are verified: a job without one is counted (``no-deadline``), not
verified. Requests and jobs are never added: a tenant (or the cluster) with both kinds of service
has ``verified_outcomes`` None and its cost per outcome per service only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pandas as pd

from gpuaas.models import SERVING_KEYS, CostInputs, SourceStatus
from gpuaas.phrases import DEFAULT_CURRENCY, first_few, minor_units, zero_money
from gpuaas.policies.cost._cost_source import COST_SOURCES, cost_source, pricing_differs
from gpuaas.policies.cost._counts import Outcomes, whole_verified
from gpuaas.policies.cost._coverage import (
    COMPLETE_SHARE,
    TELEMETRY_FIGURES,
    blind,
    comparison_note,
    coverage_note,
    covered_share,
    data_short_s,
    no_telemetry_line,
    period_complete,
    read_coverage,
    unknown_without_telemetry,
)
from gpuaas.policies.cost._figures import cents, cost_per_outcome, footed, num
from gpuaas.policies.cost._node_cost import NODE_COST_KEYS, node_cost
from gpuaas.policies.cost._periods import period_rows
from gpuaas.policies.cost._unknown_money import blank_unknown_money, unknown_costs
from gpuaas.policies.cost._unpriced import (
    NO_OUTCOME,
    gpus_unpriced_note,
    service_note,
    tenant_note,
    unpriced_days,
    unpriced_note,
    unpriced_pods,
    unpriced_services,
)
from gpuaas.policies.cost.funnel import FUNNEL_COLUMNS, MONEY_COLUMNS, POD_COLUMNS, aggregate_funnel, pod_funnel
from gpuaas.policies.cost.outcomes import BatchOutcome, batch_outcomes
from gpuaas.policies.cost.services import (
    ServiceTally,
    attempt_starts,
    batch_tally,
    job_of,
    pod_share,
    replicas,
    retried,
    select_pods,
    serves,
    serving_tally,
)
from gpuaas.policy import Policy, ServiceOutcome

__all__ = ["COMPLETE_SHARE", "COST_SOURCES", "NODE_COST_KEYS", "NO_OUTCOME", "NO_TENANT", "CostReport", "build_cost_report", "comparison_note", "cost_per_outcome",
           "covered_share", "data_short_s", "period_complete", "pricing_differs"]


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
    """Per service and period: ``service, tenant, day, day_end, data, covered_hours, partial, gpu_cost, total_cost,
    verified_outcomes, cost_per_outcome`` (``_periods``)."""
    batch: list[dict[str, Any]]
    notes: list[str]
    queries: int = 0
    cost_basis: str = "total"
    """Which of ``gpu_cost`` and ``total_cost`` cost per outcome divides (the policy's ``cost.basis``)."""
    covered_s: float | None = None
    """Seconds of the window its GPU telemetry spans (per period, first to last sample); None: not recorded."""
    data_from: datetime | None = None
    """The first GPU telemetry in the window; None when there is none, or it was not recorded."""
    span_step_s: float | None = None
    """The resolution of ``covered_s``: a window short of it by less is spanned whole."""
    telemetry_missing: str | None = None
    """Why the whole cluster's busy, idle and waste figures are unknown (no GPU telemetry at all, naming where it
    was looked for); None when some GPU-hours had telemetry. Such a run is degraded."""
    sources: dict[str, SourceStatus] = field(default_factory=dict)
    """What each source answered while the window was read: a failed one makes the run degraded, and every view of
    the report (the headline, the page, the summary) says so first."""
    cost_source: str | None = None
    """Where the money came from (``COST_SOURCES``); None where no cost source answered, or it was not recorded."""
    node_cost: dict[str, Any] = field(default_factory=dict)
    """What the nodes cost: the allocated cost plus OpenCost's ``__idle__`` (``NODE_COST_KEYS``), and per period
    (``periods``); the idle figures None where unknown, with ``idle_unknown`` saying why (``_node_cost``)."""
    currency: str = DEFAULT_CURRENCY
    """The ISO 4217 code of every amount (OpenCost's prices' currency, ``GPUAAS_OPENCOST_CURRENCY``), never converted:
    the views write money in it (``money``), and it is rounded to its minor units (a yen has no cents). A document
    that does not say (an older one) is in USD."""


def _owner(services: list[ServiceOutcome], namespace: str, name: str) -> str | None:
    """The service a pod is by name; a service with ``pod_labels`` is keyed by them, never by name."""
    matches = [s.name for s in services if not s.pod_labels and s.namespace == namespace
               and (name == s.name or name.startswith(s.name + "-"))]
    return max(matches, key=len) if matches else None


NO_TENANT = "(no tenant)"
"""How a table marks the row of a namespace that no tenant of the policy names (its ``configured_tenant`` False)."""


def _tenant(policy: Policy, namespace: str) -> str:
    """The policy's tenant of ``namespace``; a namespace no tenant names is a row of its own under its own name,
    marked ``configured_tenant`` False (``NO_TENANT`` in the tables), so that every GPU-hour and dollar is in a row."""
    tenant = policy.tenant_for(namespace)
    return tenant.name if tenant else namespace


def _pods(inputs: CostInputs, policy: Policy, selected: dict[tuple[str, str], str]) -> pd.DataFrame:
    """One row per pod over the window: hours, costs, controller, service, tenant."""
    gpu = inputs.gpu.groupby(["namespace", "pod"], as_index=False)[["observed_h", "busy_h", "active_h"]].sum()
    if inputs.costs is not None and not inputs.costs.empty:
        by_pod = inputs.costs.groupby(["namespace", "pod"])
        # GPU-hours OpenCost left null are unknown (the pod's DCGM hours stand in), not 0; an unknown cost counts $0
        # here, and ``blank_unknown_money`` makes every figure that adds it unknown
        costs = by_pod.agg(controller=("controller", "first"), gpu_cost=("gpu_cost", "sum"),
                           total_cost=("total_cost", "sum")).join(
            by_pod["gpu_hours"].sum(min_count=1).rename("allocated_h")).reset_index()
        pods = gpu.merge(costs, on=["namespace", "pod"], how="outer")
    else:
        pods = gpu.assign(controller="", allocated_h=float("nan"), gpu_cost=float("nan"), total_cost=float("nan"))
    pods = pods[pods["namespace"].fillna("") != ""].reset_index(drop=True)  # "": a free GPU, held by nobody
    pods["pod"] = pods["pod"].fillna("").astype(str)
    pods["controller"] = pods["controller"].fillna("").astype(str)
    pods["workload"] = [c or p or "(namespace)" for c, p in zip(pods["controller"], pods["pod"])]
    pods["tenant"] = [_tenant(policy, ns) for ns in pods["namespace"]]
    pods["service"] = [selected.get((ns, p)) or _owner(policy.services, ns, w) or _owner(policy.services, ns, p)
                       for ns, w, p in zip(pods["namespace"], pods["workload"], pods["pod"])]
    return pods


def _unseen(columns: pd.Index) -> pd.Series:
    """The funnel row of a tenant none of whose pods was seen: no GPU-hours, and its money unknown (never $0)."""
    return pd.Series({c: float("nan") if c in MONEY_COLUMNS else 0.0 for c in columns})


def _money_cols(row: Any, basis: str, verified: float | None, costs_known: bool, decimals: int) -> dict[str, Any]:
    """The two named costs and the waste, to the cent (``decimals``: the currency's minor units), and cost per outcome
    on the policy's basis: the cost shown divided by the outcomes shown, so a reader who divides them gets the same
    figure."""
    if not costs_known:
        return {"gpu_cost": None, "total_cost": None, "waste_cost": None, "cost_per_outcome": None}
    money = {c: cents(row[c], decimals) for c in ("gpu_cost", "total_cost", "waste_cost")}
    return {**money, "cost_per_outcome": num(cost_per_outcome(money[f"{basis}_cost"], verified))}


def build_cost_report(inputs: CostInputs, policy: Policy, policy_file: str | None = None,
                      currency: str = DEFAULT_CURRENCY) -> CostReport:
    """The whole report for ``inputs``' window (see the module docstring for the rules); ``policy_file``
    names the file in the error about two services selecting one pod. ``currency``: the ISO 4217 code of OpenCost's
    prices (``GPUAAS_OPENCOST_CURRENCY``): the money is rounded to its minor units and its notes written in it,
    never converted."""
    decimals = minor_units(currency)
    notes = list(inputs.notes)
    costs_known = inputs.costs is not None
    jobs_known = inputs.jobs is not None
    basis = policy.cost.basis
    coverage = read_coverage(inputs)
    window_s = (inputs.end - inputs.start).total_seconds()
    if coverage is not None and (note := coverage_note(coverage, window_s, currency)) is not None:
        notes.append(note)
    selected = select_pods(policy.services, inputs.pod_labels, policy_file)
    pods = _pods(inputs, policy, selected)
    dark_pods = unpriced_pods(pods, costs_known)
    if (note := unpriced_note(dark_pods)) is not None:
        notes.append(note)
    serving = inputs.serving.copy()
    for column in SERVING_KEYS:  # absent in frames built without them: "" (no pod, no service)
        serving[column] = serving[column].fillna("").astype(str) if column in serving else ""
    pods_of: dict[str, set[tuple[str, str]]] = {}
    for key, name in selected.items():
        pods_of.setdefault(name, set()).add(key)
    batch_specs = [s for s in policy.services if s.kind == "batch"]

    def of_service(namespace: str, job: str) -> bool:
        return any(serves(s, namespace, job) for s in batch_specs)

    outcomes: list[BatchOutcome] = []
    if inputs.jobs is None:
        notes.append("batch outcomes unknown: the Kubernetes API did not answer")
    else:
        reasons = sorted({r for s in batch_specs for r in s.success_reasons} or {"Succeeded"})
        # a job of no batch service is nobody's outcome: its hours are busy, not productive
        outcomes = [o for o in batch_outcomes(inputs.jobs, inputs.start, inputs.end, reasons, require_deadline=True)
                    if of_service(o.namespace, o.job)]
        undated = sum(o.verdict == "no-deadline" for o in outcomes)
        if undated:
            notes.append(f"{undated} batch job{'s' if undated > 1 else ''} finished without a gpuaas.io/deadline: "
                         "counted as jobs, not as done in time (an outcome is a job finished by its deadline)")
    models: dict[str, int] = {}
    for spec in policy.services:
        if spec.kind == "serving" and spec.model_name:
            models[spec.model_name] = models.get(spec.model_name, 0) + 1
    services = [ServiceTally(s, _tenant(policy, s.namespace)) for s in policy.services]
    for svc in services:
        if svc.spec.kind != "batch":
            serving_tally(svc, serving, inputs.days, models, notes, pods_of.get(svc.spec.name))
        elif jobs_known:
            batch_tally(svc, outcomes, inputs.start, inputs.period, inputs.days)
        else:
            svc.daily_verified = dict.fromkeys(range(inputs.days))

    # productive share per pod: a service's verified share of its requests; a batch pod's by its job's attempt
    share: dict[tuple[str, str], float] = {}
    for svc in services:
        if svc.spec.kind == "serving" and svc.requests and svc.verified is not None:
            share[(svc.spec.namespace, svc.spec.name)] = min(svc.verified / svc.requests, 1.0)
    whole_verified(services)  # what is printed adds up; the shares above keep the estimates
    by_job = {(o.namespace, o.job): o for o in outcomes}
    # in progress: a batch service's job still running (the reader keeps batch kinds only)
    running = {(r.namespace, r.owner_name): r for r in inputs.running if of_service(r.namespace, r.owner_name)}
    jobs: dict[str, list[str]] = {}
    for ns, job in [*by_job, *running]:
        jobs.setdefault(ns, []).append(job)
    starts = attempt_starts(inputs)
    shares, in_progress = [], []
    for ns, svc_name, controller, pod in zip(pods["namespace"], pods["service"], pods["controller"], pods["pod"]):
        if (ns, svc_name) in share:
            shares.append(share[(ns, svc_name)])
            in_progress.append(False)
            continue
        owner = controller or inputs.pod_owners.get((ns, pod), "")
        pod_job = job_of(ns, owner, pod, jobs)
        value, progress = pod_share(pod_job, ns, inputs.last_seen.get((ns, pod)), by_job, running,
                                    starts.get((ns, pod_job or ""), []))
        shares.append(value)
        in_progress.append(progress)
    pods["share"], pods["in_progress"] = shares, in_progress
    funnel = pod_funnel(pods[[*POD_COLUMNS, "service"]], costs_known)
    if costs_known and (note := gpus_unpriced_note(pods, funnel)) is not None:
        notes.append(note)

    tenants = aggregate_funnel(funnel, ["tenant"], costs_known).set_index("tenant")
    kueue_extra = 0.0  # Kueue's hours beyond what DCGM saw: in the tenants' rows, so in the cluster's too
    if not costs_known and inputs.kueue_hours is not None and not inputs.kueue_hours.empty:
        for tenant in policy.tenants:
            kueue = float(inputs.kueue_hours[inputs.kueue_hours["cluster_queue"].isin(tenant.cluster_queues)]
                          ["allocated_h"].sum())
            if kueue > 0 and tenant.name not in tenants.index:  # quota in use, no GPU series of its pods
                tenants.loc[tenant.name] = _unseen(tenants.columns)
            if tenant.name in tenants.index and kueue > tenants.at[tenant.name, "allocated_gpu_hours"]:
                extra = kueue - tenants.at[tenant.name, "allocated_gpu_hours"]
                tenants.at[tenant.name, "allocated_gpu_hours"] = kueue
                tenants.at[tenant.name, "unknown_gpu_hours"] += extra
                kueue_extra += extra
    tally = Outcomes(services, jobs_known)
    # A tenant whose services did work while none of its pods was found: its outcomes are in the cluster's, so it
    # has a row, with no GPU-hours and its money unknown (never $0), as its services' rows have.
    for name in sorted({svc.tenant for svc in services} - set(tenants.index)):
        if tally.requests(name) or tally.jobs(name):
            tenants.loc[name] = _unseen(tenants.columns)
            notes.append(f"tenant {name}: its services did work, but none of its pods was found in OpenCost or the "
                         f"GPU telemetry: its cost is unknown, not {zero_money(currency)}")
    funnel_sums = funnel[FUNNEL_COLUMNS].sum(min_count=1)
    if kueue_extra > 0:
        for column in ("allocated_gpu_hours", "unknown_gpu_hours"):
            held = funnel_sums[column]
            funnel_sums[column] = (0.0 if pd.isna(held) else float(held)) + kueue_extra
    missing = None
    if coverage is not None and coverage.data_from is None and coverage.covered_s <= 0:
        missing = no_telemetry_line(coverage.metrics)
    elif blind(funnel_sums.fillna(0.0)):
        missing = f"no GPU telemetry for any of the {funnel_sums['allocated_gpu_hours']:,.1f} GPU-hours allocated"
        notes.append(f"{missing}: busy, productive, in-progress, idle and active GPU-hours and the waste are unknown, "
                     "not 0")
    per_service = funnel.groupby("service")[FUNNEL_COLUMNS].sum(min_count=1)
    unpriced = unpriced_services(services, pods, costs_known)  # their cost unknown, not $0 (and $0 per outcome)
    tenant_rows = []
    configured = {t.name for t in policy.tenants}
    shown = footed(tenants, funnel_sums, decimals) if costs_known else tenants
    for name, row in tenants.sort_index().iterrows():
        verified = tally.verified(str(name))
        money = _money_cols(shown.loc[name], basis, verified, costs_known, decimals)
        dark = [s.spec.name for s in services
                if s.tenant == name and s.spec.name in unpriced and s.spec.name in per_service.index]
        tenant_note(str(name), money, verified, dark, dark_pods, row["allocated_gpu_hours"], basis, notes,
                    "batch" if tally.jobs(str(name)) else "serving", currency)  # as its row prices its outcomes
        tenant_rows.append({
            "tenant": str(name), **{c: num(row[c]) for c in FUNNEL_COLUMNS if c.endswith("_hours")},
            **money, "verified_outcomes": num(verified),
            "verified_requests": num(tally.requests(str(name))), "verified_jobs": num(tally.jobs(str(name))),
            **tally.unknown_hours(str(name)),
            "configured_tenant": str(name) in configured,
        })
        unknown_without_telemetry(tenant_rows[-1], row, f"tenant {name}", notes, missing is not None)
    if (note := _no_tenant_note([t["tenant"] for t in tenant_rows if not t["configured_tenant"]])) is not None:
        notes.append(note)
    if not costs_known:
        notes.append("cost unknown: " + ("; ".join(n for n in inputs.notes if "opencost" in n.lower())
                                         or "no cost source answered") + " (the funnel is still shown, in GPU-hours)")
    if any(tally.verified(t["tenant"]) is None and tally.mixed(t["tenant"]) for t in tenant_rows):
        notes.append("requests and jobs are never added: a tenant with serving and batch services has its cost per "
                     "outcome per service only")

    service_rows, understated = [], set()
    for svc in services:
        row = per_service.loc[svc.spec.name] if svc.spec.name in per_service.index else pd.Series(
            0.0, index=FUNNEL_COLUMNS)
        money = _money_cols(row.fillna(0.0), basis, svc.verified, costs_known and svc.spec.name not in unpriced,
                            decimals)
        if service_note(svc, money, svc.spec.name in unpriced, pods, dark_pods, row["allocated_gpu_hours"], basis,
                        notes, currency):
            understated.add(svc.spec.name)
        unknown = svc.outcomes_unknown(jobs_known)  # a serving service is never in progress: 0, known
        running_unknown = unknown and svc.spec.kind == "batch"
        service_rows.append({
            "service": svc.spec.name, "tenant": svc.tenant, "kind": svc.spec.kind,
            "requests": num(svc.requests), "good_requests": num(svc.good),
            "verified_outcomes": num(svc.verified),
            "verified_outcomes_range": [num(v) for v in svc.verified_range] if svc.verified_range else None,
            "slo_fraction": num(svc.slo.fraction) if svc.slo else None,
            "slo_error_bound": num(svc.slo.error_bound) if svc.slo else None,
            "slo_bucket": list(svc.slo.bucket) if svc.slo and svc.spec.kind == "serving" else None,
            **money,
            "busy_gpu_hours": num(row["busy_gpu_hours"] or 0.0),
            "productive_gpu_hours": None if unknown else num(row["productive_gpu_hours"] or 0.0),
            "in_progress_gpu_hours": None if running_unknown else num(row["in_progress_gpu_hours"] or 0.0),
            **replicas(svc, inputs.capacity.get(svc.spec.name), policy.cost, notes),
        })
        unknown_without_telemetry(service_rows[-1], row.fillna(0.0), f"service {svc.spec.name}", notes,
                                  missing is not None)

    daily = period_rows(inputs, services, costs_known, pods, basis, coverage, unpriced,
                        {r["service"]: r for r in service_rows}, unpriced_days(inputs.gpu, dark_pods[dark_pods["service"].isin(understated)]),
                        decimals)
    wasters = _wasters(funnel, costs_known, configured, decimals)
    cluster: dict[str, Any] = {c: num(funnel_sums[c]) if c.endswith("_hours")
                               else (cents(funnel_sums[c], decimals) if costs_known else None) for c in FUNNEL_COLUMNS}
    cluster.update(tally.unknown_hours(None))
    if missing is not None:
        cluster.update(dict.fromkeys(TELEMETRY_FIGURES, None))
    cluster["verified_outcomes"] = num(tally.verified(None))
    cluster["verified_requests"] = num(tally.requests(None))
    cluster["verified_jobs"] = num(tally.jobs(None))
    cluster["cost_basis"] = basis
    if not tenant_rows:
        notes.append("no GPU workload was seen in the window")
    batch = [{"namespace": o.namespace, "job": o.job, "kind": o.owner_kind, "finished_at": o.finished_at.isoformat(),
              "deadline": o.deadline.isoformat() if o.deadline else None, "verdict": o.verdict} for o in outcomes]
    batch += [{"namespace": r.namespace, "job": r.owner_name, "kind": r.owner_kind, "finished_at": None,
               "deadline": None, "verdict": "in progress"} for key, r in sorted(running.items())
              if key not in by_job or retried(by_job[key], r)]
    blank_unknown_money(unknown_costs(inputs.costs if costs_known else None), pods, basis,
                        {"tenants": tenant_rows, "services": service_rows, "cluster": cluster, "daily": daily,
                         "wasters": wasters}, notes, currency)
    return CostReport(
        window_s=window_s, start=inputs.start, end=inputs.end,
        tenants=tenant_rows, services=service_rows, cluster=cluster, wasters=wasters, daily=daily, batch=batch,
        notes=list(dict.fromkeys(notes)), queries=inputs.queries, cost_basis=basis,
        covered_s=coverage.covered_s if coverage else None, data_from=coverage.data_from if coverage else None,
        span_step_s=coverage.step_s if coverage else None, telemetry_missing=missing,
        sources=dict(inputs.sources), cost_source=cost_source(inputs),
        node_cost=node_cost(inputs, cluster, telemetry=missing is None, decimals=decimals), currency=currency,
    )


def _wasters(funnel: pd.DataFrame, costs_known: bool, configured: set[str], decimals: int = 2,
             top: int = 10) -> list[dict[str, Any]]:
    """The ``top`` workloads by waste (by idle GPU-hours without costs); ``configured``: the policy's tenants, so that
    a namespace of none is marked as its tenant row is; ``decimals``: the currency's minor units."""
    per = aggregate_funnel(funnel, ["tenant", "namespace", "workload"], costs_known)
    key = "waste_cost" if costs_known else "idle_gpu_hours"
    per = per[per["idle_gpu_hours"] > 0].sort_values([key, "workload"], ascending=[False, True]).head(top)
    return [{"tenant": r.tenant, "namespace": r.namespace, "workload": r.workload,
             "idle_gpu_hours": num(r.idle_gpu_hours), "allocated_gpu_hours": num(r.allocated_gpu_hours),
             "waste_cost": cents(r.waste_cost, decimals) if costs_known else None,
             "configured_tenant": r.tenant in configured} for r in per.itertuples()]


def _no_tenant_note(namespaces: list[str]) -> str | None:
    """The note on the rows of namespaces that no tenant of the policy names (``_tenant`` gives them their own row,
    so that the rows still add up to the cluster); None where there are none.

    Why: without it, ``kube-system`` or ``monitoring`` reads as a tenant someone is charged as, and a reader may
    take the tenants' rows for the whole cost spread over them."""
    if not namespaces:
        return None
    many = len(namespaces) > 1
    return (f"namespace{'s' if many else ''} {first_few(sorted(namespaces))} {'are' if many else 'is'} in no tenant "
            f"of the policy: {'each has a row' if many else 'it has a row'} of its own, marked \"{NO_TENANT}\" "
            "(configured_tenant false in the JSON), so that the rows add up to the cluster's; what such namespaces "
            "cost (shared overhead: system and monitoring pods) is not spread over the tenants")
