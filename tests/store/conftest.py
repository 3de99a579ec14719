"""The store tests run on both backends: a file SQLite database and a fresh schema of the suite's PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuaas.cluster.services import fresh_schema_url
from gpuaas.store import Store


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/gpuaas.db"
        return
    base_url: str = request.getfixturevalue("postgres_url")
    yield fresh_schema_url(base_url, f"s_{abs(hash(request.node.nodeid)) % 10**10}")


@pytest.fixture()
def store(db_url: str) -> Iterator[Store]:
    opened = Store(db_url)
    yield opened
    opened.close()
