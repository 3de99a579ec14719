"""A pydantic ``ValidationError`` as the one line every configuration error is: ``FILE: FIELD: what``.

Why one line and not one per problem: the CLI prints ``error:`` once, so a second line would read as
output of its own, and nine lines of unknown keys bury the first one. The first problem is named in
full, and how many more there are is said after it, so that fixing it is never a surprise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gpuaas.errors import ConfigError

__all__ = ["field_path", "first_problem", "require_text_keys"]

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
    would hide the others behind "(and N more)". So are the keys of that mapping the schema does not have,
    beside them: ``max_step_gpu`` for ``max_step_gpus`` is one mistake, and the line names both halves of it.
    """
    errors = exc.errors()
    err = errors[0]
    loc = tuple(err["loc"])
    if err["type"] == "missing":
        parent = loc[:-1]
        keys = [str(e["loc"][-1]) for e in errors if e["type"] == "missing" and tuple(e["loc"][:-1]) == parent]
        # A key missing beside one the schema does not have is most often that key misspelt: both are said.
        typos = [str(e["loc"][-1]) for e in errors if e["type"] == "extra_forbidden" and tuple(e["loc"][:-1]) == parent]
        msg, loc, shown = f"missing {', '.join(keys)}", parent, len(keys) + len(typos)
        if typos:
            msg += f"; {unknown} {', '.join(typos)}"
    else:
        msg = unknown if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, ")
        shown = 1
    more = f" (and {len(errors) - shown} more)" if len(errors) > shown else ""
    return ConfigError(msg + more, file=file, field=where(loc) or None)


def require_text_keys(file: Path | str, data: Any, *, where: Callable[[Loc], str] = field_path, loc: Loc = (),
                      deep: bool = True) -> None:
    """Every key of the mapping ``data`` is text, or a ``ConfigError`` naming the first that is not:
    ``capacity.1: key must be text, got 1 (quote it: '1')``.

    YAML reads ``1:`` as a number, ``true:`` as a boolean and ``null:`` as nothing: such a key could not be
    sorted with the others to name the first unknown one, ``"1"`` and ``1`` would become one key silently,
    and a schema's own refusal names it in its words (``Keys should be strings``) at a path the file does
    not have. ``loc`` is where ``data`` is in the file, and ``where`` names a location as the error's field
    (the key's as YAML writes it: ``null``, ``true``). ``deep``: the mappings in ``data``'s values and lists
    too, in document order, each mapping's keys before what they hold; walked without recursion, as an
    alias may make the document a cycle and its nesting may be deeper than Python's recursion limit.
    """
    stack: list[tuple[Any, Loc]] = [(data, loc)]
    seen: set[int] = set()
    while stack:
        node, at = stack.pop()
        if isinstance(node, Mapping):
            for key in node:
                if not isinstance(key, str):
                    shown = ({None: "null", True: "true", False: "false"}[key] if isinstance(key, bool | None)
                             else str(key))
                    raise ConfigError(f"key must be text, got {shown} (quote it: '{shown}')", file=file,
                                      field=where((*at, shown)) or None)
            children: list[tuple[Any, Loc]] = [(value, (*at, key)) for key, value in node.items()]
        elif isinstance(node, list):
            children = [(item, (*at, k)) for k, item in enumerate(node)]
        else:
            continue
        if deep and id(node) not in seen:
            seen.add(id(node))
            stack.extend(reversed(children))
