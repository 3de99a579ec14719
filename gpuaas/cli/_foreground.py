"""The foreground life of ``gpuaas cluster up``, the same for every backend.

Whichever cluster runs, an operator gets one contract: a stop signal (Ctrl-C, SIGTERM from
``gpuaas cluster down``, SIGHUP of a closed terminal) stops every process it started, the pid
files that ``cluster down`` reads exist exactly while it runs, a cancelled start is a clean stop
rather than an error, and the env file a shell sources appears complete or not at all.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Protocol

from gpuaas.cli._common import console, err_console, fail
from gpuaas.errors import GpuaasError

__all__ = ["PID_LIMIT", "held", "pid_file_text", "read_pid_file", "start_time", "write_env_file"]

PID_LIMIT = 2**22
"""The largest process id Linux gives (``PID_MAX_LIMIT``): a pid file naming more holds no process of ours."""


def start_time(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (``/proc/PID/stat``, field 22); None without it.

    Recorded beside the pid, it tells the process that wrote the pid file from a later one given the same pid."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def pid_file_text() -> str:
    """What a pid file holds: this process's pid and, where ``/proc`` has it, its start time."""
    started = start_time(os.getpid())
    return f"{os.getpid()}\n" if started is None else f"{os.getpid()} {started}\n"


def read_pid_file(text: str) -> tuple[int, int | None] | None:
    """The pid (1 to ``PID_LIMIT``) and start time a pid file holds; None when it holds anything else."""
    parts = text.split()
    if not 1 <= len(parts) <= 2 or not all(p.isascii() and p.isdigit() and len(p) <= 20 for p in parts):
        return None
    pid = int(parts[0])
    if not 1 <= pid <= PID_LIMIT:
        return None
    return pid, int(parts[1]) if len(parts) == 2 else None


class _Stoppable(Protocol):
    def cancel(self) -> None: ...

    def stop(self) -> None: ...


@contextmanager
def held(cluster: _Stoppable, label: str, pid_paths: list[Path],
         cancelled: type[BaseException]) -> Iterator[threading.Event]:
    """Run the ``with`` body as the cluster's foreground: the event it yields is set by a stop signal."""
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        # Only set flags here: start() and wait() notice them and everything is stopped in order.
        stop.set()
        cluster.cancel()

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _on_signal)
    for path in pid_paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")  # renamed into place: 'cluster down' never reads half of it
        tmp.write_text(pid_file_text())
        tmp.replace(path)
    try:
        yield stop
    except cancelled:
        pass
    except GpuaasError as exc:
        raise fail(str(exc)) from exc
    finally:
        cluster.stop()
        for path in pid_paths:
            try:
                recorded = read_pid_file(path.read_text())
                if recorded is not None and recorded[0] == os.getpid():
                    path.unlink(missing_ok=True)
            except (OSError, ValueError):
                pass
    err_console.print(f"{label} stopped")


def write_env_file(env_file: Path, values: Mapping[str, str]) -> None:
    """``KEY=value`` lines, written beside and renamed into place, so a reader never sees half of it."""
    env_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = env_file.with_name(env_file.name + ".tmp")
    try:
        tmp.write_text("".join(f"{key}={value}\n" for key, value in values.items()))
        tmp.replace(env_file)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    console.print(f"environment:    {env_file}", highlight=False)
