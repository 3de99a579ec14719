"""A pydantic ``ValidationError`` as the one line every configuration error is: ``FILE: FIELD: what``.

Why one line and not one per problem: the CLI prints ``error:`` once, so a second line would read as
output of its own, and nine lines of unknown keys bury the first one. The first problem is named in
full, and how many more there are is said after it, so that fixing it is never a surprise.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from gpuaas.errors import ConfigError

__all__ = ["field_path", "first_problem"]

Loc = tuple[int | str, ...]


def field_path(loc: Loc) -> str:
    """``tenants[2].reclaim.window_minutes``: pydantic's location as a person reads the file."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def first_problem(exc: ValidationError, file: Path | str, *, where: Callable[[Loc], str] = field_path,
                  unknown: str = "unknown field") -> ConfigError:
    """The first problem as one line, and how many more there are.

    ``where`` names a location (a file may add what the index stands for: ``queues[1] (queue b)``);
    ``unknown`` is said of a key the schema does not have. Missing keys of one mapping are one problem,
    all named (``limits: missing max_step_gpus, hysteresis_gpus``): reported one at a time, the first
    would hide the others behind "(and N more)".
    """
    errors = exc.errors()
    err = errors[0]
    loc = tuple(err["loc"])
    if err["type"] == "missing":
        parent = loc[:-1]
        keys = [str(e["loc"][-1]) for e in errors if e["type"] == "missing" and tuple(e["loc"][:-1]) == parent]
        msg, loc, shown = f"missing {', '.join(keys)}", parent, len(keys)
    else:
        msg = unknown if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, ")
        shown = 1
    more = f" (and {len(errors) - shown} more)" if len(errors) > shown else ""
    return ConfigError(msg + more, file=file, field=where(loc) or None)
