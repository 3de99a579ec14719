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
    format: Annotated[OutputFormat, typer.Option("--format", help="Output format.")] = OutputFormat.table,
) -> None:
    """Plan deadlines on a YAML problem; print the schedule, what is missed and the extra GPUs needed."""
    from gpuaas.policies.deadlines import plan_deadlines
    from gpuaas.sources.deadline_file import load_deadline_problem
    from reports.deadlines import plan_dict, plan_rows

    if file is None:
        raise fail("give a FILE", code=2)
    try:
        capacity, jobs = load_deadline_problem(file)
        plan = plan_deadlines(capacity, jobs)
    except GpuaasError as exc:
        raise fail(str(exc)) from exc
    if format is OutputFormat.json:
        print_json(plan_dict(plan))
        return
    print_table("Deadline plan (minutes from now)", _COLUMNS, plan_rows(plan))
    extra = ", ".join(f"{r} +{n}" for r, n in plan.extra_gpus.items() if n) or "none"
    verdict = "every holdable deadline holds on current GPUs" if plan.feasible else f"extra GPUs needed: {extra}"
    console.print(f"{verdict}; {'exact' if plan.exact else 'heuristic (past the exact bound)'}", highlight=False)
    for line in plan.messages:
        console.print(f"- {line}", highlight=False, markup=False)
