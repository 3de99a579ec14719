"""Tasks of the load_test flow around ``gpuaas.operations.load_test``: the sweep, the capacity, the files and
the audit row, the artifacts.

The sweep task has no retries on purpose: a load test that failed half-way must not start
again by itself and load the endpoint a second time.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from prefect import get_run_logger

from gpuaas.loadtest import LoadTestConfig, SweepRun
from gpuaas.operations import load_test as operation
from gpuaas.settings import GpuaasSettings
from gpuaas.store import open_store
from reports.capacity import capacity_markdown, load_test_headline
from tasks._artifacts import summary_artifact, table_artifact
from tasks._options import current_run_id, gpuaas_task

__all__ = ["apply_load_test", "plan_load_test", "publish_load_test_artifacts", "run_load_sweep"]


@gpuaas_task("load-sweep", retries=0)
def run_load_sweep(config: LoadTestConfig) -> SweepRun:
    logger = get_run_logger()

    def progress(row: dict[str, Any]) -> None:
        logger.info("%g rps: %d requests, p50/p95/p99 %.3f/%.3f/%.3f s, quality %.3f, lateness p99 %.1f ms%s",
                    row["rate_rps"], row["requests"], row["latency_p50_s"], row["latency_p95_s"],
                    row["latency_p99_s"], row["quality"], row["lateness_p99_s"] * 1000,
                    " (client could not keep up)" if row["client_limited"] else "")

    return operation.sweep(config, progress)


@gpuaas_task("plan-load-test")
def plan_load_test(run: SweepRun) -> operation.LoadTestPlan:
    """The sustainable capacity of the sweep (no retries: a bad sweep stays bad)."""
    return operation.plan(run)


@gpuaas_task("apply-load-test", retries=2, retry_delay_seconds=2)
def apply_load_test(settings: GpuaasSettings, plan: operation.LoadTestPlan, out_dir: Path) -> operation.LoadTestResult:
    """The files, then the audit row (a retry writes the same files again: they are the sweep's, not the endpoint's)."""
    with open_store(settings) as store:
        return operation.apply(plan, out_dir, store, flow_run_id=current_run_id())


@gpuaas_task("publish-load-test-artifacts")
def publish_load_test_artifacts(result: operation.LoadTestResult) -> None:
    run, capacity, files = result.plan.run, result.plan.capacity, result.files
    table_artifact(key="gpuaas-load-test-sweep", table=[
        {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()} for row in run.steps],
        description=f"Load test of {run.config.model} at {run.config.url}: one row per rate")
    png = base64.b64encode(files["plot"].read_bytes()).decode()
    notes = [f"Requests: {len(run.requests)}; lateness p99 {run.lateness_p99_s * 1000:.1f} ms."]
    if run.client_limited_rates:
        notes.append("Client could not keep up at " + ", ".join(f"{r:g}" for r in run.client_limited_rates)
                     + " rps: those steps are not the server's capacity.")
    if run.stopped:
        notes.append(run.stopped + ".")
    markdown = (f"{load_test_headline(result.to_json())}\n\n"  # the description: summary_artifact takes it off
                + capacity_markdown(capacity, f"Sustainable capacity of {run.config.model}") + "\n" + " ".join(notes)
                + f"\n\n![latency against rate](data:image/png;base64,{png})\n\nFiles: {files['sweep'].parent}\n")
    summary_artifact(key="gpuaas-load-test", markdown=markdown)
