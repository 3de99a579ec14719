"""Who holds the ``cluster-writes`` lock, and whether that holder is still alive.

The lock row expires after its TTL (15 minutes), which covers a holder on another machine. A
holder killed on *this* machine (SIGKILL, the OOM killer, a node drain of a worker pod that
restarts in place) is known dead at once: its process id is gone. Taking its lock over
immediately lets the next run recover the half-done action now, instead of refusing every
write for the rest of the TTL. Recovery itself is safe to run: it reads back before writing.

"This machine" is the host name *and* the PID namespace: two containers can share a host name
(host networking) while each sees only its own processes, and a process id missing from one
namespace may be alive in the other. Where the namespace cannot be read, nothing is proven dead
and the TTL decides.
"""

from __future__ import annotations

import os
import socket
import uuid

__all__ = ["holder_is_dead", "new_holder"]


def _pid_namespace() -> str:
    """``pid:[4026531836]``, the kernel's name of this process's PID namespace; empty where it cannot be read."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def _here() -> str:
    namespace = _pid_namespace()
    return f"{socket.gethostname()}/{namespace}" if namespace else socket.gethostname()


def new_holder(flow: str) -> str:
    """``flow-<uuid>@<host>/<pid namespace>:<pid>``: unique per run, and traceable to its process."""
    return f"{flow}-{uuid.uuid4()}@{_here()}:{os.getpid()}"


def holder_is_dead(holder: str) -> bool:
    """True only for a holder of this host and PID namespace whose process no longer exists (never guessed
    otherwise: a holder of another namespace, or written where none could be read, waits for its TTL)."""
    _, sep, where = holder.rpartition("@")
    place, sep2, pid_text = where.rpartition(":")
    if not sep or not sep2 or not pid_text.isdigit() or not _pid_namespace() or place != _here():
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
