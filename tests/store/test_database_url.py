"""A PostgreSQL URL that names no driver opens the store with the driver gpuaas installs (psycopg2).

SQLAlchemy on its own gives ``postgresql://`` the psycopg 3 driver, which is not installed, and does not
know ``postgres://``; a driver the URL names is the user's choice and stays as given.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import SecretStr
from sqlalchemy.engine import make_url

from gpuaas.cluster.services import fresh_schema_url
from gpuaas.errors import StoreError
from gpuaas.settings import GpuaasSettings
from gpuaas.store import AuditEntry, Store, open_store
from gpuaas.store._database import engine_url


@pytest.mark.parametrize(("given", "driver"), [
    ("postgresql://gpuaas:s3cret@db.example:5433/gpuaas?sslmode=require", "postgresql+psycopg2"),
    ("postgres://gpuaas:s3cret@db.example:5433/gpuaas?sslmode=require", "postgresql+psycopg2"),
    ("postgresql+psycopg2://gpuaas:s3cret@db.example:5433/gpuaas?sslmode=require", "postgresql+psycopg2"),
    ("postgresql+psycopg://gpuaas:s3cret@db.example:5433/gpuaas?sslmode=require", "postgresql+psycopg"),
], ids=["bare postgresql", "bare postgres", "explicit psycopg2", "explicit psycopg"])
def test_only_a_url_naming_no_driver_gets_psycopg2_and_nothing_else_changes(given: str, driver: str) -> None:
    url = engine_url(given)
    assert url.drivername == driver
    assert (url.username, url.password, url.host, url.port, url.database) == ("gpuaas", "s3cret", "db.example",
                                                                              5433, "gpuaas")
    assert dict(url.query) == {"sslmode": "require"}


@pytest.mark.parametrize("given", ["sqlite:////var/lib/gpuaas/gpuaas.db", "sqlite:///relative.db", "sqlite://"])
def test_a_sqlite_url_is_untouched(given: str) -> None:
    assert engine_url(given) == make_url(given)


def test_an_unparsable_url_is_still_a_store_error() -> None:
    with pytest.raises(StoreError, match="cannot open database"):
        Store("not a database url", migrate=False)


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_a_bare_url_of_the_real_postgresql_opens_the_store_for_writing_and_reading(
        postgres_url: str, scheme: str) -> None:
    with_driver = fresh_schema_url(postgres_url, f"bare_url_{scheme}")
    parsed = make_url(with_driver)
    bare = parsed.render_as_string(hide_password=False).replace(f"{parsed.drivername}://", f"{scheme}://", 1)
    assert bare.startswith(f"{scheme}://")  # the URL under test names no driver
    when = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

    writer = Store(bare)
    assert writer.engine.dialect.name == "postgresql" and writer.engine.dialect.driver == "psycopg2"
    written = writer.append(AuditEntry(flow="reclaim", action="reclaim", kind="RayCluster", namespace="team-a",
                                       name="train-7", mode="dry-run", outcome="planned", reason="idle 45m",
                                       created_at=when))
    writer.close()

    # As an operator sets it: GPUAAS_DATABASE_URL, read by a command that only reads.
    reader = open_store(GpuaasSettings(database_url=SecretStr(bare)), read_only=True)
    try:
        assert [(e.id, e.name, e.created_at) for e in reader.audit()] == [(written.id, "train-7", when)]
    finally:
        reader.close()
