"""The PostgreSQL store restarted during a reclaim apply.

This module starts a PostgreSQL server of its own (the session's may be a shared one,
``GPUAAS_TEST_POSTGRES_URL``, that a test must not restart). The API proxy pauses the run's
first PATCH, after its audit intent was committed; meanwhile the test:

* restarts the server (``pg_ctl restart -m fast``): every pooled connection is dead when the run
  writes its next audit row. The run reconnects and completes;
* stops it, lets the PATCH land, and starts it again only once the run is over: the run (its own
  process, as a worker's would be) fails at its next audit row, and names the database.

Then the next run (the server up) finishes the job. After it: every idle target of the scenario
(what a run with no fault stops) is stopped, each by exactly one PATCH that reached the API, each
with an applied audit row, no intent left open and no idempotency key applied twice.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from gpuaas.cluster.fault_proxy import FaultProxy, fault_proxy
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.services import as_postgres_user, fresh_schema_url, pg_bin, postgres_server
from gpuaas.cluster.testbed import reclaim_cluster, write_policy
from gpuaas.settings import load_settings
from gpuaas.store import AuditEntry, Store
from tests.actions.reclaim_scenario import IDLE_TARGETS, target_of
from tests.faults.kill import flow_process, stopped, written_name

pytestmark = [pytest.mark.integration, pytest.mark.flow]


class Postgres:
    """The module's server: its URL, and stop/start/restart with the options it was started with."""

    def __init__(self, url: str) -> None:
        self.url = url
        engine = create_engine(url)
        with engine.connect() as conn:
            self.data = Path(str(conn.execute(text("SHOW data_directory")).scalar_one()))
        engine.dispose()
        # postmaster.opts: the command line it runs with (port, socket, listen address); start reuses it.
        argv = shlex.split((self.data / "postmaster.opts").read_text())[1:]
        self.options = " ".join(shlex.quote(a) for a in argv if a != "-D" and a != str(self.data))
        self.log = self.data.parent / "postgres.log"

    def _ctl(self, *args: str) -> None:
        subprocess.run(as_postgres_user([pg_bin("pg_ctl"), "-D", str(self.data), "-w", "-t", "60", *args]),
                       check=True, capture_output=True, timeout=90)

    def stop(self) -> None:
        self._ctl("-m", "fast", "stop")

    def start(self) -> None:
        self._ctl("-l", str(self.log), "-o", self.options, "start")

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    shared = os.environ.pop("GPUAAS_TEST_POSTGRES_URL", None)
    try:
        server = postgres_server()
        url = server.__enter__()
    finally:
        if shared is not None:
            os.environ["GPUAAS_TEST_POSTGRES_URL"] = shared
    try:
        yield Postgres(url)
    finally:
        server.__exit__(None, None, None)


@pytest.fixture()
def fleet(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    """A fresh reclaim fleet per test: each apply stops every idle target."""
    with reclaim_cluster(tmp_path / "fleet") as running:
        yield running


@pytest.fixture()
def kube(fleet: EmbeddedCluster, postgres: Postgres, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
         prefect_harness: None, request: pytest.FixtureRequest) -> Iterator[FaultProxy]:
    """Settings on a fresh schema of the module's server, the API through a fault proxy."""
    with fault_proxy(fleet.api_url) as proxy:
        env = {**fleet.settings_env(), "GPUAAS_NVML": "off",
               "GPUAAS_DATABASE_URL": fresh_schema_url(postgres.url, request.node.callspec.id.replace("-", "_")),
               "GPUAAS_POLICY_FILE": str(write_policy(tmp_path / "policy.yaml", max_actions_per_run=20)),
               "GPUAAS_KUBECONFIG": str(proxy.kubeconfig(fleet.kubeconfig, tmp_path / "kubeconfig")),
               "GPUAAS_REQUEST_TIMEOUT_SECONDS": "30", "GPUAAS_RETRIES": "1", "GPUAAS_RETRY_BACKOFF_SECONDS": "0"}
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        yield proxy


def _while_paused(proxy: FaultProxy, action: Any) -> threading.Thread:
    """Pause the run's first PATCH; ``action()`` runs meanwhile, then the PATCH goes on to the server."""
    proxy.arm("pause", 1, method="PATCH")

    def run() -> None:
        try:
            if proxy.held.wait(timeout=120):
                action()
        finally:
            proxy.release.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _rows() -> list[AuditEntry]:
    store = Store(load_settings().database_url_value)
    try:
        return [r for r in store.audit(limit=None) if r.mode == "apply" and r.action == "reclaim"]
    finally:
        store.close()


@pytest.mark.parametrize("fault", ["restarted-between-steps", "down-at-the-next-write"])
def test_a_postgres_restart_mid_run_writes_nothing_twice_and_the_next_run_converges(
        fault: str, fleet: EmbeddedCluster, kube: FaultProxy, postgres: Postgres) -> None:
    from flows.reclaim import reclaim

    at = fleet.clock.now()
    if fault == "restarted-between-steps":
        paused = _while_paused(kube, postgres.restart)
        first = reclaim(apply=True, at=at)  # in this process: its pool holds connections the restart killed
        paused.join(timeout=120)
        assert {target_of(d) for d in first["decisions"] if d["result"] == "applied"} == IDLE_TARGETS
    else:
        paused = _while_paused(kube, postgres.stop)
        child = flow_process(["reclaim", at.isoformat()])
        _, err = child.communicate(timeout=300)
        paused.join(timeout=120)
        postgres.start()
        assert child.returncode != 0, "the run claimed success with its database down"
        assert b"OperationalError" in err or b"database" in err, err[-2000:]
    assert kube.hits, "the run never wrote"

    again = {target_of(d) for d in reclaim(apply=True, at=at)["decisions"] if d["result"] == "applied"}
    if fault == "restarted-between-steps":
        assert again == set(), "the run after a completed one acted again"
    assert {(kind, name) for kind, name in IDLE_TARGETS if stopped(fleet, kind, name)} == IDLE_TARGETS
    written = {written_name(fleet, kind, name): name for kind, name in IDLE_TARGETS}
    patches = Counter(name for h in [*kube.hits, *kube.relayed] if h.method == "PATCH"
                      for path_name, name in written.items() if h.path.partition("?")[0].endswith(f"/{path_name}"))
    assert patches == Counter({name: 1 for _, name in IDLE_TARGETS}), "a target was written twice (or never)"
    rows = _rows()
    applied = {r.name for r in rows if r.outcome == "applied"}
    assert applied == set(written), "a write without its audit row"
    intents = [r for r in rows if r.outcome == "planned"]
    closed = {r.refers_to for r in rows if r.refers_to is not None}
    assert all(i.id in closed for i in intents), "an intent left open"
    keys = Counter(r.idempotency_key for r in rows if r.outcome == "applied")
    assert max(keys.values()) == 1, keys.most_common(2)
