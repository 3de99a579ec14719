"""``gpuaas reclaim`` and ``gpuaas undo``: run the reclaim flow once, now, and print its decisions."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from gpuaas.cli._common import OutputFormat, console, fail, print_json, print_table, settings_or_exit
from gpuaas.cli._flows import run_flow

_COLUMNS = ["audit id", "workload", "tenant", "GPUs", "idle for", "action", "frees", "result", "reason"]


def _row(d: dict[str, Any]) -> list[Any]:
    from reports._format import duration, gpus

    return [d["audit_id"] or "-", f"{d['kind']} {d['namespace']}/{d['name']}", d["tenant"] or "-", gpus(d["gpus"]),
            duration(d["idle_seconds"]), d["action"], d["frees"], d["result"], d["reason"]]


def reclaim(
    apply: Annotated[bool, typer.Option("--apply", help="Write to the cluster this run (overrides a dry-run policy; "
                                        "the cap and every other rule still hold).")] = False,
    format: Annotated[OutputFormat, typer.Option("--format", help="Output format.")] = OutputFormat.table,
) -> None:
    """Find idle GPU workloads and stop them (dry-run unless --apply or the policy says apply)."""
    settings_or_exit()
    from flows.reclaim import reclaim as reclaim_flow

    result: dict[str, Any] = run_flow(reclaim_flow, "reclaiming idle GPUs", apply=apply)
    if result.get("writes_busy"):
        raise fail(result["writes_busy"])
    if format is OutputFormat.json:
        print_json({"decisions": result["decisions"], "degraded": result["degraded"], "summary": result["summary"]})
        return
    rows = result["decisions"]
    if result["degraded"]:  # first: a run that could judge almost nothing must not read as "nothing idle"
        console.print(f"[yellow]degraded:[/] {result['summary']}", highlight=False)
    print_table(f"Reclaim decisions ({result['mode']})", _COLUMNS, [_row(r) for r in rows],
                optional=("frees", "idle for", "tenant"))
    console.print(f"snapshot {result['snapshot_id']}: {result['summary']}", highlight=False)


def undo(
    audit_ids: Annotated[list[int], typer.Argument(help="Audit ids of reclaims to restore.")],
    format: Annotated[OutputFormat, typer.Option("--format", help="Output format.")] = OutputFormat.table,
) -> None:
    """Restore the prior state recorded by earlier reclaims (a no-op for ones already restored)."""
    settings_or_exit()
    from flows.reclaim import reclaim as reclaim_flow

    result: dict[str, Any] = run_flow(reclaim_flow, "restoring", undo=audit_ids)
    if result.get("writes_busy"):
        raise fail(result["writes_busy"])
    rows = result["undo"]
    if format is OutputFormat.json:
        print_json({"undo": rows})
    else:
        cols = ["audit_id", "kind", "namespace", "name", "result", "message", "restore_audit_id"]
        print_table("Undo", cols, [[r[c] for c in cols] for r in rows])
    if any(r["result"] in ("failed", "unknown") for r in rows):
        raise fail("some restores failed (see above)")
