"""The trace layouts a command reads (``--trace-format``), in a module of its own: ``cluster up`` and ``replay
rebalance`` both offer the choice, and importing it from either command would load that command's replay.

It also holds the span a replayed trace may cover (:func:`check_replay_times`): the readers accept any time a
trace may hold, but a replay steps through the trace's time, night by night or plan by plan, and holds it
as dates and minutes, so a job of 30,000 years would run for hours or overflow its clock."""

from __future__ import annotations

import math
from datetime import datetime
from enum import Enum
from pathlib import Path

from gpuaas.errors import ConfigError

__all__ = ["MAX_REPLAY_SECONDS", "TraceFormat", "check_replay_times"]


class TraceFormat(str, Enum):
    philly = "philly"
    itp = "itp"


MAX_REPLAY_SECONDS = 2 * 365 * 86_400
"""The longest a replayed job may run, and the latest it may be submitted or due after the trace's first job:
two years. The published traces span under four months (Philly: 109 days; its longest job 54 days); the
rebalance replay plans every night until the last job ends, so two years is some 730 plans, where 1e12 s
would be 11 million and run for hours, and the deadline replays hold times as dates, which end at year 9999."""

_COLUMNS = {
    "itp": ({"submission_time", "deadline", "num_gpu", "duration"}, ("submission_time", "deadline")),
    "philly": ({"timestamp", "duration", "num_gpus", "cluster"}, ("timestamp",)),
}
"""Per layout: the columns its reader requires, and those that are instants (seconds, or Philly's ISO times)."""


def _seconds(text: str, column: str) -> float | None:
    """The cell as seconds, or None where it is not one: the reader refuses those, in its own words."""
    try:
        value = datetime.fromisoformat(text).timestamp() if column == "timestamp" else float(text)
    except (ValueError, OverflowError, OSError):
        return None
    return value if math.isfinite(value) else None


def check_replay_times(path: Path, layout: str) -> None:
    """Refuse ``path`` naming the line and column of the first duration longer than :data:`MAX_REPLAY_SECONDS`,
    or the first submission or deadline that far after the trace's first submission; the rest is the reader's."""
    from gpuaas.sources.csv_table import read_csv_table, where

    required, instants = _COLUMNS[layout]
    table = read_csv_table(path)
    table.require(required)
    records = table.records()
    starts = [s for _, row in records if (s := _seconds(row[instants[0]], instants[0])) is not None]
    first = min(starts, default=0.0)
    limit = f"{MAX_REPLAY_SECONDS:,} s (two years)"
    for line, row in records:
        duration = _seconds(row["duration"], "duration")
        if duration is not None and duration > MAX_REPLAY_SECONDS:
            raise ConfigError(f"a replay holds runs of at most {limit}, got {row['duration']!r}", file=path,
                              field=where(line, "duration"))
        for column in instants:
            at = _seconds(row[column], column)
            if at is not None and at - first > MAX_REPLAY_SECONDS:
                raise ConfigError(f"a replay holds times up to {limit} after the trace's first submission, got "
                                  f"{row[column]!r}", file=path, field=where(line, column))
