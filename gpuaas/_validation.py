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

__all__ = ["FieldProblem", "field_path", "first_problem", "require_text_keys", "shown_message"]

Loc = tuple[int | str, ...]

SHOWN_VALUE_CHARS = 200
"""How much of a value an error line quotes: enough to recognise it; a value of a YAML alias bomb (seven nested
aliases) expands to millions of items, and quoted whole made one error line of megabytes."""
MESSAGE_CHARS = 1000
"""The longest message an error line keeps, whatever it quotes in a form other than the value's own."""


class FieldProblem(ValueError):
    """A validator's refusal of one part of what it checks: ``at`` is that part's place below the validator's own
    (``("tenants", 1, "name")`` from the policy's, ``(1,)`` from a list field's), so that the line names the field
    the file has wrong, not the model or the list that holds it."""

    def __init__(self, at: Loc, message: str) -> None:
        super().__init__(message)
        self.at = at


def field_path(loc: Loc) -> str:
    """``tenants[2].reclaim.window_minutes``: pydantic's location as a person reads the file.

    A key with a character that prints as nothing, or as a blank (a zero-width space, a byte-order mark, a
    no-break space pasted from a web page), is written with it escaped: ``reclaim.mo\\u200bde: unknown field``
    printed as it is would name a key that looks right (``reclaim.mode``)."""
    out = ""
    for part in loc:
        name = str(part)
        if not name.isprintable() or any(c.isspace() and c != " " for c in name):
            name = name.encode("unicode_escape").decode("ascii")
        out += f"[{part}]" if isinstance(part, int) else (f".{name}" if out else name)
    return out


def shown_message(message: str, value: Any) -> str:
    """``message`` (a validator's, which may quote the value it refused) with that value cut to
    :data:`SHOWN_VALUE_CHARS` characters and an ellipsis, wherever it quotes it as Python prints it (``repr`` or
    ``str``); past :data:`MESSAGE_CHARS` in all, its start and its end (what it says of the value) are kept."""
    if len(message) <= SHOWN_VALUE_CHARS:
        return message
    for form in dict.fromkeys((repr(value), str(value))):
        if len(form) > SHOWN_VALUE_CHARS and form in message:
            message = message.replace(form, f"{form[:SHOWN_VALUE_CHARS]}... ({len(form):,} characters)")
    if len(message) > MESSAGE_CHARS:
        half = MESSAGE_CHARS // 2
        message = f"{message[:half]}... ({len(message):,} characters) ...{message[-half:]}"
    return message


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
    problem = (err.get("ctx") or {}).get("error")
    if isinstance(problem, FieldProblem):
        loc += problem.at
    if err["type"] == "missing":
        parent = loc[:-1]
        keys = [str(e["loc"][-1]) for e in errors if e["type"] == "missing" and tuple(e["loc"][:-1]) == parent]
        # A key missing beside one the schema does not have is most often that key misspelt: both are said.
        typos = [str(e["loc"][-1]) for e in errors if e["type"] == "extra_forbidden" and tuple(e["loc"][:-1]) == parent]
        msg, loc, shown = f"missing {', '.join(keys)}", parent, len(keys) + len(typos)
        if typos:
            msg += f"; {unknown} {', '.join(typos)}"
    elif err["type"] in ("model_type", "dict_type"):  # pydantic names its own class: "instance of Tenant"
        msg, shown = f"expected a mapping of keys to values, got {_kind(err['input'])}", 1
    else:
        msg = unknown if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, ")
        msg, shown = shown_message(msg, err.get("input")), 1
    more = f" (and {len(errors) - shown} more)" if len(errors) > shown else ""
    return ConfigError(msg + more, file=file, field=where(loc) or None)


def _kind(value: Any) -> str:
    """What a YAML value is, as its writer would say it: ``a list``, ``nothing (null)``, ``text 'team-a'``."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"text {value[:40]!r}" + ("..." if len(value) > 40 else "")
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int | float):
        shown = repr(value) if not isinstance(value, int) or value.bit_length() < 64 else f"{str(value)[:20]}..."
        return f"a number ({shown})"
    return type(value).__name__


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
