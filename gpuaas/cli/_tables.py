"""Tables on the terminal: never a split word or number, at any width.

Apart from the rest of what the sub-commands share because it is one concept with its own rules: which
columns a person copies whole into ``kubectl``, which give way first, what moves under a table and what
is left out (and said so) when the terminal is narrow, and ``--wide``, which shows everything.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from gpuaas.cli._common import console, visible

__all__ = ["NAME_COLUMNS", "NOTE_LINES", "WHOLE_COLUMNS", "print_table", "set_wide"]


WHOLE_COLUMNS = frozenset({"workload", "name", "job", "queue", "cluster_queue", "ClusterQueue", "cohort", "object",
                           "namespace", "tenant", "kind", "pod", "source", "service", "deployment"})
"""Columns whose values are names a person copies into ``kubectl``: never folded or cut; other columns give way."""

NAME_COLUMNS = WHOLE_COLUMNS | {"subject"}
"""Columns that name a row: a ``subject`` (``RayCluster research/ray (Workload raycluster-ray-9cefe)``) names it in
several words, and wraps between them like any other column."""

NOTE_LINES = 3
"""The most lines a ``notes`` cell may wrap to in the table: a reason folded into a narrow column, five or six
lines to each row, is a table that does not fit the terminal, however narrow its frame; it moves under the table."""

_wide = False


def set_wide(wide: bool) -> None:
    """``gpuaas --wide``: every column of every table, however wide the terminal (by default ``print_table`` moves
    the notes columns under a table that does not fit, then drops its optional columns and says so, and prints
    what still does not fit wider than the terminal)."""
    global _wide
    _wide = wide


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
                optional: Sequence[str] = (), notes: Sequence[str] = (), whole: Sequence[str] = ()) -> None:
    """A table that never splits a word or a number, at any width (``make`` pipes stdout: 80 columns).

    Cells wrap only at spaces: every column is at least as wide as its longest word (name columns,
    ``WHOLE_COLUMNS``, as their longest value), and the widest column gives way first. The ``whole``
    columns, figures read as one phrase such as ``$0.142 per 1,000 requests``, are kept on one line too
    where the steps below make room for them, and wrap between their words where they cannot. Where
    that does not fit the console, in this order:

    1. the ``notes`` columns (long reasons) move under the table, one paragraph per row, led by the
       row's first cell and its name (its first ``NAME_COLUMNS`` cell after the first); a notes column
       moves too, even where the table would fit, when one of its cells would wrap to more than
       ``NOTE_LINES`` lines in it and to half as many or fewer under the table (a reason folded into a
       narrow column makes every row five lines tall);
    2. the ``optional`` columns are left out, in the order given (the least important first), and
       where that leaves room the more important of them come back; a line after the table names
       the ones left out and ``--wide``. A column is never left out where two rows would then read
       the same (``Deployment team-a/llm`` and ``InferenceService team-a/llm`` without their kind):
       it is what tells them apart, so it stays, even if the table then runs past the console;
    3. what is left is printed at its narrowest whole-word width, wider than the console (a
       terminal wraps the line; no word is cut).
    """
    cells = [["" if v is None else visible(str(v)) for v in row] for row in rows]
    width = console.width
    keep = WHOLE_COLUMNS | set(whole)
    shown, widths, moved, dropped = _fit(columns, cells, width, keep, optional, notes)
    if widths is None and whole:  # a phrase kept whole that cannot fit: let it wrap between its words
        keep = WHOLE_COLUMNS
        shown, widths, moved, dropped = _fit(columns, cells, width, keep, optional, notes)
    if widths is None and not _wide:  # even the narrowest whole-word layout is wider than the console
        widths = _layout(columns, cells, shown, 10**6, keep, narrowest=True)
        assert widths is not None
        width = _frame(sum(widths), len(shown))
    table = Table(title=visible(title))
    for k, name in enumerate(shown):
        table.add_column(name, overflow="fold", width=widths[k] if widths else None,
                         no_wrap=_wide or name in keep)
    for row in cells:
        table.add_row(*(row[columns.index(c)] for c in shown))
    if _wide:  # the table's own width, past the console's (a terminal wraps the lines; a pager or a file keeps them)
        width = max(console.width, _frame(sum(_longest(columns, cells, c) for c in shown), len(shown)))
    if width == console.width:
        console.print(table)
    else:
        Console(width=width, no_color=console.no_color, force_terminal=console.is_terminal, markup=False).print(table)
    # The row's name, as in the table: its first cell and the first name column after it (a kind alone, or a
    # cohort alone, names several rows).
    key = next((k for k, c in enumerate(columns) if k and c in NAME_COLUMNS), 0)
    for name in moved:
        for row in cells:
            text = row[columns.index(name)]
            if text:
                lead = f"{row[0]} {row[key]}" if key else row[0]
                console.print(textwrap.fill(f"{lead} {name}: {' '.join(text.split())}", width=console.width,
                                            initial_indent="  ", subsequent_indent="      ", break_long_words=False,
                                            break_on_hyphens=False), highlight=False, markup=False, soft_wrap=True)
    if dropped:
        console.print(f"(not shown at {console.width} columns: {', '.join(dropped)}; --wide shows them)",
                      highlight=False)


def _fit(columns: Sequence[str], cells: list[list[str]], width: int, keep: frozenset[str] | set[str],
         optional: Sequence[str], notes: Sequence[str]) -> tuple[list[str], list[int] | None, list[str], list[str]]:
    """(columns shown, their widths or None where nothing fits, columns moved under the table, columns left out):
    ``print_table``'s steps 1 and 2, at ``width``."""
    shown = list(columns)
    moved: list[str] = []
    dropped: list[str] = []
    widths = None if _wide else _layout(columns, cells, shown, width, keep)
    while widths is not None and not _wide and (tall := _tall(columns, cells, shown, widths, notes, width)):
        shown.remove(tall)  # it fits only with its reasons folded into a column too narrow to read them
        moved.append(tall)
        widths = _layout(columns, cells, shown, width, keep)
    steps = [("note", c) for c in notes if c in shown] + [("drop", c) for c in optional if c in shown]
    while widths is None and not _wide and steps:
        how, name = steps.pop(0)
        if name not in shown or (how == "drop" and _merges(columns, cells, shown, name)):
            continue
        shown.remove(name)
        (moved if how == "note" else dropped).append(name)
        widths = _layout(columns, cells, shown, width, keep)
    for name in reversed(list(dropped)):  # room left once it fits: the more important of the left-out come back
        if widths is None:
            break
        again = [c for c in columns if c in shown or c == name]
        if (fits := _layout(columns, cells, again, width, keep)) is not None:
            shown, widths = again, fits
            dropped.remove(name)
    return shown, widths, moved, dropped


def _tall(columns: Sequence[str], cells: list[list[str]], shown: list[str], widths: list[int],
          notes: Sequence[str], width: int) -> str | None:
    """The first shown ``notes`` column with a cell that wraps to more than ``NOTE_LINES`` lines at ``widths``, and
    to at most half as many under the table, ``width`` wide: a column already as wide as most of the terminal
    (a preflight's detail beside its check) stays, since under the table its text would take nearly as many
    lines, apart from the row it explains."""
    for name in notes:
        if name in shown:
            at, w = columns.index(name), widths[shown.index(name)]
            for row in cells:
                folded = _lines(row[at], w)
                if folded > NOTE_LINES and 2 * _lines(row[at], max(1, width - 4)) <= folded:
                    return name
    return None


def _lines(text: str, width: int) -> int:
    """How many lines ``text`` takes in a cell ``width`` wide that wraps only at spaces."""
    return sum(max(1, len(textwrap.wrap(line, width, break_long_words=False, break_on_hyphens=False)))
               for line in text.splitlines() or [""])


def _merges(columns: Sequence[str], cells: list[list[str]], shown: list[str], name: str) -> bool:
    """Whether leaving ``name`` out of ``shown`` makes rows that differ read the same: a reader would take them
    for one row printed twice, and could not tell which is which."""
    def distinct(names: list[str]) -> int:
        at = [columns.index(c) for c in names]
        return len({tuple(row[k] for k in at) for row in cells})

    return distinct([c for c in shown if c != name]) < distinct(shown)


def _frame(cells_width: int, n: int) -> int:
    """Width of a table whose cells take ``cells_width``: a space each side of each cell and n + 1 rules."""
    return cells_width + 3 * n + 1


def _longest(columns: Sequence[str], cells: list[list[str]], name: str) -> int:
    return max([len(r[columns.index(name)]) for r in cells] + [len(name)])


def _words(text: str) -> list[str]:
    return text.split() or [""]


def _layout(columns: Sequence[str], cells: list[list[str]], shown: list[str], width: int,
            whole: frozenset[str] | set[str] = WHOLE_COLUMNS, narrowest: bool = False) -> list[int] | None:
    """Each shown column's width, or None where even the narrowest whole-word layout is wider than ``width``.

    ``whole`` columns: their longest value. The others start at their longest value (``narrowest``:
    at their longest word) and the widest gives way first, down to its longest word (or the header's).
    """
    longest = [_longest(columns, cells, c) for c in shown]
    floor = [longest[k] if c in whole else
             max(len(w) for v in [c, *(r[columns.index(c)] for r in cells)] for line in v.splitlines() or [""]
                 for w in _words(line))
             for k, c in enumerate(shown)]
    room = width - _frame(0, len(shown))
    if sum(floor) > room:
        return None
    widths = list(floor) if narrowest else list(longest)
    while sum(widths) > room:
        k = max((k for k in range(len(widths)) if widths[k] > floor[k]), key=lambda k: widths[k])
        widths[k] -= 1
    return widths
