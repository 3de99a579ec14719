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

__all__ = ["held", "write_env_file"]


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
        path.write_text(str(os.getpid()))
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
                if int(path.read_text().strip()) == os.getpid():
                    path.unlink(missing_ok=True)
            except (OSError, ValueError):
                pass
    err_console.print(f"{label} stopped")


def write_env_file(env_file: Path, values: Mapping[str, str]) -> None:
    """``KEY=value`` lines, written beside and renamed into place, so a reader never sees half of it."""
    env_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = env_file.with_name(env_file.name + ".tmp")
    tmp.write_text("".join(f"{key}={value}\n" for key, value in values.items()))
    tmp.replace(env_file)
    console.print(f"environment:    {env_file}", highlight=False)
