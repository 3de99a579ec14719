"""Whether the holder of the writes lock is dead is proven on this host and PID namespace only.

Two containers can share a host name (host networking) and still see different processes: a process
id missing here may be alive there, and taking its lock would put two writers on the cluster.
"""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from gpuaas.actions import _lock_owner
from gpuaas.actions._lock_owner import holder_is_dead, new_holder


def _a_dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True, timeout=60)
    return int(proc.stdout)


def test_a_holder_of_this_namespace_whose_process_is_gone_is_dead() -> None:
    mine = new_holder("reclaim")
    pid = _a_dead_pid()
    assert holder_is_dead(f"{mine.rpartition(':')[0]}:{pid}")
    assert not holder_is_dead(mine)  # this very process


def test_a_holder_of_another_pid_namespace_on_the_same_host_is_never_proven_dead() -> None:
    pid = _a_dead_pid()
    assert not holder_is_dead(f"reclaim-1@{socket.gethostname()}/pid:[1]:{pid}")
    assert not holder_is_dead(f"reclaim-1@{socket.gethostname()}:{pid}")  # a holder that named no namespace


def test_where_the_namespace_cannot_be_read_the_lease_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    pid = _a_dead_pid()
    monkeypatch.setattr(_lock_owner, "_pid_namespace", lambda: "")
    assert not holder_is_dead(f"{new_holder('reclaim').rpartition(':')[0]}:{pid}")
