"""A PostgreSQL that accepts connections and never answers (a hung host, a half-open firewall) ends a command in
one line naming the database, within the connect timeout, instead of holding it (and a run's writes lock) for as
long as the kernel retries; a timeout the URL sets itself wins."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from gpuaas.store._database import CONNECT_TIMEOUT_S, connect_args

GPUAAS = str(Path(sys.executable).with_name("gpuaas"))


@pytest.fixture()
def silent_port() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts every connection and never sends a byte; closed after the test."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def test_a_database_that_never_answers_ends_the_command_in_one_line(silent_port: int) -> None:
    url = f"postgresql://gpuaas@127.0.0.1:{silent_port}/gpuaas"
    started = time.monotonic()
    run = subprocess.run([GPUAAS, "audit", "list"], env={"GPUAAS_DATABASE_URL": url, "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=CONNECT_TIMEOUT_S * 6)
    took = time.monotonic() - started
    assert run.returncode == 1, run.stderr
    assert run.stderr.startswith("error: ") and f"127.0.0.1:{silent_port}" in run.stderr, run.stderr
    assert "timeout" in run.stderr and "Traceback" not in run.stderr
    assert took < CONNECT_TIMEOUT_S * 4, took  # the timeout, per attempt, not the kernel's minutes


def test_the_urls_own_timeout_wins_and_other_databases_get_none() -> None:
    ours = connect_args(make_url("postgresql+psycopg2://gpuaas@db/gpuaas"))
    assert ours["connect_timeout"] == CONNECT_TIMEOUT_S and ours["keepalives"] == 1
    assert "connect_timeout" not in connect_args(make_url("postgresql+psycopg2://gpuaas@db/gpuaas?connect_timeout=3"))
    assert connect_args(make_url("postgresql+psycopg://gpuaas@db/gpuaas"))["connect_timeout"] == CONNECT_TIMEOUT_S
    assert connect_args(make_url("sqlite:////var/lib/gpuaas/gpuaas.db")) == {}
