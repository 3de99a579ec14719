"""The Prefect servers the benchmarks start, beside the product's PostgreSQL and Prometheus launchers.

PostgreSQL, the Pushgateway and Prometheus are started by ``gpuaas.cluster.services`` and
``gpuaas.cluster.prometheus`` (the tests use the same ones). A Prefect server cannot live there: the
library never imports Prefect. Two kinds are needed, and each is started once, here:

* :func:`prefect_server_on_postgres`: Prefect's own API server whose database is PostgreSQL. Prefect's
  test harness keeps its state in SQLite, and 20 flow processes writing flow, task and log rows at
  once make it answer ``503 Service Unavailable`` (its SQLITE_BUSY) past the client's retries, so a
  run would fail on the orchestrator, not on gpuaas's store.
* :func:`prefect_server_process`: ``prefect server start`` with its background services (the
  repossessor that revokes expired concurrency leases), which the API-only servers do not run.

A smoke run (:func:`smoke_prefect_api`) uses the Prefect API its caller already runs, if any: the test
suite runs every benchmark at its smallest size and has a Prefect server up, and starting three more
would cost it most of its time budget. Full runs always start their own: their figures depend on it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from gpuaas.cluster.prometheus import free_port
from gpuaas.errors import GpuaasError

__all__ = ["prefect_server_on_postgres", "prefect_server_process", "smoke_prefect_api"]


def smoke_prefect_api(smoke: bool) -> str | None:
    """``PREFECT_API_URL`` when this is a smoke run and it is set; else None (start a server)."""
    return (os.environ.get("PREFECT_API_URL") or None) if smoke else None


@contextmanager
def prefect_server_on_postgres(postgres_url: str, database: str = "prefect_overlap") -> Iterator[str]:
    """A Prefect API server (Prefect's own subprocess server) on a fresh PostgreSQL database; yields its API URL."""
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_DATABASE_CONNECTION_URL, temporary_settings
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{database}"'))
        conn.execute(text(f'CREATE DATABASE "{database}"'))
    admin.dispose()
    url = make_url(postgres_url).set(drivername="postgresql+asyncpg", database=database, query={})
    with temporary_settings(updates={PREFECT_SERVER_DATABASE_CONNECTION_URL: url.render_as_string(hide_password=False)}):
        server = SubprocessASGIServer(port=free_port())
        server.start(timeout=180)
    try:
        with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
            yield server.api_url
    finally:
        server.stop()


@contextmanager
def prefect_server_process(env: dict[str, str], log: Path, timeout_s: float = 180.0) -> Iterator[str]:
    """``prefect server start`` on a free loopback port with ``env`` (its settings); yields its API URL.

    It runs in a session of its own so that stopping it stops its workers too; its output goes to
    ``log``, which the error names when it does not become healthy within ``timeout_s``.
    """
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    with log.open("wb") as sink:
        server = subprocess.Popen([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
                                   "--port", str(port)], env={**env, "PREFECT_API_URL": api}, stdout=sink,
                                  stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    if httpx.get(f"{api}/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline or server.poll() is not None:
                    raise GpuaasError(f"prefect server did not start within {timeout_s:g} s; see {log}")
                time.sleep(0.5)
            yield api
        finally:
            if server.poll() is None:
                os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(10)
