"""``gpuaas cluster down`` signals only the ``gpuaas cluster up`` that wrote the pid file.

The pid file is read as a pid from 1 to Linux's largest and the start time ``up`` recorded beside it; the process
must be running, be a ``gpuaas ... cluster up`` by its command line and have started when the file says. Anything
else (garbage, ``-1`` or ``0`` which ``kill`` reads as "every process" or "my group", a pid past any pid, a
process that has exited, a live process of another program) is "no embedded cluster is running", exit 0 as when
there is no pid file, with what was found on the same line; nothing is signalled. ``--timeout`` is checked first.

``os.kill`` is replaced by a recorder that signals only processes these tests started themselves.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli._foreground import PID_LIMIT, pid_file_text, read_pid_file, start_time
from gpuaas.cli.app import app

runner = CliRunner()

NOT_A_PID = "not the pid of a running cluster; removed it)"
NOT_OURS = "which is not the gpuaas cluster started from this data dir; removed it)"


class Kills:
    """``os.kill`` for the test: every call recorded; only the test's own children really signalled, and any other
    pid answered "alive" to signal 0, so that nothing outside the test can be reached whatever the code does."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []
        self.own: set[int] = set()
        self._kill = os.kill

    def __call__(self, pid: int, sig: int) -> None:
        self.calls.append((pid, sig))
        if pid in self.own:
            self._kill(pid, sig)

    @property
    def signalled(self) -> list[tuple[int, int]]:
        return [(pid, sig) for pid, sig in self.calls if sig != 0]


@pytest.fixture
def kills(monkeypatch: pytest.MonkeyPatch) -> Kills:
    recorder = Kills()
    monkeypatch.setattr(os, "kill", recorder)
    return recorder


@pytest.fixture
def spawn(kills: Kills) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Start child processes the test may signal; all gone afterwards."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _child(spawn: list[subprocess.Popen[bytes]], kills: Kills, *argv: str) -> subprocess.Popen[bytes]:
    """A python child sleeping a minute; ``argv`` after its code is what its command line says it is.

    Returned once the child runs that command line: between its fork and its exec it still shows the test's
    own, which ``down`` rightly reads as another program's (on a loaded machine that window is long)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *argv])
    spawn.append(proc)
    kills.own.add(proc.pid)
    wanted = "\0".join(["-c", "import time; time.sleep(60)", *argv]).encode()
    deadline = time.monotonic() + 10
    while wanted not in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
        assert time.monotonic() < deadline, "the child did not start within 10 s"
        time.sleep(0.01)
    return proc


def _down(data: Path, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["cluster", "down", *args], env={"GPUAAS_DATA_DIR": str(data)})
    assert "Traceback" not in result.output
    return result.exit_code, result.stdout, result.stderr


def _pid_file(data: Path, text: str) -> Path:
    path = data / "cluster" / "cluster.pid"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize("text", ["-1", "0", "999999999999999999999", str(PID_LIMIT + 1), "9" * 5000, "abc", "",
                                  "+5", "12x", "1 2 3", "0x10", "١٢"])
def test_a_pid_file_holding_no_pid_is_no_cluster_and_nothing_is_signalled(tmp_path: Path, kills: Kills,
                                                                          text: str) -> None:
    path = _pid_file(tmp_path, text + "\n")
    code, out, err = _down(tmp_path)
    assert (code, err) == (0, "")
    shown = repr(text.strip()[:40])
    assert out.splitlines() == [f"no embedded cluster is running ({path} holds {shown}, {NOT_A_PID}"]
    assert kills.calls == []  # not even signal 0: -1 and 0 are not processes
    assert not path.exists()


def test_a_pid_file_of_a_process_that_exited_is_no_cluster(tmp_path: Path, kills: Kills,
                                                           spawn: list[subprocess.Popen[bytes]]) -> None:
    gone = _child(spawn, kills)
    gone.kill()
    gone.wait()
    kills.calls.clear()
    path = _pid_file(tmp_path, f"{gone.pid}\n")
    code, out, _ = _down(tmp_path)
    assert code == 0
    assert out.splitlines() == [f"no embedded cluster is running ({path} names pid {gone.pid}, which is not running; "
                                "removed it)"]
    assert kills.signalled == []


@pytest.mark.parametrize("token", ["none", "its-own", "wrong"])
def test_a_live_process_of_another_program_is_not_signalled(tmp_path: Path, kills: Kills,
                                                            spawn: list[subprocess.Popen[bytes]], token: str) -> None:
    """A pid since given to another program: with no start time, its own (as if forged) or another one."""
    other = _child(spawn, kills, "not", "a", "cluster")
    started = start_time(other.pid)
    assert started is not None
    recorded = {"none": "", "its-own": f" {started}", "wrong": f" {started + 1}"}[token]
    path = _pid_file(tmp_path, f"{other.pid}{recorded}\n")
    code, out, err = _down(tmp_path)
    assert (code, err) == (0, "")
    assert out.splitlines() == [f"no embedded cluster is running ({path} names pid {other.pid}, {NOT_OURS}"]
    assert kills.signalled == []
    assert other.poll() is None


def test_a_cluster_up_started_after_the_pid_file_was_written_is_not_signalled(
        tmp_path: Path, kills: Kills, spawn: list[subprocess.Popen[bytes]]) -> None:
    """The pid is a ``gpuaas cluster up`` now, but not the one that wrote the file (it started at another time):
    another data dir's cluster, given the pid after this one's exited."""
    other = _child(spawn, kills, "gpuaas", "cluster", "up")
    started = start_time(other.pid)
    assert started is not None
    path = _pid_file(tmp_path, f"{other.pid} {started + 1}\n")
    code, out, _ = _down(tmp_path)
    assert code == 0 and out.splitlines() == [f"no embedded cluster is running ({path} names pid {other.pid}, "
                                              f"{NOT_OURS}"]
    assert kills.signalled == [] and other.poll() is None


@pytest.mark.parametrize("with_start_time", [True, False], ids=["pid-and-start-time", "pid-only"])
def test_the_cluster_up_that_wrote_the_pid_file_is_stopped(tmp_path: Path, kills: Kills,
                                                           spawn: list[subprocess.Popen[bytes]],
                                                           with_start_time: bool) -> None:
    """What ``up`` writes (its pid and start time; a pid alone from an older ``up``) names it, and it is stopped."""
    up = _child(spawn, kills, "/venv/bin/gpuaas", "cluster", "up", "--history", "10m")
    started = start_time(up.pid)
    _pid_file(tmp_path, f"{up.pid} {started}\n" if with_start_time else f"{up.pid}\n")
    code, out, err = _down(tmp_path, "--timeout", "10")
    assert (code, err) == (0, ""), err
    assert out.splitlines() == [f"stopped (pid {up.pid})"]
    assert kills.signalled == [(up.pid, signal.SIGTERM)]
    assert up.wait(timeout=10) == -signal.SIGTERM


@pytest.mark.parametrize("value", ["nan", "-1", "inf", "-inf"])
def test_a_timeout_that_is_no_number_of_seconds_is_refused_before_anything_is_signalled(
        tmp_path: Path, kills: Kills, spawn: list[subprocess.Popen[bytes]], value: str) -> None:
    up = _child(spawn, kills, "gpuaas", "cluster", "up")
    path = _pid_file(tmp_path, f"{up.pid} {start_time(up.pid)}\n")
    code, out, err = _down(tmp_path, "--timeout", value)
    assert code == 2 and out == ""
    [line] = err.strip().splitlines()
    assert line.startswith("error: Invalid value for '--timeout': ") and f"'{value}'" in line
    assert kills.calls == [] and up.poll() is None and path.exists()


def test_up_writes_its_pid_and_start_time_and_down_reads_them() -> None:
    pid, started = read_pid_file(pid_file_text()) or (None, None)
    assert pid == os.getpid() and started == start_time(os.getpid()) and started is not None
    assert read_pid_file("42\n") == (42, None)
    assert read_pid_file(f"{PID_LIMIT}\n") == (PID_LIMIT, None)
    for text in ("0", "-1", f"{PID_LIMIT + 1}", "1 2 3", "", "1e3", "42 x"):
        assert read_pid_file(text) is None, text
