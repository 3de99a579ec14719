"""Cost report at fleet scale: the number of queries stays fixed, and how long they take.

Builds a synthetic fleet straight into a real Prometheus (promtool backfill): GPUS GPUs in pods of
8 across TENANTS namespaces, DAYS days sampled every STEP seconds (dcgm activity, OpenCost's
``container_gpu_allocation`` and node prices, Kueue usage), and SERVICES vLLM services (requests
by reason, the e2e latency histogram). Then reads the report window with the production code
(OpenCost through its Prometheus metrics, no Kubernetes API) and prints the query count and the
time. ``python -m bench.bench_cost_report [GPUS] [DAYS] [STEP_S] [SERVICES] [--smoke]``; the default is
2,000 GPUs, 30 days, hourly samples, 50 services (``--smoke``: 16 GPUs, 1 day, 2 services); 16,000 GPUs
x 30 days (18 M samples) backfills in ~10 min on the 2-core development machine, then reads in at most
12 queries whatever the size.
"""

from __future__ import annotations

import random
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench._run import headline, parser, run
from gpuaas.cluster.prometheus import PrometheusServer, require_binary
from gpuaas.cluster.telemetry import E2E_BUCKETS
from gpuaas.operations import cost_report as operation
from gpuaas.settings import MetricNames, load_settings
from gpuaas.sources import PromClient

TENANTS = 50
END = datetime(2026, 11, 30, tzinfo=UTC)


def write_history(path: Path, gpus: int, days: int, step_s: int, services: int) -> int:
    """OpenMetrics, one series at a time (each series' samples in time order, families contiguous)."""
    start = END.timestamp() - days * 86400
    stamps = [start + i * step_s for i in range(1, days * 86400 // step_s + 1)]
    rng = random.Random(1)
    lines = 0
    pods = gpus // 8
    with path.open("w", encoding="utf-8") as out:
        out.write("# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge\n")
        for g in range(gpus):
            pod, ns = g // 8, f"team-{(g // 8) % TENANTS}"
            labels = (f'{{UUID="GPU-{g:08d}",gpu="{g % 8}",Hostname="node-{pod}",namespace="{ns}",'
                      f'pod="job-{pod}-0",container="main"}}')
            busy = rng.random()
            for ts in stamps:
                out.write(f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{labels} {busy if (ts // 3600) % 3 else 0.0} {ts:.0f}\n")
            lines += len(stamps)
        out.write("# TYPE container_gpu_allocation gauge\n")
        for pod in range(pods):
            labels = f'{{namespace="team-{pod % TENANTS}",pod="job-{pod}-0",container="main",node="node-{pod}"}}'
            out.writelines(f"container_gpu_allocation{labels} 8 {ts:.0f}\n" for ts in stamps)
            lines += len(stamps)
        out.write("# TYPE node_gpu_hourly_cost gauge\n")
        for pod in range(pods):
            out.writelines(f'node_gpu_hourly_cost{{node="node-{pod}"}} 4 {ts:.0f}\n' for ts in stamps)
            lines += len(stamps)
        out.write("# TYPE kueue_cluster_queue_resource_usage gauge\n")
        for t in range(TENANTS):
            labels = f'{{cluster_queue="team-{t}-cq",flavor="h100",resource="nvidia.com/gpu"}}'
            out.writelines(f"kueue_cluster_queue_resource_usage{labels} {8 * pods // TENANTS} {ts:.0f}\n"
                           for ts in stamps)
            lines += len(stamps)
        lines += _vllm(out, stamps, services)
        out.write("# EOF\n")
    return lines


def _vllm(out: object, stamps: list[float], services: int) -> int:
    write = out.write  # type: ignore[attr-defined]
    lines = 0
    write("# TYPE vllm:request_success counter\n")
    for s in range(services):
        base = f'engine="0",model_name="model-{s}",namespace="team-{s % TENANTS}"'
        for reason, share in (("stop", 0.9), ("length", 0.03), ("abort", 0.05), ("error", 0.02), ("repetition", 0)):
            for i, ts in enumerate(stamps):
                write(f'vllm:request_success_total{{{base},finished_reason="{reason}"}} {i * 100 * share:.0f} {ts:.0f}\n')
            lines += len(stamps)
    write("# TYPE vllm:e2e_request_latency_seconds histogram\n")
    for s in range(services):
        base = f'engine="0",model_name="model-{s}",namespace="team-{s % TENANTS}"'
        for le in [*(repr(b) for b in E2E_BUCKETS), "+Inf"]:
            share = 1.0 if le == "+Inf" else min(1.0, float(le) / 4)
            for i, ts in enumerate(stamps):
                write(f'vllm:e2e_request_latency_seconds_bucket{{{base},le="{le}"}} {i * 100 * share:.0f} {ts:.0f}\n')
            lines += len(stamps)
    return lines


def main(argv: list[str]) -> int:
    cli = parser(__doc__)
    for name, default in (("gpus", 2000), ("days", 30), ("step_s", 3600), ("services", 50)):
        cli.add_argument(name, nargs="?", type=int, default=default)
    args = cli.parse_args(argv)
    gpus, days, step_s, services = (16, 1, 3600, 2) if args.smoke else (args.gpus, args.days, args.step_s,
                                                                           args.services)
    with tempfile.TemporaryDirectory(prefix="bench-cost-") as tmp:
        t0 = time.monotonic()
        history = Path(tmp) / "history.om"
        samples = write_history(history, gpus, days, step_s, services)
        t1 = time.monotonic()
        prom = PrometheusServer(Path(tmp) / "prom")
        prom.tsdb_dir.mkdir(parents=True)
        # 6-day blocks (10 % of the 60-day retention) rather than promtool's 2-hour default: a month
        # of history in 5 blocks, as a compacted Prometheus would hold it
        subprocess.run([require_binary("promtool"), "tsdb", "create-blocks-from", "openmetrics",
                        "--max-block-duration=144h", str(history), str(prom.tsdb_dir)], check=True,
                       capture_output=True)
        history.unlink()
        prom.start(timeout=300)
        t2 = time.monotonic()
        try:
            policy = Path(tmp) / "policy.yaml"
            policy.write_text("tenants:\n" + "".join(
                f"  - {{name: team-{t}, namespaces: [team-{t}], cluster_queues: [team-{t}-cq]}}\n" for t in range(TENANTS))
                + "services:\n" + "".join(
                f"  - {{name: svc-{s}, namespace: team-{s % TENANTS}, model_name: model-{s}, latency_slo_seconds: 2.0}}\n"
                for s in range(services)))
            settings = load_settings(prometheus_url=prom.url, policy_file=policy, nvml="off", data_dir=Path(tmp),
                                     metrics=MetricNames(sample_interval_seconds=step_s), request_timeout_seconds=600)
            timings: list[float] = []
            call = PromClient._call

            def timed(self: PromClient, path: str, form: dict[str, str]) -> list[Any]:
                began = time.monotonic()
                try:
                    return call(self, path, form)
                finally:
                    timings.append(time.monotonic() - began)

            PromClient._call = timed  # type: ignore[method-assign]
            t3 = time.monotonic()
            windows = operation.read(settings, END, days * 86400, compare=False)
            inputs = windows.current
            t4 = time.monotonic()
            report = operation.plan(windows, settings.policy).report
            t5 = time.monotonic()
        finally:
            prom.stop()
    print(f"fleet: {gpus:,} GPUs in {gpus // 8:,} pods, {TENANTS} tenants, {services} vLLM services; "
          f"{days} days sampled every {step_s}s ({samples:,} samples; built in {t1 - t0:.0f}s, backfilled in "
          f"{t2 - t1:.0f}s)")
    print(f"cost report over {days} days: {inputs.queries} queries (PromQL; OpenCost via its metrics, no Kubernetes "
          f"API) in {t4 - t3:.1f}s; report built in {t5 - t4:.1f}s; {len(report.tenants)} tenants, "
          f"{len(report.services)} services, {len(report.daily)} service-days")
    print("per query (GPU hours observed, then busy, each in up to 3 day chunks; serving; Kueue; OpenCost metrics): "
          + ", ".join(f"{t:.1f}s" for t in timings))
    print(f"peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB")
    headline(f"{days} days of {gpus:,} GPUs: {inputs.queries} queries in {t4 - t3:.1f} s, report built in "
             f"{t5 - t4:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(run(main, "bench_cost_report"))
