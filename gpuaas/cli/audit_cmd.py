"""``gpuaas audit``: what gpuaas decided and did, for people after an incident."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer

from gpuaas.audit_subject import owner_named, owners, subject
from gpuaas.cli._common import (
    OutputFormat,
    audit_id,
    console,
    print_json,
    settings_or_exit,
    store_or_exit,
    usage_error,
)
from gpuaas.cli._tables import print_table
from gpuaas.store import AuditEntry, parse_object_ref

MAX_LISTED = 10_000
"""The most rows one listing prints. A listing is built in memory, and a reclaim row carries its per-GPU evidence
(about 1.3 KB, more in the JSON): a million rows of a months-old log took gigabytes. Past it, a terminal or a script
pages with --before (the title of a cut listing names where), or narrows with --since and --flow."""

_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(value: str, now: datetime | None = None, option: str = "--since", *, allow_now: bool = False) -> datetime:
    """``90m``, ``2h``, ``7d`` (relative), an ISO-8601 time (UTC when no offset is given), or with ``allow_now``
    ``now`` (the end of a window, as ``gpuaas incident --to`` takes it)."""
    now = now or datetime.now(UTC)
    text = value.strip()
    if allow_now and text.lower() == "now":
        return now
    if len(text) >= 2 and text[-1] in _UNITS and text[:-1].replace(".", "", 1).isdigit():
        try:
            return now - timedelta(**{_UNITS[text[-1]]: float(text[:-1])})
        except OverflowError as exc:
            raise ValueError(f"{option}: {value!r} is out of range (before year 1)") from exc
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"{option}: {_not_a_time(str(exc), allow_now)}, got {value!r}") from exc
    try:
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:59:59-12:00 is in year 10000 in UTC, 0001-01-01T00:00+14:00 in year 0
        raise ValueError(f"{option}: {value!r} is outside the years 1 to 9999 in UTC") from None


def _not_a_time(reason: str, allow_now: bool) -> str:
    """Why a value is no time: a time written right that no calendar has (``2026-02-30``: the day is out of range
    for the month) says which part is wrong; anything else, the forms there are."""
    if reason.startswith("offset must be"):
        return "no such time: the offset from UTC must be less than 24 hours"
    if not reason.startswith("Invalid isoformat string"):
        return f"no such time: {reason}"  # day is out of range for month, month must be in 1..12, ...
    if allow_now:
        return "expected a duration like 2h or 7d, an ISO time (UTC unless it has an offset) or now"
    return "expected a duration like 2h or 7d or an ISO time (UTC unless it has an offset)"


def _instant(value: str | None, option: str, now: datetime | None = None) -> datetime | None:
    """``option``'s instant; one not understood is a usage error (exit 2), as Click's own refusals are."""
    try:
        return parse_since(value, now, option=option, allow_now=option == "--until") if value else None
    except ValueError as exc:
        raise usage_error(str(exc), option) from exc


def _window(since: str | None, until: str | None) -> tuple[datetime | None, datetime | None]:
    """Both instants; one not understood, or a window that runs backwards or is empty (``--since 2h --until 3h``),
    is a usage error, worded as ``gpuaas incident --from --to`` words it: the query could only find nothing."""
    now = datetime.now(UTC)  # one instant for both: ``--since 2h --until 2h`` is the empty window it reads as
    since_at, until_at = _instant(since, "--since", now), _instant(until, "--until", now)
    if since_at is not None and until_at is not None and since_at >= until_at:
        raise usage_error(f"{since_at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC is not before --until "
                          f"{until_at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC", "--since")
    return since_at, until_at


def _object(value: str | None) -> str | None:
    """``--object`` in one of the store's forms, or a usage error naming them (``a/b/c/d`` would match nothing)."""
    if value is not None:
        try:
            parse_object_ref(value)
        except ValueError as exc:
            raise usage_error(str(exc), "--object") from exc
    return value


def audited_flows() -> tuple[str, ...]:
    """The ``flow`` values audit rows carry: each writer's own constant, so that a new writer is listed by adding
    it here, never by a copy of its name. Imported when asked: the writers load the Kubernetes client (a second)."""
    from gpuaas.actions.deadline_holds import FLOW as DEADLINES
    from gpuaas.actions.quotas import FLOW as REBALANCE
    from gpuaas.actions.reclaim import FLOW as RECLAIM
    from gpuaas.loadtest import LOAD_TEST_FLOW

    return (RECLAIM, REBALANCE, DEADLINES, LOAD_TEST_FLOW)


def _check_flow(flow: str | None, found: bool) -> None:
    """An unknown ``--flow`` is a usage error naming the flows there are. Checked only when nothing matched (a flow
    with rows is one there is), so that a listing does not pay for loading the writers."""
    if flow and not found and flow not in (known := audited_flows()):
        raise usage_error(f"--flow: expected one of {', '.join(known)}, got {flow!r}", "--flow")


_FIELDS = ("id", "created_at", "flow", "flow_run_id", "action", "kind", "namespace", "name", "uid", "object",
           "subject", "mode", "outcome", "reason", "evidence", "before", "after", "idempotency_key", "refers_to")


def entry_to_dict(entry: AuditEntry, owner: str | None = None) -> dict[str, object]:
    """One row as JSON, keys in a stable, readable order: ``object`` is what was written, ``subject`` what the
    deciding command named (the owner first, where a reclaim stopped one through its Workload)."""
    data = entry.model_dump(mode="json")
    data["object"] = entry.object_ref
    data["subject"] = subject(entry.kind, entry.namespace, entry.name, owner or owner_named(entry))
    return {key: data.get(key) for key in _FIELDS}


def _as_given(value: str | None, at: datetime | None) -> str | None:
    """An instant's option as typed, with the UTC instant it was read as (``2h (2026-11-29 01:00:00 UTC)``): an
    empty answer then says which window found nothing, a time without an offset included."""
    return None if value is None or at is None else f"{value} ({at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC)"


def _nothing(argv: list[str]) -> str:
    """The sentence printed for no rows (no header-only table), with the filters that found none as typed."""
    return f"audit log: 0 entries match {' '.join(argv)}." if argv else "audit log: 0 entries: nothing recorded yet."


def list_(
    since: Annotated[str | None, typer.Option("--since", "--from", help=(
        "Only rows newer than this: a duration before now (2h, 7d) or an ISO time, UTC unless it has an offset "
        "(2026-11-29T02:00, 2026-11-29T03:00+01:00)."))] = None,
    until: Annotated[str | None, typer.Option("--until", "--to", help=(
        "Only rows older than this: a duration before now, an ISO time (UTC unless it has an offset) or now."
    ))] = None,
    flow: Annotated[str | None, typer.Option(help="Only rows written by this flow (reclaim, rebalance, ...).")] = None,
    object: Annotated[str | None, typer.Option("--object", help=(
        "Only rows about this object: NAME, NAMESPACE/NAME, KIND/NAMESPACE/NAME or KIND//NAME (cluster-scoped), or "
        "as the tables print it (KIND NAMESPACE/NAME, KIND NAME); "
        "the kind in any case. Finds a reclaim by the object it wrote (its Workload) or by the owner it stopped, "
        "as gpuaas reclaim names it, and the rows that undo it."))] = None,
    limit: Annotated[int, typer.Option(min=1, max=MAX_LISTED, help=(
        f"At most this many rows (up to {MAX_LISTED:,}): the newest, shown oldest first; the title says when more "
        "match, and --before pages back."))] = 200,
    before: Annotated[int | None, typer.Option("--before", parser=audit_id, metavar="ID", help=(
        "Only the rows listed before row ID (by time, then id): page back from the oldest row shown (the title of a "
        "cut listing names it)."
    ))] = None,
    format: Annotated[OutputFormat, typer.Option("--format", help="Output format.")] = OutputFormat.table,
) -> None:
    """List audit entries, oldest first (an incident window: --since 2026-11-29T02:00 --until 2026-11-29T03:00).

    The newest --limit (200) entries that match; a longer log is cut, and the title says how many match in all (the
    JSON's total) and the --before that shows the ones before."""
    since_at, until_at = _window(since, until)
    _object(object)
    store = store_or_exit(settings_or_exit(), read_only=True)
    try:
        if before is not None and store.get_audit(before) is None:
            raise usage_error("--before: no audit entry has that id (see `gpuaas audit list`)", "--before")
        rows = store.audit(since=since_at, until=until_at, flow=flow, obj=object, before=before, limit=limit,
                           newest=True)
        total = len(rows) if len(rows) < limit else store.count_audit(  # counted only where the listing may be cut
            since=since_at, until=until_at, flow=flow, obj=object, before=before)
        owner = owners(rows, store.get_audit)
    finally:
        store.close()
    _check_flow(flow, bool(rows))
    if format is OutputFormat.json:
        print_json({"entries": [entry_to_dict(r, owner.get(int(r.id or 0))) for r in rows], "total": total})
        return
    if not rows:
        given = [("--since", _as_given(since, since_at)), ("--until", _as_given(until, until_at)), ("--flow", flow),
                 ("--object", object), ("--before", before)]
        console.print(_nothing([f"{k} {v}" for k, v in given if v]), highlight=False, soft_wrap=True)
        return
    print_table(
        _title(len(rows), total, rows[0].id),
        ["id", "when (UTC)", "flow", "action", "subject", "mode", "outcome", "reason"],
        [
            [r.id, r.created_at.strftime("%Y-%m-%d %H:%M:%S"), r.flow, r.action, subject(r.kind, r.namespace, r.name, owner.get(int(r.id or 0))), r.mode, r.outcome,
             textwrap.shorten(r.reason, 160, placeholder=" …")]
            for r in rows
        ],
        optional=("action", "flow"),  # never "mode": whether a row was a dry-run or applied is the point
        notes=("reason",),
    )


def _title(shown: int, total: int, oldest: int | None) -> str:
    """``audit log: 12 entries``, or where the listing is cut, how many of how many and how to see the ones before."""
    if shown >= total:
        return f"audit log: {shown} entr{'y' if shown == 1 else 'ies'}"
    return f"audit log: the newest {shown:,} of {total:,} entries (older: --before {oldest})"
