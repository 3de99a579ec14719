"""The Prefect server on PostgreSQL that the overlap benchmark needs, and the smoke run's Prefect API.

PostgreSQL, the Pushgateway, Prometheus and ``prefect server start`` are started by
``gpuaas.cluster.services`` and ``gpuaas.cluster.prometheus`` (the tests use the same ones). This one
cannot live there: it runs Prefect's server class in-process, and the library never imports Prefect.

:func:`prefect_server_on_postgres` is Prefect's own API server whose database is PostgreSQL. Prefect's
test harness keeps its state in SQLite, and 20 flow processes writing flow, task and log rows at
once make it answer ``503 Service Unavailable`` (its SQLITE_BUSY) past the client's retries, so a
run would fail on the orchestrator, not on gpuaas's store.

A smoke run (:func:`smoke_prefect_api`) uses the Prefect API its caller already runs, if any: the test
suite runs every benchmark at its smallest size and has a Prefect server up, and starting three more
would cost it most of its time budget. Full runs always start their own: their figures depend on it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from gpuaas.cluster.prometheus import free_port

__all__ = ["prefect_server_on_postgres", "smoke_prefect_api"]


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
