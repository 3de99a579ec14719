"""Fixtures for the source tests: real Prometheus servers with backfilled history.

Prometheus is a hard requirement: ``require_binary`` raises when it is missing, so a test
that needs it fails loudly instead of skipping.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import pytest

from gpuaas.cluster.prometheus import PrometheusServer, to_openmetrics
from tests.sources.helpers import Sample


@pytest.fixture(scope="session")
def prometheus_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[list[Sample]], PrometheusServer]]:
    """Start a real Prometheus with the given samples backfilled; all are stopped at session end."""
    servers: list[PrometheusServer] = []
    counter = itertools.count()

    def make(samples: list[Sample]) -> PrometheusServer:
        server = PrometheusServer(tmp_path_factory.mktemp(f"prom{next(counter)}"))
        server.backfill(to_openmetrics(samples))
        server.start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()
