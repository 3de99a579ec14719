"""The services of the policy file: how each one's work counts as outcomes, and how the cost report prices them.

A service is keyed by its own selector, so that no request and no GPU-hour is counted for two
services: its namespace plus ``model_name`` (serving series) and its name (pods ``<name>-…``), or
its ``pod_labels``. ``check_service_series`` refuses two services whose serving series would
overlap when the file is read; two label selectors that both match a running pod can only be seen
on the pods, and the cost report refuses them there (``gpuaas.policies.cost.report``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, model_validator

from gpuaas._policy_model import Fraction, Namespace, _Model
from gpuaas._validation import FieldProblem

__all__ = ["BAD_FINISHED_REASONS", "CostPolicy", "LabelKey", "LabelValue", "MetricName", "QualityGate",
           "ServiceCapacity", "ServiceOutcome", "check_service_series"]

LabelKey = Annotated[str, Field(pattern=r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")]
"""A Kubernetes label key: an optional DNS prefix and ``/``, then up to 63 letters, digits, ``-``, ``_``, ``.``."""
LabelValue = Annotated[str, Field(pattern=r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")]


class ServiceCapacity(_Model):
    """Where a service's sustainable rate comes from when no load test of it is in the store."""

    sweep: Path
    """A load-test sweep CSV (``gpuaas capacity`` format); relative paths start at the policy file."""
    slo_quantile: Literal["p50", "p95", "p99"] = "p95"
    min_quality: Fraction | None = None


MetricName = Annotated[str, Field(pattern=r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")]
BAD_FINISHED_REASONS = ("abort", "error")


class QualityGate(_Model):
    """A quality series (an evaluation score, a task success ratio) that must hold for requests to count."""

    metric: MetricName
    """Prometheus metric, labelled like the service's vLLM series (``namespace``, ``model_name``)."""
    threshold: float
    """Requests count only while the metric is at or above this value; while it is missing, none count."""


class ServiceOutcome(_Model):
    """How one service's work counts as verified outcomes (cost per outcome, DESIGN 1.4).

    ``serving``: requests that finished with a good reason, within the latency SLO, and while
    ``quality`` (if set) held. ``batch``: Kueue Workloads in ``namespace`` whose owner's name
    starts with ``name`` that finished with a success reason no later than their deadline.
    """

    name: Annotated[str, Field(min_length=1)]
    namespace: Namespace
    """Where its pods and series are: a name Kubernetes could not give a namespace (``Team-B``) would match none,
    and the service would report no outcome and no cost, with nothing to say why."""
    kind: Literal["serving", "batch"] = "serving"
    model_name: str | None = None
    pod_labels: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    """The service's pods, as a Kubernetes ``matchLabels``: the pods of its namespace that carry every one of
    these labels. Set, it decides which pods' GPU-hours and cost are the service's (instead of pods named
    ``<name>-…``) and, for serving, whose requests are its outcomes (with ``model_name`` too, if set)."""
    latency_slo_seconds: Annotated[float, Field(gt=0, le=86400)] | None = None
    """At most a day: a request answered in time past that is no serving SLO, and ``1e300`` would be a typo."""
    good_finished_reasons: list[str] = Field(default_factory=lambda: ["stop", "length"])
    capacity: ServiceCapacity | None = None
    latency_metric: MetricName | None = None
    """Histogram base name; default the settings' ``vllm:e2e_request_latency_seconds``."""
    quality: QualityGate | None = None
    success_reasons: list[str] = Field(default_factory=lambda: ["Succeeded"])
    """Kueue ``Finished`` condition reasons that mean success."""

    @model_validator(mode="after")
    def _kind_fields(self) -> ServiceOutcome:
        if self.kind == "serving" and self.latency_slo_seconds is None:
            raise FieldProblem(("latency_slo_seconds",), "missing: a serving service needs it")
        if self.kind == "batch" and (self.latency_slo_seconds is not None or self.quality is not None):
            raise FieldProblem(("latency_slo_seconds" if self.latency_slo_seconds is not None else "quality",),
                               "a batch service has no latency_slo_seconds or quality: its outcome is a job done "
                               "in time")
        if self.quality is not None and not self.model_name:
            raise FieldProblem(("quality",), "a quality gate needs the service's model_name (its series are "
                                             "matched on it)")
        for i, reason in enumerate(self.good_finished_reasons):
            if reason in BAD_FINISHED_REASONS:
                raise FieldProblem(("good_finished_reasons", i), f"{reason} never counts as a verified outcome")
        return self


class CostPolicy(_Model):
    """How the cost report prices outcomes and sizes services."""

    basis: Literal["total", "gpu"] = "total"
    """The cost that cost per outcome divides: ``total`` (everything OpenCost charges the workload:
    GPU, CPU, RAM) or ``gpu`` (the GPU share only). Both are reported either way."""
    forecast_quantile: Annotated[float, Field(gt=0, le=1)] = 0.95
    """Quantile of the 5-minute request rate over the window that a service is sized for: the
    peak a service must hold, not the mean, which a daily cycle halves."""
    headroom: Annotated[float, Field(ge=0, le=10)] = 0.2
    """Extra share of that rate the replicas must absorb (0.2: size for 120 % of the quantile)."""


def check_service_series(services: list[ServiceOutcome]) -> list[ServiceOutcome]:
    """A serving service's requests are its namespace's series with its model_name (all of them without
    one), or, with ``pod_labels``, its pods' series: two services whose series overlap would each count
    the other's requests. Two label selectors overlap only on pods that carry both, so only identical
    ones are refused here; the cost report refuses the others on the first pod both select."""
    serving = [s for s in services if s.kind == "serving"]
    for i, a in enumerate(serving):
        for b in serving[i + 1:]:
            if a.namespace != b.namespace or (a.model_name and b.model_name and a.model_name != b.model_name):
                continue
            if a.pod_labels and b.pod_labels and a.pod_labels != b.pod_labels:
                continue
            how = (f"pod_labels {a.pod_labels}" if a.pod_labels and a.pod_labels == b.pod_labels else
                   f"model_name {a.model_name or 'any'!r} and {b.model_name or 'any'!r}")
            raise ValueError(f"services {a.name!r} and {b.name!r} select the same serving series (namespace "
                             f"{a.namespace!r}, {how}); give each its own model_name or pod_labels")
    return services
