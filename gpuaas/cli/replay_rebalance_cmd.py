"""``gpuaas replay rebalance``: static quotas, Kueue's borrowing, and nightly rebalancing on a trace.

Why on the command line: whether moving nominal quota at night helps a given fleet is a question
about its own job history, and it should be answered on that history before the rebalance flow
is allowed to apply anything. Semantics: :mod:`gpuaas.cluster.quota_replay`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from gpuaas.cli._common import OutputFormat, console, fail, flag_error, lead, print_json
from gpuaas.cli._progress import say
from gpuaas.cli._tables import print_table
from gpuaas.cli._trace_format import TraceFormat
from gpuaas.cluster.deadline_replay import DEFAULT_RUNTIME_ESTIMATE, estimate_runtimes
from gpuaas.cluster.quota_replay import replay_rebalance
from gpuaas.errors import ConfigError
from gpuaas.phrases import counted, duration, figure
from gpuaas.policy import Policy, load_policy

__all__ = ["rebalance"]


_HEADERS = ("configuration", "avg wait s", "p95 wait s", "worst tenant p95 s", "met / deadlines", "allocated",
            "Jain", "preempted GPU-h", "GPUs moved/night")
_OPTIONAL = ("preempted GPU-h", "allocated", "avg wait s", "met / deadlines", "p95 wait s")
"""Left out in this order where the console is too narrow: the worst tenant's wait, Jain and the GPUs moved stay."""
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
                                  progress=say)
    except ConfigError as exc:
        raise fail(str(exc)) from exc
    result = {"headline": replay_headline(result["configurations"]), **result}
    lead(result, format)  # the first line: on stdout above the tables, on stderr beside the JSON
    if format is OutputFormat.json:
        print_json(result)
        return
    _print_tables(result)


def replay_headline(configurations: dict[str, dict[str, Any]]) -> str:
    """The command's first line: the worst-off tenant's p95 wait with the nightly rebalance against static quotas,
    for isolated queues and for one cohort, and the GPUs it moved a night."""
    parts, moved = [], []
    for kind, words in (("isolated", "isolated queues"), ("cohort", "one cohort")):
        static, rebalanced = configurations.get(f"static_{kind}"), configurations.get(f"rebalanced_{kind}")
        if static is None or rebalanced is None:
            continue
        parts.append(f"{duration(rebalanced['worst_tenant_p95_queue_s'])} against "
                     f"{duration(static['worst_tenant_p95_queue_s'])} with static quotas ({words})")
        nights = rebalanced["gpus_moved_per_night"]
        moved.append(f"{figure(round(sum(nights) / len(nights), 1) if nights else 0)} ({kind})")  # as the table rounds
    if not parts:
        return "Rebalance replay: no rebalanced configuration to compare."
    return (f"Nightly rebalancing: the worst-off tenant's p95 wait {', '.join(parts)}; GPUs moved a night: "
            f"{', '.join(moved)}.")


def _print_tables(result: dict[str, Any]) -> None:
    """The configurations, then every replayed tenant, then one line per tenant of the input left out.

    The headline's jobs, tenants and GPUs are the sums of the tenant table's rows, and its excluded jobs
    those of the table plus those of the left-out lines, so every tenant and job of the input is accounted for.
    """
    meta = result["meta"]
    tenants = meta["tenants"]
    replayed = {name: t for name, t in tenants.items() if t["left_out"] is None}
    left_out = [t["why"] for t in tenants.values() if t["left_out"] is not None]
    title = (f"Rebalance replay: {counted(meta['jobs'], 'job')} of {counted(len(replayed), 'tenant')} "
             f"over {counted(meta['submission_span_days'], 'day')}, {counted(meta['total_gpus'], 'GPU')} "
             f"({counted(meta['excluded_jobs'], 'job')} excluded, {counted(len(left_out), 'tenant')} left out)")
    configurations = result["configurations"]
    print_table(title, _HEADERS, [_row(name, data) for name, data in configurations.items()], optional=_OPTIONAL)
    print_table("p95 wait s per tenant", ("tenant", "quota", "jobs", "excluded", *(c.replace("_", " ") for c in configurations)),
                [[name, t["quota"], t["jobs"], t["excluded_jobs"],
                  *(_wait(data["tenants"][name]) for data in configurations.values())]
                 for name, t in replayed.items()], optional=("excluded", "jobs", "quota"))
    for line in left_out:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def _wait(tenant: dict[str, Any]) -> str:
    """A tenant's p95 wait in one configuration, with the jobs that never finished (counted until the replay
    stopped: at least that long)."""
    wait = str(tenant["p95_queue_s"])
    if tenant["jobs_unfinished"] == tenant["jobs"]:
        return f"at least {wait} (none of {tenant['jobs']:,} finished)"
    return f"at least {wait} ({tenant['jobs_unfinished']} unfinished)" if tenant["jobs_unfinished"] else wait
