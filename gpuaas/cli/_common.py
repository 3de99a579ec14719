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
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from enum import Enum
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gpuaas.errors import GpuaasError

if TYPE_CHECKING:
    from gpuaas.settings import GpuaasSettings

__all__ = [
    "EXIT_CODES_HELP",
    "EXIT_DEGRADED",
    "EXIT_FAILED",
    "EXIT_USAGE",
    "WHOLE_COLUMNS",
    "OutputFormat",
    "console",
    "describe_error",
    "err_console",
    "fail",
    "end_degraded",
    "handle_errors",
    "lead",
    "print_json",
    "print_table",
    "progress",
    "set_wide",
    "settings_or_exit",
]

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_DEGRADED = 3
"""The command ran and printed its answer, but a source it needs failed: the answer is partial, and a
script must not read "nothing idle" as "nothing idle". Its first line names the source and the error."""

EXIT_CODES_HELP = ("Exit codes: 0 ok; 1 failed (the error on stderr); 2 usage; 3 degraded: a source did not "
                   "answer, the first line names it (the output is partial).")

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


@contextmanager
def progress(what: str) -> Iterator[Callable[[str], None]]:
    """A long step's progress on stderr; yields ``update(message)`` for its stages.

    On a terminal a spinner line that changes in place. Otherwise (``make``, CI, a pipe) a
    spinner prints nothing at all, so plain lines instead: one when the step starts, one per
    stage, one with the time it took: a log that says where a slow run is.
    """
    started = time.monotonic()
    if err_console.is_terminal:
        with err_console.status(f"{what}…") as status:
            yield lambda message: status.update(f"{what}: {message}")
        return

    def line(text: str) -> None:
        err_console.print(text, markup=False, highlight=False, soft_wrap=True)

    line(f"{what}…")
    yield lambda message: line(f"  {message}")
    line(f"{what}: done in {time.monotonic() - started:.1f} s")


def settings_or_exit(**overrides: Any) -> GpuaasSettings:
    """Load settings; a configuration error ends the command with exit code 1."""
    from gpuaas.settings import load_settings

    try:
        return load_settings(**overrides)
    except GpuaasError as exc:
        raise fail(str(exc)) from exc


def lead(result: dict[str, Any], format: OutputFormat) -> None:
    """The run's headline as the command's first line: above the tables, or on stderr beside ``--format json``
    (stdout stays one JSON document, which carries the headline too). A failed source leads it."""
    line = result.get("headline")
    if not line:
        return
    if format is OutputFormat.json:
        err_console.print(line, markup=False, highlight=False, soft_wrap=True)
    else:
        console.print(("[yellow]" if result.get("degraded") else "[bold]") + escape(line) + "[/]", highlight=False)


def end_degraded(result: dict[str, Any]) -> None:
    """Exit ``EXIT_DEGRADED`` after the output when the run was degraded (a source failed, telemetry missing)."""
    if result.get("degraded"):
        raise typer.Exit(code=EXIT_DEGRADED)


def print_json(data: Any) -> None:
    """Plain JSON on stdout: no colour, stable key order, dates as ISO strings."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


WHOLE_COLUMNS = frozenset({"workload", "name", "job", "queue", "cluster_queue", "ClusterQueue", "cohort", "object",
                           "namespace", "tenant", "kind", "pod", "source", "service", "deployment"})
"""Columns whose values are names a person copies into ``kubectl``: never folded or cut; other columns give way."""

_wide = False


def set_wide(wide: bool) -> None:
    """``gpuaas --wide``: every column of every table, however wide the terminal (the default drops the optional
    ones that do not fit, and says so)."""
    global _wide
    _wide = wide


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
                optional: Sequence[str] = ()) -> None:
    """A table that stays readable at 80 columns (``make`` pipes stdout: no terminal, 80 columns).

    Nothing is cut with "…". The widths are set here, not left to Rich (which squeezes a no-wrap
    column as readily as any other): name columns (``WHOLE_COLUMNS``) get their longest value, the
    others share what is left, none below its longest word. Where that does not fit the console,
    the ``optional`` columns are left out (last first) and a line after the table names them and
    ``--wide``; where even then it does not, every column folds.
    """
    cells = [["" if v is None else str(v) for v in row] for row in rows]
    shown = list(columns)
    dropped: list[str] = []
    while True:
        widths = None if _wide else _layout(columns, cells, shown, console.width)
        left = [c for c in reversed(optional) if c in shown]
        if _wide or widths is not None:
            break
        if not left:  # the other columns fold inside their words; the names still stay whole where they can
            widths = _layout(columns, cells, shown, console.width, fold_words=True)
            break
        shown.remove(left[0])
        dropped.insert(0, left[0])
    table = Table(title=title, show_lines=False)
    for k, name in enumerate(shown):
        table.add_column(name, overflow="fold", width=widths[k] if widths else None,
                         no_wrap=_wide or (widths is not None and name in WHOLE_COLUMNS))
    for row in cells:
        table.add_row(*(row[columns.index(c)] for c in shown))
    if _wide:  # the table's own width, past the console's (a terminal wraps the lines; a pager or a file keeps them)
        natural = _frame(sum(_longest(columns, cells, c) for c in shown), len(shown))
        Console(width=max(console.width, natural), no_color=console.no_color).print(table)
    else:
        console.print(table)
    if dropped:
        console.print(f"(not shown at {console.width} columns: {', '.join(dropped)}; gpuaas --wide shows them)",
                      highlight=False)


def _frame(cells_width: int, n: int) -> int:
    """Width of a table whose cells take ``cells_width``: a space each side of each cell and n + 1 rules."""
    return cells_width + 3 * n + 1


def _longest(columns: Sequence[str], cells: list[list[str]], name: str) -> int:
    return max([len(r[columns.index(name)]) for r in cells] + [len(name)])


def _layout(columns: Sequence[str], cells: list[list[str]], shown: list[str], width: int,
            fold_words: bool = False) -> list[int] | None:
    """Each shown column's width, or None where even the narrowest layout is wider than ``width``.

    Whole-name columns: their longest value. The others start at their longest value and the widest
    gives way first, down to its longest word (or the header's); with ``fold_words``, down to 4.
    """
    longest = [_longest(columns, cells, c) for c in shown]
    floor = [longest[k] if c in WHOLE_COLUMNS else
             min(4, longest[k]) if fold_words else
             max(len(w) for v in [c, *(r[columns.index(c)] for r in cells)] for w in [*v.split(), ""])
             for k, c in enumerate(shown)]
    room = width - _frame(0, len(shown))
    if sum(floor) > room:
        return None
    widths = list(longest)
    while sum(widths) > room:
        k = max((k for k in range(len(widths)) if widths[k] > floor[k]), key=lambda k: widths[k])
        widths[k] -= 1
    return widths
