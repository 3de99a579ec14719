"""Tasks of the load_test flow: the sweep (never retried), files, the store record, artifacts.

The sweep task has no retries on purpose: a load test that failed half-way must not start
again by itself and load the endpoint a second time.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from prefect import get_run_logger, runtime

from gpuaas.loadtest import LoadTestConfig, SweepRun, record_load_test, run_sweep, write_outputs
from gpuaas.policies.cost import CapacityResult
from gpuaas.settings import GpuaasSettings
from gpuaas.store import open_store
from reports.capacity import capacity_markdown
from tasks._artifacts import summary_artifact, table_artifact
from tasks._options import gpuaas_task

__all__ = ["publish_load_test_artifacts", "record_run", "run_load_sweep", "write_load_test_files"]


@gpuaas_task("load-sweep", retries=0)
def run_load_sweep(config: LoadTestConfig) -> SweepRun:
    logger = get_run_logger()

    def progress(row: dict[str, Any]) -> None:
        logger.info("%g rps: %d requests, p50/p95/p99 %.3f/%.3f/%.3f s, quality %.3f, lateness p99 %.1f ms%s",
                    row["rate_rps"], row["requests"], row["latency_p50_s"], row["latency_p95_s"],
                    row["latency_p99_s"], row["quality"], row["lateness_p99_s"] * 1000,
                    " (client could not keep up)" if row["client_limited"] else "")

    return run_sweep(config, progress)


@gpuaas_task("write-load-test-files")
def write_load_test_files(run: SweepRun, capacity: CapacityResult, out_dir: Path) -> dict[str, Path]:
    return write_outputs(run, capacity, out_dir)


@gpuaas_task("record-load-test", retries=2, retry_delay_seconds=2)
def record_run(settings: GpuaasSettings, run: SweepRun, capacity: CapacityResult, files: dict[str, Path]) -> int:
    with open_store(settings) as store:
        flow_run_id = runtime.flow_run.id
        return int(record_load_test(store, run, capacity, files, str(flow_run_id) if flow_run_id else None).id or 0)


@gpuaas_task("publish-load-test-artifacts")
def publish_load_test_artifacts(run: SweepRun, capacity: CapacityResult, files: dict[str, Path]) -> None:
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
    markdown = (capacity_markdown(capacity, f"Sustainable capacity of {run.config.model}") + "\n" + " ".join(notes)
                + f"\n\n![latency against rate](data:image/png;base64,{png})\n\nFiles: {files['sweep'].parent}\n")
    summary_artifact(key="gpuaas-load-test", markdown=markdown)
