"""The preflight's checks, each a pure function of what was read: its verdict and, in words, what was found or
what to set. ``gpuaas.operations.preflight`` reads the sources and the probes and lists these in order; they live
apart from it so that the use case stays its reading and its order, and each check can be called in a REPL."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

import pandas as pd

from gpuaas.instant import utc_stamp
from gpuaas.models import SourceStatus, WorkloadState
from gpuaas.permissions import (
    ADMISSION_POLICY,
    CANARIES,
    FLOW_READS,
    ROLES,
    WRITES,
    Access,
    AdmissionPolicy,
    Found,
    bind_command,
    unbind_command,
)
from gpuaas.phrases import counted, first_few, listed
from gpuaas.policies.deadlines import HOLD_ANNOTATION
from gpuaas.policy import Policy
from gpuaas.settings import MetricNames
from gpuaas.snapshot_health import clock_problem
from gpuaas.sources.kube import KubeState
from gpuaas.sources.prometheus import KUEUE_PENDING, PrometheusReading

__all__ = ["Check", "SeriesCensus", "Verdict", "admission_check", "excess_check", "headline", "holding_gpus",
           "kube_check", "kueue_metrics_check", "permissions_check", "policy_check", "prometheus_check", "source_check",
           "telemetry_check", "writer_rights"]


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


def prometheus_check(status: SourceStatus, max_staleness_s: float, reading: PrometheusReading | None = None) -> Check:
    """Prometheus answered with data fresh enough to act on (``collect.max_staleness_seconds``): the age is the
    stalest of its newest DCGM, Kueue and vLLM samples, as the reclaim flow reads it, counted on a clock that agrees
    with Prometheus's (``gpuaas.snapshot_health.clock_problem``, which fails every cycle's snapshot too)."""
    name = "Prometheus"
    if status.ok and (clock := clock_problem(reading)) is not None:
        return Check(name, Verdict.failed, f"answered in {status.latency_s:.2f} s, but {clock}")
    if not status.ok or status.staleness_s is None:
        return source_check(name, status)
    age = f"answered in {status.latency_s:.2f} s, its data {status.staleness_s:.0f} s old"
    if status.staleness_s > max_staleness_s:
        return Check(name, Verdict.failed, f"{age}, over the {max_staleness_s:.0f} s collect.max_staleness_seconds "
                                           "allows: no action is taken on it (is the scrape failing?)")
    return Check(name, Verdict.ok, age)


def kueue_metrics_check(reading: PrometheusReading | None) -> Check:
    """Kueue's own metrics are in Prometheus, and their newest sample is not after the instant asked about. Without
    them nothing fails, so nothing else would say they are missing; a sample from the future has an age no action
    can be judged on, so every snapshot would be degraded."""
    name = "Kueue metrics"
    if reading is None:
        return Check(name, Verdict.skipped, "needs Prometheus, above")
    age = reading.staleness.get("kueue")
    if age is None:
        return Check(name, Verdict.warning, f"no {KUEUE_PENDING} in Prometheus: scrape the Kueue manager's metrics "
                                            "(its chart's ServiceMonitor); without them the cost report cannot count "
                                            "allocated GPU-hours where OpenCost is missing, the dashboard shows no "
                                            "backlog and a KEDA-scaled workload is not woken by pending work")
    if age < 0:
        return Check(name, Verdict.failed, f"the newest {KUEUE_PENDING} sample is {-age:.0f} s after the instant "
                                           "asked about: its age cannot be trusted (a proxy rewriting answers, or a "
                                           "broken clock), so no snapshot is fresh")
    queues = reading.kueue.loc[reading.kueue["stat"] == "pending_workloads", "cluster_queue"].nunique()
    return Check(name, Verdict.ok, f"{queues} ClusterQueues in {KUEUE_PENDING}, the newest sample {age:.0f} s old")


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
    unqueued = _unqueued(state)
    problems = [unqueued] if unqueued else []
    if state.kueue_version != "v1beta2":
        problems.insert(0, f"only {state.kueue_version} is served, read as a fallback: Kueue v0.15 or newer serves "
                           "v1beta2")
    if not state.cluster_queues:
        problems.insert(0, "no ClusterQueue, so no quota to plan or backlog to read")
    if problems:
        return Check(name, Verdict.warning, f"{found}{missing}; {'; '.join(problems)}")
    return Check(name, Verdict.ok, f"{found}{missing}")


def _unqueued(state: KubeState) -> str | None:
    """The pending Workloads whose LocalQueue their namespace lacks (a misspelt ``kueue.x-k8s.io/queue-name``, a
    namespace nobody gave a queue): Kueue never admits them, and no ClusterQueue's backlog counts them, so every
    other figure leaves them out without a word."""
    queues = {(q.namespace, q.name) for q in state.local_queues}
    lost = [w for w in state.workloads
            if w.state is WorkloadState.pending and w.queue and (w.namespace, w.queue) not in queues]
    if not lost:
        return None
    shown = "; ".join(f"{_owner(w)} asks for {w.queue}" for w in lost[:3])
    more = f"; and {len(lost) - 3} more" if len(lost) > 3 else ""
    many = len(lost) > 1
    return (f"{len(lost)} pending Workload{'s' if many else ''} ask{'' if many else 's'} for a LocalQueue "
            f"{'their namespaces lack' if many else 'its namespace lacks'}: {shown}{more}; "
            f"{counted(sum(w.gpus for w in lost), 'GPU')} that Kueue never admits and no ClusterQueue's backlog counts (create "
            "the LocalQueue, or correct the job's kueue.x-k8s.io/queue-name label)")


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
            many = len(idle) > 1  # each of them has neither
            problems.append(f"tenant {tenant.name}'s namespace{'s' if many else ''} {listed(idle)} "
                            f"ha{'ve' if many else 's'} no LocalQueue and no Workload")
    unknown = [c for c in policy.rebalance.cohorts if c not in cohorts]
    if unknown:
        problems.append(f"rebalance.cohorts names {', '.join(unknown)}, which no ClusterQueue belongs to")
    if problems:
        return Check(name, Verdict.warning, "; ".join(problems) + " (a typo in the policy file?)")
    return Check(name, Verdict.ok, f"the {len(policy.tenants)} tenants' ClusterQueues and namespaces and the "
                                   "cohorts it names are in the cluster")


def telemetry_check(workloads: pd.DataFrame, metrics: MetricNames, found: SeriesCensus | None,
                    window_start: datetime | None = None) -> Check:
    """Whether the GPU workloads holding GPUs have DCGM samples: without, they stay ``unknown``, never idle.

    ``found`` is the census, taken only where no workload has a sample (the case a setting fixes). ``window_start``:
    the start of the shortest telemetry window; a workload admitted (or created) after it cannot have a whole window of
    samples yet, so its incomplete telemetry is no fault: on a fleet where jobs start all day, counting those would
    make every daily preflight warn. They are said apart.
    """
    name = "GPU telemetry"
    holding = holding_gpus(workloads)
    if holding.empty:
        return Check(name, Verdict.skipped, "no workload holds GPUs now: nothing to match telemetry to")
    unknown = holding[holding["telemetry"] == "unknown"]
    started = _started(unknown)
    new = unknown[started > pd.Timestamp(window_start)] if window_start is not None else unknown.iloc[0:0]
    unknown = unknown.drop(new.index)
    unseen = int((holding["gpus_observed"].fillna(0) == 0).sum())
    total = len(holding)
    names = metrics.activity_names
    young = (f"; {len(new)} more started inside the window ({utc_stamp(window_start, '%H:%M UTC')} on), "
             "judged once it has passed" if len(new) and window_start is not None else "")
    if unknown.empty:
        whole = total - len(new)
        return Check(name, Verdict.ok, f"{whole} of {total} GPU workloads have complete telemetry ({names}){young}")
    if unseen < total or found is None:
        shown = [_owner(row) for row in unknown.head(3).itertuples()]
        more = f" and {len(unknown) - len(shown)} more" if len(unknown) > len(shown) else ""
        verb = "has" if len(unknown) == 1 else "have"
        return Check(name, Verdict.warning, f"{len(unknown)} of {total} GPU workloads {verb} incomplete telemetry in "
                                            f"the window ({', '.join(shown)}{more}; {unseen} with no sample of "
                                            f"{names} at all): they stay unknown, never counted as idle{young}")
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


def _started(workloads: pd.DataFrame) -> pd.Series:
    """When each workload began to hold its GPUs: admitted, else created (as the reclaim policy ages it); NaT where
    neither is known (then it counts as old: no excuse for missing telemetry)."""
    columns = [c for c in ("admitted_at", "created_at") if c in workloads]
    if not columns:
        return pd.Series(pd.NaT, index=workloads.index, dtype="datetime64[ns, UTC]")
    started = pd.to_datetime(workloads[columns[0]], utc=True, errors="coerce")
    for column in columns[1:]:
        started = started.fillna(pd.to_datetime(workloads[column], utc=True, errors="coerce"))
    return started


def _owner(row: Any) -> str:
    """``Deployment platform/embed-batch``: the object an operator knows, else the Workload."""
    kind, name = (row.owner_kind, row.owner_name) if isinstance(row.owner_name, str) and row.owner_name else (
        row.kind, row.name)
    return f"{kind} {row.namespace}/{name}"


def _few(accesses: Sequence[Access]) -> str:
    return first_few([str(a) for a in accesses])


def permissions_check(answers: Mapping[Access, bool], writes_of: Sequence[str], identity: str | None = None) -> Check:
    """The reads every flow makes (``FLOW_READS``), and the writes of ``writes_of`` (the flows that apply), each
    allowed or not; a refusal names the shipped role that grants it. The reader role's reads of the admission
    policy are the admission check's: no flow fails without them. ``identity``: whom the API server took the credentials for,
    said first (an admin kubeconfig is allowed everything, whatever roles are bound to the service account)."""
    name = "permissions"
    who = f"as {identity}: " if identity else ""
    problems = []
    unread = [a for a in FLOW_READS if not answers[a]]
    if unread:
        problems.append(f"{len(unread)} of the {len(FLOW_READS)} reads every flow makes are refused ({_few(unread)}): "
                        f"{bind_command(ROLES['reads'])}")
    for flow in writes_of:
        refused = [a for a in WRITES[flow] if not answers[a]]
        if refused:
            problems.append(f"{flow} would write, but {_few(refused)} {'is' if len(refused) == 1 else 'are'} refused: "
                            f"{bind_command(ROLES[flow])}")
    if problems:  # the reads allowed, where they are: a refused write must not read as a role that reads nothing
        reads = "" if unread else f"allowed: the {len(FLOW_READS)} reads every flow makes; refused: "
        return Check(name, Verdict.failed, who + reads + "; ".join(dict.fromkeys(problems)))
    writes = (f" and the writes of {', '.join(writes_of)}" if writes_of
              else "; no flow applies, so no write was asked about (--all-writes, or all_writes for the flow, asks)")
    return Check(name, Verdict.ok, f"{who}allowed: the {len(FLOW_READS)} reads every flow makes{writes}")


def excess_check(answers: Mapping[Access, bool] | None, applying: Sequence[str], identity: str | None = None,
                 state: KubeState | None = None) -> Check:
    """Credentials broader than gpuaas needs: each of ``CANARIES`` the API server allows, named, with where to take
    it from. A warning, not a failure: every flow still works, but a leaked token (or a bug) could do more than
    gpuaas ever does. ``applying``: the flows the policy switches to apply, the only ones a ``patch`` is needed
    for, but that the deadlines flow releases its holds in any mode: while ``state`` shows a Workload it holds,
    ``patch`` on Workloads is needed. ``answers``: those of the permissions check, None where there are none."""
    name = "permissions beyond need"
    if answers is None:
        return Check(name, Verdict.skipped, "needs the permissions check's answers, above")
    who = f"as {identity}: " if identity else ""
    needed = {a for flow in applying for a in WRITES[flow]}
    if state is not None and any(HOLD_ANNOTATION in dict(w.annotations) for w in state.workloads):
        needed |= {a for a in WRITES["deadlines"] if a.verb == "patch"}
    problems = []
    never = [a for a in CANARIES if a.verb != "patch" and answers.get(a)]
    if never:
        many = len(never) > 1
        problems.append(f"{listed([_said(a) for a in never])} {'are' if many else 'is'} allowed, which no gpuaas "
                        f"role grants: take {'them' if many else 'it'} out of the role bound to "
                        f"{identity or 'these credentials'} that grants {'them' if many else 'it'}")
    for flow in (f for f in WRITES if f not in applying):
        extra = [a for a in WRITES[flow] if a.verb == "patch" and a not in needed and answers.get(a)]
        if extra:
            problems.append(f"{flow} does not apply, yet {listed([str(a) for a in extra])} "
                            f"{'are' if len(extra) > 1 else 'is'} allowed: {unbind_command(ROLES[flow])} "
                            "until it applies")
    if problems:
        return Check(name, Verdict.warning, who + "; ".join(problems))
    return Check(name, Verdict.ok, f"{who}refused, as they should be: the {len(CANARIES)} accesses asked about that "
                                   "gpuaas never needs (get secrets, create pods, * on *, delete of the kinds it "
                                   "writes) or needs only while a flow applies (patch)")


def writer_rights(answers: Mapping[Access, bool]) -> list[Access]:
    """The writer roles' ``patch`` accesses the credentials are allowed (the permissions checks ask each one)."""
    return [a for a in dict.fromkeys(a for accesses in WRITES.values() for a in accesses)
            if a.verb == "patch" and answers.get(a)]


_APPLY_GUARD = "kubectl apply -f deployments/kubernetes/admission-policy.yaml"
_OPEN = ("nothing limits the writer roles to the fields gpuaas writes: the gpuaas service account may change any "
         "field of the objects it may patch (a pod template's image, command or service account)")


def admission_check(guard: AdmissionPolicy | None, answers: Mapping[Access, bool] | None, applying: Sequence[str],
                    error: str | None = None) -> Check:
    """The kit's ``ValidatingAdmissionPolicy`` and its binding (``ADMISSION_POLICY``) are there and deny, wherever a
    flow applies or a writer role's ``patch`` is allowed: RBAC grants a patch of a whole object, so without them a
    writer role is as good as rewriting any pod template it reaches. A warning, not a failure: every flow still
    works. ``guard``: what was read, None where nothing was (``error``: why a read failed)."""
    name = "admission policy"
    if answers is None:
        return Check(name, Verdict.skipped, "needs the permissions check's answers, above")
    writers = writer_rights(answers)
    if not applying and not writers:
        return Check(name, Verdict.skipped, f"no flow applies and no writer role's patch is allowed: there is no "
                                            f"write for {ADMISSION_POLICY} to guard")
    if error is not None or guard is None:
        return Check(name, Verdict.warning, f"could not read the ValidatingAdmissionPolicy {ADMISSION_POLICY}: "
                                            f"{error or 'not read'}")
    why = (f"{listed(list(applying))} appl{'ies' if len(applying) == 1 else 'y'}" if applying
           else f"{_few(writers)} {'is' if len(writers) == 1 else 'are'} allowed")
    found = (guard.policy, guard.binding)
    if Found.refused in found:
        return Check(name, Verdict.warning, f"reading the ValidatingAdmissionPolicy {ADMISSION_POLICY} and its binding "
                                            "is refused (403), so whether they guard the writer roles is unknown: the "
                                            f"reader role bound lacks get on them: {bind_command(ROLES['reads'])}")
    if Found.unserved in found:
        return Check(name, Verdict.warning, "the API server is too old for the admission policy: it does not serve "
                                            "ValidatingAdmissionPolicies (admissionregistration.k8s.io/v1, Kubernetes "
                                            f"1.30 or newer), so with {why}, {_OPEN}; bind each writer role only while "
                                            f"its flow applies, and {_APPLY_GUARD} once the cluster runs 1.30")
    missing = [kind for kind, state in (("ValidatingAdmissionPolicy", guard.policy),
                                         ("ValidatingAdmissionPolicyBinding", guard.binding)) if state is Found.absent]
    if missing:
        return Check(name, Verdict.warning, f"{why}, but the cluster has no {' and no '.join(missing)} named "
                                            f"{ADMISSION_POLICY}, so {_OPEN}: {_APPLY_GUARD}")
    if guard.bound_policy != ADMISSION_POLICY:
        return Check(name, Verdict.warning, f"the binding {ADMISSION_POLICY} binds the policy "
                                            f"{guard.bound_policy or '(none)'}, not {ADMISSION_POLICY}, so {_OPEN}: "
                                            f"{_APPLY_GUARD}")
    if "Deny" not in guard.validation_actions:
        actions = ", ".join(guard.validation_actions) or "none"
        return Check(name, Verdict.warning, f"the binding {ADMISSION_POLICY} has validationActions {actions}, without "
                                            f"Deny: a change outside gpuaas's fields is let through, so {_OPEN}: "
                                            f"{_APPLY_GUARD}")
    return Check(name, Verdict.ok, f"{ADMISSION_POLICY} guards the writer roles: its binding denies any change by "
                                   "gpuaas's service accounts outside the fields gpuaas writes")


def _said(access: Access) -> str:
    return "* on * (every verb on every resource)" if access.verb == "*" else str(access)


def headline(checks: Sequence[Check]) -> str:
    """``Preflight: 8 checks: 5 ok, 1 warning (Prometheus), 1 failed (GPU telemetry), 1 skipped.``: what the command
    and the flow lead with; the checks that warn or fail are named, so the line alone says where to look."""
    counts = {verdict: sum(c.verdict is verdict for c in checks) for verdict in Verdict}
    named = {o: [c.name for c in checks if c.verdict is o] for o in (Verdict.warning, Verdict.failed)}
    said = [f"{counts[o]} {o.value}{'s' if o is Verdict.warning and counts[o] > 1 else ''}"
            + (f" ({', '.join(named[o])})" if o in named else "")
            for o in Verdict if counts[o]]
    return f"Preflight: {len(checks)} checks: {', '.join(said)}."


def holding_gpus(workloads: pd.DataFrame) -> pd.DataFrame:
    """The workloads that hold GPUs now: the ones telemetry is matched to."""
    return workloads[workloads["telemetry"] != "n/a"] if "telemetry" in workloads else workloads.iloc[0:0]
