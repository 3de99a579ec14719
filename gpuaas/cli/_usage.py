"""A usage error (a flag Click or Typer rejected) in one line: what was wrong, with what was given, and where help is."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import get_args

from typer import _click as click

__all__ = ["shown_value", "usage_error_line"]


def _given_value(args: Sequence[str], param: click.Parameter | None) -> str | None:
    """The text the user gave ``param`` on the command line (its last occurrence), if it was an option given one."""
    if param is None or param.param_type_name != "option" or getattr(param, "is_flag", False):
        return None
    found = None
    for i, arg in enumerate(args):
        for opt in param.opts:
            if arg == opt and i + 1 < len(args):
                found = args[i + 1]
            elif arg.startswith(opt + "="):
                found = arg[len(opt) + 1:]
    return found


def _takes_a_number(param: click.Parameter) -> bool:
    """Whether Typer parses ``param``'s value as a number: only there is NaN wrong for being NaN; a flag of text
    (``--since``: a duration or a time) refuses it with its own message, which says what it expects."""
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    return any(t in (int, float) for t in (annotation, *get_args(annotation)))


def _not_a_number(text: str) -> bool:
    try:
        return math.isnan(float(text))
    except ValueError:
        return False


def shown_value(value: str) -> str:
    """``value`` as a refusal quotes it: in full up to 100 characters, else its start and its length (a
    pasted 5000-digit number is not worth a screen)."""
    return repr(value) if len(value) <= 100 else f"{value[:40]!r}… ({len(value)} characters)"


def usage_error_line(exc: click.ClickException, args: Sequence[str]) -> str:
    """One line naming the flag, what was given and where help is: ``Invalid value for '--budget': 'nan' is not
    a number; see gpuaas replay reclaim --help``.

    A number checked against a range reads NaN as out of it ("should be less than or equal to
    1440"), which sends the reader after the wrong bound; it is named as not a number instead. The
    ``Value error, `` that pydantic puts before a refusal (an unknown choice: ``'xml' is not one of 'table',
    'json'``) says nothing to the reader and is dropped.
    """
    # Click puts a list (the choices of a missing option) on lines of their own, indented by tabs: one line here.
    message = re.sub(r"\s*\n\s*", " ", exc.format_message().strip()).rstrip(".").replace(": Value error, ", ": ", 1)
    param: click.Parameter | None = getattr(exc, "param", None)
    value = _given_value(args, param)
    if param is not None and value is not None:
        if _not_a_number(value) and _takes_a_number(param):
            message = f"Invalid value for '{param.opts[0]}': {value!r} is not a number"
        elif repr(value) not in message and (shown := shown_value(value)) not in message:
            message = f"{message} (got {shown})"
    ctx = getattr(exc, "ctx", None)
    if ctx is not None and ctx.command.get_help_option(ctx) is not None:
        message += f"; see {ctx.command_path} {ctx.help_option_names[0]}"
    return message
