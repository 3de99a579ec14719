"""Real services on loopback for the tests and the benchmarks: PostgreSQL, the Pushgateway, a Prefect server.

They are real servers, never stand-ins: the store must see PostgreSQL's own behaviour
(transactional DDL, triggers, types), and the collect flow pushes to the real Pushgateway.
They live in the product, next to the Prometheus launcher (``gpuaas.cluster.prometheus``),
so that the test suite and ``bench/`` start them with one implementation and a benchmark
never imports the test suite. A missing binary is a ``GpuaasError`` that says what to install.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from gpuaas.cluster.prometheus import free_port, require_binary
from gpuaas.errors import GpuaasError

__all__ = [
    "as_postgres_user", "fresh_schema_url", "pg_bin", "postgres_server", "prefect_server", "pushgateway_server",
    "server_process", "stop_session",
]


def pg_bin(name: str) -> str:
    """Path of a PostgreSQL server program (Debian keeps them under /usr/lib/postgresql/<version>/bin)."""
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    found = candidates[0] if candidates else shutil.which(name)
    if not found:
        raise GpuaasError(f"PostgreSQL's {name} is not installed (Debian: apt-get install postgresql)")
    return found


def as_postgres_user(cmd: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root; as root we drop to the 'postgres' account."""
    if os.geteuid() != 0:
        return cmd
    return ["runuser", "-u", "postgres", "--", *cmd]


@contextmanager
def postgres_server() -> Iterator[str]:
    """A throwaway PostgreSQL cluster on a free loopback port; yields a SQLAlchemy URL.

    ``GPUAAS_TEST_POSTGRES_URL`` points the tests and benchmarks at a server that is already running
    instead (the test suite passes its own to the benchmarks it runs, saving a cluster's start).
    """
    existing = os.environ.get("GPUAAS_TEST_POSTGRES_URL")
    if existing:
        yield existing
        return
    # A caller's temp dirs may be private to root; the postgres account needs its own.
    base = Path(tempfile.mkdtemp(prefix="gpuaas-pg-"))
    data, sock = base / "pgdata", base / "pgsock"
    sock.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        pg = pwd.getpwnam("postgres")
        for path in (base, sock):
            os.chown(path, pg.pw_uid, pg.pw_gid)
    port = free_port()
    subprocess.run(
        as_postgres_user([pg_bin("initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"]),
        check=True, capture_output=True,
    )
    log = base / "postgres.log"
    subprocess.run(
        as_postgres_user([
            pg_bin("pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60",
            "-o", f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off", "start",
        ]),
        check=True, capture_output=True,
    )
    try:
        subprocess.run(
            as_postgres_user([pg_bin("createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "gpuaas"]),
            check=True, capture_output=True,
        )
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/gpuaas"
    finally:
        subprocess.run(
            as_postgres_user([pg_bin("pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]),
            check=False, capture_output=True,
        )
        shutil.rmtree(base, ignore_errors=True)


def fresh_schema_url(base_url: str, name: str) -> str:
    """A URL whose connections use a new, empty schema ``name``: independent tests on one server."""
    from sqlalchemy import create_engine, text

    admin = create_engine(base_url)
    with admin.begin() as conn:
        conn.execute(text(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))
        conn.execute(text(f'CREATE SCHEMA "{name}"'))
    admin.dispose()
    return f"{base_url}?options=-csearch_path%3D{name}"


@contextmanager
def server_process(cmd: list[str], ready_url: str, log: Path, what: str, *, timeout_s: float = 30.0,
                   env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """``cmd`` in a session of its own, output to ``log``, until ``ready_url`` answers 200; stopped on exit.

    Every server the tests and benchmarks start as a subprocess (the Pushgateway, ``prefect server
    start``) is waited for and stopped here, once: its own session so that stopping it stops the
    workers it forked (:func:`stop_session`). A server that exits or is not ready within ``timeout_s``
    is a ``GpuaasError`` naming ``what`` and its log.
    """
    with log.open("wb") as sink:
        proc = subprocess.Popen(cmd, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    if httpx.get(ready_url, timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise GpuaasError(f"{what} did not start within {timeout_s:g} s; see {log}")
                time.sleep(0.1)
            yield proc
        finally:
            stop_session(proc)


def stop_session(proc: subprocess.Popen[bytes]) -> None:
    """Stop a process started with ``start_new_session=True`` and all it forked: SIGTERM, then SIGKILL after 30 s."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


@contextmanager
def pushgateway_server(base: Path) -> Iterator[str]:
    """Debian's prometheus-pushgateway on a free loopback port, holding its groups in memory only; yields its URL.

    Debian's build persists them to ``/var/lib/prometheus/pushgateway.data`` by default: every
    server started so would begin with the groups the last one pushed, on any run of the machine."""
    url = f"http://127.0.0.1:{free_port()}"
    cmd = [require_binary("prometheus-pushgateway"), f"--web.listen-address={url.removeprefix('http://')}",
           "--persistence.file="]
    with server_process(cmd, f"{url}/-/ready", base / "pushgateway.log", "pushgateway"):
        yield url


@contextmanager
def prefect_server(env: dict[str, str], log: Path, timeout_s: float = 180.0) -> Iterator[str]:
    """``prefect server start`` (with its background services) on a free loopback port; yields its API URL.

    A subprocess, so the library still never imports Prefect; ``env`` carries its settings (its
    ``PREFECT_HOME``, its database) and gets ``PREFECT_API_URL`` pointed at it.
    """
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    cmd = [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    with server_process(cmd, f"{api}/health", log, "prefect server", timeout_s=timeout_s,
                        env={**env, "PREFECT_API_URL": api}):
        yield api
