"""The flow process SIGKILLed at each step of a rebalance apply.

The rebalance fleet (``tests/actions/rebalance_scenario.py``: one cohort, three queues, team-b's
8 GPUs waiting) plans to move quota toward team-b; the plan lands as one audit intent, one
ClusterQueue PATCH per step (decreases first), then a completion row and the Pushgateway push.
The flow process is killed (``tests.faults.kill``) after the intent before any patch, with each
patch's write in flight (landed, its answer and audit row not), before the next patch, and
after the completion row (at the push). After each kill the cohort's total never exceeds the
original; the next run's recovery closes the open intent (rolling back what had landed), plans
again and applies. Then: the cohort's total equals the original, the quotas equal a fault-free
run's, every PATCH that reached the API is an audited quota change (or the killed one, which the
recovery audits), no move was applied twice, and no intent is left open.

Found by it and fixed: a patch that landed with its answer in flight had no change row, so the
recovery's rollback row alone read as a net move gpuaas had made; the no-reversal rule then kept the
next plan off that queue and the cohort ended elsewhere than a fault-free run (``recover_quota_plans``
now audits the landed patch before rolling it back).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuaas.actions import KubeWriter
from gpuaas.actions._quota_patches import gpu_nominal
from gpuaas.cluster.fault_proxy import FaultProxy, fault_proxy
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.settings import load_settings
from gpuaas.store import AuditEntry, open_store
from tests.actions.rebalance_scenario import NOMINAL, QUEUES, rebalance_cluster
from tests.faults.kill import killed_at
from tests.scenarios import point_at

pytestmark = [pytest.mark.integration, pytest.mark.flow]
GPU = ["nvidia.com/gpu"]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with rebalance_cluster(tmp_path_factory.mktemp("rebalance-kill")) as running:
        yield running


@pytest.fixture(scope="module")
def proxies(fleet: EmbeddedCluster, pushgateway_url: str) -> Iterator[dict[str, FaultProxy]]:
    with fault_proxy(fleet.api_url) as kube, fault_proxy(pushgateway_url) as push:
        yield {"kube": kube, "push": push}


@pytest.fixture(scope="module")
def original(fleet: EmbeddedCluster) -> dict[str, dict[str, Any]]:
    """The ClusterQueues as the scenario made them: every test starts from these quotas."""
    return {q: copy.deepcopy(fleet.store.get("ClusterQueue", None, q)) for q in QUEUES}


def _reset(fleet: EmbeddedCluster, original: dict[str, dict[str, Any]]) -> None:
    for queue, obj in original.items():
        live = fleet.store.get("ClusterQueue", None, queue)
        fleet.store.replace({**live, "metadata": {**live["metadata"], "annotations": obj["metadata"].get(
            "annotations") or {}}, "spec": copy.deepcopy(obj["spec"])})


def _point(fleet: EmbeddedCluster, proxies: dict[str, FaultProxy], data: Path, m: pytest.MonkeyPatch) -> None:
    policy = data / "policy.yaml"
    data.mkdir(parents=True, exist_ok=True)
    # The scenario's history is short: min_history_days 0 lets its quiet queue lend (one decrease, one increase).
    policy.write_text(yaml.safe_dump({"rebalance": {"max_step_percent": 100, "min_history_days": 0},
                                      "tenants": [{"name": "team-b", "cluster_queues": ["team-b-cq"], "weight": 2}]}))
    point_at(fleet, m, data_dir=data / "data", policy_file=policy, pushgateway_url=proxies["push"].url,
             kubeconfig=proxies["kube"].kubeconfig(fleet.kubeconfig, data / "kubeconfig"),
             request_timeout_seconds=5, retries=1, retry_backoff_seconds=0)


def quotas() -> dict[str, int]:
    with KubeWriter(load_settings()) as w:
        return {q: gpu_nominal(w.get_cluster_scoped("ClusterQueue", q), GPU)["h100"] for q in QUEUES}


def _patched(proxy: FaultProxy) -> list[str]:
    """The queues whose PATCH reached the API server, in order."""
    return [q for h in proxy.relayed if h.method == "PATCH" for q in QUEUES if h.path.partition("?")[0].endswith(f"/{q}")]


@pytest.fixture(scope="module")
def reference(fleet: EmbeddedCluster, proxies: dict[str, FaultProxy], original: dict[str, dict[str, Any]],
              prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, int], list[str]]:
    """A fault-free apply run: the quotas it leaves and the queues it patches, in order (two: a decrease,
    then an increase)."""
    from flows.rebalance import rebalance

    with pytest.MonkeyPatch.context() as m:
        _point(fleet, proxies, tmp_path_factory.mktemp("reference"), m)
        proxies["kube"].clear()
        [c] = rebalance(apply=True, at=fleet.clock.now())["cohorts"]
        assert c["result"] == "applied", c["message"]
        result = quotas(), _patched(proxies["kube"])
    _reset(fleet, original)
    proxies["kube"].clear()
    assert len(result[1]) == 2 and result[0] != NOMINAL, result
    return result


@pytest.fixture()
def pointed(fleet: EmbeddedCluster, proxies: dict[str, FaultProxy], original: dict[str, dict[str, Any]],
            reference: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, FaultProxy]:
    """The scenario's quotas, a fresh store, settings through the proxies."""
    _reset(fleet, original)
    for proxy in proxies.values():
        proxy.clear()
    _point(fleet, proxies, tmp_path, monkeypatch)
    assert quotas() == NOMINAL
    return proxies


def _rows() -> list[AuditEntry]:
    store = open_store(load_settings())
    try:
        return store.audit(flow="rebalance", limit=None)
    finally:
        store.close()


def _delta(row: AuditEntry) -> int:
    return sum(int(b) - int(a) for f, a in (row.before or {}).items()
               for b in [(row.after or {})[f]])


# (id, which proxy holds, the index of the held PATCH in the reference's order or None, forwarded)
POINTS = [("after-the-intent", "kube", 0, False), ("first-patch-landed", "kube", 0, True),
          ("before-the-second-patch", "kube", 1, False), ("second-patch-landed", "kube", 1, True),
          ("after-the-result", "push", None, False)]


@pytest.mark.parametrize(("where", "index", "forward"), [p[1:] for p in POINTS], ids=[p[0] for p in POINTS])
def test_a_rebalance_killed_at_each_step_conserves_the_cohort_and_converges(
        where: str, index: int | None, forward: bool, fleet: EmbeddedCluster, pointed: dict[str, FaultProxy],
        reference: tuple[dict[str, int], list[str]]) -> None:
    from flows.rebalance import rebalance
    from gpuaas.actions.quotas import recover_quota_plans

    kube, total = pointed["kube"], sum(NOMINAL.values())
    ref, order = reference
    at = fleet.clock.now()
    held = order[index] if index is not None else None
    path = f"/clusterqueues/{held}" if held else "job/gpuaas_rebalance"
    relayed = killed_at(pointed[where], ["rebalance", at.isoformat()], forward=forward,
                        method="PATCH" if held else "PUT", path=path)
    patched = _patched(kube) if where != "kube" else [q for q in QUEUES for h in relayed
                                                      if h.method == "PATCH" and h.path.partition("?")[0].endswith(f"/{q}")]
    landed = patched + ([held] if held and forward else [])
    assert landed == order[:len(landed)] and sum(quotas().values()) <= total, "the cohort grew mid-apply"
    [intent] = [r for r in _rows() if r.action == "quota-plan" and r.outcome == "planned"]
    kube.clear()

    if where == "push":  # the plan was closed before the kill: the next run's recovery has nothing to do
        assert quotas() == ref
        with KubeWriter(load_settings()) as writer:
            store = open_store(load_settings())
            try:
                assert recover_quota_plans(store, writer, flow_run_id=None, now=at, gpu_resources=GPU) == []
            finally:
                store.close()
    else:
        [c] = rebalance(apply=True, at=at)["cohorts"]
        assert c["result"] == "applied", c["message"]
    landed += _patched(kube)

    assert quotas() == ref and sum(quotas().values()) == total, "the next run did not converge"
    rows = _rows()
    changes = [r for r in rows if r.action == "quota-change"]
    for queue in QUEUES:  # every PATCH that reached the API is an audited change (the recovery audits the killed one)
        audited = [r for r in changes if r.name == queue]
        assert landed.count(queue) == len(audited), (queue, landed, [(r.outcome, r.reason) for r in audited])
        assert sum(_delta(r) for r in audited) == ref[queue] - NOMINAL[queue], "a move applied twice"
    if held and forward:
        assert any(r.name == held and r.reason.startswith("recovered: this patch had landed") for r in changes)
    intents = [r for r in rows if r.action == "quota-plan" and r.outcome == "planned" and r.mode == "apply"]
    closed = {r.refers_to for r in rows if r.action == "quota-plan" and r.refers_to is not None}
    assert all(i.id in closed for i in intents), "an intent left open"
