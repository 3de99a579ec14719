"""Operating gpuaas: a cycle on PostgreSQL with planted secrets, and one writer at a time.

One embedded cluster for the module. First, collect -> reclaim --apply -> undo with the store on
the test suite's real PostgreSQL, the database password and the Prometheus and OpenCost tokens from
Prefect Secret blocks and the webhook URL from the environment: none of the four appears in the flow
runs' logs, the artifacts, the audit rows or the CLI's output.

Then write concurrency:
Two overlapping reclaim runs in apply mode against the embedded cluster (the first is held
inside its write step): the second waits its bounded ``GPUAAS_WRITES_WAIT_SECONDS``, ends with a
message naming the busy lock, and makes no write and no audit row; the first writes. A store lock
left by a process killed with SIGKILL blocks writers until its lease expires, then is taken over
(the expiry checked at a given ``now``, not by sleeping out the lease).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.testbed import write_policy
from gpuaas.settings import load_settings
from gpuaas.store import open_store
from tasks.writes import CONCURRENCY_LIMIT, LOCK
from tests.actions.reclaim_scenario import writes
from tests.flows.conftest import Received
from tests.scenarios import point_at

pytestmark = [pytest.mark.integration, pytest.mark.flow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster(reclaim_fleet: EmbeddedCluster) -> EmbeddedCluster:
    return reclaim_fleet


@pytest.fixture()
def pointed_at(cluster: EmbeddedCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> EmbeddedCluster:
    monkeypatch.setenv("GPUAAS_WRITES_WAIT_SECONDS", "1")
    return point_at(cluster, monkeypatch, policy_file=write_policy(tmp_path / "policy.yaml", max_actions_per_run=1))


SECRETS = {"db": "db-pw-7f3a9c", "token": "prom-token-5d21e8", "opencost": "opencost-token-9b47d2",
           "hook": "hook-token-c0ffee"}


def _own_database(postgres_url: str) -> str:
    """A database of its own on the suite's server, so no other test's rows mix in."""
    import uuid

    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"gpuaas_ops_{uuid.uuid4().hex[:8]}"
    engine = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return make_url(postgres_url).set(database=name, password=None).render_as_string(hide_password=False)


def test_a_cycle_on_postgresql_never_shows_a_secret(cluster: EmbeddedCluster, postgres_url: str, tmp_path: Path,
                                                     prefect_harness: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.blocks.system import Secret
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    from flows.reclaim import reclaim
    from gpuaas.settings import SECRET_BLOCKS

    url = _own_database(postgres_url)  # trust auth: the planted password is sent and accepted
    point_at(cluster, monkeypatch, policy_file=write_policy(tmp_path / "policy.yaml", max_actions_per_run=1),
             database_url=url)
    monkeypatch.setenv("GPUAAS_NOTIFY_WEBHOOK_URL", f"http://127.0.0.1:9/hook?token={SECRETS['hook']}")
    Secret(value=SECRETS["db"]).save(SECRET_BLOCKS["database_password"], overwrite=True)
    Secret(value=SECRETS["token"]).save(SECRET_BLOCKS["prometheus_token"], overwrite=True)
    Secret(value=SECRETS["opencost"]).save(SECRET_BLOCKS["opencost_token"], overwrite=True)
    try:
        first = reclaim(apply=True, at=datetime.now(UTC), return_state=True)
        assert first.is_completed(), first.message
        applied = [d for d in first.result()["decisions"] if d["result"] == "applied"]
        assert len(applied) == 1
        undo = reclaim(undo=[applied[0]["audit_id"]], return_state=True)
        assert undo.result()["undo"][0]["result"] == "restored"
        settings = load_settings(database_password=SECRETS["db"])
        assert settings.database_url_value.startswith("postgresql") and SECRETS["db"] in settings.database_url_value
        store = open_store(settings)
        try:
            rows = [r.model_dump(mode="json") for r in store.audit(limit=None)]
        finally:
            store.close()
        assert {r["outcome"] for r in rows} >= {"applied", "restored"}  # the cycle's rows are on PostgreSQL
        cli = subprocess.run([str(Path(sys.executable).with_name("gpuaas")), "audit", "list", "--since", "1h",
                              "--format", "json"], env={**os.environ, "GPUAAS_DATABASE_PASSWORD": SECRETS["db"],
                                                        "PYTHONPATH": str(ROOT)},
                             capture_output=True, text=True, timeout=120)
        assert cli.returncode == 0 and str(applied[0]["audit_id"]) in cli.stdout, cli.stderr[-2000:]
        run_ids = [first.state_details.flow_run_id, undo.state_details.flow_run_id]
        with get_client(sync_client=True) as client:
            runs = client.read_flow_runs()
            deadline = time.monotonic() + 60  # run logs reach the API in batches, later on a loaded host
            while True:
                logs = [log.message for log in client.read_logs(
                    log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[r.id for r in runs])))]
                if logs or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            artifacts = [str(a.data) + str(a.description) for a in client.read_artifacts()]
            parameters = [str(r.parameters) for r in runs if r.id in run_ids]
    finally:
        with get_client(sync_client=True) as client:
            for block in SECRET_BLOCKS.values():
                client.delete_block_document(Secret.load(block)._block_document_id)  # type: ignore[arg-type]
    assert logs and artifacts
    seen = "\n".join([*logs, *artifacts, *parameters, json.dumps(rows), cli.stdout, cli.stderr])
    for name, secret in SECRETS.items():
        assert secret not in seen, f"the {name} secret leaked"


def _audit_runs() -> set[str | None]:
    store = open_store(load_settings())
    try:
        return {r.flow_run_id for r in store.audit(flow="reclaim", limit=None) if r.outcome != "planned"}
    finally:
        store.close()


def test_two_overlapping_runs_only_one_writes(pointed_at: EmbeddedCluster, prefect_harness: None,
                                              monkeypatch: pytest.MonkeyPatch, webhook: Received) -> None:
    import gpuaas.operations.reclaim
    from flows.reclaim import reclaim

    entered, release = threading.Event(), threading.Event()
    real = gpuaas.operations.reclaim.execute_decisions

    def held_inside_the_write_step(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        assert release.wait(120), "the test never let the first run go on"
        return real(*args, **kwargs)

    monkeypatch.setattr(gpuaas.operations.reclaim, "execute_decisions", held_inside_the_write_step)
    before = writes(pointed_at)
    first: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: first.update(state=reclaim(apply=True, at=datetime.now(UTC),
                                                                        return_state=True)))
    runner.start()
    refused = _Records()
    prefect_concurrency = logging.getLogger("prefect._internal.concurrency")
    prefect_concurrency.addHandler(refused)
    try:
        assert entered.wait(180), "the first run never reached its write step"
        second = reclaim(apply=True, at=datetime.now(UTC), return_state=True)
    finally:
        release.set()
        runner.join(180)
        prefect_concurrency.removeHandler(refused)
    # Waiting on the slot is not an error: no ERROR line per refused attempt in the run's log.
    assert not [r for r in refused.records if r.levelno >= logging.ERROR], refused.records
    assert second.is_completed(), second.message
    busy = second.result()
    assert busy["decisions"] == [] and "no writes this run" in busy["writes_busy"]
    assert CONCURRENCY_LIMIT in busy["writes_busy"] and "waited 1 s" in busy["writes_busy"]
    # The lock covers collect to act, as in every writing flow: the second run collected nothing either.
    assert busy["snapshot_id"] is None

    assert first["state"].is_completed(), first["state"].message
    applied = [d for d in first["state"].result()["decisions"] if d["result"] == "applied"]
    assert len(applied) == 1  # the cap of 1
    assert writes(pointed_at) == before + 2  # one PATCH and its Event, from the first run only
    assert _audit_runs() == {str(first["state"].state_details.flow_run_id)}
    assert _active_slots() == 0  # both runs gave the Prefect slot back
    # The run that wrote nothing completed degraded: the webhook says so.
    assert [(b["body"]["flow"], b["body"]["status"], b["body"]["flow_run_id"]) for b in webhook] \
        == [("reclaim", "degraded", str(second.state_details.flow_run_id))]
    assert "no writes this run" in webhook[0]["body"]["what"]


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _active_slots() -> int:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.read_global_concurrency_limit_by_name(CONCURRENCY_LIMIT).active_slots


def test_a_lock_left_by_a_killed_process_is_taken_over_after_its_lease(pointed_at: EmbeddedCluster,
                                                                       prefect_harness: None) -> None:
    from flows.reclaim import reclaim

    # A writer outside Prefect takes the store lock (lease 10 min) and is killed without releasing it.
    script = ("import os, signal; from gpuaas.settings import load_settings; from tasks.writes import "
              "acquire_writes_lock; acquire_writes_lock.fn(load_settings(), 'killed-writer', 0); "
              "os.kill(os.getpid(), signal.SIGKILL)")
    killed = subprocess.run([sys.executable, "-c", script], env={**os.environ, "GPUAAS_WRITES_LEASE_SECONDS": "600",
                                                                 "PYTHONPATH": str(ROOT)}, timeout=120)
    assert killed.returncode == -9
    store = open_store(load_settings())
    try:
        assert store.lock_holder(LOCK) == "killed-writer"
        before = writes(pointed_at)
        blocked = reclaim(apply=True, at=datetime.now(UTC))
        assert "killed-writer holds the 'cluster-writes' lock" in blocked["writes_busy"]
        assert writes(pointed_at) == before and _active_slots() == 0
        # Inside the lease nobody else gets it; past the lease the next writer does.
        soon, later = datetime.now(UTC) + timedelta(seconds=590), datetime.now(UTC) + timedelta(seconds=601)
        assert not store.acquire_lock(LOCK, "next-writer", timedelta(minutes=15), now=soon)
        assert store.lock_holder(LOCK, now=later) is None
        assert store.acquire_lock(LOCK, "next-writer", timedelta(minutes=15), now=later)
        assert store.lock_holder(LOCK, now=later) == "next-writer"
        store.release_lock(LOCK, "next-writer")
    finally:
        store.close()
    taken_over = reclaim(apply=True, at=datetime.now(UTC))
    assert "writes_busy" not in taken_over
    [stopped] = [d for d in taken_over["decisions"] if d["result"] == "applied"]
    # the stop and its Event, and a Workload's on the object that controls it too
    assert writes(pointed_at) == before + 2 + (stopped["kind"] == "Workload")


def test_a_run_longer_than_its_lease_keeps_the_writes_lock_and_one_that_lost_it_patches_nothing(
        pointed_at: EmbeddedCluster, prefect_harness: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from kubernetes import client as k8s
    from prefect import flow

    from gpuaas.actions import KubeWriter
    from gpuaas.errors import GpuaasError
    from tasks.writes import cluster_writes, writes_lost

    monkeypatch.setenv("GPUAAS_WRITES_LEASE_SECONDS", "0.6")
    settings = load_settings()
    nowhere = k8s.ApiClient(k8s.Configuration(host="http://127.0.0.1:9"))  # a patch sent would fail otherwise

    @flow
    def long_run() -> tuple[bool, str | None, str]:
        with cluster_writes(settings, "reclaim/long"):
            time.sleep(1.5)  # two and a half leases, renewed every 0.2 s
            with open_store(settings) as store:
                kept = not store.acquire_lock(LOCK, "rebalance/next", timedelta(minutes=1))
                store.release_lock(LOCK, "reclaim/long")  # as if its lease ran out and the next run took it
                assert store.acquire_lock(LOCK, "rebalance/next", timedelta(minutes=1))
            time.sleep(0.5)
            lost = writes_lost()
            with KubeWriter(settings, api_client=nowhere, guard=writes_lost) as writer:
                try:
                    writer.patch("RayCluster", "team-a", "train-7", {"metadata": {"resourceVersion": "7"}})
                    refused = ""
                except GpuaasError as exc:
                    refused = str(exc)
        return kept, lost, refused

    kept, lost, refused = long_run()
    assert kept
    assert lost == "the 'cluster-writes' lock of reclaim/long expired and may be another run's"
    assert refused.startswith("patching RayCluster team-a/train-7") and "refusing a patch: the 'cluster-writes'" in refused
    assert writes_lost() is None  # the block is over: nothing of it is left in the process
    with open_store(settings) as store:
        assert store.lock_holder(LOCK) == "rebalance/next"  # the run's exit released only its own lock
        store.release_lock(LOCK, "rebalance/next")


HOLD_THE_SLOT_AND_DIE = """
import os, signal
from prefect import flow
from gpuaas.actions._lock_owner import new_holder
from gpuaas.settings import load_settings
from tasks.writes import cluster_writes

@flow(name="killed-writer")
def hold() -> None:
    with cluster_writes(load_settings(), new_holder("killed")):
        print("holding", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

hold()
"""


def test_a_prefect_slot_left_by_a_killed_run_is_given_back(pointed_at: EmbeddedCluster,
                                                            prefect_harness: None) -> None:
    """A flow run SIGKILLed inside its write step leaves the Prefect slot taken (the harness server has no
    repossessor, and a real one frees it only after the lease); the next run on this host gives it back."""
    from prefect.settings import PREFECT_API_URL

    from flows.reclaim import reclaim

    killed = subprocess.run([sys.executable, "-c", HOLD_THE_SLOT_AND_DIE], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "PREFECT_API_URL": str(PREFECT_API_URL.value())},
                            timeout=180)
    assert killed.returncode == -9 and "holding" in killed.stdout, killed.stderr[-2000:]
    assert _active_slots() == 1  # the dead run's lease is still there
    before = writes(pointed_at)
    next_run = reclaim(apply=True, at=datetime.now(UTC))
    assert "writes_busy" not in next_run, next_run["writes_busy"]
    assert [d["result"] for d in next_run["decisions"]].count("applied") == 1
    assert writes(pointed_at) == before + 2  # the stop and its Event
    assert _active_slots() == 0


@pytest.mark.parametrize("flow_name", ["rebalance", "deadlines"])
def test_a_busy_rebalance_or_deadlines_run_completes_and_writes_nothing(flow_name: str, pointed_at: EmbeddedCluster,
                                                                         prefect_harness: None) -> None:
    """Another run holds the writes: the run ends Completed (not Failed) with the busy line as its state message
    and, for rebalance, the first line of its summary artifact; no PATCH, no audit row."""
    from prefect.client.orchestration import get_client

    import flows.deadlines
    import flows.rebalance

    flow = {"rebalance": flows.rebalance.rebalance, "deadlines": flows.deadlines.deadlines}[flow_name]
    store = open_store(load_settings())
    try:
        assert store.acquire_lock(LOCK, "reclaim-elsewhere", timedelta(minutes=5))
        before, audit_before = writes(pointed_at), len(store.audit(limit=None))
        state = flow(apply=True, at=datetime.now(UTC), return_state=True)
        assert len(store.audit(limit=None)) == audit_before
    finally:
        store.release_lock(LOCK, "reclaim-elsewhere")
        store.close()
    assert state.is_completed(), state.message
    assert state.message.startswith("Another run is writing; nothing written: reclaim-elsewhere holds")
    assert "waited 1 s" in state.result()["writes_busy"] and writes(pointed_at) == before
    with get_client(sync_client=True) as client:  # named for what it found, as every run that completes
        run = client.read_flow_run(state.state_details.flow_run_id)
        assert run.name == "Another run is writing"  # the headline's first clause
        if flow_name == "rebalance":
            summary = client.read_latest_artifacts()
            found = next(a for a in summary if a.key == "gpuaas-rebalance-summary")
            assert str(found.description).startswith("Another run is writing; nothing written: reclaim-elsewhere")
            assert str(found.data) == "The next run decides again.\n"  # the headline once: as the description
    assert _active_slots() == 0
