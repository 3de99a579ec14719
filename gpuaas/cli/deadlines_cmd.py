"""``gpuaas plan deadlines``: which deadlines hold on today's GPUs and the fewest extra GPUs for the rest.

Why a file mode: the answer ("reorder, don't buy" or "buy exactly n") should be checked on a
problem a person can read before anyone scales a node pool on it. Reads only; never writes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpuaas.cli._common import OutputFormat, console, fail, print_json, print_table
from gpuaas.errors import GpuaasError

__all__ = ["deadlines"]

_COLUMNS = ("job", "resource", "GPUs", "start", "end", "deadline", "status")


def deadlines(
    file: Annotated[Path | None, typer.Argument(help="YAML problem: capacity and jobs, minutes from now.")] = None,
    from_cluster: Annotated[bool, typer.Option(
        "--from-cluster", help="Collect a snapshot and plan every cohort and flavor (seconds from now).")] = False,
    format: Annotated[OutputFormat, typer.Option("--format", help="Output format.")] = OutputFormat.table,
) -> None:
    """Plan deadlines on a YAML problem or the live cluster; print the schedule, what is missed, the extra GPUs."""
    from gpuaas.policies.deadlines import plan_deadlines
    from gpuaas.sources.deadline_file import load_deadline_problem
    from reports.deadlines import plan_dict, plan_rows

    if (file is None) == (not from_cluster):
        raise fail("give either a FILE or --from-cluster", code=2)
    if from_cluster:
        _from_cluster(format)
        return
    assert file is not None
    try:
        capacity, jobs = load_deadline_problem(file)
        plan = plan_deadlines(capacity, jobs)
    except GpuaasError as exc:
        raise fail(str(exc)) from exc
    if format is OutputFormat.json:
        print_json(plan_dict(plan))
        return
    print_table("Deadline plan (minutes from now)", _COLUMNS, plan_rows(plan), optional=("start", "end", "resource"))
    extra = ", ".join(f"{r} +{n}" for r, n in plan.extra_gpus.items() if n) or "none"
    verdict = "every holdable deadline holds on current GPUs" if plan.feasible else f"extra GPUs needed: {extra}"
    console.print(f"{verdict}; {'exact' if plan.exact else 'heuristic (past the exact bound)'}", highlight=False)
    for line in plan.messages:
        console.print(f"- {line}", highlight=False, markup=False)


def _from_cluster(format: OutputFormat) -> None:
    from gpuaas.cli._common import settings_or_exit
    from gpuaas.cli._flows import run_flow

    settings_or_exit()
    from flows.deadlines import deadlines as deadlines_flow

    result = run_flow(deadlines_flow, "collecting a snapshot and planning deadlines", nudge=False)
    if format is OutputFormat.json:
        print_json(result)
        return
    for pool in result["pools"]:
        rows = [[s["name"], s["gpus"], _minutes(s["start"]), _minutes(s["end"]), _minutes(s["deadline"]),
                 _pool_status(s, pool)] for s in pool["schedule"]]
        print_table(f"cohort {pool['cohort']}, flavor {pool['flavor']}: {pool['capacity_gpus']} GPUs",
                    ("workload", "GPUs", "start", "end", "deadline", "status"), rows)
        extra = pool["extra_gpus"].get(pool["flavor"], 0)
        console.print(f"extra GPUs needed: {extra}; at risk: {len(pool['at_risk'])}; missed: {len(pool['missed'])}"
                      f"; {'exact' if pool['exact'] else 'heuristic'}", highlight=False)
        for line in pool["messages"] + pool["notes"]:
            console.print(f"- {line}", highlight=False, markup=False)
    if not result["pools"]:
        console.print("no ClusterQueue with GPU quota: nothing to plan", highlight=False)


def _minutes(seconds: float | None) -> str:
    from reports._format import duration

    if seconds is None:
        return "-"
    return ("-" if seconds < 0 else "+") + duration(abs(seconds))


def _pool_status(job: dict[str, object], pool: dict[str, list[str]]) -> str:
    name = str(job["name"])
    if name in pool["missed"]:
        return "missed"
    if name in pool["at_risk"]:
        return "at risk now"
    return "running" if job["running"] else "holds" if job["deadline"] is not None else "best effort"
