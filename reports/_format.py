"""How reports and tables write numbers people read."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["BUSY_LINE", "busy_line", "duration", "gpus", "source_errors", "verdict_phrase", "with_failures"]


def duration(seconds: float | None) -> str:
    """``45m``, ``3h07m``; ``-`` when unknown."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "-"
    minutes = int(seconds // 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m"


def gpus(value: float | None) -> str:
    """GPU counts without a trailing ``.0``; ``-`` when unknown."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:g}"


BUSY_LINE = "another run is writing; nothing written"
"""The first line of a busy run's artifact and its Completed state's message (``tasks.writes``)."""


def busy_line(busy: str) -> str:
    """``Another run is writing; nothing written: <who holds what, how long this run waited>``."""
    return f"{BUSY_LINE[0].upper()}{BUSY_LINE[1:]}: {busy.removeprefix('no writes this run: ')}"


def verdict_phrase(verdict: str, reason: str, activity_max: float | None, threshold: float | None,
                   idle_seconds: float | None) -> str:
    """The idle verdict as a short phrase with its numbers: ``idle 30m, max activity 0.00 ≤ 0.05``.

    Only the verdicts GPU activity decided get numbers; the others keep the policy's reason
    (opted out, excluded, incomplete telemetry name their own cause), and so does an idle verdict whose
    numbers do not say it (an adaptive window shorter than the one the maximum was read over)."""
    known = activity_max is not None and threshold is not None and not math.isnan(float(activity_max))
    if verdict == "idle" and known and float(activity_max or 0) <= float(threshold or 0):
        return f"idle {duration(idle_seconds)}, max activity {float(activity_max or 0):.2f} ≤ {float(threshold or 0):g}"
    if verdict == "busy" and known and float(activity_max or 0) > float(threshold or 0):
        return f"max activity {float(activity_max or 0):.2f} > {float(threshold or 0):g}"
    return reason


def source_errors(sources: Mapping[str, Any]) -> dict[str, str]:
    """Each required source that failed and its one-line error (``Prometheus at URL: name does not resolve``).

    ``sources``: a snapshot's ``SourceStatus`` objects or their dicts, by name."""
    errors = {}
    for name, status in sources.items():
        get = status.get if isinstance(status, dict) else lambda key, s=status: getattr(s, key, None)
        if not get("ok") and get("required") is not False:
            errors[name] = str(get("error") or f"{name}: no answer")
    return errors


def with_failures(headline: str, errors: Mapping[str, str]) -> str:
    """``Degraded: <each failed source>. <headline>``: what failed comes first, wherever the line is read."""
    return f"Degraded: {'; '.join(errors.values())}. {headline}" if errors else headline
