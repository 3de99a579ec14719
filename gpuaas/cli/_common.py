"""What every sub-command shares: consoles, output format, error handling.

Errors are printed once, on stderr, as one line and without a traceback: a ``GpuaasError``
already says what went wrong and where (file, field, object). ``main`` also maps what the
operating system and the standard library raise on bad input (``OSError`` with its path,
``ValueError``, ``UnicodeDecodeError``, ``OverflowError``, ...) the same way, so that no
input reaches the user as a traceback; commands map the ones they can name better first.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from enum import Enum
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from gpuaas.errors import GpuaasError
from gpuaas.settings import GpuaasSettings, load_settings

__all__ = [
    "EXIT_FAILED",
    "EXIT_USAGE",
    "OutputFormat",
    "console",
    "describe_error",
    "err_console",
    "fail",
    "handle_errors",
    "print_json",
    "print_table",
    "settings_or_exit",
]

EXIT_FAILED = 1
EXIT_USAGE = 2

console = Console()
err_console = Console(stderr=True)


class OutputFormat(str, Enum):
    table = "table"
    json = "json"


def fail(message: str, code: int = EXIT_FAILED) -> typer.Exit:
    """Print ``error: message`` on stderr and return the Exit to raise."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, markup=True, soft_wrap=True)
    return typer.Exit(code=code)


BAD_INPUT_ERRORS = (OSError, ValueError, ArithmeticError, LookupError, TypeError, RecursionError, MemoryError)
"""What bad input (a path, a file's bytes, a number) surfaces as when no command mapped it first."""


def describe_error(exc: BaseException) -> str:
    """One line naming what was wrong: the path and the system's reason for an ``OSError``."""
    if isinstance(exc, GpuaasError):
        text = str(exc)
    elif isinstance(exc, OSError) and exc.strerror:
        names = [str(n) for n in (exc.filename, exc.filename2) if n is not None]
        text = f"{exc.strerror}: {' -> '.join(names)}" if names else exc.strerror
    elif isinstance(exc, UnicodeDecodeError):
        text = f"UnicodeDecodeError: input is not {exc.encoding} (byte {exc.start}: {exc.reason})"
    else:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return " ".join(text.split())[:1000]


@contextmanager
def handle_errors() -> Iterator[None]:
    """Turn a GpuaasError, or bad input the standard library rejected, into ``error: ...`` and exit 1."""
    try:
        yield
    except (GpuaasError, *BAD_INPUT_ERRORS) as exc:
        err_console.print(f"error: {describe_error(exc)}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(EXIT_FAILED)


def settings_or_exit(**overrides: Any) -> GpuaasSettings:
    """Load settings; a configuration error ends the command with exit code 1."""
    try:
        return load_settings(**overrides)
    except GpuaasError as exc:
        raise fail(str(exc)) from exc


def print_json(data: Any) -> None:
    """Plain JSON on stdout: no colour, stable key order, dates as ISO strings."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    table = Table(title=title, show_lines=False)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    console.print(table)
