"""``gpuaas incident``: review a window after an incident, and undo chosen actions, through the flow."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import Enum
from typing import Annotated, Any

import typer
from typer._click.globals import get_current_context

from gpuaas.cli._common import (
    audit_id,
    busy,
    console,
    err_console,
    fail,
    flag_error,
    flag_given,
    namespace_name,
    object_name,
    print_json,
    settings_or_exit,
    store_or_exit,
)
from gpuaas.cli._flows import run_flow
from gpuaas.cli._tables import print_table
from gpuaas.cli.reclaim_cmd import raise_not_undone
from gpuaas.errors import ConfigError


class IncidentFormat(str, Enum):
    table = "table"
    json = "json"
    markdown = "markdown"


def _given(name: str) -> bool:
    ctx = get_current_context(silent=True)
    return ctx is not None and flag_given(ctx, name)


def _check(start: str, end: str, undo: list[int]) -> None:
    """Bad input ends here, before Prefect starts and before anything is undone."""
    from gpuaas.operations import incident as operation

    try:
        operation.window(start, end, datetime.now(UTC))
    except ConfigError as exc:  # a time not understood, or a window that runs backwards: called wrong (exit 2)
        # a window that runs backwards is the fault of the end the user gave: --to alone moves it before --from's default
        blamed = "--to" if exc.field == "start" and _given("end") and not _given("start") else "--from"
        raise flag_error(exc, {"start": blamed, "end": "--to"}) from exc
    if undo:
        with store_or_exit(settings_or_exit(), read_only=True) as store:
            missing = operation.missing_audit_ids(store, undo)
        if missing:
            raise fail(f"--undo: no audit row {', '.join(f'#{i}' for i in missing)} (see `gpuaas audit list`); "
                       "nothing undone")


def _event_cells(e: dict[str, Any]) -> list[Any]:
    what = e["action"] + (f" (of #{e['refers_to']})" if e["refers_to"] else "") + f" {e['subject']}"
    words = e["reason"] + (f"; {e['evidence']}" if e["evidence"] and e["evidence"] not in e["reason"] else "")
    return [f"{e['at'][11:19]} #{e['audit_id']}" + (" undoable" if e["undoable"] else ""), what,
            f"{e['mode']}: {e['outcome']}", words]


def _tables(result: dict[str, Any]) -> None:
    console.print(result["summary"], highlight=False)
    if result["undo"]:
        cols = ["audit_id", "subject", "result", "message"]
        print_table("Undo", ["audit id", "subject", "result", "message"], [[u.get(c) for c in cols] for u in result["undo"]],
                    notes=("message",))
    fleet = result["fleet_changes"]
    if fleet:
        print_table("Fleet (collects where something changed)", list(fleet[0]), [list(r.values()) for r in fleet])
    events = result["events"]
    if events:  # none: the summary's first line already says so, not an empty table
        print_table(f"Decisions and actions ({len(events)} audit rows, oldest first)",
                    ["when (UTC), audit id", "what", "result", "reason / evidence"],
                    [_event_cells(e) for e in events], notes=("reason / evidence",))
    changed = [q for q in result["quota"] if q["changes"]]
    if changed:
        print_table("Nominal quota changes (at the collects that saw them)", ["queue", "flavor", "at start", "changes", "at end"],
                    [[q["queue"], q["flavor"], f"{q['at_start']:g}",
                      "; ".join(f"{c['at'][11:19]} {c['before']:g} -> {c['after']:g}" for c in q["changes"]),
                      f"{q['at_end']:g}"] for q in changed])
    for note in result["notes"]:
        console.print(f"note: {note}", highlight=False)


def incident(
    start: Annotated[str, typer.Option("--from", "--since", help="Start: an ISO time (UTC unless it has an offset) or a "
                                       "duration before now (2h, 90m, 7d).")] = "1h",
    end: Annotated[str, typer.Option("--to", "--until", help="End (exclusive): an ISO time, a duration before now, or now.")]
    = "now",
    namespace: Annotated[list[str] | None, typer.Option("--namespace", parser=namespace_name, metavar="NAMESPACE",
                                                        help="Only this namespace (repeatable).")] = None,
    queue: Annotated[list[str] | None, typer.Option("--queue", parser=object_name, metavar="CLUSTERQUEUE",
                                                    help="Only this ClusterQueue (repeatable).")] = None,
    undo: Annotated[list[int] | None, typer.Option("--undo", parser=audit_id, metavar="AUDIT_ID", help="Reverse this action by its audit id "
                                                   "(repeatable; like `gpuaas undo`, never over a later change).")]
    = None,
    format: Annotated[IncidentFormat, typer.Option("--format", help="Output format.")] = IncidentFormat.table,
) -> None:
    """What the fleet looked like in a window and every gpuaas decision and action in it, with evidence."""
    settings_or_exit()
    undo_ids = list(dict.fromkeys(undo or []))  # an id given twice is undone once, and reported once
    _check(start, end, undo_ids)
    from flows.incident import incident_review

    result: dict[str, Any] = run_flow(incident_review, "reviewing the window", start=start, end=end,
                                      namespaces=list(namespace or []), queues=list(queue or []), undo=undo_ids)
    markdown = result.pop("markdown")
    if format is IncidentFormat.json:
        err_console.print(result["summary"], markup=False, highlight=False, soft_wrap=True)  # its first line
        print_json(result)
    elif format is IncidentFormat.markdown:
        typer.echo(markdown, nl=False)
    else:
        _tables(result)
    if result["writes_busy"]:
        raise busy(result["writes_busy"])
    raise_not_undone(result["undo"])

