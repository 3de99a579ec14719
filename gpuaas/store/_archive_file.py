"""The archive file: gzip-compressed JSON Lines, a header line, then one line per audit row.

Why this format: it is the team's to keep for as long as its own retention says, read with tools every machine has
(``zcat FILE | jq``), with no gpuaas and no database. The header says what the file is (format and version, the
schema the rows were read at, the database, the cutoff, how many rows and which ids, when it was written); each row
line holds every column, times in ISO 8601 UTC and the JSON columns as JSON. The SHA-256 is over the row lines as
``zcat FILE | tail -n +2`` prints them, so ``sha256sum`` checks a file against the archive's audit row.

A file is written beside its final path, fsynced, read back and checked (row count, ids, SHA-256) before anything
is removed from the database; the caller renames it into place (``publish``), never over an existing file.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import tempfile
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from gpuaas.errors import StoreError
from gpuaas.store._models import AuditEntry, as_utc

__all__ = ["FORMAT", "VERSION", "Written", "publish", "read_archive", "row_line", "write_archive"]

FORMAT = "gpuaas-audit-archive"
VERSION = 1
_COLUMNS: tuple[str, ...] = tuple(AuditEntry.__table__.columns.keys())  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Written:
    """A temporary file written and checked: its path, how many rows, their ids in order, the SHA-256 of the rows."""

    temporary: Path
    rows: int
    ids: array[int]
    sha256: str


def _value(value: Any) -> Any:
    return as_utc(value).isoformat() if isinstance(value, datetime) else value


def row_line(row: Any) -> bytes:
    """One row as its line: every column, in the table's order, UTF-8, ending in a newline."""
    data = {name: _value(getattr(row, name)) for name in _COLUMNS}
    return (json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def write_archive(final: Path, header: dict[str, Any], rows: Iterable[Any]) -> Written:
    """Write ``header`` and ``rows`` to a temporary file beside ``final``, fsync it, read it back and check it.

    The temporary file is removed whatever fails here; ``StoreError`` names ``final``."""
    fd, name = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".partial")
    temporary = Path(name)
    try:
        ids: array[int] = array("q")
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as raw:
            with gzip.GzipFile(filename=final.name, mode="wb", fileobj=raw, compresslevel=6) as packed:
                packed.write((json.dumps(header, separators=(",", ":")) + "\n").encode())
                for row in rows:
                    line = row_line(row)
                    packed.write(line)
                    digest.update(line)
                    ids.append(int(row.id))
            raw.flush()
            os.fsync(raw.fileno())
        written = Written(temporary, len(ids), ids, digest.hexdigest())
        _check(final, written, int(header["rows"]))
        return written
    except BaseException as exc:
        temporary.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise StoreError(f"cannot write the archive {final}: {exc.strerror or exc}") from exc
        raise


def _check(final: Path, written: Written, expected: int) -> None:
    """Read the temporary file back: the header's count, the rows' ids and their SHA-256 must be what was written."""
    header, lines = read_archive(written.temporary)
    digest = hashlib.sha256()
    ids: array[int] = array("q")
    for line in lines:
        digest.update(line)
        ids.append(int(json.loads(line)["id"]))
    if not (header.get("rows") == expected == written.rows == len(ids) and ids == written.ids
            and digest.hexdigest() == written.sha256):
        raise StoreError(f"the archive {final} did not read back as written ({len(ids):,} of {expected:,} rows, "
                         "or their ids or SHA-256 differ): nothing removed from the database")


def read_archive(path: Path) -> tuple[dict[str, Any], Iterator[bytes]]:
    """The header of an archive file and its row lines (as bytes, each with its newline), read lazily."""
    stream = gzip.open(path, "rb")
    try:
        header = json.loads(stream.readline())
    except (OSError, ValueError, EOFError) as exc:
        stream.close()
        raise StoreError(f"{path} is not a gpuaas audit archive: {exc}") from exc
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        stream.close()
        raise StoreError(f"{path} is not a gpuaas audit archive (no {FORMAT!r} header)")

    def lines() -> Iterator[bytes]:
        with stream:
            yield from stream

    return header, lines()


def publish(written: Written, final: Path) -> None:
    """Put the checked file at ``final``, never over a file there (one made since the command began included), and
    make the rename durable. A hard link is the atomic "create only if absent"; where the file system has none,
    the rename follows a check."""
    try:
        try:
            os.link(written.temporary, final)
        except FileExistsError:
            raise
        except OSError:
            if final.exists():
                raise FileExistsError(final) from None
            os.replace(written.temporary, final)
        else:
            written.temporary.unlink()
        directory = os.open(final.parent, os.O_RDONLY)
        try:
            with contextlib.suppress(OSError):  # a directory that cannot be fsynced (some network file systems)
                os.fsync(directory)
        finally:
            os.close(directory)
    except FileExistsError as exc:
        raise StoreError(f"{final} already exists: an archive is never written over a file; give another path") from exc
    except OSError as exc:
        raise StoreError(f"cannot put the archive at {final}: {exc.strerror or exc}") from exc
