"""What a load test leaves behind: the per-request CSV, the sweep CSV, the plot and a summary.

The sweep CSV is exactly what ``gpuaas capacity`` reads, so a run can be re-judged later
against another SLO without sending a request. The plot draws the latency quantiles against
the rate with the SLO line and the knee (the first rate that stopped the climb); steps where
the client could not keep its schedule are marked, so nobody reads them as the server's limit.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from gpuaas._json_safe import json_safe
from gpuaas.loadtest._sweep import SweepRun
from gpuaas.policies.cost import CapacityResult

__all__ = ["LoadTestFiles", "json_safe", "plot_sweep", "summary", "write_outputs"]

LoadTestFiles = dict[str, Path]


def plot_sweep(run: SweepRun, capacity: CapacityResult, path: Path) -> Path:
    """PNG of p50/p95/p99 latency against rate, the SLO and the knee."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sweep = run.sweep
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    try:
        for q, style in (("p50", "o-"), ("p95", "s-"), ("p99", "^-")):
            values = [v if math.isfinite(v) else float("nan") for v in sweep[f"latency_{q}_s"]]
            ax.plot(sweep["rate_rps"], values, style, label=f"e2e {q}", linewidth=1.4, markersize=4)
        ax.axhline(capacity.slo_seconds, color="red", linestyle="--", linewidth=1,
                   label=f"SLO {capacity.slo_quantile} <= {capacity.slo_seconds:g}s")
        if capacity.sustainable_rate_rps is not None:
            ax.axvline(capacity.sustainable_rate_rps, color="green", linestyle=":", linewidth=1.2,
                       label=f"sustainable {capacity.sustainable_rate_rps:g} rps")
        if capacity.knee_rate_rps is not None:
            ax.axvline(capacity.knee_rate_rps, color="black", linestyle="-.", linewidth=1,
                       label=f"knee (first failing) {capacity.knee_rate_rps:g} rps")
        limited = sweep[sweep["client_limited"].astype(bool)]
        if len(limited):
            ax.scatter(limited["rate_rps"], [capacity.slo_seconds] * len(limited), marker="x", color="purple",
                       zorder=5, label="client could not keep up")
        ax.set_xlabel("rate (requests/s asked for, open-loop Poisson)")
        ax.set_ylabel("end-to-end latency (s)")
        ax.set_title(f"{run.config.model} at {run.config.url}", fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path


def summary(run: SweepRun, capacity: CapacityResult) -> dict[str, Any]:
    c = run.config
    out: dict[str, Any] = json_safe({
        "url": c.url, "model": c.model, "service": c.service, "api": c.api, "rates": list(c.rates),
        "prompt_tokens": c.prompt_tokens, "output_tokens": c.output_tokens, "prompt_spread": c.prompt_spread,
        "output_spread": c.output_spread, "ignore_eos": run.ignore_eos, "step_seconds": c.step_seconds,
        "warmup_seconds": c.warmup_seconds,
        "max_requests_per_step": c.max_requests_per_step, "seed": c.seed, "replicas": c.replicas, "gpus": c.gpus,
        "requests": len(run.requests), "lateness_p99_s": run.lateness_p99_s,
        "client_limited_rates": run.client_limited_rates, "stopped": run.stopped,
        "capacity": capacity.to_dict(), "sweep": run.steps,
    })
    return out


def write_outputs(run: SweepRun, capacity: CapacityResult, out_dir: Path) -> LoadTestFiles:
    """requests.csv, sweep.csv, latency.png and summary.json under ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {"requests": out_dir / "requests.csv", "sweep": out_dir / "sweep.csv",
             "plot": out_dir / "latency.png", "summary": out_dir / "summary.json"}
    run.request_frame.to_csv(files["requests"], index=False)
    run.sweep.to_csv(files["sweep"], index=False)
    plot_sweep(run, capacity, files["plot"])
    files["summary"].write_text(json.dumps(summary(run, capacity), indent=2) + "\n", encoding="utf-8")
    return files
