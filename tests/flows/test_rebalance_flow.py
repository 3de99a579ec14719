"""The rebalance flow end to end: embedded cluster, real Prometheus and Pushgateway, Prefect harness.

Scenario: ``tests/actions/rebalance_scenario.py`` (team-b's 8 GPUs wait for 90 minutes while team-a
and team-c hold spare quota). Covers: dry-run plans, publishes both artifacts and the metrics and
writes nothing; ``gpuaas rebalance --apply`` patches the queues under one plan id that ``gpuaas undo``
restores; with only 90 minutes of history the plan says so and moves at most one step; a held
``cluster-writes`` lock (reclaim writing) stops an apply run before it writes; after a crash mid-apply
the next run rolls it back, finds its own plan stale (changed since the plan) and plans again.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from gpuaas.actions import KubeWriter
from gpuaas.actions._quota_patches import gpu_nominal
from gpuaas.cli.app import app
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.settings import load_settings
from gpuaas.store import open_store
from tests.actions.rebalance_scenario import NOMINAL, QUEUES, rebalance_cluster
from tests.scenarios import point_at

pytestmark = [pytest.mark.integration, pytest.mark.flow]
runner = CliRunner()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with rebalance_cluster(tmp_path_factory.mktemp("rebalance-flow")) as running:
        yield running


@pytest.fixture()
def pointed_at(cluster: EmbeddedCluster, tmp_path: Path, pushgateway_url: str,
               monkeypatch: pytest.MonkeyPatch) -> EmbeddedCluster:
    policy = tmp_path / "policy.yaml"
    # Weight 1: team-b's share of the 24 GPUs is 8, so it regains 4 (to its share, its step); with weight 2
    # its share would be 12 and the plan would raise it to its whole demand at once.
    policy.write_text(yaml.safe_dump({"rebalance": {"max_step_percent": 100},
                                      "tenants": [{"name": "team-b", "cluster_queues": ["team-b-cq"], "weight": 1}]}))
    return point_at(cluster, monkeypatch, data_dir=tmp_path / "data", pushgateway_url=pushgateway_url,
                    policy_file=policy)


def quotas(cluster: EmbeddedCluster) -> dict[str, int]:
    with KubeWriter(load_settings()) as w:
        return {q: gpu_nominal(w.get_cluster_scoped("ClusterQueue", q), ["nvidia.com/gpu"])["h100"] for q in QUEUES}


def test_dry_run_plans_publishes_and_writes_nothing(pointed_at: EmbeddedCluster, prefect_harness: None,
                                                    pushgateway_url: str) -> None:
    from flows.rebalance import rebalance

    state = rebalance(at=pointed_at.clock.now(), return_state=True)
    assert state.is_completed(), state.message
    result = state.result()
    assert result["mode"] == "dry-run" and result["degraded"] is None
    [c] = result["cohorts"]
    assert c["cohort"] == "c" and c["result"] == "planned" and c["little_history"]
    assert "of history" in c["notes"][0]
    after = {r["queue"]: r["after"] for r in c["changes"]}
    assert after["team-b-cq"] == 8 and sum(after.values()) == sum(NOMINAL.values())  # +4: 100% of 4
    assert c["moved_gpus"] == 4 and c["weighted_shortfall_before"] == 8.0 and c["weighted_shortfall"] == 4.0
    assert quotas(pointed_at) == NOMINAL

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        found = {key: client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])))
                 for key in ("gpuaas-rebalance-plan", "gpuaas-rebalance-summary")}
    latest = {key: max(artifacts, key=lambda a: a.created) for key, artifacts in found.items()}
    table = latest["gpuaas-rebalance-plan"].data
    rows = json.loads(table) if isinstance(table, str) else table
    assert {r["queue"] for r in rows} == set(QUEUES) and {r["queue"]: r["quota"] for r in rows}["team-b-cq"] == "4 -> 8"
    summary = str(latest["gpuaas-rebalance-summary"].data)
    assert "- **team-b-cq h100**: 4 -> 8 (+4 from " in summary  # the reasons: a list under the table
    assert "# gpuaas rebalance (dry-run)" in summary and "weighted shortfall **8 -> 4**" in summary
    assert latest["gpuaas-rebalance-summary"].description == (
        "Dry-run: 4 GPUs of quota would move in 1 cohort (planned 1); nothing was changed; "
        "to apply: gpuaas rebalance --apply.")
    assert summary.splitlines()[0] == "# gpuaas rebalance (dry-run)"  # the headline once: as the description
    metrics = httpx.get(f"{pushgateway_url}/metrics", timeout=10).text
    assert 'gpuaas_rebalance_moved_gpus{cohort="c",instance="",job="gpuaas_rebalance"} 4' in metrics


def test_a_change_freeze_makes_an_apply_from_the_cli_a_dry_run(pointed_at: EmbeddedCluster, prefect_harness: None,
                                                               tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    data = yaml.safe_load(policy.read_text())
    now = datetime.now(UTC).replace(microsecond=0)
    data["rebalance"]["mode"] = "apply"
    data["freezes"] = [{"name": "maintenance", "start": (now - timedelta(hours=1)).isoformat(),
                        "end": (now + timedelta(hours=1)).isoformat()},
                       {"name": "reclaim-only", "start": "2026-01-01T00:00:00Z", "end": "2099-01-01T00:00:00Z",
                        "flows": ["reclaim"]}]
    policy.write_text(yaml.safe_dump(data))
    done = runner.invoke(app, ["rebalance", "--apply", "--cohort", "c", "--format", "json"])
    assert done.exit_code == 0, done.output
    result = json.loads(done.stdout)
    assert result["mode"] == "dry-run" and result["freeze"]["name"] == "maintenance"
    assert result["headline"] == (f"Change freeze maintenance until {now + timedelta(hours=1):%Y-%m-%d %H:%M} UTC: "
                                  "dry-run, 4 GPUs of quota would move in 1 cohort (planned 1); nothing was "
                                  "changed.")
    assert quotas(pointed_at) == NOMINAL

    del data["freezes"][0]  # the one left holds back reclaim only: the policy's apply goes through
    policy.write_text(yaml.safe_dump(data))
    done = runner.invoke(app, ["rebalance", "--cohort", "c", "--format", "json"])
    assert done.exit_code == 0, done.output
    [c] = json.loads(done.stdout)["cohorts"]
    assert c["result"] == "applied" and quotas(pointed_at)["team-b-cq"] == 8
    assert runner.invoke(app, ["undo", str(c["plan_id"])]).exit_code == 0
    assert quotas(pointed_at) == NOMINAL


def test_a_tenants_change_freeze_keeps_its_queues_quota_and_the_rest_plans_without_it(
        pointed_at: EmbeddedCluster, prefect_harness: None, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    data = yaml.safe_load(policy.read_text())
    now = datetime.now(UTC).replace(microsecond=0)
    until = now + timedelta(hours=1)
    data["freezes"] = [{"name": "launch", "start": (now - timedelta(hours=1)).isoformat(), "end": until.isoformat(),
                        "tenants": ["team-b"]}]
    policy.write_text(yaml.safe_dump(data))
    done = runner.invoke(app, ["rebalance", "--apply", "--cohort", "c", "--format", "json"])
    assert done.exit_code == 0, done.output
    result = json.loads(done.stdout)
    assert result["mode"] == "apply" and result["freeze"] is None  # the fleet's run applies; team-b's queue is out
    [c] = result["cohorts"]
    assert f"team-b-cq keeps its quota: held back by the change freeze launch of tenant team-b until {until:%Y-%m-%d %H:%M} UTC" \
        in c["notes"]
    # team-b waits (without the freeze it gains 4), but its queue is out of the plan: nobody else is short
    assert {ch["queue"] for ch in c["changes"]} == {"team-a-cq", "team-c-cq"}
    assert c["result"] == "skipped" and c["moved_gpus"] == 0
    assert quotas(pointed_at) == NOMINAL


def test_an_apply_the_cluster_refuses_closes_the_plan_and_exits_1(pointed_at: EmbeddedCluster,
                                                                   prefect_harness: None) -> None:
    """The reader's role alone: the plan's read before its patches is refused; the plan is closed as failed at once
    (nothing left open for a recovery to mistake for a crash) and the command exits 1, naming the role."""
    from gpuaas.cluster.apiserver import RBACRules

    manifest = Path(__file__).resolve().parents[2] / "deployments" / "kubernetes" / "rbac.yaml"
    pointed_at.api.rbac = RBACRules.from_manifest(manifest, ["gpuaas-reader"])
    try:
        done = runner.invoke(app, ["rebalance", "--apply", "--cohort", "c", "--format", "json"])
    finally:
        pointed_at.api.rbac = None
    assert done.exit_code == 1, done.output
    [c] = json.loads(done.stdout)["cohorts"]
    assert c["result"] == "failed" and "403" in c["message"]
    assert "bind gpuaas-rebalancer (kubectl apply -f deployments/kubernetes/rbac-apply-rebalance.yaml)" in c["message"]
    assert done.stderr.strip().splitlines()[-1] == "error: 1 of 1 cohorts failed (c); see its message"
    assert quotas(pointed_at) == NOMINAL


def test_apply_from_the_cli_then_undo_the_whole_plan(pointed_at: EmbeddedCluster, prefect_harness: None) -> None:
    done = runner.invoke(app, ["rebalance", "--apply", "--cohort", "c", "--format", "json"])
    assert done.exit_code == 0, done.output
    [c] = json.loads(done.stdout)["cohorts"]
    assert c["result"] == "applied", c["message"]
    assert quotas(pointed_at)["team-b-cq"] == 8
    undone = runner.invoke(app, ["undo", str(c["plan_id"]), "--format", "json"])
    assert undone.exit_code == 0, undone.output
    assert json.loads(undone.stdout)["undo"][0]["result"] == "restored"
    assert quotas(pointed_at) == NOMINAL


def test_the_step_is_a_days_however_many_runs_and_an_undo_gives_none_back(pointed_at: EmbeddedCluster,
                                                                         prefect_harness: None) -> None:
    first = runner.invoke(app, ["rebalance", "--apply", "--cohort", "c", "--format", "json"])
    assert first.exit_code == 0, first.output
    [c] = json.loads(first.stdout)["cohorts"]
    assert c["result"] == "applied" and quotas(pointed_at)["team-b-cq"] == 8  # +4: its step, 100 % of 4
    # At 8 its step would be 8 again and team-b still waits for 4 GPUs; but its day's step is spent.
    again = runner.invoke(app, ["rebalance", "--apply", "--cohort", "c", "--format", "json"])
    assert again.exit_code == 0, again.output
    [c2] = json.loads(again.stdout)["cohorts"]
    assert c2["moved_gpus"] == 0 and quotas(pointed_at)["team-b-cq"] == 8
    [b] = [r for r in c2["changes"] if r["queue"] == "team-b-cq"]
    assert "the step of 4 (100% of 4, 4 of it gained in the last 22 hours) allows no gain" in b["reason"]
    assert any("4 GPUs of quota already moved in this cohort in the last 22 hours" in n for n in c2["notes"])
    assert runner.invoke(app, ["undo", str(c["plan_id"])]).exit_code == 0
    assert quotas(pointed_at) == NOMINAL
    after_undo = runner.invoke(app, ["rebalance", "--apply", "--cohort", "c", "--format", "json"])
    [c3] = json.loads(after_undo.stdout)["cohorts"]
    assert c3["moved_gpus"] == 0 and quotas(pointed_at) == NOMINAL  # the plan undone is not made again today


def test_apply_waits_for_no_one_while_reclaim_holds_the_writes_lock(pointed_at: EmbeddedCluster,
                                                                      prefect_harness: None,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUAAS_WRITES_WAIT_SECONDS", "2")  # the wait's length is not what is tested here
    store = open_store(load_settings())
    try:
        assert store.acquire_lock("cluster-writes", "reclaim-elsewhere", timedelta(minutes=5))
        done = runner.invoke(app, ["rebalance", "--apply", "--format", "json"])
        assert done.exit_code == 1 and "cluster-writes" in done.stderr
        assert quotas(pointed_at) == NOMINAL
    finally:
        store.release_lock("cluster-writes", "reclaim-elsewhere")
        store.close()


def test_a_crashed_apply_is_rolled_back_and_the_plan_made_again(pointed_at: EmbeddedCluster,
                                                                  prefect_harness: None) -> None:
    """A run crashed after its first patch; the next run's snapshot sees that half-applied state, its
    recovery rolls it back, so its own plan no longer matches the queues: it plans again and applies."""
    from flows.rebalance import rebalance
    from gpuaas.actions.quotas import apply_quota_plan
    from gpuaas.policies.quotas import QueueDemand, QuotaLimits, plan_quotas
    from gpuaas.policy import Mode
    from tests.actions.test_quota_actions import Crash, CrashingWriter

    settings = load_settings()
    store = open_store(settings)
    try:
        crashed = plan_quotas([QueueDemand(q, {"h100": NOMINAL[q]}, {"h100": d}) for q, d in
                               (("team-a-cq", 12.0), ("team-b-cq", 8.0), ("team-c-cq", 4.0))],
                              QuotaLimits(8, 100, 32, 1))
        with CrashingWriter(settings, after_patches=1) as crashing, pytest.raises(Crash):
            apply_quota_plan(store, crashing, "c", crashed, mode=Mode.apply, degraded=None, flow_run_id=None,
                             evidence={}, gpu_resources=["nvidia.com/gpu"])
        assert quotas(pointed_at)["team-c-cq"] == 4  # the decrease landed, the increase did not

        state = rebalance(apply=True, return_state=True)
        assert state.is_completed(), state.message
        [c] = state.result()["cohorts"]
        assert c["result"] == "applied", c["message"]
        rows = store.audit(flow="rebalance", limit=None)
        closed = [r for r in rows if r.action == "quota-plan" and r.outcome == "failed"]
        assert closed and "rolled back 1 of 1" in closed[0].reason
        assert any(r.action == "quota-plan" and r.outcome == "changed" for r in rows)
        now = quotas(pointed_at)
        assert now["team-b-cq"] == 8 and sum(now.values()) == sum(NOMINAL.values())
        undone = runner.invoke(app, ["undo", str(c["plan_id"]), "--format", "json"])
        assert undone.exit_code == 0, undone.output
        assert quotas(pointed_at) == NOMINAL
    finally:
        store.close()


def test_a_misspelt_cohort_or_an_endless_history_is_refused_by_name(pointed_at: EmbeddedCluster,
                                                                   prefect_harness: None) -> None:
    typo = runner.invoke(app, ["rebalance", "--cohort", "cc"])
    assert typo.exit_code == 1
    assert typo.stderr.strip().splitlines()[-1] == (
        "error: cohort: no cohort 'cc' holds nvidia.com/gpu quota in the cluster (those that do: c)")
    endless = runner.invoke(app, ["rebalance", "--history-days", "100000"])
    assert endless.exit_code == 2 and "--history-days" in endless.stderr and "366" in endless.stderr
    assert quotas(pointed_at) == NOMINAL


def test_an_at_without_a_zone_plans_as_utc_through_prefect_and_the_command_lines_direct_run(
        pointed_at: EmbeddedCluster, prefect_harness: None) -> None:
    from flows.direct import direct_runs
    from flows.rebalance import rebalance

    at = pointed_at.clock.now()
    aware = rebalance(at=at, return_state=True)
    assert aware.is_completed(), aware.message
    naive = rebalance(at=at.replace(tzinfo=None), return_state=True)
    assert naive.is_completed(), naive.message
    with direct_runs():
        direct = rebalance(at=at.replace(tzinfo=None), return_state=True)
    assert direct.is_completed(), direct.message
    planned = [c["changes"] for c in aware.result()["cohorts"]]
    assert [c["changes"] for c in naive.result()["cohorts"]] == planned
    assert [c["changes"] for c in direct.result()["cohorts"]] == planned
    assert quotas(pointed_at) == NOMINAL


def test_a_run_given_a_later_at_is_refused_and_apply_refuses_an_earlier_one(pointed_at: EmbeddedCluster,
                                                                           prefect_harness: None) -> None:
    """A plan applied now; a run told it is 25 hours later (its 22 hours would start after the plan, and the day's
    step look unspent) is refused in either mode, before it plans or writes anything. An apply run for an earlier
    instant than now is refused too, and writes nothing."""
    from flows.rebalance import rebalance

    first = runner.invoke(app, ["rebalance", "--apply", "--cohort", "c", "--format", "json"])
    assert first.exit_code == 0, first.output
    [c] = json.loads(first.stdout)["cohorts"]
    assert c["result"] == "applied" and quotas(pointed_at)["team-b-cq"] == 8
    moved = quotas(pointed_at)
    later = datetime.now(UTC) + timedelta(hours=25)

    store = open_store(load_settings())
    try:
        rows = len(store.audit(flow="rebalance", limit=None))
        for apply, at, says in ((False, later, "is in the future"), (True, later, "is in the future"),
                                (True, datetime.now(UTC) - timedelta(days=1), "collect.max_staleness_seconds")):
            refused = rebalance(apply=apply, at=at, cohort="c", return_state=True)
            assert refused.is_failed()
            assert "at: " in str(refused.message) and says in str(refused.message)
        assert len(store.audit(flow="rebalance", limit=None)) == rows
    finally:
        store.close()
    assert quotas(pointed_at) == moved
    assert runner.invoke(app, ["undo", str(c["plan_id"])]).exit_code == 0
    assert quotas(pointed_at) == NOMINAL
