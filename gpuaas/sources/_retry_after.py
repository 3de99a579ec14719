"""``Retry-After`` as seconds: a server that says when to come back is believed, within a cap.

A 429 or 503 may carry it as delta-seconds or as an HTTP date (RFC 9110 §10.2.3). The task's
retry waits at least that long, so a throttling API server or Prometheus is not hammered by
retries that it will only refuse again; the cap keeps a hostile or broken value from parking
a flow for hours.
"""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

__all__ = ["MAX_RETRY_AFTER_S", "RETRYING", "retry_after_seconds"]

MAX_RETRY_AFTER_S = 60.0

RETRYING = "gpuaas_retrying"
"""A log record's attribute, ``extra={RETRYING: (failure, attempt, retries, delay_s)}``, on the line a retry loop logs
before it waits: ``failure`` names the source and what it answered (``str()`` of the error). The command line's
progress line says it (``gpuaas.cli._progress``): without it a person watches a spinner for the 15 to 25 s three
retries take, with no word of what is being waited for."""


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header value; ``None`` when absent or unreadable."""
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        return min(float(text), MAX_RETRY_AFTER_S)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return min(max((when - (now or datetime.now(UTC))).total_seconds(), 0.0), MAX_RETRY_AFTER_S)
