"""The scenario file's schema: pydantic models, strict (``extra="forbid"``).

A scenario says what the embedded cluster contains (node pools, flavors, tenants with their
queues and quotas) and what happens in it (workloads, when they arrive, how busy their GPUs
are, what traffic a service gets). Times are offsets from the scenario's start, written as
seconds or ``"90s"``, ``"30m"``, ``"6h"``, ``"2d"``, so the same file works whatever day it runs.
"""

from __future__ import annotations

import math
import re
from datetime import timedelta
from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from gpuaas.cluster._engine import EngineModel

__all__ = [
    "ConstantProfile",
    "DiurnalProfile",
    "Duration",
    "Flavor",
    "IdleAfterProfile",
    "NodePool",
    "Profile",
    "Quota",
    "Scenario",
    "Serving",
    "TelemetryOptions",
    "Tenant",
    "TraceProfile",
    "WorkloadKind",
    "WorkloadSpec",
    "format_duration",
    "parse_duration",
]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_LONGEST = timedelta.max.total_seconds()
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")


def _shown(value: object) -> str:
    """``value`` for a message, cut short: a number of thousands of digits has no place on one line."""
    if isinstance(value, int) and value.bit_length() > 128:
        return "a number over 10^38"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def format_duration(value: timedelta) -> str:
    """``value`` as a duration is written in a scenario: ``60d``, ``1h``, ``90s``."""
    seconds = value.total_seconds()
    unit = next(u for u in ("d", "h", "m", "s") if seconds % _UNITS[u] == 0 or u == "s")
    return f"{seconds / _UNITS[unit]:g}{unit}"


def parse_duration(value: object, maximum: timedelta | None = None) -> timedelta:
    """``90``, ``"90s"``, ``"30m"``, ``"1.5h"``, ``"2d"`` or a timedelta, as a timedelta; a ``ValueError`` when it is
    none, or longer than ``maximum`` (or than any timedelta)."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or a string like '30m'")
    elif isinstance(value, int | float):
        if value != value:  # nan
            raise ValueError(f"not a duration: {_shown(value)} (use seconds or e.g. '90s', '30m', '6h', '2d')")
        if value < 0:
            raise ValueError("a duration cannot be negative")
        seconds = float(value) if value <= _LONGEST else math.inf  # an int too large for a float is too long too
    else:
        match = _DURATION.match(value) if isinstance(value, str) else None
        if not match:
            raise ValueError(f"not a duration: {_shown(value)} (use seconds or e.g. '90s', '30m', '6h', '2d')")
        seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]  # digits only: never nan, at most inf
    if maximum is not None and seconds > maximum.total_seconds():
        raise ValueError(f"at most {format_duration(maximum)}, got {_shown(value)}")
    try:
        if seconds > _LONGEST:
            raise OverflowError
        return value if isinstance(value, timedelta) else timedelta(seconds=seconds)
    except OverflowError:  # also a float that rounds past the longest
        raise ValueError(f"longer than any duration ({timedelta.max.days:,} days at most), got {_shown(value)}") from None


Duration = Annotated[timedelta, BeforeValidator(parse_duration)]

SAMPLE_STEP_RANGE = (timedelta(seconds=1), timedelta(hours=1))
"""The bounds of ``telemetry.step``: at most an hour, as the ``GPUAAS_METRICS__SAMPLE_INTERVAL_SECONDS`` the
env file passes it on as; at least a second, as each step simulates the whole fleet."""


def _sample_step(value: object) -> timedelta:
    least, most = SAMPLE_STEP_RANGE
    step = parse_duration(value, maximum=most)
    if step < least:
        raise ValueError(f"at least {format_duration(least)}, got {_shown(value)}")
    return step
Fraction = Annotated[float, Field(ge=0.0, le=1.0)]


MAX_NODES = 10_000
"""Nodes in all of a scenario's pools: far past any fleet the emulator is used for (its benchmark runs 2,000), and a
bound on the memory ``cluster up`` takes before it starts (a typo of 100,000,000 nodes took gigabytes)."""
MAX_INSTANCES = 100_000
"""Workloads a scenario submits in all (``copies`` included): twice the emulator's largest benchmark."""
MAX_GPUS = 10_000_000
"""A quota past ten million GPUs is a typo, as everywhere in gpuaas (the policy refuses it the same way)."""
MAX_HOURLY_PRICE = 1_000_000.0
"""Dollars per hour for one GPU, core or GiB: past any price, and far below where cost arithmetic overflows."""
Price = Annotated[float, Field(ge=0, le=MAX_HOURLY_PRICE)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # .inf or .nan is no level or price


# --- utilisation and traffic profiles ------------------------------------------------------
class ConstantProfile(_Strict):
    """The same level the whole time (``value`` is 0-1 for utilisation, req/s for traffic)."""

    profile: Literal["constant"] = "constant"
    value: Annotated[float, Field(ge=0)]


class IdleAfterProfile(_Strict):
    """Busy at ``busy`` for ``after`` since the workload started, then ``idle``: the forgotten job."""

    profile: Literal["idle-after"]
    busy: Annotated[float, Field(ge=0)]
    idle: Annotated[float, Field(ge=0)] = 0.0
    after: Duration


class DiurnalProfile(_Strict):
    """A day-long sine: ``mean`` +/- ``amplitude``, highest at ``peak_hour`` (UTC)."""

    profile: Literal["diurnal"]
    mean: Annotated[float, Field(ge=0)]
    amplitude: Annotated[float, Field(ge=0)]
    peak_hour: Annotated[float, Field(ge=0, lt=24)] = 14.0


class TraceProfile(_Strict):
    """Piecewise-constant levels: ``points`` are ``[offset since start, level]`` pairs, repeating
    every ``period`` when given (e.g. a duty-cycle trace)."""

    profile: Literal["trace"]
    points: Annotated[list[tuple[Duration, Annotated[float, Field(ge=0)]]], Field(min_length=1)]
    period: Duration | None = None


Profile = Annotated[
    ConstantProfile | IdleAfterProfile | DiurnalProfile | TraceProfile, Field(discriminator="profile")
]


class Serving(_Strict):
    """Traffic for an inference service: vLLM series are generated from it."""

    model_name: str
    requests_per_second: Profile
    latency_seconds: Annotated[float, Field(gt=0)] = 0.8
    """Median end-to-end latency; requests are log-normally distributed around it."""
    latency_sigma: Annotated[float, Field(gt=0)] = 0.5
    slo_seconds: Annotated[float, Field(gt=0)] | None = None
    """Written as the annotation ``gpuaas.io/latency-slo-seconds`` on the service."""
    error_ratio: Fraction = 0.0
    max_running: Annotated[int, Field(gt=0)] = 256
    """Concurrency at which the KV cache is full (``vllm:kv_cache_usage_perc`` = 1)."""
    engine: EngineModel = EngineModel()
    """Latency model of the live OpenAI endpoint the embedded cluster serves (``gpuaas.cluster.serving``)."""
    abort_ratio: Fraction = 0.0
    """Share of requests that end ``finished_reason="abort"`` (client gone, timeout): served, not an outcome."""
    quality: Profile | None = None
    """An evaluation score over time (e.g. ``{profile: trace, points: [[0, 0.9], [2h, 0.6]]}``), as a gauge."""
    quality_metric: Annotated[str, Field(pattern=r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")] = "gpuaas_eval_score"
    """Name of the quality gauge, labelled like the vLLM series (``model_name``, ``namespace``, ``pod``)."""

    @model_validator(mode="after")
    def _ratios(self) -> Serving:
        if self.abort_ratio + self.error_ratio > 1:
            raise ValueError("abort_ratio + error_ratio exceed 1")
        return self


# --- fleet ---------------------------------------------------------------------------------
class Flavor(_Strict):
    name: str
    node_labels: dict[str, str] | None = None
    """Default: ``nvidia.com/gpu.product`` of the pools of this flavor (as GPU feature discovery labels)."""


class NodePool(_Strict):
    name: str
    count: Annotated[int, Field(gt=0, le=MAX_NODES)]
    gpus_per_node: Annotated[int, Field(gt=0, le=16)] = 8
    gpu_model: str = "NVIDIA H100 80GB HBM3"
    """As dcgm-exporter's ``modelName`` label shows it."""
    flavor: str
    gpu_hourly_price: Price
    """Price of one GPU for one hour, as OpenCost's ``node_gpu_hourly_cost``."""
    cpu_cores: Annotated[int, Field(gt=0)] = 96
    memory_gib: Annotated[int, Field(gt=0)] = 1024
    cpu_hourly_price: Price = 0.0
    ram_gib_hourly_price: Price = 0.0
    fb_total_mib: Annotated[int, Field(gt=0)] = 81559
    instance_type: str = "p5.48xlarge"
    region: str = "us-east-1"


class Quota(_Strict):
    flavor: str
    gpus: Annotated[int, Field(ge=0, le=MAX_GPUS)]
    borrowing_limit: Annotated[int, Field(ge=0, le=MAX_GPUS)] | None = None
    lending_limit: Annotated[int, Field(ge=0, le=MAX_GPUS)] | None = None

    @model_validator(mode="after")
    def _lending_within_nominal(self) -> Quota:
        if self.lending_limit is not None and self.lending_limit > self.gpus:
            raise ValueError(f"lending_limit {self.lending_limit} exceeds the nominal {self.gpus} GPUs")
        return self


class Tenant(_Strict):
    name: str
    namespace: str | None = None
    """Default: the tenant's name."""
    cluster_queue: str | None = None
    """Default: ``<name>-cq``."""
    local_queue: str | None = None
    """Default: ``<name>-queue``."""
    cohort: str | None = None
    quotas: Annotated[list[Quota], Field(min_length=1)]

    @property
    def ns(self) -> str:
        return self.namespace or self.name

    @property
    def cq(self) -> str:
        return self.cluster_queue or f"{self.name}-cq"

    @property
    def lq(self) -> str:
        return self.local_queue or f"{self.name}-queue"


class WorkloadKind(str, Enum):
    RAY_CLUSTER = "RayCluster"
    WORKLOAD = "Workload"
    INFERENCE_SERVICE = "InferenceService"
    NOTEBOOK = "Notebook"
    DEPLOYMENT = "Deployment"
    STATEFUL_SET = "StatefulSet"


class WorkloadSpec(_Strict):
    name: str
    kind: WorkloadKind
    tenant: str
    gpus_per_pod: Annotated[int, Field(ge=1, le=16)] = 1
    pods: Annotated[int, Field(ge=1, le=1_000)] = 1
    priority: int = 0
    submit_at: Duration = timedelta(0)
    duration: Duration | None = None
    """None: runs until stopped (services, notebooks, Ray clusters)."""
    utilisation: Profile = ConstantProfile(value=0.6)
    noise: Annotated[float, Field(ge=0, le=0.5)] = 0.02
    """Half-width of the uniform, zero-mean jitter added to each GPU sample."""
    deadline: Duration | None = None
    """Offset from the scenario start; written as ``gpuaas.io/deadline`` (RFC3339)."""
    expected_runtime: Duration | None = None
    """Written as ``gpuaas.io/expected-runtime`` (``3600s``)."""
    serving: Serving | None = None
    annotations: dict[str, str] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)
    drop_telemetry: bool = False
    """No dcgm or vLLM series at all for this workload's GPUs: data is missing, not zero."""
    copies: Annotated[int, Field(ge=1, le=MAX_INSTANCES)] = 1
    """Submit ``copies`` identical workloads named ``<name>-<i>``, ``every`` apart."""
    every: Duration = timedelta(0)
    cpu_per_pod: Annotated[float, Field(gt=0)] = 4.0
    memory_gib_per_pod: Annotated[float, Field(gt=0)] = 32.0
    fb_used_fraction: Fraction = 0.6
    """Share of the framebuffer the process holds (a loaded model stays resident when idle)."""

    def instance_names(self) -> list[str]:
        return [self.name] if self.copies == 1 else [f"{self.name}-{i}" for i in range(self.copies)]


class TelemetryOptions(_Strict):
    """Which label spelling the emulated exporters and scrape config produce."""

    hostname_label: Literal["Hostname", "hostname"] = "Hostname"
    """dcgm-exporter renamed ``Hostname`` to ``hostname`` in 2026; both exist in the field."""
    pod_label_prefix: Literal["", "exported_"] = ""
    """``exported_`` reproduces a ServiceMonitor with ``honorLabels: false``."""
    driver_version: str = "580.105.08"
    step: Annotated[timedelta, BeforeValidator(_sample_step)] = timedelta(seconds=60)
    """Spacing of backfilled history samples, from 1s to 1h (``SAMPLE_STEP_RANGE``)."""


class Scenario(_Strict):
    name: str = "scenario"
    cluster: str = "embedded"
    """OpenCost's ``properties.cluster``."""
    telemetry: TelemetryOptions = TelemetryOptions()
    flavors: Annotated[list[Flavor], Field(min_length=1)]
    pools: Annotated[list[NodePool], Field(min_length=1)]
    tenants: Annotated[list[Tenant], Field(min_length=1)]
    workloads: list[WorkloadSpec] = Field(default_factory=list)
    objects: list[dict[str, Any]] = Field(default_factory=list)
    """Other objects, installed as written after the queues: kinds the emulated Kueue runs nothing for, such
    as a batch Job, RayJob, JobSet or Kubeflow job that gpuaas only lists for its deadline annotations."""

    @model_validator(mode="after")
    def _references(self) -> Scenario:
        if (nodes := sum(p.count for p in self.pools)) > MAX_NODES:
            raise ValueError(f"pools: {nodes:,} nodes in all, at most {MAX_NODES:,}")
        if (submitted := sum(w.copies for w in self.workloads)) > MAX_INSTANCES:
            raise ValueError(f"workloads: {submitted:,} workloads in all (copies included), at most {MAX_INSTANCES:,}")
        flavors = _unique("flavors", [f.name for f in self.flavors])
        _unique("pools", [p.name for p in self.pools])
        tenants = _unique("tenants", [t.name for t in self.tenants])
        _unique("workloads", [n for w in self.workloads for n in w.instance_names()])
        for i, pool in enumerate(self.pools):
            if pool.flavor not in flavors:
                raise ValueError(f"pools[{i}].flavor: unknown flavor {pool.flavor!r} (known: {sorted(flavors)})")
        for i, tenant in enumerate(self.tenants):
            for j, quota in enumerate(tenant.quotas):
                if quota.flavor not in flavors:
                    raise ValueError(f"tenants[{i}].quotas[{j}].flavor: unknown flavor {quota.flavor!r}")
                if tenant.cohort is None and (quota.borrowing_limit is not None or quota.lending_limit is not None):
                    raise ValueError(f"tenants[{i}].quotas[{j}]: borrowing/lending limits need a cohort")
        for i, obj in enumerate(self.objects):
            meta = obj.get("metadata")
            if not all(isinstance(obj.get(k), str) for k in ("apiVersion", "kind")) or not (
                    isinstance(meta, dict) and isinstance(meta.get("name"), str)):
                raise ValueError(f"objects[{i}]: a Kubernetes object needs apiVersion, kind and metadata.name")
        for i, wl in enumerate(self.workloads):
            if wl.tenant not in tenants:
                raise ValueError(f"workloads[{i}].tenant: unknown tenant {wl.tenant!r} (known: {sorted(tenants)})")
            if wl.serving is not None and wl.kind not in (
                WorkloadKind.INFERENCE_SERVICE, WorkloadKind.DEPLOYMENT, WorkloadKind.STATEFUL_SET
            ):
                raise ValueError(f"workloads[{i}].serving: a {wl.kind.value} does not serve traffic")
        return self

    def tenant(self, name: str) -> Tenant:
        return next(t for t in self.tenants if t.name == name)

    def pool_models(self, flavor: str) -> set[str]:
        return {p.gpu_model for p in self.pools if p.flavor == flavor}


def _unique(what: str, names: list[str]) -> set[str]:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"{what}: duplicate name {name!r}")
        seen.add(name)
    return seen
