"""The load test, as one use case: from a sweep of one endpoint to its sustainable capacity, without Prefect.

The path of one load test, in order (every caller takes it: the ``load_test`` flow, ``gpuaas loadtest``, the
benchmark):

1. ``check``: the target is on loopback, or the caller allowed a remote one: loading a shared endpoint is
   a deliberate act, refused before a single request.
2. ``sweep``: the open-loop Poisson steps, one rate after the other, each bounded (I/O). Never retried:
   a load test that failed half-way must not load the endpoint a second time by itself.
3. ``plan``: the sustainable capacity the sweep shows against the SLO and the quality floor, pure.
4. ``apply``: the files (the requests and the sweep as CSV, the plot, a summary), then the audit row the
   cost report and the planners read the capacity back from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpuaas.loadtest import LoadTestConfig, SweepRun, json_safe, record_load_test, run_sweep, write_outputs
from gpuaas.policies.cost import CapacityResult, sustainable_capacity
from gpuaas.store import Store

__all__ = ["LoadTestPlan", "LoadTestResult", "apply", "check", "plan", "record", "sweep", "write_files"]


@dataclass(frozen=True)
class LoadTestPlan:
    """A finished sweep and the capacity it shows: everything the files and the audit row hold."""

    run: SweepRun
    capacity: CapacityResult


@dataclass(frozen=True)
class LoadTestResult:
    """What one load test left behind: its plan, its files and its audit row."""

    plan: LoadTestPlan
    files: dict[str, Path]
    audit_id: int

    def to_json(self) -> dict[str, Any]:
        """The flow's return value and ``gpuaas loadtest --format json``: the capacity, the steps, the files."""
        run = self.plan.run
        out: dict[str, Any] = json_safe({
            "capacity": self.plan.capacity.to_dict(), "steps": run.steps, "stopped": run.stopped,
            "lateness_p99_s": run.lateness_p99_s, "client_limited_rates": run.client_limited_rates,
            "requests": len(run.requests), "files": {k: str(v) for k, v in self.files.items()},
            "audit_id": self.audit_id, "ignore_eos": run.ignore_eos, "url": run.config.url,
            "unreached": run.unreached})
        return out


def check(config: LoadTestConfig) -> None:
    """``ActionRefused`` for a non-loopback URL unless ``config.allow_remote``."""
    config.check_target()


def sweep(config: LoadTestConfig, progress: Callable[[dict[str, Any]], None] | None = None) -> SweepRun:
    """Every rate of ``config`` against its endpoint; ``progress`` is called with each step's row as it ends.

    Refuses a remote target as ``check`` does, so that no caller can load one by skipping the check."""
    return run_sweep(config, progress)


def plan(run: SweepRun) -> LoadTestPlan:
    """The highest rate that meets the SLO and the quality floor of ``run.config``, with its reason. Pure."""
    config = run.config
    capacity = sustainable_capacity(run.sweep, slo_quantile=config.slo_quantile, slo_seconds=config.slo_seconds,
                                    min_quality=config.min_quality, source=f"load test of {config.url}")
    if run.unreached is not None:
        capacity = replace(capacity, reason=f"no request reached the server ({run.unreached}): is it up at "
                                            f"{config.url}? {capacity.reason}")
    return LoadTestPlan(run, capacity)


def write_files(load_plan: LoadTestPlan, out_dir: Path) -> dict[str, Path]:
    """requests.csv, sweep.csv, latency.png and summary.json under ``out_dir``; their paths by name."""
    return write_outputs(load_plan.run, load_plan.capacity, out_dir)


def record(load_plan: LoadTestPlan, files: dict[str, Path], store: Store, *, flow_run_id: str | None) -> int:
    """The audit row of the load test (``applied`` when a rate met the SLO, else ``failed``); returns its id."""
    row = record_load_test(store, load_plan.run, load_plan.capacity, files, flow_run_id)
    return int(row.id or 0)


def apply(load_plan: LoadTestPlan, out_dir: Path, store: Store, *, flow_run_id: str | None) -> LoadTestResult:
    """The files, then the audit row that names them."""
    files = write_files(load_plan, out_dir)
    return LoadTestResult(load_plan, files, record(load_plan, files, store, flow_run_id=flow_run_id))
