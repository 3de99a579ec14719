"""How reports and tables write numbers people read."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from gpuaas.phrases import counted, duration, verdict_phrase

__all__ = ["BUSY_LINE", "busy_line", "counted", "duration", "gpus", "source_errors", "verdict_phrase", "with_failures"]


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
