"""Reading an input file a person names (a policy, a planner problem, a trace, a sweep) without reading forever.

Why: ``/dev/zero`` never ends, ``/dev/urandom`` neither, a pipe or a terminal may never answer, and a file of
tens of gigabytes is a wrong path, not an input; read whole, each ends in a ``MemoryError`` or a command
that hangs. The shared readers (:mod:`gpuaas._yaml`, :mod:`gpuaas.sources.csv_table`) take the bytes from
here: a device or socket, or a file larger than the reader's limit, is refused with one ``ConfigError``
naming it, before anything is read from it (and a file that grows while it is read is cut at the limit and
refused the same way). A pipe is read, as ``<(kubectl get configmap …)`` or ``/dev/stdin`` gives one, up to the
limit: one that sends more is refused the same way, one that nobody writes is an empty file, never a hang.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

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

_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _size(count: int) -> str:
    if count >= 2**30:
        return f"{count / 2**30:,.4g} GiB"
    return f"{count / 2**20:,.4g} MiB" if count >= 2**20 else f"{count:,} bytes"


def read_input_bytes(path: Path, limit: int, what: str | None = None) -> bytes:
    """The bytes of ``path``; a ``ConfigError`` naming it, before anything is read, when it is a device or a socket
    (``is a character device, not a regular file``) or holds more than ``limit`` bytes (a pipe: sends more).
    ``what``: the file's role
    (``policy file``), said first. An ``OSError`` (no such file, permission denied, a directory) is the caller's
    to word, as it words one from ``open``."""
    info = path.stat()  # follows links: a link to a regular file is one
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    subject = f"{what} " if what else ""
    too_big = f"larger than the {_size(limit)} an input file of this kind may hold: is it the right file?"
    if stat.S_ISFIFO(info.st_mode):
        return _read_pipe(path, limit, f"{subject}is {too_big}")
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "a special file")
        raise ConfigError(f"{subject}is {kind}, not a regular file: give the file itself", file=path)
    if info.st_size > limit:
        raise ConfigError(f"{subject}is {info.st_size:,} bytes, {too_big}", file=path)
    # without blocking: a pipe put in its place since the look above must not hang the open (a file ignores it)
    with open(path, "rb", opener=lambda name, flags: os.open(name, flags | os.O_NONBLOCK)) as stream:
        if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):  # replaced between the two looks
            raise ConfigError(f"{subject}is not a regular file: give the file itself", file=path)
        data = stream.read(limit + 1)
    if len(data) > limit:  # it grew while it was read
        raise ConfigError(f"{subject}is {too_big}", file=path)
    return data


def _read_pipe(path: Path, limit: int, refusal: str) -> bytes:
    """What a pipe sends until its writer closes it, at most ``limit`` bytes (``refusal`` past them). Opened without
    blocking, so that a named pipe nobody has opened to write does not hang the open; then read blocking, to the
    end of what its writer sends (none: an empty file)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    os.set_blocking(fd, True)
    with os.fdopen(fd, "rb") as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise ConfigError(refusal, file=path)
    return data
