"""``gpuaas audit``: what gpuaas decided and did, for people after an incident."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer

from gpuaas.cli._common import OutputFormat, print_json, print_table, settings_or_exit, store_or_exit, usage_error
from gpuaas.store import AuditEntry

_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(value: str, now: datetime | None = None, option: str = "--since") -> datetime:
    """``90m``, ``2h``, ``7d`` (relative) or an ISO-8601 time (UTC when no offset is given)."""
    now = now or datetime.now(UTC)
    text = value.strip()
    if len(text) >= 2 and text[-1] in _UNITS and text[:-1].replace(".", "", 1).isdigit():
        try:
            return now - timedelta(**{_UNITS[text[-1]]: float(text[:-1])})
        except OverflowError as exc:
            raise ValueError(f"{option}: {value!r} is out of range (before year 1)") from exc
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"{option}: expected a duration like 2h or 7d, or an ISO time, got {value!r}") from exc
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed


def _instant(value: str | None, option: str) -> datetime | None:
    """``option``'s instant; one not understood is a usage error (exit 2), as Click's own refusals are."""
    try:
        return parse_since(value, option=option) if value else None
    except ValueError as exc:
        raise usage_error(str(exc), option) from exc


_FIELDS = ("id", "created_at", "flow", "flow_run_id", "action", "kind", "namespace", "name", "uid", "object",
           "mode", "outcome", "reason", "evidence", "before", "after", "idempotency_key", "refers_to")


def entry_to_dict(entry: AuditEntry) -> dict[str, object]:
    """One row as JSON, keys in a stable, readable order."""
    data = entry.model_dump(mode="json")
    data["object"] = entry.object_ref
    return {key: data.get(key) for key in _FIELDS}


def list_(
    since: Annotated[str | None, typer.Option(help="Only rows newer than this: 2h, 7d, or an ISO time.")] = None,
    until: Annotated[str | None, typer.Option(help="Only rows older than this (same forms as --since).")] = None,
    flow: Annotated[str | None, typer.Option(help="Only rows written by this flow (reclaim, rebalance, ...).")] = None,
    object: Annotated[
        str | None, typer.Option("--object", help="NAME, NAMESPACE/NAME or KIND/NAMESPACE/NAME.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many rows (newest kept).")] = 200,
    format: Annotated[OutputFormat, typer.Option("--format")] = OutputFormat.table,
) -> None:
    """List audit entries, oldest first (an incident window: --since 2026-11-29T02:00 --until 2026-11-29T03:00)."""
    since_at = _instant(since, "--since")
    until_at = _instant(until, "--until")
    store = store_or_exit(settings_or_exit(), read_only=True)
    try:
        rows = store.audit(since=since_at, until=until_at, flow=flow, obj=object, limit=None)[-limit:]
    finally:
        store.close()
    if format is OutputFormat.json:
        print_json({"entries": [entry_to_dict(r) for r in rows]})
        return
    print_table(
        f"audit log: {len(rows)} entr{'y' if len(rows) == 1 else 'ies'}",
        ["id", "when (UTC)", "flow", "action", "object", "mode", "outcome", "reason"],
        [
            [r.id, r.created_at.strftime("%Y-%m-%d %H:%M:%S"), r.flow, r.action, r.object_ref, r.mode, r.outcome,
             textwrap.shorten(r.reason, 160, placeholder=" …")]
            for r in rows
        ],
        optional=("action", "flow"),  # never "mode": whether a row was a dry-run or applied is the point
        notes=("reason",),
    )
