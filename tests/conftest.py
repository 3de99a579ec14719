"""Shared fixtures: real PostgreSQL, real Prometheus, real Pushgateway, Prefect's harness.

Each server starts once per test session, on a free loopback port. A missing binary fails
the test loudly: CI installs them (``make test``), and a skipped test would hide that.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

# A test sets the terminal width it checks; a width inherited from whatever started the test process (a
# parallel worker is started with 80 columns) would be kept by the CLI's console from its import on.
os.environ.pop("COLUMNS", None)

import importlib
import random

import prefect.main  # noqa: F401  (Prefect configures its logging now, before gpuaas.cli sets terminal defaults)
import pytest

from gpuaas.cluster.prometheus import PrometheusServer, to_openmetrics
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.services import postgres_server, pushgateway_server
from gpuaas.settings import GpuaasSettings
from gpuaas.store import Store, open_store

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


def _private_random_for_prefects_threads() -> None:
    """Hypothesis warns that a strategy uses ``random`` when the global state moves while it draws. Once a
    flow has run, Prefect's background threads move it: the events websocket draws every keepalive ping's
    payload from it, and the client its retry jitter. Each of those modules gets a generator of its own,
    so a ping that lands mid-draw is not reported as our strategy's."""
    for name in ("websockets.asyncio.connection", "prefect.utilities.math"):
        importlib.import_module(name).random = random.Random()


_private_random_for_prefects_threads()


def _scope(nodeid: str) -> str:
    """The unit one test process runs whole: a module (its module-scoped servers start once), or every
    module under ``tests/real``, which share one real control plane (a minute or two to start)."""
    path = nodeid.split("::", 1)[0]
    return "tests/real" if path.startswith("tests/real/") else path


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules that hold a slow test go first: in a parallel run (``make test``) their waits (a load
    test holds a rate for 90 s) then overlap the rest of the suite instead of ending the run alone."""
    slow = {item.path for item in items if any(item.get_closest_marker(m) for m in ("slow", "e2e", "real"))}
    items.sort(key=lambda item: item.path not in slow)  # stable: collection order within each part


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadscope`` with :func:`_scope` as the scope, handed out in collection order."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByScope(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    config.option.loadscopereorder = False
    return ByScope(config, log)


@pytest.fixture()
def store(settings: GpuaasSettings) -> Iterator[Store]:
    """The store the test's ``settings`` open (a directory or a module gives its own ``settings``)."""
    opened = open_store(settings)
    yield opened
    opened.close()


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """``../shared``: the upstream fixtures, read in place (never copied into the product)."""
    if not (SHARED / "fixtures").is_dir():
        pytest.fail(f"the shared fixtures are missing: expected {SHARED / 'fixtures'}")
    return SHARED


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads the developer's own data directory or GPUAAS_* variables."""
    for key in list(os.environ):
        if key.startswith("GPUAAS_") and key != "GPUAAS_TEST_POSTGRES_URL":
            monkeypatch.delenv(key)
    # Importing gpuaas.cli quiets Prefect's terminal handler; a Prefect worker or flow process a test starts
    # starts from Prefect's own logging settings.
    monkeypatch.delenv("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", raising=False)
    monkeypatch.delenv("PREFECT_LOGGING_LEVEL", raising=False)
    monkeypatch.setenv("GPUAAS_DATA_DIR", str(tmp_path / "gpuaas-data"))


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL server (started here, or GPUAAS_TEST_POSTGRES_URL)."""
    with postgres_server() as url:
        yield url


@pytest.fixture(scope="session")
def pushgateway_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with pushgateway_server(tmp_path_factory.mktemp("pushgateway")) as url:
        yield url


@pytest.fixture(scope="session")
def prometheus_factory(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[[str | Sequence[tuple[str, dict[str, str], float, float]]], PrometheusServer]]:
    """Start a real Prometheus whose TSDB is first backfilled with ``promtool``.

    Takes OpenMetrics text or ``(metric, labels, value, unix_seconds)`` samples; every server
    started in the session is stopped at its end.
    """
    started: list[PrometheusServer] = []

    def start(history: str | Sequence[tuple[str, dict[str, str], float, float]]) -> PrometheusServer:
        server = PrometheusServer(tmp_path_factory.mktemp(f"prometheus-{len(started)}"))
        server.backfill(history if isinstance(history, str) else to_openmetrics(history))
        server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def reclaim_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    """The reclaim scenario (``tests/actions/reclaim_scenario.py``), one cluster per test module."""
    from gpuaas.cluster.testbed import reclaim_cluster

    with reclaim_cluster(tmp_path_factory.mktemp("reclaim")) as running:
        yield running


@pytest.fixture(scope="session")
def deadline_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    """The deadline scenario (``tests/flows/deadline_scenario.py``), shared by the plan and nudge tests."""
    from tests.flows.deadline_scenario import deadline_cluster

    with deadline_cluster(tmp_path_factory.mktemp("deadlines")) as running:
        yield running


@pytest.fixture(scope="session")
def prefect_harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One Prefect test server for the whole session (it costs ~10 s to start)."""
    os.environ.setdefault("PREFECT_HOME", str(tmp_path_factory.mktemp("prefect-home")))
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
            yield
