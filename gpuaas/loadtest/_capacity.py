"""A service's sustainable per-replica rate, with where it came from and how old it is.

What the cost report ("replicas needed for the forecast") and the deadline/rebalance planners
(serving queues) call. The number comes from, in this order:

1. the sweep file the policy names for the service (``services[].capacity.sweep``), judged
   with the service's SLO (``latency_slo_seconds`` at ``capacity.slo_quantile``); its age is
   the file's modification time;
2. the latest load test of the service (``namespace/name``, else its ``model_name``) in the
   store; its sweep is judged again with the service's SLO when the policy has one, so a run
   made against another target still answers for this one; its age is the run's;
3. nothing: ``None``. A missing estimate is never a guess.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from gpuaas.errors import ConfigError
from gpuaas.loadtest._record import latest_load_test
from gpuaas.models import CapacityEstimate
from gpuaas.policies.cost import CapacityResult, sustainable_capacity
from gpuaas.policy import ServiceOutcome
from gpuaas.settings import GpuaasSettings
from gpuaas.sources.sweep import read_sweep
from gpuaas.store import Store, open_store

__all__ = ["CapacityEstimate", "serving_capacity", "sweep_path", "sweep_problem"]


def sweep_path(service: ServiceOutcome, policy_file: Path | None) -> Path:
    """The service's sweep file; a relative path starts at the policy file's folder."""
    assert service.capacity is not None
    path = service.capacity.sweep
    return policy_file.parent / path if not path.is_absolute() and policy_file is not None else path


def _judged(service: ServiceOutcome, path: Path) -> CapacityResult:
    assert service.capacity is not None and service.latency_slo_seconds is not None
    return sustainable_capacity(read_sweep(path), slo_quantile=service.capacity.slo_quantile,
                                slo_seconds=service.latency_slo_seconds, min_quality=service.capacity.min_quality,
                                source=str(path))


def sweep_problem(services: Sequence[ServiceOutcome], policy_file: Path) -> ConfigError | None:
    """The first sweep file a policy names that the cost report could not judge (missing, unreadable, not a
    sweep), as an error on its field (``services[0].capacity.sweep``); None when every one reads. What ``config
    check`` asks, so that a typo in the path is said when the policy is checked, not as a note in a report."""
    for i, service in enumerate(services):
        if service.capacity is None or service.latency_slo_seconds is None:
            continue  # the policy's own validation requires the SLO beside a sweep
        try:
            _judged(service, sweep_path(service, policy_file))
        except ConfigError as exc:
            return ConfigError(str(exc), file=policy_file, field=f"services[{i}].capacity.sweep")
    return None


def _service(settings: GpuaasSettings, namespace: str, name: str) -> tuple[int, ServiceOutcome] | None:
    for i, svc in enumerate(settings.policy.services):
        if svc.namespace == namespace and svc.name == name:
            return i, svc
    return None


def _estimate(namespace: str, name: str, result: CapacityResult, source: str, measured_at: datetime,
              now: datetime) -> CapacityEstimate:
    return CapacityEstimate(
        namespace=namespace, name=name, met=result.met, per_replica_rps=result.per_replica_rps,
        per_gpu_rps=result.per_gpu_rps, sustainable_rate_rps=result.sustainable_rate_rps,
        slo_quantile=result.slo_quantile, slo_seconds=result.slo_seconds, source=source, measured_at=measured_at,
        age_seconds=max(0.0, (now - measured_at).total_seconds()), reason=result.reason)


def serving_capacity(settings: GpuaasSettings, namespace: str, name: str, *, model_name: str | None = None,
                     now: datetime | None = None, store: Store | None = None) -> CapacityEstimate | None:
    """The sustainable per-replica rate of ``namespace/name`` (see the module docstring for the order)."""
    now = now or datetime.now(UTC)
    found = _service(settings, namespace, name)
    service = found[1] if found else None
    if found and service is not None and service.capacity is not None:
        if service.latency_slo_seconds is None:
            raise ConfigError(f"services: {namespace}/{name}: a capacity sweep needs latency_slo_seconds")
        path = sweep_path(service, settings.policy_file)
        result = _judged(service, path)
        measured_at = datetime.fromtimestamp(path.stat().st_mtime, UTC)
        return _estimate(namespace, name, result, f"sweep file {path}", measured_at, now)
    with nullcontext(store) if store is not None else open_store(settings) as opened:
        row = latest_load_test(opened, namespace=namespace, name=name,
                               model_name=model_name or (service.model_name if service else None))
    if row is None:
        return None
    stored = row.evidence["capacity"]
    if service is not None and service.latency_slo_seconds is not None:
        sweep = pd.DataFrame(row.evidence["sweep"]).fillna(float("inf"))
        result = sustainable_capacity(sweep, slo_quantile=stored["slo_quantile"],
                                      slo_seconds=service.latency_slo_seconds, min_quality=stored["min_quality"],
                                      source=f"load test #{row.id}")
    else:
        result = CapacityResult(**{k: v for k, v in stored.items() if k != "steps"})
    return _estimate(namespace, name, result, f"load test #{row.id}", row.created_at, now)
