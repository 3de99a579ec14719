"""The load_test flow (on demand only, never scheduled): a sustainable-capacity sweep of one endpoint.

Check, sweep (open-loop Poisson steps, bounded), plan (the capacity, pure), apply (files, then an
audit row the cost report reads back): ``gpuaas.operations.load_test``, a task per phase; then the
artifacts. A non-loopback URL is refused unless ``allow_remote``: loading production is a deliberate act.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger

from flows._hooks import FLOW_HOOKS
from flows._outcome import finished
from gpuaas.loadtest import LoadTestConfig
from gpuaas.operations import load_test as operation
from gpuaas.settings import load_settings
from reports.capacity import load_test_headline
from tasks.load_test import apply_load_test, plan_load_test, publish_load_test_artifacts, run_load_sweep


@flow(name="load_test", log_prints=False, **FLOW_HOOKS)
def load_test(url: str, model: str, rates: list[float], slo_quantile: str = "p95", slo_seconds: float = 2.0,
              prompt_tokens: int = 128, output_tokens: int = 32, max_requests_per_step: int = 50_000,
              step_seconds: float = 60.0, warmup_seconds: float = 10.0, prompt_spread: float = 0.25,
              output_spread: float = 0.0, ignore_eos: bool = True, out: str | None = None, api: str = "completions",
              min_quality: float = 0.99, expect_substring: str | None = None, replicas: int = 1, gpus: int = 1,
              seed: int = 0, request_timeout_seconds: float = 60.0, max_lateness_seconds: float = 0.05,
              allow_remote: bool = False, service: str | None = None) -> dict[str, Any]:
    """Run the sweep and return the capacity, the files and the audit id."""
    logger = get_run_logger()
    settings = load_settings()
    config = LoadTestConfig(
        url=url, model=model, rates=tuple(float(r) for r in rates), slo_quantile=slo_quantile,
        slo_seconds=slo_seconds, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
        max_requests_per_step=max_requests_per_step, step_seconds=step_seconds, warmup_seconds=warmup_seconds,
        prompt_spread=prompt_spread, output_spread=output_spread, ignore_eos=ignore_eos, api=api,  # type: ignore[arg-type]
        min_quality=min_quality, expect_substring=expect_substring, replicas=replicas, gpus=gpus, seed=seed,
        request_timeout_seconds=request_timeout_seconds, max_lateness_seconds=max_lateness_seconds,
        allow_remote=allow_remote, service=service)
    operation.check(config)
    out_dir = Path(out) if out else settings.reports_dir / "load-tests" / _stamp()
    run = run_load_sweep(config)
    logger.info("load test: %d steps, %d requests, lateness p99 %.1f ms%s", len(run.steps), len(run.requests),
                run.lateness_p99_s * 1000, f"; {run.stopped}" if run.stopped else "")
    plan = plan_load_test(run)
    result = apply_load_test(settings, plan, out_dir)
    publish_load_test_artifacts(result)
    logger.info("capacity: %s", plan.capacity.reason)
    doc = result.to_json()
    return finished(doc, load_test_headline(doc))


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
