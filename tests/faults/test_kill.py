"""The flow process SIGKILLed at each step of a reclaim apply and of an undo.

The API proxy holds the PATCH of the write (``tests.faults.kill``): either before it reaches the server
(killed after the intent row, before the write) or after the server applied it (killed with the answer
in flight). The process is killed there with SIGKILL, and the next run of the same window must finish the job: the
workload is stopped (or restored) exactly once, one write reached the API, and every write has its
audit row.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuaas.cluster.fault_proxy import FaultProxy
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.settings import load_settings
from gpuaas.store import Store
from tests.faults.kill import killed_at, stopped

pytestmark = [pytest.mark.integration, pytest.mark.flow]


def _patches(proxy: FaultProxy, name: str, held: bool) -> int:
    """PATCHes of ``name`` that reached the API server (a forwarded hold counts)."""
    return sum(1 for h in proxy.relayed if h.method == "PATCH" and name in h.path) + int(held)


def _rows(name: str) -> list[Any]:
    store = Store(load_settings().database_url_value)
    try:
        return [r for r in store.audit(obj=name) if r.mode == "apply"]
    finally:
        store.close()


@pytest.fixture()
def one_at_a_time(reclaim_fleet: EmbeddedCluster, through_proxies: dict[str, FaultProxy], tmp_path: Path,
                  monkeypatch: pytest.MonkeyPatch, prefect_harness: None) -> dict[str, FaultProxy]:
    from gpuaas.cluster.testbed import write_policy

    monkeypatch.setenv("GPUAAS_POLICY_FILE", str(write_policy(tmp_path / "policy.yaml", max_actions_per_run=1)))
    monkeypatch.delenv("GPUAAS_PUSHGATEWAY_URL")
    return through_proxies


@pytest.mark.parametrize("forward", [False, True], ids=["before-the-write", "after-the-write"])
def test_a_reclaim_killed_at_its_write_is_finished_once_by_the_next_run(
        forward: bool, reclaim_fleet: EmbeddedCluster, one_at_a_time: dict[str, FaultProxy]) -> None:
    kube = one_at_a_time["kube"]
    at = reclaim_fleet.clock.now().isoformat()
    killed_at(kube, ["reclaim", at], forward=forward)
    [intent] = [r for r in _all_rows() if r.outcome not in ("skipped", "deferred")]
    kind, name = intent.kind, intent.name
    assert stopped(reclaim_fleet, kind, name) is forward

    from datetime import datetime

    from flows.reclaim import reclaim

    reclaim(apply=True, at=datetime.fromisoformat(at))
    assert stopped(reclaim_fleet, kind, name), "the next run did not finish the reclaim"
    assert _patches(kube, name, held=forward) == 1, "the workload was written twice"
    rows = _rows(name)
    assert rows and all(r.outcome != "pending" for r in rows[-1:]), [(r.id, r.outcome, r.reason) for r in rows]


def _all_rows() -> list[Any]:
    store = Store(load_settings().database_url_value)
    try:
        return [r for r in store.audit() if r.mode == "apply"]
    finally:
        store.close()


def _applied_reclaims() -> list[Any]:
    return [r for r in _all_rows() if r.action == "reclaim" and r.outcome == "applied"]


@pytest.mark.parametrize("forward", [False, True], ids=["before-the-write", "after-the-write"])
def test_an_undo_killed_at_its_write_is_finished_once_by_the_next_undo(
        forward: bool, reclaim_fleet: EmbeddedCluster, one_at_a_time: dict[str, FaultProxy]) -> None:
    from datetime import datetime

    from flows.reclaim import reclaim

    kube = one_at_a_time["kube"]
    reclaim(apply=True, at=datetime.fromisoformat(reclaim_fleet.clock.now().isoformat()))
    [done] = _applied_reclaims()
    assert stopped(reclaim_fleet, done.kind, done.name)
    kube.clear()
    killed_at(kube, ["undo", str(done.id)], forward=forward)
    assert stopped(reclaim_fleet, done.kind, done.name) is not forward
    [restore] = reclaim(undo=[done.id])["undo"]
    # Killed after the write: the read-back finds it done ("already restored by" the killed run's intent row).
    assert restore["result"] == ("no-op" if forward else "restored"), restore
    assert not stopped(reclaim_fleet, done.kind, done.name), "the next undo did not restore"
    assert _patches(kube, done.name, held=forward) == 1, "the restore was written twice"


def test_a_409_storm_on_patches_writes_nothing_and_the_next_run_acts_once(
        reclaim_fleet: EmbeddedCluster, one_at_a_time: dict[str, FaultProxy]) -> None:
    from datetime import datetime

    from flows.reclaim import reclaim

    kube = one_at_a_time["kube"]
    at = datetime.fromisoformat(reclaim_fleet.clock.now().isoformat())
    kube.arm("409", 99, method="PATCH")
    result = reclaim(apply=True, at=at)["decisions"]
    # The writer re-reads after a 409 and never forces: the target is skipped, audited, left running.
    stormed = [d for d in result if "409 Conflict" in d["reason"]]
    assert len(stormed) == 1 and stormed[0]["audit_id"], [(d["name"], d["result"], d["reason"]) for d in result]
    assert not any(d["result"] == "applied" for d in result)
    assert kube.hits and not any(h.method == "PATCH" for h in kube.relayed)
    [target] = stormed
    assert not stopped(reclaim_fleet, target["kind"], target["name"])
    kube.clear()
    [again] = [d for d in reclaim(apply=True, at=at)["decisions"] if d["name"] == target["name"]]
    assert again["result"] == "applied", again
    assert stopped(reclaim_fleet, target["kind"], target["name"])
    assert _patches(kube, target["name"], held=False) == 1
