"""``gpuaas plan deadlines``: which deadlines hold on today's GPUs and the fewest extra GPUs for the rest.

Why a file mode: the answer ("reorder, don't buy" or "buy exactly n") should be checked on a
problem a person can read before anyone scales a node pool on it. Reads only; never writes.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from gpuaas.cli._common import OutputFormat, console, end_degraded, fail, lead, print_json, usage_error
from gpuaas.cli._tables import print_table
from gpuaas.errors import GpuaasError
from gpuaas.instant import utc_stamp

__all__ = ["deadlines"]

_COLUMNS = ("job", "resource", "GPUs", "start", "end", "deadline", "status")


def deadlines(
    file: Annotated[Path | None, typer.Argument(help="YAML problem: capacity and jobs, minutes from now.")] = None,
    from_cluster: Annotated[bool, typer.Option(
        "--from-cluster", help="Collect a snapshot and plan every cohort and flavor (seconds from now).")] = False,
    format: Annotated[OutputFormat, typer.Option("--format", help="Output format.")] = OutputFormat.table,
) -> None:
    """Plan deadlines on a YAML problem or the live cluster; print the schedule, what is missed, the extra GPUs."""
    from gpuaas.cli._deadline_file import load_deadline_problem
    from gpuaas.operations.deadlines import plan_problem
    from reports import grouped_notes
    from reports.deadlines import plan_dict, plan_rows, plan_title, verdict_sentence

    if (file is None) == (not from_cluster):
        raise usage_error("give a FILE or --from-cluster" + (", not both" if from_cluster else ""))
    if from_cluster:
        _from_cluster(format)
        return
    assert file is not None
    try:
        capacity, jobs = load_deadline_problem(file)
        plan = plan_problem(capacity, jobs)
    except GpuaasError as exc:
        raise fail(str(exc)) from exc
    if format is OutputFormat.json:
        print_json(plan_dict(plan, capacity))
        return
    console.print(verdict_sentence(dict(plan.extra_gpus), len(plan.at_risk), len(plan.missed), plan.inexact,
                                   deadlines=sum(j.deadline is not None for j in jobs)), highlight=False, markup=False)
    print_table(plan_title(capacity, plan), _COLUMNS, plan_rows(plan, jobs),
                optional=("resource", "end", "start"))
    for line in grouped_notes(plan.messages):
        console.print(f"- {line}", highlight=False, markup=False)


def _from_cluster(format: OutputFormat) -> None:
    from gpuaas.cli._common import settings_or_exit
    from gpuaas.cli._flows import run_flow

    settings_or_exit()
    from flows.deadlines import deadlines as deadlines_flow
    from reports import grouped_notes
    from reports.deadlines import kueue_alone_sentence, on_gpus, pool_deadlines, pool_rows, verdict_sentence

    result = run_flow(deadlines_flow, "collecting a snapshot and planning deadlines", nudge=False)
    lead(result, format)
    if format is OutputFormat.json:  # a plan decides no hold and releases nothing: no such (always empty) lists
        print_json({k: v for k, v in result.items() if k not in ("nudges", "released")})
        end_degraded(result)
        return
    names: dict[str, str] = result.get("objects") or {}
    for pool in result["pools"]:
        extra = pool["extra_gpus"].get(pool["flavor"], 0)  # the schedule runs on them too: the title says so
        print_table(f"cohort {pool['cohort']}, flavor {pool['flavor']}: {pool['capacity_gpus']} GPUs"
                    + (f"; schedule on {on_gpus(pool['capacity_gpus'], extra)}" if extra else ""),
                    ("object", "Workload", "GPUs", "start", "end", "deadline", "status"), pool_rows(pool, names),
                    optional=("Workload", "end", "start"))
        console.print(verdict_sentence({pool["flavor"]: extra},
                                       len(pool["at_risk"]), len(pool["missed"]), pool["inexact"],
                                       deadlines=pool_deadlines(pool)), highlight=False, markup=False)
        if alone := kueue_alone_sentence(pool):
            console.print(alone, highlight=False, markup=False)
        for line in grouped_notes(pool["messages"] + pool["notes"]):
            console.print(f"- {line}", highlight=False, markup=False)
    _print_would(result.get("would") or [], names)
    end_degraded(result)


_WOULD = {"planned": "write", "skipped": "skip", "deferred": "defer"}
"""How the plan's nudges read as what a run would do: written, held back (a freeze, a degraded snapshot), or
left to a later run (over ``max_holds_per_run``)."""


def _print_would(would: list[dict[str, Any]], names: dict[str, str]) -> None:
    """The holds, demotions and releases a run in apply mode would write now, so that they can be read before the
    flow is let write them; none is written here."""
    if not would:
        console.print("A deadlines run in apply mode would hold, demote and release nothing now.", highlight=False,
                      markup=False)
        return
    writes = sum(n["result"] == "planned" for n in would)
    which = ("this" if len(would) == 1 else f"these {len(would)}") if writes == len(would) else \
        f"{writes} of these {len(would)}"
    console.print(f"Nothing was written. A deadlines run in apply mode would now write {which}:", highlight=False,
                  markup=False)
    rows = [[n["action"], names.get(n["workload"], f"Workload {n['workload']}"), n["workload"],
             _WOULD.get(str(n["result"]), str(n["result"])), _clock_utc(n["release_at"]), n["reason"]] for n in would]
    print_table("Deadline holds, demotions and releases", ("action", "object", "Workload", "would", "until", "reason"),
                rows, optional=("Workload", "until"), notes=("reason",))


def _clock_utc(instant: str | None) -> str:
    """A release time as the reasons write it, date included: a hold planned now may run past midnight."""
    from gpuaas.policies.deadlines.nudges import RELEASE_TIME

    return "" if instant is None else utc_stamp(datetime.fromisoformat(instant), RELEASE_TIME)
