"""A store on each backend for the operations whose audit reads pull ``evidence`` fields out in SQL, which each
dialect spells its way: a file SQLite database and a fresh schema of the suite's PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuaas.cluster.services import fresh_schema_url
from gpuaas.store import Store


@pytest.fixture(params=["sqlite", "postgresql"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/gpuaas.db"
    else:
        url = fresh_schema_url(request.getfixturevalue("postgres_url"), f"s_{abs(hash(request.node.nodeid)) % 10**10}")
    opened = Store(url)
    yield opened
    opened.close()
