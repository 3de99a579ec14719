"""Deadline and run-time annotations as people write them, turned into numbers or a named problem.

Why strict: a deadline plan is only as honest as its inputs. A value that does not parse is
reported with the workload and the value (the snapshot's ``data_quality`` frame), and the
workload is planned without it; it is never guessed and never crashes the collect.

- ``gpuaas.io/deadline``: RFC 3339, with a time zone (``2026-12-01T18:00:00Z``).
- ``gpuaas.io/expected-runtime``: a duration such as ``45m``, ``1h30m``, ``90s``, ``2.5h``.
- Where the run time is missing, Kueue's ``spec.maximumExecutionTimeSeconds`` (set from the job's
  ``kueue.x-k8s.io/max-exec-time-seconds`` label) is used as an upper bound: Kueue deactivates the
  workload when it has been admitted that long, so it cannot run longer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

__all__ = [
    "DEADLINE",
    "EXPECTED_RUNTIME",
    "MAX_EXEC_LABEL",
    "DeadlineFields",
    "parse_deadline_fields",
    "parse_duration",
    "parse_rfc3339",
]

DEADLINE = "gpuaas.io/deadline"
EXPECTED_RUNTIME = "gpuaas.io/expected-runtime"
MAX_EXEC_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"

_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)(h|m|s))")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0}


@dataclass(frozen=True)
class DeadlineFields:
    """What a workload says about its deadline; ``problems`` are (field, value, why) for the report."""

    deadline: datetime | None
    runtime_seconds: float | None
    runtime_source: str | None
    """``expected-runtime`` or ``max-exec-time`` (an upper bound), None when neither is known."""
    problems: tuple[tuple[str, str, str], ...] = ()


def parse_rfc3339(value: str) -> datetime:
    """An aware datetime; ``ValueError`` for anything RFC 3339 does not allow (no zone, no time)."""
    text = value.strip()
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", text):
        raise ValueError("not an RFC 3339 time with a zone, e.g. 2026-12-01T18:00:00Z")
    return datetime.fromisoformat(text.upper().replace("Z", "+00:00"))


def parse_duration(value: str) -> float:
    """Seconds in ``45m`` / ``1h30m`` / ``90s`` / ``2.5h``; ``ValueError`` otherwise or when not > 0."""
    text = value.strip()
    if not text or _DURATION.sub("", text) != "":
        raise ValueError("not a duration such as 45m, 1h30m or 90s")
    seconds = sum(float(n) * _UNIT[u] for n, u in _DURATION.findall(text))
    if seconds <= 0:
        raise ValueError("must be longer than 0s")
    return seconds


def parse_deadline_fields(deadline: str | None, runtime: str | None, max_exec: str | None) -> DeadlineFields:
    """Parse the three raw values of one workload; every malformed one becomes a problem, not a guess."""
    problems: list[tuple[str, str, str]] = []
    when = None
    if deadline is not None:
        try:
            when = parse_rfc3339(deadline)
        except ValueError as exc:
            problems.append((DEADLINE, deadline, str(exc)))
    seconds, source = None, None
    if runtime is not None:
        try:
            seconds, source = parse_duration(runtime), "expected-runtime"
        except ValueError as exc:
            problems.append((EXPECTED_RUNTIME, runtime, str(exc)))
    if seconds is None and max_exec is not None:
        text = max_exec.strip()
        if text.isdigit() and int(text) >= 1:
            seconds, source = float(text), "max-exec-time"
        else:
            problems.append((MAX_EXEC_LABEL, max_exec, "not a whole number of seconds >= 1"))
    if when is not None and seconds is None and not problems:
        problems.append((EXPECTED_RUNTIME, "", "a deadline without a run time (nor max-exec-time) cannot be planned"))
    return DeadlineFields(when, seconds, source, tuple(problems))
