"""The processes of the real control plane: started in their own session, logged to a file, stopped in order.

Each runs in a new session so that a Ctrl-C in the terminal reaches only ``gpuaas cluster up``, which
then stops them newest first: SIGTERM, a grace period, then SIGKILL. A process that exits while we
wait for it to become ready fails the start with the tail of its log, never a traceback.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from gpuaas.errors import PermanentError

__all__ = ["Process", "StartError"]


class StartError(PermanentError):
    """A process of the real control plane did not start or did not become ready."""


class Process:
    """One child process with its log file."""

    def __init__(self, name: str, argv: Sequence[str], log_dir: Path, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_dir / f"{name}.log"
        self.env = env
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as log:
            try:
                self._proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                              start_new_session=True, env=self.env)
            except OSError as exc:
                raise StartError(f"cannot start {self.name} ({self.argv[0]}): {exc.strerror}") from exc

    def log_tail(self, lines: int = 5) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(line[:300] for line in text[-lines:])

    def wait_ready(self, ready: Callable[[], bool], timeout: float) -> None:
        """Poll ``ready`` until it is true; fail if the process exits or the time runs out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                code = self._proc.returncode if self._proc else None
                raise StartError(f"{self.name} exited with {code} while starting: {self.log_tail()}")
            try:
                if ready():
                    return
            except Exception:  # noqa: BLE001 - not up yet: connection refused, TLS not ready, 5xx
                pass
            time.sleep(0.2)
        raise StartError(f"{self.name} not ready after {timeout:.0f} s: {self.log_tail()}")

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self, grace: float = 10.0) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=grace)
