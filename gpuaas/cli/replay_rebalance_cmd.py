"""``gpuaas replay rebalance``: static quotas, Kueue's borrowing, and nightly rebalancing on a trace.

Why on the command line: whether moving nominal quota at night helps a given fleet is a question
about its own job history, and it should be answered on that history before the rebalance flow
is allowed to apply anything. Semantics: :mod:`gpuaas.cluster.quota_replay`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from gpuaas.cli._common import OutputFormat, console, err_console, fail, flag_error, print_json, print_table
from gpuaas.cli._trace_format import TraceFormat
from gpuaas.cluster.deadline_replay import DEFAULT_RUNTIME_ESTIMATE, estimate_runtimes
from gpuaas.cluster.quota_replay import replay_rebalance
from gpuaas.errors import ConfigError
from gpuaas.policy import Policy, load_policy

__all__ = ["rebalance"]


_HEADERS = ("configuration", "avg wait s", "p95 wait s", "worst tenant p95 s", "met / deadlines", "allocated",
            "Jain", "preempted GPU-h", "GPUs moved/night")
_COLUMNS = ("configuration", "avg_queue_s", "p95_queue_s", "worst_tenant_p95_queue_s", "deadline_satisfaction",
            "gpu_allocation_ratio", "jain_fairness", "preempted_gpu_hours", "gpus_moved_per_night")


def _row(name: str, data: dict[str, Any]) -> list[Any]:
    moved = data["gpus_moved_per_night"]
    per_night = round(sum(moved) / len(moved), 1) if moved else 0
    return [name, *(data[c] for c in _COLUMNS[1:-1]), per_night]


def rebalance(
    trace: Annotated[list[Path], typer.Option("--trace", help="Trace CSV; repeat for several (ITP: one tenant each).")],
    trace_format: Annotated[TraceFormat, typer.Option("--trace-format", help="philly or itp.")],
    quotas: Annotated[Path | None, typer.Option("--quotas", help="YAML mapping tenant -> nominal GPUs.")] = None,
    days: Annotated[float | None, typer.Option("--days", min=0.0, help="Replay jobs submitted in the first N days.")]
    = None,
    policy: Annotated[Path | None, typer.Option(
        "--policy", help="Policy YAML whose rebalance settings and tenants the nightly plan uses (default: the "
                         "policy's defaults, as the flow runs without one).")] = None,
    runtime_estimate: Annotated[str, typer.Option(
        "--runtime-estimate", help="What the nightly plan's deadline need is told of each job's run time: exact, "
                                   f"factor:F or lognormal:SIGMA (default {DEFAULT_RUNTIME_ESTIMATE}: the median "
                                   "estimate right; exact tells it the true run times, which no flow knows).")]
    = DEFAULT_RUNTIME_ESTIMATE,
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**32 - 1, help="Seed of the lognormal estimate error.")] = 0,
    format: Annotated[OutputFormat, typer.Option("--format", help="Output format.")] = OutputFormat.table,
) -> None:
    """Replay a trace under static_isolated, static_cohort, rebalanced_isolated and rebalanced_cohort."""
    try:
        estimate_runtimes([], runtime_estimate, seed)
    except ConfigError as exc:  # the flag's value: a usage error (exit 2), before any trace is read
        raise flag_error(exc) from exc
    try:
        chosen = load_policy(policy) if policy is not None else Policy()
        result = replay_rebalance(trace, trace_format.value, quotas_file=quotas, days=days, policy=chosen,
                                  policy_file=policy, runtime_estimate=runtime_estimate, seed=seed,
                                  progress=lambda line: err_console.print(line, markup=False, highlight=False))
    except ConfigError as exc:
        raise fail(str(exc)) from exc
    if format is OutputFormat.json:
        print_json(result)
        return
    _print_tables(result)


def _print_tables(result: dict[str, Any]) -> None:
    """The configurations, then every replayed tenant, then one line per tenant of the input left out.

    The headline's jobs, tenants and GPUs are the sums of the tenant table's rows, and its excluded jobs
    those of the table plus those of the left-out lines, so every tenant and job of the input is accounted for.
    """
    meta = result["meta"]
    tenants = meta["tenants"]
    replayed = {name: t for name, t in tenants.items() if t["left_out"] is None}
    left_out = [t["why"] for t in tenants.values() if t["left_out"] is not None]
    title = (f"Rebalance replay: {meta['jobs']:,} jobs of {len(replayed)} tenant{'' if len(replayed) == 1 else 's'} "
             f"over {meta['submission_span_days']} days, {meta['total_gpus']:,} GPUs "
             f"({meta['excluded_jobs']} jobs excluded, {len(left_out)} tenant{'' if len(left_out) == 1 else 's'} "
             "left out)")
    configurations = result["configurations"]
    print_table(title, _HEADERS, [_row(name, data) for name, data in configurations.items()])
    print_table("p95 wait s per tenant", ("tenant", "quota", "jobs", "excluded", *(c.replace("_", " ") for c in configurations)),
                [[name, t["quota"], t["jobs"], t["excluded_jobs"],
                  *(_wait(data["tenants"][name]) for data in configurations.values())]
                 for name, t in replayed.items()])
    for line in left_out:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def _wait(tenant: dict[str, Any]) -> str:
    """A tenant's p95 wait in one configuration, with the jobs that never finished (counted until the replay
    stopped: at least that long)."""
    wait = str(tenant["p95_queue_s"])
    if tenant["jobs_unfinished"] == tenant["jobs"]:
        return f"at least {wait} (none of {tenant['jobs']:,} finished)"
    return f"at least {wait} ({tenant['jobs_unfinished']} unfinished)" if tenant["jobs_unfinished"] else wait
