"""``gpuaas rebalance``: run the rebalance flow once, now, and print its quota plan per cohort."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from gpuaas.cli._common import (
    OutputFormat,
    busy,
    console,
    end_degraded,
    fail,
    fail_on_refused,
    lead,
    print_json,
    settings_or_exit,
    unsplit,
    visible,
)
from gpuaas.cli._flows import run_flow
from gpuaas.cli._tables import print_table
from gpuaas.models import Outcome
from gpuaas.phrases import figure
from gpuaas.policy import MAX_HISTORY_DAYS

__all__ = ["print_rebalance", "rebalance"]

_COLUMNS = ["cohort", "queue", "flavor", "before", "after", "change", "demand", "shortfall", "reason"]


def rebalance(
    apply: Annotated[bool, typer.Option("--apply", help="Patch the ClusterQueues this run (overrides a dry-run "
                                        "policy, not a change freeze; every limit still holds).")] = False,
    cohort: Annotated[str | None, typer.Option("--cohort", help="Only this cohort.")] = None,
    history_days: Annotated[float | None, typer.Option("--history-days", min=0.01, max=MAX_HISTORY_DAYS,
                                                       help="History window in days (default: the policy's "
                                                            "usage_lookback_days).")] = None,
    format: Annotated[OutputFormat, typer.Option("--format", help="Output format.")] = OutputFormat.table,
) -> None:
    """Plan nominal GPU quota moves inside each cohort (dry-run unless --apply or the policy says apply)."""
    settings_or_exit()
    from flows.rebalance import rebalance as rebalance_flow

    result: dict[str, Any] = run_flow(rebalance_flow, "rebalancing quotas", apply=apply, cohort=cohort,
                                      history_days=history_days)
    if result.get("writes_busy"):
        raise busy(result["writes_busy"])
    lead(result, format)
    if format is OutputFormat.json:
        print_json(result)
    else:
        print_rebalance(result)
    if result.get("refused"):  # nothing applied: a tenant's freeze and guarantee would have held none of its queues
        raise fail("nothing applied: " + "; ".join(result.get("misnamed_queues") or []))
    fail_on_refused([c["cohort"] for c in result["cohorts"] if c["result"] == Outcome.failed],  # or the read before
                    len(result["cohorts"]), "cohorts", ("its message", "their messages"))
    end_degraded(result)


def _moved(cohort: dict[str, Any], mode: str) -> str:
    """``8 GPUs moved`` only where they did: a dry-run's plan would move them, a refused one moved none."""
    gpus = f"{cohort['moved_gpus']} GPU{'' if cohort['moved_gpus'] == 1 else 's'}"
    if cohort["result"] == Outcome.applied:
        return f"{gpus} moved"
    return f"{gpus} would move" if mode != "apply" else f"{gpus} planned, none moved"


def print_rebalance(result: dict[str, Any]) -> None:
    """The quota plan per cohort as people read it (also the demo's rebalance step)."""
    rows = [[r["cohort"], r["queue"], r["flavor"], r["before"], r["after"], r["change"], figure(r["demand"]),
             f"{figure(r['shortfall before'])} -> {figure(r['shortfall after'])}", r["reason"]]
            for c in result["cohorts"] for r in c["changes"]]
    if rows:  # no quota change in any cohort: the lines below say why, under no empty table
        print_table(f"Quota plan ({result['mode']})", _COLUMNS, rows, optional=("change", "cohort", "demand"),
                    notes=("reason",))
    for c in result["cohorts"]:
        line = (f"cohort {c['cohort']}: {c['result']}" + (f", audit #{c['plan_id']}" if c["plan_id"] else "")
                + (f" (to reverse: gpuaas undo {c['plan_id']})" if c["plan_id"] and c["result"] == Outcome.applied else "")
                + f"; {_moved(c, result['mode'])}" + (f"; {c['error']}" if c["error"] else ""))
        console.print(unsplit(visible(line), console.width), highlight=False, soft_wrap=True)
        for line in c["notes"] + c["flags"] + ([c["message"]] if c["message"] else []):
            console.print(f"  {line}", highlight=False)
    if result["degraded"]:
        console.print(f"degraded snapshot ({result['degraded']}): nothing applied", highlight=False)
