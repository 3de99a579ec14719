"""Instants in UTC: the one conversion behind every comparison, key and stamp gpuaas makes of a datetime.

An instant may arrive naive (a flow parameter typed without a zone, a library that drops it) or with
any offset. Compared as given, a naive one against an aware one raises; formatted as given with a
literal ``Z``, ``12:00+02:00`` reads ``12:00Z``, two hours off, and the same instant yields two
idempotency keys. So a naive instant is read as UTC (what every clock and store of gpuaas writes)
and an aware one converted, before either happens.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TypeVar

__all__ = ["RFC3339", "as_utc", "utc_stamp"]

RFC3339 = "%Y-%m-%dT%H:%M:%SZ"
"""Seconds in UTC, as Kubernetes writes its timestamps."""

When = TypeVar("When", bound=datetime)


def as_utc(value: When) -> When:
    """``value`` as an aware UTC instant (a ``pd.Timestamp`` stays one): naive is read as UTC, aware converted.

    Not ``astimezone`` alone: on a naive datetime that assumes the machine's local zone."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def utc_stamp(value: datetime, layout: str = RFC3339) -> str:
    """``value`` formatted in UTC; ``layout`` ends in a literal ``Z``, which is true only after the conversion."""
    return as_utc(value).strftime(layout)
