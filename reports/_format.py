"""How reports and tables write numbers people read."""

from __future__ import annotations

import math

__all__ = ["BUSY_LINE", "busy_line", "duration", "gpus"]


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
