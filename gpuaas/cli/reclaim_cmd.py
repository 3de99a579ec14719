"""``gpuaas reclaim`` and ``gpuaas undo``: run the reclaim flow once, now, and print its decisions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import typer

from gpuaas.cli._common import (
    OutputFormat,
    audit_id,
    busy,
    end_degraded,
    fail,
    fail_on_refused,
    lead,
    print_json,
    settings_or_exit,
    store_or_exit,
)
from gpuaas.cli._flows import run_flow
from gpuaas.cli._tables import print_table
from gpuaas.models import NOT_OK, Outcome

_COLUMNS = ["audit id", "workload", "tenant", "GPUs", "idle for", "action", "frees", "result", "reason"]


def _row(d: dict[str, Any]) -> list[Any]:
    from reports import duration, gpus

    return [d["audit_id"] or "-", d["subject"], d["tenant"] or "-", gpus(d["gpus"]),
            duration(d["idle_seconds"]), d["action"], d["frees"], d["result"], d["reason"]]


def reclaim(
    apply: Annotated[bool, typer.Option("--apply", help="Write to the cluster this run (overrides a dry-run policy, "
                                        "not a change freeze; the cap and every other rule still hold).")] = False,
    format: Annotated[OutputFormat, typer.Option("--format", help="Output format.")] = OutputFormat.table,
) -> None:
    """Find idle GPU workloads and stop them (dry-run unless --apply or the policy says apply)."""
    settings_or_exit()
    from flows.reclaim import reclaim as reclaim_flow

    result: dict[str, Any] = run_flow(reclaim_flow, "reclaiming idle GPUs", apply=apply)
    if result.get("writes_busy"):
        raise busy(result["writes_busy"])
    print_reclaim(result, format)
    not_ok = [d for d in result["decisions"] if d["result"] in NOT_OK]  # unknown: it may have landed, a person looks
    verb = "failed" if all(d["result"] == Outcome.failed for d in not_ok) else "failed or unknown"
    fail_on_refused([f"#{d['audit_id']}" + ("" if d["result"] == Outcome.failed else f" {d['result']}") for d in not_ok],
                    len(result["decisions"]), "reclaims", ("its row's reason", "their rows' reasons"), verb)
    end_degraded(result)


def print_reclaim(result: dict[str, Any], format: OutputFormat = OutputFormat.table) -> None:
    """The headline, then the decisions (also the demo's). The headline comes first: a run that could judge
    almost nothing must not read as "nothing idle"."""
    lead(result, format)
    if format is OutputFormat.json:
        print_json({k: result.get(k) for k in ("headline", "degraded", "source_errors", "summary", "mode",
                                               "snapshot_id", "freeze", "decisions", "settled")})
    elif result["decisions"]:
        print_table(f"Reclaim decisions ({result['mode']}, snapshot {result['snapshot_id']})", _COLUMNS,
                    [_row(r) for r in result["decisions"]], optional=("tenant", "idle for", "frees", "action"),
                    notes=("reason",))


def undo(
    audit_ids: Annotated[list[int], typer.Argument(parser=audit_id, metavar="AUDIT_ID", help=(
        "Audit ids of the changes to undo: reclaims, quota plans (rebalance) or deadline holds and demotions "
        "(see gpuaas audit list)."))],
    format: Annotated[OutputFormat, typer.Option("--format", help="Output format.")] = OutputFormat.table,
) -> None:
    """Undo earlier reclaims, quota plans and deadline holds: restore the state each recorded, never over a later
    change. Exit 1 when any was not undone (refused, failed or unknown) or an id names no change gpuaas can undo (a
    restore, a release: the refusal names the id to undo instead); one undone before, or a dry-run, is a no-op."""
    settings = settings_or_exit()
    audit_ids = list(dict.fromkeys(audit_ids))  # an id given twice is undone once, and reported once
    from flows.reclaim import reclaim as reclaim_flow
    from gpuaas.operations.incident import missing_audit_ids
    from tasks.reclaim import no_audit_rows

    with store_or_exit(settings, read_only=True) as store:  # a mistyped id ends here, before anything is restored
        missing = missing_audit_ids(store, audit_ids)
    if missing:
        raise fail(no_audit_rows(missing))

    result: dict[str, Any] = run_flow(reclaim_flow, "restoring", undo=audit_ids)
    if result.get("writes_busy"):
        raise busy(result["writes_busy"])
    rows = result["undo"]
    lead(result, format)
    if format is OutputFormat.json:
        print_json({"headline": result.get("headline"), "undo": rows})
    else:
        cols = ["audit_id", "subject", "result", "restore_audit_id", "message"]
        print_table("Undo", ["audit id", "subject", "result", "restore id", "message"],
                    [[r[c] for c in cols] for r in rows], optional=("restore id",), notes=("message",))
    raise_not_undone(rows)


UNDONE = (Outcome.restored, Outcome.no_op)
"""An undo's results that leave the change undone: restored now, or nothing to undo (undone before, a dry-run).
Every other (skipped: refused over a later change or a deleted object, or an id of no change gpuaas can undo;
failed; unknown) left it in place."""


def raise_not_undone(rows: Sequence[dict[str, Any]]) -> None:
    """Exit 1 when an undo asked for was not done, after its rows are printed: a script that runs ``gpuaas undo``
    must not read "nothing was undone" as success. One line: how many, and which rows say why."""
    left = [r for r in rows if r["result"] not in UNDONE]
    if left:
        which = ", ".join(f"#{r['audit_id']} {r['result']}" for r in left)
        raise fail(f"{len(left)} of {len(rows)} not undone ({which}); see "
                   + ("its row's message" if len(left) == 1 else "their rows' messages"))
