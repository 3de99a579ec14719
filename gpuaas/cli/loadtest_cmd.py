"""``gpuaas loadtest``: run the load_test flow now against one OpenAI-compatible endpoint.

The same flow a person would start from the Prefect UI (it is never scheduled). The arguments
are checked before Prefect starts: a flag's value it refuses fails at once with exit 2 (usage), a
non-loopback URL without ``--allow-remote`` or an ``--out`` it cannot write with exit 1. Exit 1 too when no
measured rate meets the SLO (the table says why).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from gpuaas.cli._common import OutputFormat, as_flag, console, fail, flag_error, lead, print_json, settings_or_exit
from gpuaas.cli._tables import print_table
from gpuaas.errors import ConfigError, GpuaasError
from gpuaas.loadtest import MAX_REQUEST_TOKENS
from gpuaas.models import MAX_GPUS
from reports.capacity import load_test_headline

__all__ = ["loadtest"]


STEP_COLUMNS = {
    "rate_rps": "rate (rps)", "offered_rps": "offered (rps)", "achieved_ratio": "achieved", "latency_p50_s": "p50 (s)",
    "latency_p95_s": "p95 (s)", "latency_p99_s": "p99 (s)", "ttft_p95_s": "TTFT p95 (s)", "itl_p95_s": "ITL p95 (s)",
    "output_tokens_per_s": "tokens/s", "quality": "quality", "latency_growth": "latency growth",
    "lateness_p99_s": "lateness p99 (s)", "client_limited": "client-limited",
}
"""A sweep step's fields (``sweep.csv``'s columns, the JSON's keys) and their headers in the table."""


def step_optional(slo_quantile: str) -> tuple[str, ...]:
    """What a narrow terminal leaves out first: the client's own health, then the detail beside the SLO's own
    quantile (``p95``: ``p95 (s)`` is always shown, the other two go)."""
    others = tuple(f"{q} (s)" for q in ("p50", "p99", "p95") if q != slo_quantile)
    return ("lateness p99 (s)", "client-limited", "latency growth", "ITL p95 (s)", "tokens/s", "offered (rps)",
            "TTFT p95 (s)", *others)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "YES" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


_TARGET = "The endpoint"
_SWEEP = "The sweep and its SLO"
_REQUESTS = "Each request"
"""Help panels: each is its own table, so one command's long names and its ``--no-`` switch do not share a
column that cannot fit 80 characters."""


def loadtest(
    url: Annotated[str, typer.Option("--url", rich_help_panel=_TARGET, help="OpenAI-compatible base URL, loopback unless --allow-remote.")],
    model: Annotated[str, typer.Option("--model", rich_help_panel=_TARGET, help="Model name the endpoint serves.")],
    rates: Annotated[str, typer.Option("--rates", rich_help_panel=_SWEEP, help="Increasing request rates (per second), e.g. 1,2,4,8.")],
    slo_seconds: Annotated[float, typer.Option("--slo-seconds", rich_help_panel=_SWEEP, help="End-to-end latency target at the quantile.")],
    out: Annotated[Path, typer.Option("--out", "--output", "-o", help="Directory for requests.csv, sweep.csv, latency.png.")],
    slo_quantile: Annotated[str, typer.Option("--slo-quantile", rich_help_panel=_SWEEP, help="p50 | p95 | p99")] = "p95",
    prompt_tokens: Annotated[int, typer.Option("--prompt-tokens", rich_help_panel=_REQUESTS, max=MAX_REQUEST_TOKENS, help=(
        "Prompt length (words), at most 1,048,576: the longest context a serving engine takes."))] = 128,
    output_tokens: Annotated[int, typer.Option("--output-tokens", rich_help_panel=_REQUESTS, max=MAX_REQUEST_TOKENS, help=(
        "max_tokens of each request, at most 1,048,576 (as --prompt-tokens)."))] = 32,
    max_requests_per_step: Annotated[int, typer.Option("--max-requests-per-step", rich_help_panel=_SWEEP, help=(
        "Cap per step (warm-up included); a rate that would need more is refused, a step is never cut short."))
                                     ] = 50_000,
    step_seconds: Annotated[float, typer.Option("--step-seconds", rich_help_panel=_SWEEP, help=(
        "Steady part of each step, the part it is judged on."))] = 60.0,
    warmup_seconds: Annotated[float, typer.Option("--warmup-seconds", rich_help_panel=_SWEEP, help=(
        "Load sent before each step's steady part at the same rate, not judged."))] = 10.0,
    prompt_spread: Annotated[float, typer.Option("--prompt-spread", rich_help_panel=_REQUESTS, help=(
        "Prompt lengths uniform within prompt-tokens x (1 +- spread)."))] = 0.25,
    output_spread: Annotated[float, typer.Option("--output-spread", rich_help_panel=_REQUESTS, help=(
        "max_tokens uniform within output-tokens x (1 +- spread)."))] = 0.0,
    ignore_eos: Annotated[bool, typer.Option("--ignore-eos/--no-ignore-eos", rich_help_panel=_REQUESTS, help=(
        "Ask for outputs of exactly max_tokens (vLLM's ignore_eos; dropped if the server refuses it)."))] = True,
    request_timeout: Annotated[float, typer.Option("--request-timeout", rich_help_panel=_REQUESTS, help="Seconds per request (bound).")] = 60.0,
    api: Annotated[str, typer.Option("--api", rich_help_panel=_TARGET, help="completions | chat")] = "completions",
    min_quality: Annotated[float, typer.Option("--min-quality", rich_help_panel=_SWEEP, help="Share of good answers required.")] = 0.99,
    expect_substring: Annotated[str | None, typer.Option("--expect", rich_help_panel=_SWEEP, help="A good answer contains this.")] = None,
    replicas: Annotated[int, typer.Option("--replicas", rich_help_panel=_TARGET, max=MAX_GPUS, help="Replicas behind the URL.")] = 1,
    gpus: Annotated[int, typer.Option("--gpus", rich_help_panel=_TARGET, max=MAX_GPUS, help="GPUs behind the URL.")] = 1,
    seed: Annotated[int, typer.Option("--seed", rich_help_panel=_REQUESTS, min=0, help="Seed of the arrival times and the prompts.")] = 0,
    max_lateness: Annotated[float, typer.Option("--max-lateness", rich_help_panel=_SWEEP, help="p99 send lateness (s) above which a step "
                                                "is flagged as client-limited.")] = 0.05,
    service: Annotated[str | None, typer.Option("--service", rich_help_panel=_TARGET, help="namespace/name of the service (for the store).")
                       ] = None,
    allow_remote: Annotated[bool, typer.Option("--allow-remote", rich_help_panel=_TARGET, help="Allow a URL that is not loopback.")] = False,
    format: Annotated[OutputFormat, typer.Option("--format", help="Output format.")] = OutputFormat.table,
) -> None:
    """Sweep request rates with open-loop Poisson arrivals; find the highest rate that meets the SLO."""
    from gpuaas.loadtest import LoadTestConfig, parse_rates

    settings_or_exit()
    try:
        parsed = parse_rates(rates)
        config = LoadTestConfig(
            url=url, model=model, rates=parsed, slo_quantile=slo_quantile, slo_seconds=slo_seconds,
            prompt_tokens=prompt_tokens, output_tokens=output_tokens, max_requests_per_step=max_requests_per_step,
            step_seconds=step_seconds, warmup_seconds=warmup_seconds, prompt_spread=prompt_spread,
            output_spread=output_spread, ignore_eos=ignore_eos,
            request_timeout_seconds=request_timeout, api=api,  # type: ignore[arg-type]
            min_quality=min_quality, expect_substring=expect_substring, replicas=replicas, gpus=gpus, seed=seed,
            max_lateness_seconds=max_lateness, allow_remote=allow_remote, service=service)
    except ConfigError as exc:  # a flag's value: called wrong (exit 2)
        raise flag_error(exc, _FLAGS) from exc
    try:
        config.check_target()
        _check_out(out)
    except ConfigError as exc:
        raise fail(as_flag(exc, _FLAGS)) from exc
    except GpuaasError as exc:
        raise fail(str(exc)) from exc
    from flows.load_test import load_test as load_test_flow
    from gpuaas.cli._flows import run_flow

    worst = config.max_step_seconds * len(parsed)
    result = run_flow(
        load_test_flow, f"load test: {len(parsed)} rate{'' if len(parsed) == 1 else 's'} x ({warmup_seconds:g}s warm-up + {step_seconds:g}s) "
                        f"(at most {worst:.0f}s)",
        url=url, model=model, rates=list(parsed), slo_quantile=config.slo_quantile, slo_seconds=slo_seconds,
        prompt_tokens=prompt_tokens, output_tokens=output_tokens, max_requests_per_step=max_requests_per_step,
        step_seconds=step_seconds, warmup_seconds=warmup_seconds, prompt_spread=prompt_spread,
        output_spread=output_spread, ignore_eos=ignore_eos,
        out=str(out), api=api, min_quality=min_quality, expect_substring=expect_substring,
        replicas=replicas, gpus=gpus, seed=seed, request_timeout_seconds=request_timeout,
        max_lateness_seconds=max_lateness, allow_remote=allow_remote, service=service)
    capacity = result["capacity"]
    result["headline"] = load_test_headline(result)
    lead(result, format)  # the first line: on stdout above the tables, on stderr beside the JSON
    if format is OutputFormat.json:
        print_json(result)
    else:
        print_table("Load test: one row per rate", list(STEP_COLUMNS.values()),
                    [[_fmt(s[key]) for key in STEP_COLUMNS] for s in result["steps"]], optional=step_optional(capacity["slo_quantile"]))
        rows = [["sustainable rate (rps)", _fmt(capacity["sustainable_rate_rps"])],
                ["per replica / per GPU (rps)", f"{_fmt(capacity['per_replica_rps'])} / {_fmt(capacity['per_gpu_rps'])}"],
                ["knee: first failing rate (rps)", _fmt(capacity["knee_rate_rps"])],
                ["requests sent", f"{result['requests']:,}"],
                ["lateness p99 (ms)", f"{result['lateness_p99_s'] * 1000:.1f}"],
                ["why", capacity["reason"] + (f"; {result['stopped']}" if result["stopped"] else "")],
                ["files", str(Path(result["files"]["sweep"]).parent)]]
        print_table(f"Sustainable capacity ({capacity['slo_quantile']} <= {slo_seconds:g}s)", ["", "value"], rows)
        console.print(f"audit id {result['audit_id']}", highlight=False)
    if not capacity["met"]:
        raise fail(f"{url}: {capacity['reason']}")


def _check_out(out: Path) -> None:
    """The output directory, made and writable before the first request: a load test takes minutes, and
    a typo in ``--out`` must not be found only when its results have nowhere to go."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} exists and is not a directory", field="--out")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create {out}: {exc.strerror or exc}", field="--out") from exc
    if not os.access(out, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot write to {out}: permission denied", field="--out")


_FLAGS = {"request_timeout_seconds": "--request-timeout", "max_lateness_seconds": "--max-lateness",
          "expect_substring": "--expect"}
"""The configuration's fields whose flag is not their name."""
