"""Who holds the ``cluster-writes`` lock, and whether that holder is still alive.

The lock row expires after its TTL (15 minutes), which covers a holder on another machine. A
holder killed on *this* machine (SIGKILL, the OOM killer, a node drain of a worker pod that
restarts in place) is known dead at once: its process id is gone. Taking its lock over
immediately lets the next run recover the half-done action now, instead of refusing every
write for the rest of the TTL. Recovery itself is safe to run: it reads back before writing.
"""

from __future__ import annotations

import os
import socket
import uuid

__all__ = ["holder_is_dead", "new_holder"]


def new_holder(flow: str) -> str:
    """``flow-<uuid>@<host>:<pid>``: unique per run, and traceable to its process."""
    return f"{flow}-{uuid.uuid4()}@{socket.gethostname()}:{os.getpid()}"


def holder_is_dead(holder: str) -> bool:
    """True only for a holder of this host whose process no longer exists (never guessed otherwise)."""
    _, sep, where = holder.rpartition("@")
    host, sep2, pid_text = where.rpartition(":")
    if not sep or not sep2 or host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, someone else's
        return False
    return _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False
