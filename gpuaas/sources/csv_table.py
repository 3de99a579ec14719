"""Read a CSV file as text: its header and its rows, each row with the line it ends on.

Why one reader for every CSV input (duty-cycle and request-rate traces, job traces, load-test sweeps, the
Philly VC table): a malformed file must be refused the same way wherever it enters, with the file and the
line an editor shows, before any number is read from it. In particular every row must have as many fields
as the header: pandas reads a file whose rows all carry one field more than the header as if the first
column were the rows' index, so each value lands one column to the left and the run succeeds with wrong
numbers; a row with one field less would leave its last column silently empty.

Lines are numbered as an editor numbers them (the header is line 1, blank lines count), so a row after a
blank line is not reported one line early. Cells are stripped of surrounding spaces; a UTF-8 byte-order
mark (as spreadsheet programs write) is dropped.
"""

from __future__ import annotations

import codecs
import csv
import io
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from gpuaas._input_file import MAX_CSV_BYTES, read_input_bytes
from gpuaas.errors import ConfigError

__all__ = ["CsvTable", "read_csv_table", "where"]


def where(line: int, column: str | None = None) -> str:
    """``line 7: num_gpu``: the line as an editor numbers it, then the column, as every CSV error reads."""
    return f"line {line}: {column}" if column else f"line {line}"


@dataclass(frozen=True)
class CsvTable:
    """A CSV file's header and rows (every row as long as the header), all text, and the line each row ends on."""

    path: Path
    header: tuple[str, ...]
    rows: list[list[str]]
    lines: list[int]

    def require(self, columns: Collection[str]) -> None:
        """Refuse the file, naming every column it lacks and those it has, when one of ``columns`` is missing."""
        missing = sorted(set(columns) - set(self.header))
        if missing:
            found = ", ".join(self.header) or "none"
            raise ConfigError(f"missing columns {missing} (columns found: {found})", file=self.path)

    def records(self) -> list[tuple[int, dict[str, str]]]:
        """The rows as ``(line, {column: cell})``."""
        numbered = zip(self.lines, self.rows, strict=True)
        return [(line, dict(zip(self.header, cells, strict=True))) for line, cells in numbered]


def _text(path: Path) -> str:
    """The file's text; a file that is not UTF-8 is refused with the line of its first bad byte."""
    if path.is_dir():
        raise ConfigError("is a directory, not a CSV file", file=path)
    try:
        data = read_input_bytes(path, MAX_CSV_BYTES)  # /dev/zero, a pipe, a huge file: refused unread
    except FileNotFoundError as exc:
        raise ConfigError("no such file", file=path) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", file=path) from exc
    data = data.removeprefix(codecs.BOM_UTF8)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"not UTF-8 text (byte 0x{data[exc.start]:02x}: {exc.reason})", file=path,
                          field=where(line)) from exc


def read_csv_table(path: Path | str) -> CsvTable:
    """Read ``path``; a ConfigError names the file, and the line where there is one, when it is not a
    CSV with a header (empty, not UTF-8, a quote left open, a column named twice, a row of another length)."""
    path = Path(path)
    text = _text(path)
    strip = " " in text or "\t" in text  # machine-written files seldom hold any: no cell to strip, none stripped
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    header: tuple[str, ...] | None = None
    width = -1
    rows: list[list[str]] = []
    lines: list[int] = []
    add_row, add_line = rows.append, lines.append  # the loop runs once a row: the lookups would be a third of it
    try:
        for raw in reader:
            cells = [cell.strip() for cell in raw] if strip else raw
            if len(cells) == width and (width > 1 or cells[0]):
                add_row(cells)
                add_line(reader.line_num)
            elif len(cells) > 1 or (cells and cells[0]):  # else a blank line, or one of spaces only
                if header is not None:
                    raise ConfigError(f"{_fields(len(cells))}, header has {width}", file=path,
                                      field=where(reader.line_num))
                header = _header(path, cells, reader.line_num)
                width = len(header)
    except csv.Error as exc:
        raise ConfigError(f"not a readable CSV ({exc})", file=path, field=where(reader.line_num)) from exc
    if header is None:
        raise ConfigError("empty file: no header row (expected a CSV with a header)", file=path)
    return CsvTable(path, header, rows, lines)


def _header(path: Path, cells: list[str], line: int) -> tuple[str, ...]:
    """The column names; a name given twice is refused: a row's value would be read from one of the two columns
    and the other ignored, whichever the reader picks. Unnamed columns (a trailing comma) are no one's."""
    seen: set[str] = set()
    for name in cells:
        if name and name in seen:
            raise ConfigError("a second column of this name (the header must name each column once)", file=path,
                              field=where(line, name))
        seen.add(name)
    return tuple(cells)


def _fields(count: int) -> str:
    return f"{count} field{'' if count == 1 else 's'}"
