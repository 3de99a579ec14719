"""The policy file: what gpuaas may do, to whom, and how carefully.

A policy is a YAML document validated by pydantic models with ``extra="forbid"``, so a typo
is an error instead of a silently ignored key. ``load_policy`` turns the validation problems
into one ``ConfigError`` line that names the file, the first problem's field path and what was
expected, and how many more there are, e.g. ``policy.yaml: tenants[2].reclaim.window_minutes:
Input should be greater than 0 (and 1 more)``. The complete commented example lives in
``examples/policy.yaml``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError, field_validator, model_validator

from gpuaas._policy_freeze import (
    HELD_BACK,
    Freeze,
    FreezeOn,
    WritingFlow,
    freeze_on,
    freezes_on,
    freezes_phrase,
    next_freeze,
    tenant_freezes,
    unknown_freeze_tenant,
)
from gpuaas._policy_model import Fraction, Namespace, ObjectName, _Model
from gpuaas._policy_retention import RetentionDays, retention_warnings
from gpuaas._policy_services import (
    CostPolicy,
    QualityGate,
    ServiceCapacity,
    ServiceOutcome,
    check_service_series,
)
from gpuaas._validation import FieldProblem, field_path, first_problem, require_text_keys
from gpuaas._yaml import read_yaml
from gpuaas.errors import ConfigError
from gpuaas.models import MAX_GPUS

__all__ = [
    "HELD_BACK",
    "MOVES_WINDOW",
    "Actuator",
    "AdaptivePolicy",
    "ColdStartBudget",
    "CollectPolicy",
    "CostPolicy",
    "DeadlinesPolicy",
    "FreeGoal",
    "Freeze",
    "FreezeOn",
    "Mode",
    "Policy",
    "QualityGate",
    "ReclaimPolicy",
    "ReclaimRule",
    "ReclaimStrategy",
    "RebalancePolicy",
    "ServiceCapacity",
    "ServiceOutcome",
    "StorePolicy",
    "Tenant",
    "WritingFlow",
    "format_validation_error",
    "freeze_on",
    "freezes_on",
    "freezes_phrase",
    "load_policy",
    "next_freeze",
    "retention_warnings",
]

WORKLOAD_KINDS = ("RayCluster", "Workload", "InferenceService", "Notebook", "Deployment", "StatefulSet")


class Mode(StrEnum):
    """Dry-run decides and audits but writes nothing to the cluster; apply writes."""

    dry_run = "dry-run"
    apply = "apply"


class FreeGoal(StrEnum):
    """What a reclaim gives back: only the GPUs (the team keeps its reservation), or the quota too."""

    compute = "compute"
    quota = "quota"


class Actuator(StrEnum):
    """Who stops an idle workload: gpuaas itself (its patches), or KEDA scaling on gpuaas's idle signal.

    ``keda``: a ScaledObject (``deployments/keda/``) scales the workload; gpuaas publishes its idle
    signal in every mode (dry-run included: KEDA acts on it) and never stops it itself. ``gpuaas``:
    the signal is published only in apply mode, so that a dry-run changes nothing anywhere.
    """

    gpuaas = "gpuaas"
    keda = "keda"


MAX_MINUTES = 31 * 24 * 60
Minutes = Annotated[float, Field(gt=0, le=MAX_MINUTES)]
"""A duration in minutes; past a month it is a typo, and a huge one would overflow the time arithmetic."""
WaitMinutes = Annotated[float, Field(ge=0, le=MAX_MINUTES)]
Gpus = Annotated[int, Field(ge=0, le=MAX_GPUS)]
"""A GPU count; above ten million GPUs it is a typo, and a huge number would overflow the planners' arithmetic."""


class CollectPolicy(_Model):
    windows_minutes: list[Minutes] = Field(default=[30.0], min_length=1)
    retention_days: RetentionDays = 14
    """How long the store keeps each collect's history and snapshot row: at least a day (``gpuaas._policy_retention``)."""
    max_staleness_seconds: Annotated[float, Field(gt=0, le=MAX_MINUTES * 60)] = 600
    """Telemetry older than this is stale: no action may be based on it."""


class StorePolicy(_Model):
    """What the store keeps: aggregates every cycle for ``collect.retention_days``, full snapshots only a few.

    A full snapshot has a row per Workload and GPU (tens of MB at 16,000 GPUs); later runs and
    the incident review read the per-queue and per-tenant history and the audit rows instead.
    """

    keep_full_snapshots: Annotated[int, Field(ge=1, le=1_000_000)] = 12
    """Newest full snapshots kept (12 at ``full_snapshot_every_minutes: 60`` = hourly for the last 12 hours). At
    most a million (one a minute for two years): the count is the store's ``LIMIT``, and one past 64 bits
    failed every collect's pruning with an ``OverflowError``."""
    full_snapshot_every_minutes: WaitMinutes = 60
    """A collect stores its full snapshot only when the store has none from the last this many minutes
    (0: every collect), or when the snapshot is degraded; the reclaim flow decides on its own collect's
    snapshot in memory. Every collect stores its aggregates and a snapshot row (summary, no rows)."""


class ReclaimStrategy(StrEnum):
    """``fixed``: the same window for every idle spell. ``adaptive``: a window per idle spell, from
    the workload's idle history: the built-in rule, or with a cold-start budget the survival window
    chosen within it (``docs/reclaim-policy.md``)."""

    fixed = "fixed"
    adaptive = "adaptive"


class ColdStartBudget(_Model):
    """The trade-off between GPU-hours and cold starts, stated once (set exactly one field)."""

    wakeups_per_workload_per_day: Annotated[float, Field(gt=0, le=24 * 60)] | None = None
    """At most this many wake-ups per workload per day on the history (the calibration)."""
    cold_start_gpu_minutes: Annotated[float, Field(ge=0, le=MAX_GPUS * 60)] | None = None
    """What one cold start costs, in GPU-minutes of reclaimed time it must pay for."""
    refit_hours: Annotated[float, Field(gt=0, le=24 * 7)] = 24
    """How often the window is chosen again: on the history up to the last multiple of this period
    since the Unix epoch (00:00 UTC for 24), and kept until the next. Refit every cycle, the window
    follows the last few hours and did worse than the fixed rule on the GenAI trace."""

    @model_validator(mode="after")
    def _exactly_one(self) -> ColdStartBudget:
        if (self.wakeups_per_workload_per_day is None) == (self.cold_start_gpu_minutes is None):
            raise ValueError("set exactly one of wakeups_per_workload_per_day and cold_start_gpu_minutes")
        return self


class AdaptivePolicy(_Model):
    """Where the adaptive strategy learns from: the fleet's GPU history in Prometheus."""

    history_hours: Annotated[float, Field(gt=0, le=24 * 31)] = 24
    """How far back each cycle reads the per-workload activity (1-minute steps): from the last refit
    boundary with a cold-start budget, from now without."""
    chunk_hours: Annotated[float, Field(gt=0, le=24 * 31)] = 2
    """Time span of one range query: bounds the memory of one answer."""
    cold_start_budget: ColdStartBudget | None = None
    """None: the built-in rule (10 min after long spells, else 40 min, for a 30-min base). Set: the
    survival window fitted on the history within it (a stop time per context of the workload's last
    2 h), or the fixed window where that does better on the history."""


class ReclaimRule(_Model):
    """Idle rule for one workload kind or tenant; unset fields inherit from the defaults."""

    window_minutes: Minutes | None = None
    activity_threshold: Fraction | None = None
    """GPU activity (0-1, DCGM_FI_PROF_GR_ENGINE_ACTIVE scale) at or below which a GPU counts as idle."""
    grace_minutes: WaitMinutes | None = None
    free: FreeGoal | None = None
    enabled: bool | None = None
    strategy: ReclaimStrategy | None = None
    actuator: Actuator | None = None


class ReclaimPolicy(_Model):
    mode: Mode = Mode.dry_run
    max_actions_per_run: Annotated[int, Field(ge=0, le=MAX_GPUS)] = 10
    window_minutes: Minutes = 30
    activity_threshold: Fraction = 0.05
    grace_minutes: WaitMinutes = 30
    free: FreeGoal = FreeGoal.compute
    strategy: ReclaimStrategy = ReclaimStrategy.fixed
    adaptive: AdaptivePolicy = AdaptivePolicy()
    actuator: Actuator = Actuator.gpuaas
    kinds: dict[str, ReclaimRule] = Field(default_factory=dict)
    exclude_namespaces: list[Namespace] = Field(default_factory=list)
    """Opt-outs by namespace and ClusterQueue: a name Kubernetes could not give one (``kube_system``) would
    exclude nothing, and reclaim would act where the file says it must not."""
    exclude_queues: list[ObjectName] = Field(default_factory=list)
    serving_kinds: list[str] = Field(default_factory=lambda: ["InferenceService"])
    """Kinds that serve requests: idle only with a *known* zero request count (missing metrics = unknown)."""
    record_skips_every_minutes: WaitMinutes = 60
    """A skip or deferral that stays the same (the object and its uid, the mode, the outcome and the cause) is
    recorded in the audit log once per this many minutes, not once per run: each run's result points at the row
    that holds it. Any change records a new row at once. 0: a row every run."""

    @model_validator(mode="after")
    def _known_kinds(self) -> ReclaimPolicy:
        for where, kinds in (("kinds", list(self.kinds)), ("serving_kinds", self.serving_kinds)):
            for kind in kinds:
                if kind not in WORKLOAD_KINDS:
                    raise ValueError(
                        f"unknown workload kind {kind!r} in {where}; expected one of {', '.join(WORKLOAD_KINDS)}")
        return self


class Tenant(_Model):
    name: Annotated[str, Field(min_length=1)]
    namespaces: list[Namespace] = Field(default_factory=list)
    cluster_queues: list[ObjectName] = Field(default_factory=list)
    guaranteed_gpus: Gpus = 0
    """Nominal GPU quota that rebalance never takes away."""
    guaranteed_gpus_per_flavor: dict[str, Gpus] = Field(default_factory=dict)
    """The same per ResourceFlavor; where given it replaces ``guaranteed_gpus`` for that flavor."""
    weight: Annotated[float, Field(ge=1e-6, le=1e6)] = 1.0
    """The tenant's share weight in the quota planner: from 0.000001 to 1,000,000, the range the planner solves (a
    smaller weight, a denormal one such as 1.0e-320, makes its costs overflow)."""
    reclaim: ReclaimRule = ReclaimRule()


MAX_HISTORY_DAYS = 366.0
"""The longest history a rebalance plans on (``usage_lookback_days``, ``--history-days``): a year of one
query chunk after another, and no fleet keeps its quotas' reasons longer."""

MOVES_WINDOW = timedelta(hours=22)
"""How far back a rebalance counts the quota moves of applied plans as spent of a queue's step and a cohort's
``max_total_moved_gpus``: a day less two hours. Every run writes its audit rows after its own start
(collect and planning come first), so with a full 24 hours the previous nightly run's moves, stamped a
minute or so after that night's start, would fall inside tonight's window and spend every other night's
step. The two hours are slack for either a nightly run that started up to an hour late (a busy worker) or
the 23-hour night of a daylight-saving change in the schedule's time zone. A run later the same day (by
hand, a retry) still finds that night's moves spent: two runs that each move a full step are more than
22 hours apart."""


class RebalancePolicy(_Model):
    mode: Mode = Mode.dry_run
    max_step_gpus: Gpus = 8
    """Most GPUs of nominal quota any one queue gains or loses in a night, however many runs: what plans applied
    in the last 22 hours (``MOVES_WINDOW``) moved is spent (an undo gives none of it back)."""
    max_total_moved_gpus: Gpus = 32
    """Most GPUs of nominal quota all the queues of a cohort gain together in a night, counted the same way."""
    hysteresis_gpus: Gpus = 1
    usage_lookback_days: Annotated[float, Field(gt=0, le=MAX_HISTORY_DAYS)] = 7
    """The history window demand is computed over."""
    usage_percentile: Annotated[float, Field(gt=0, le=100)] = 90
    max_step_percent: Annotated[float, Field(ge=0, le=10_000)] = 50
    """... and no more than this share of its current quota (or of its guarantee, when that is larger)."""
    min_step_gpus: Gpus = 2
    """... but always this many (within max_step_gpus): a queue at 0 or 1 GPU can gain again."""
    lend_reserve: Annotated[float, Field(ge=0, le=1)] = 0.0
    """Share of a queue's unused weighted share it keeps instead of lending (its cushion until the next night)."""
    no_reclaim_keep_factor: Annotated[float, Field(ge=0, le=1e6)] = 12
    """When the cohort was full within the window, a queue that cannot reclaim (no cohort, or
    reclaimWithinCohort: Never) lends only beyond this many times its busiest demand (up to its share)."""
    no_reclaim_keep_gpus: Gpus = 2
    """However quiet its window, a queue that cannot reclaim keeps this many GPUs of its share (all of a smaller
    share): a burst after a silence longer than the window then starts at once instead of the next night."""
    reclaiming_lends: bool = False
    """Whether a queue that can reclaim (in a cohort, reclaimWithinCohort other than Never) lends quota below its
    weighted share in a cohort without borrowingLimit or lendingLimit, keeping what the two settings below say.
    Off: there every queue already borrows the idle quota, and lending it made the worst tenant wait longer on
    a trace it was not tuned on (docs/planners.md). Where such a limit is set, these queues lend all their
    demand leaves: that is how a capped borrower reaches it."""
    reclaiming_keep_factor: Annotated[float, Field(ge=0, le=1e6)] = 4
    """With ``reclaiming_lends``, when the cohort was full within the window, a queue that can reclaim lends only
    beyond this many times its busiest demand (up to its share)."""
    reclaiming_keep_gpus: Gpus = 2
    """With ``reclaiming_lends``, however quiet its window, a queue that can reclaim keeps this many GPUs of its
    share (all of a smaller share)."""
    no_reversal_days: Annotated[float, Field(ge=0, le=366)] = 7
    """A queue does not move against its own net change of this many days."""
    pending_wait_minutes: WaitMinutes = 30
    """Pending GPUs count as demand now once the oldest has waited this long (else only their median)."""
    min_history_days: Annotated[float, Field(ge=0, le=366)] = 2
    """Less history than this: planned from what there is, said so, and at most one step moved in all; a queue
    with less than this of its own lends nothing below its share (its quiet first day says nothing of its week)."""
    manage_limits: bool = False
    """Move lendingLimit with nominalQuota and borrowingLimit against it (see docs/flows/rebalance.md)."""
    cohorts: list[ObjectName] = Field(default_factory=list)
    """Cohorts to rebalance; empty means every cohort. A name Kueue could not give a cohort would match none."""


class DeadlinesPolicy(_Model):
    """How far gpuaas may nudge Kueue toward the deadline plan (``gpuaas.policies.deadlines.nudges``)."""

    mode: Mode = Mode.dry_run
    max_holds_per_run: Annotated[int, Field(ge=0, le=MAX_GPUS)] = 10
    """New holds and demotions per run; releases are never capped (a release must never wait)."""
    release_margin_minutes: Minutes = 30
    """A held Workload is released this long before its planned start: at least two runs of the flow."""
    give_up_lost: bool = True
    """Demote a pending Workload whose deadline is lost (one priority below its own), so that Kueue admits
    the Workloads that can still meet theirs first; never in a pool whose preemption compares priorities."""
    runtime_estimate_error: Annotated[float, Field(ge=1, le=1000)] = 2.0
    """An expected run time may be off by this factor either way. A Workload is held for its planned start
    only when it still starts in time if the work ahead runs this many times longer; a deadline is given
    up only when it is lost at the shortest run time this allows. At most 1,000, the widest estimate factor the
    replays take (``--runtime-estimate factor:F``): a larger one is a typo, not an estimate."""
    give_up_lease_minutes: Minutes = 60
    """A given-up Workload's demotion lasts this long and is renewed by the next run while the reason stands:
    gpuaas stopping never strands work."""


POLICY_VERSIONS = (1,)
"""The policy schema versions this gpuaas reads; a file written for another is refused, never half-understood."""


class Policy(_Model):
    version: int = 1
    """The policy schema the file is written for (absent means 1)."""
    collect: CollectPolicy = CollectPolicy()
    reclaim: ReclaimPolicy = ReclaimPolicy()
    rebalance: RebalancePolicy = RebalancePolicy()
    deadlines: DeadlinesPolicy = DeadlinesPolicy()
    tenants: list[Tenant] = Field(default_factory=list)
    services: list[ServiceOutcome] = Field(default_factory=list)
    cost: CostPolicy = CostPolicy()
    store: StorePolicy = StorePolicy()
    freezes: list[Freeze] = Field(default_factory=list)

    @field_validator("version", mode="before")
    @classmethod
    def _known_version(cls, version: object) -> object:
        """A file for a schema this gpuaas does not know may mean something else by the same keys: refuse it
        rather than guess. Only a plain integer counts (``true`` or ``"1"`` would pass a lax integer check)."""
        if type(version) is not int or version not in POLICY_VERSIONS:
            known = " and ".join(str(v) for v in POLICY_VERSIONS)
            raise ValueError(f"{version!r} is not a policy version this gpuaas reads (it reads version {known})")
        return version

    @model_validator(mode="after")
    def _unique_tenants(self) -> Policy:
        seen: set[str] = set()
        owner: dict[tuple[str, str], str] = {}
        for i, tenant in enumerate(self.tenants):
            if tenant.name in seen:
                raise ValueError(f"tenant {tenant.name!r} is defined twice")
            seen.add(tenant.name)
            # One owner per namespace and ClusterQueue: tenant_for would silently pick the first.
            for what, field, names in (("namespace", "namespaces", tenant.namespaces),
                                       ("cluster queue", "cluster_queues", tenant.cluster_queues)):
                for j, name in enumerate(names):
                    other = owner.setdefault((what, name), tenant.name)
                    if other != tenant.name:
                        raise FieldProblem(("tenants", i, field, j),
                                           f"{what} {name!r} is in tenants {other!r} and {tenant.name!r}")
        return self

    @model_validator(mode="after")
    def _unique_names(self) -> Policy:
        """A service or a freeze is named in reports and headlines: two of one name could not be told apart."""
        for what, names in (("service", [s.name for s in self.services]), ("freeze", [f.name for f in self.freezes])):
            for i, name in enumerate(names):
                if name in names[:i]:
                    raise FieldProblem((f"{what}s", i, "name"), f"{what} {name!r} is defined twice")
        return self

    @field_validator("services")
    @classmethod
    def _one_service_per_series(cls, services: list[ServiceOutcome]) -> list[ServiceOutcome]:
        return check_service_series(services)

    @property
    def modes(self) -> dict[WritingFlow, Mode]:
        """Each writing flow's mode as the file sets it."""
        return {WritingFlow.reclaim: self.reclaim.mode, WritingFlow.rebalance: self.rebalance.mode,
                WritingFlow.deadlines: self.deadlines.mode}

    def run_mode(self, flow: WritingFlow, apply: bool, now: datetime) -> tuple[Mode, FreezeOn | None]:
        """The mode a run of ``flow`` at ``now`` writes in, and the change freeze on for it (None when none is):
        apply when the file or the operator's ``--apply`` says so and no freeze is on. A freeze is returned in
        dry-run too: what KEDA scales on gpuaas's signal is stopped in every mode, so the freeze covers it."""
        frozen = freeze_on(self.freezes, flow, now)
        applying = (apply or self.modes[flow] is Mode.apply) and frozen is None
        return (Mode.apply if applying else Mode.dry_run), frozen

    def frozen_tenants(self, flow: WritingFlow, now: datetime) -> dict[str, FreezeOn]:
        """Tenant -> the change freeze that holds back ``flow``'s changes to its workloads and ClusterQueues at
        ``now`` (a freeze that names tenants; the whole fleet's is ``run_mode``'s)."""
        return tenant_freezes(self.freezes, flow, now)

    def tenant_for(self, namespace: str | None, queue: str | None = None) -> Tenant | None:
        """The tenant owning a namespace or ClusterQueue, if the policy names one."""
        for tenant in self.tenants:
            if (namespace and namespace in tenant.namespaces) or (queue and queue in tenant.cluster_queues):
                return tenant
        return None


def format_validation_error(exc: ValidationError, file: Path | str) -> ConfigError:
    """One ConfigError line, ``file: field.path: message``, for the first problem, saying how many more."""
    return first_problem(exc, file, where=lambda loc: field_path(loc) or "(top level)",
                         unknown="unknown field; check its spelling against examples/policy.yaml")


def parse_policy(data: Any, file: Path | str = "<policy>") -> Policy:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"expected a mapping at the top level, got {type(data).__name__}", file=file)
    require_text_keys(file, data)  # ``1:`` or ``null:`` would be refused in pydantic's words, at no path the file has
    try:
        policy = Policy.model_validate(data)
    except ValidationError as exc:
        raise format_validation_error(exc, file) from exc
    unknown = unknown_freeze_tenant(policy.freezes, [t.name for t in policy.tenants])
    if unknown is not None:  # a freeze of a tenant the policy lacks would hold back nothing: a typo, not a freeze
        field, message = unknown
        raise ConfigError(message, file=file, field=field)
    return policy


def load_policy(path: Path | str) -> Policy:
    """Read and validate a policy file; every failure is a ConfigError naming the file. Only a regular file (or a
    link to one, as a ConfigMap mounts it) is read: a FIFO whose writer has not started would read as the empty
    policy, with none of the file's freezes and caps."""
    return parse_policy(read_yaml(path, "policy file", regular=True), path)
