"""Reading an input file a person names (a policy, a planner problem, a trace, a sweep) without reading forever.

Why: ``/dev/zero`` never ends, ``/dev/urandom`` neither, a pipe or a terminal may never answer, and a file of
tens of gigabytes is a wrong path, not an input; read whole, each ends in a ``MemoryError`` or a command
that hangs. The shared readers (:mod:`gpuaas._yaml`, :mod:`gpuaas.sources.csv_table`) take the bytes from
here: a device or socket, or a file larger than the reader's limit, is refused with one ``ConfigError``
naming it, before anything is read from it (and a file that grows while it is read is cut at the limit and
refused the same way). A pipe is read, as ``<(kubectl get configmap …)`` or ``/dev/stdin`` gives one, up to the
limit: one that sends more is refused the same way, one that nobody writes is an empty file, never a hang.
That empty file is why an input read more than once, or whose empty reading is a valid one, takes only a
regular file (``regular=True``): a policy piped from a FIFO whose writer had not started yet read as the empty
policy (no freezes, no caps), and a token file is read again at each use, where a pipe the check drained is
empty. ``/dev/null`` (:data:`os.devnull`) is the one device read: as an empty file, as it always was; it can
hold nothing that reading it would lose.

Nothing is allocated for the limit itself: a regular file is read to its size (and one chunk more, to see
whether it grew), a pipe in chunks; a 2-line CSV must not take the 1 GiB a CSV may hold.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from gpuaas.errors import ConfigError

__all__ = ["MAX_CSV_BYTES", "MAX_TOKEN_BYTES", "MAX_YAML_BYTES", "read_input_bytes"]

MAX_YAML_BYTES = 64 * 2**20
"""64 MiB: a policy, scenario, RBAC manifest or planner problem; the largest real one (a deadline problem of
thousands of jobs) is a few MB, and PyYAML would take minutes over more."""

MAX_TOKEN_BYTES = 2**16
"""64 KiB: a bearer token file (a service account's token is about a kilobyte; a header of more is refused by
most servers anyway)."""

MAX_CSV_BYTES = 2**30
"""1 GiB: a trace, utilization export or load-test sweep; the published job traces the replays read are tens
of MB, and a CSV of more is read faster from its source (``--from-prometheus``) than from a file."""

_CHUNK = 2**20
"""1 MiB: what a pipe is read by, and how much more than its size a regular file is read by to see that it grew."""

_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _size(count: int) -> str:
    if count >= 2**30:
        return f"{count / 2**30:,.4g} GiB"
    return f"{count / 2**20:,.4g} MiB" if count >= 2**20 else f"{count:,} bytes"


def read_input_bytes(path: Path, limit: int, what: str | None = None, *, regular: bool = False) -> bytes:
    """The bytes of ``path``; a ``ConfigError`` naming it, before anything is read, when it is a device or a socket
    (``is a character device, not a regular file``), a pipe where ``regular`` (``is a pipe, not a regular file``),
    or holds more than ``limit`` bytes (a pipe: sends more); ``/dev/null`` (:data:`os.devnull`, or a link to it) is
    an empty file. ``what``: the file's role (``policy file``), said first. An ``OSError`` (no such file, permission
    denied, a directory) is the caller's to word, as it words one from ``open``."""
    info = path.stat()  # follows links: a link to a regular file is one (a ConfigMap's mounted key is)
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    subject = f"{what} " if what else ""
    too_big = f"larger than the {_size(limit)} an input file of this kind may hold: is it the right file?"
    if stat.S_ISFIFO(info.st_mode) and regular:  # one nobody writes yet would read as an empty file
        raise ConfigError(f"{subject}is a pipe, not a regular file: give the file itself", file=path)
    if stat.S_ISFIFO(info.st_mode):
        return _read_pipe(path, limit, f"{subject}is {too_big}")
    if stat.S_ISCHR(info.st_mode) and _is_devnull(path, info):
        return b""  # the empty input a script gives for "none" (``config check /dev/null``)
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "a special file")
        raise ConfigError(f"{subject}is {kind}, not a regular file: give the file itself", file=path)
    if info.st_size > limit:
        raise ConfigError(f"{subject}is {info.st_size:,} bytes, {too_big}", file=path)
    # without blocking: a pipe put in its place since the look above must not hang the open (a file ignores it)
    with open(path, "rb", opener=lambda name, flags: os.open(name, flags | os.O_NONBLOCK)) as stream:
        if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):  # replaced between the two looks
            raise ConfigError(f"{subject}is not a regular file: give the file itself", file=path)
        # its size, not the limit: ``read(n)`` takes n bytes of memory before it reads one
        data = stream.read(min(limit, info.st_size) + 1)
        if len(data) > info.st_size:  # it grew since the look above: read on, by chunks, to its end or the limit
            data += _read_chunks(stream, limit - len(data))
    if len(data) > limit:  # it grew while it was read
        raise ConfigError(f"{subject}is {too_big}", file=path)
    return data


def _is_devnull(path: Path, info: os.stat_result) -> bool:
    """Whether ``path`` (``info``: its ``stat``) is :data:`os.devnull`, through links too."""
    try:
        null = os.stat(os.devnull)
    except OSError:
        return False
    return (info.st_dev, info.st_ino, info.st_rdev) == (null.st_dev, null.st_ino, null.st_rdev) \
        or os.path.realpath(path) == os.devnull


def _read_chunks(stream: BinaryIO, room: int) -> bytes:
    """What ``stream`` holds to its end, read by :data:`_CHUNK`, or the first ``room + 1`` bytes of it (one more
    than may be read: the caller refuses it); never more memory than what was read, and a chunk."""
    parts: list[bytes] = []
    total = 0
    while total <= room:
        part = stream.read(min(_CHUNK, room + 1 - total))
        if not part:
            break
        parts.append(part)
        total += len(part)
    return b"".join(parts)


def _read_pipe(path: Path, limit: int, refusal: str) -> bytes:
    """What a pipe sends until its writer closes it, at most ``limit`` bytes (``refusal`` past them). Opened without
    blocking, so that a named pipe nobody has opened to write does not hang the open; then read blocking, to the
    end of what its writer sends (none: an empty file)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    os.set_blocking(fd, True)
    with os.fdopen(fd, "rb") as stream:
        data = _read_chunks(stream, limit)
    if len(data) > limit:
        raise ConfigError(refusal, file=path)
    return data
