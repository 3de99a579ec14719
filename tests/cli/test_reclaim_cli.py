"""``gpuaas reclaim`` and ``gpuaas undo`` in-process (CliRunner) against the embedded cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.testbed import write_policy
from tests.actions.reclaim_scenario import IDLE_TARGETS, OPTED_OUT, target_of, writes
from tests.lossy_proxy import lossy_proxy
from tests.scenarios import point_at

pytestmark = [pytest.mark.integration, pytest.mark.flow]
FIELDS = {"audit_id", "kind", "namespace", "name", "subject", "tenant", "gpus", "idle_seconds", "action", "mode",
          "result", "reason"}


@pytest.fixture(scope="module")
def cluster(reclaim_fleet: EmbeddedCluster) -> EmbeddedCluster:
    return reclaim_fleet


@pytest.fixture()
def pointed_at(cluster: EmbeddedCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> EmbeddedCluster:
    return point_at(cluster, monkeypatch, policy_file=write_policy(tmp_path / "policy.yaml", max_actions_per_run=1))


def test_reclaim_json_then_apply_then_undo(pointed_at: EmbeddedCluster, prefect_harness: None) -> None:
    runner = CliRunner()
    before = writes(pointed_at)
    dry = runner.invoke(app, ["reclaim", "--format", "json"])
    assert dry.exit_code == 0, dry.output
    decisions = json.loads(dry.stdout)["decisions"]
    assert {target_of(d) for d in decisions} == IDLE_TARGETS | {OPTED_OUT}  # that one skipped: opted out
    assert all(FIELDS <= set(d) for d in decisions) and writes(pointed_at) == before
    # one voice: each decision's audit row gives the same reason, in the same words, as the command did
    rows = {r["id"]: r for r in json.loads(runner.invoke(app, ["audit", "list", "--format", "json"]).stdout)["entries"]}
    planned = [d for d in decisions if d["result"] == "planned"]
    assert planned and all(d["reason"].startswith("idle ") and "max activity" in d["reason"] for d in planned)
    recorded = [d for d in decisions if d["audit_id"]]
    assert recorded and {d["audit_id"]: d["reason"] for d in recorded} == {
        d["audit_id"]: rows[d["audit_id"]]["reason"] for d in recorded}

    applied = runner.invoke(app, ["reclaim", "--apply", "--format", "json"])
    assert applied.exit_code == 0, applied.output
    [done] = [d for d in json.loads(applied.stdout)["decisions"] if d["result"] == "applied"]
    assert done["mode"] == "apply" and done["gpus"] == 2

    undone = runner.invoke(app, ["undo", str(done["audit_id"]), "--format", "json"])
    assert undone.exit_code == 0, undone.output
    [restored] = json.loads(undone.stdout)["undo"]
    assert restored["result"] == "restored"
    assert restored["subject"].startswith(done["subject"])  # named as the reclaim named it, not as the row written


def test_reclaim_fails_with_a_clear_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            prefect_harness: None) -> None:
    monkeypatch.setenv("GPUAAS_KUBECONFIG", str(tmp_path / "missing-kubeconfig"))
    monkeypatch.setenv("GPUAAS_NVML", "off")
    result = CliRunner().invoke(app, ["reclaim"])
    assert result.exit_code == 1
    assert "error:" in result.output and "kubeconfig" in result.output.lower()
    assert "reclaiming idle GPUs: failed after " in result.stderr and "done in" not in result.stderr


def test_undo_of_an_id_no_audit_row_has_is_refused_before_anything_runs(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUAAS_KUBECONFIG", str(tmp_path / "missing-kubeconfig"))
    assert CliRunner().invoke(app, ["db", "upgrade"]).exit_code == 0
    result = CliRunner().invoke(app, ["undo", "1", "99999"])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        "error: no audit row #1, #99999 (see `gpuaas audit list`); nothing undone"]
    assert "restoring" not in result.output  # the flow never started
    twice = CliRunner().invoke(app, ["undo", "99999", "1", "99999"])  # an id given twice is named once, in order
    assert twice.stderr.strip().splitlines() == [
        "error: no audit row #99999, #1 (see `gpuaas audit list`); nothing undone"]


def test_with_a_prefect_api_the_command_runs_through_prefect(pointed_at: EmbeddedCluster,
                                                              prefect_harness: None) -> None:
    """``PREFECT_API_URL`` set (the harness): the run is recorded there, its headline as the state message, and its
    artifacts on the flow run itself, described. Without it the same command runs directly (the other tests)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, FlowFilter, FlowFilterName
    from prefect.client.schemas.sorting import FlowRunSort

    from gpuaas.cli._flows import prefect_api_url

    assert prefect_api_url() is not None
    result = CliRunner().invoke(app, ["collect", "--format", "json"])
    assert result.exit_code == 0, result.output
    headline = json.loads(result.stdout)["headline"]
    with get_client(sync_client=True) as client:
        [run] = client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=["collect"])),
                                      sort=FlowRunSort.START_TIME_DESC, limit=1)
        assert run.state is not None and run.state.message == headline
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(
            any_=[run.id])))
    assert {a.key for a in artifacts} >= {"gpuaas-collect-summary", "gpuaas-collect-backlog"}
    assert all(a.task_run_id is None and a.description for a in artifacts)
    assert next(a for a in artifacts if a.key == "gpuaas-collect-summary").description == headline


@pytest.mark.parametrize("through_prefect", [True, False], ids=["prefect", "direct"])
def test_an_apply_the_cluster_refuses_exits_1_naming_the_role_to_bind(
        pointed_at: EmbeddedCluster, prefect_harness: None, monkeypatch: pytest.MonkeyPatch,
        through_prefect: bool) -> None:
    """The reader's role alone: every stop is refused with 403. The command must not report a clean run."""
    from gpuaas.cluster.apiserver import RBACRules

    if not through_prefect:
        monkeypatch.delenv("PREFECT_API_URL", raising=False)
    manifest = Path(__file__).resolve().parents[2] / "deployments" / "kubernetes" / "rbac.yaml"
    before = {(o["kind"], o["metadata"]["name"]): o["metadata"]["resourceVersion"]
              for kind in ("Deployment", "Workload", "Notebook") for o in pointed_at.store.list(kind)}
    pointed_at.api.rbac = RBACRules.from_manifest(manifest, ["gpuaas-reader"])
    try:
        result = CliRunner().invoke(app, ["reclaim", "--apply", "--format", "json"])
    finally:
        pointed_at.api.rbac = None
    assert result.exit_code == 1, result.output
    out = json.loads(result.stdout)
    failed = [d for d in out["decisions"] if d["result"] == "failed"]
    assert len(failed) == 1 and "403" in failed[0]["reason"]  # the cap of 1: one stop tried, and refused
    assert out["headline"].startswith("No idle workload stopped; 1 failed: ")
    assert out["headline"].endswith(
        ", bind gpuaas-reclaimer (kubectl apply -f deployments/kubernetes/rbac-apply-reclaim.yaml).")
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: 1 of {len(out['decisions'])} reclaims failed (#{failed[0]['audit_id']}); see its row's reason")
    assert {(o["kind"], o["metadata"]["name"]): o["metadata"]["resourceVersion"]
            for kind in ("Deployment", "Workload", "Notebook") for o in pointed_at.store.list(kind)} == before


def test_an_undo_hint_pasted_with_its_full_stop_is_read_and_a_bad_id_is_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUAAS_KUBECONFIG", str(tmp_path / "missing-kubeconfig"))
    assert CliRunner().invoke(app, ["db", "upgrade"]).exit_code == 0
    pasted = CliRunner().invoke(app, ["undo", "41", "42."])  # `...; to reverse: gpuaas undo 41 42.` copied whole
    assert pasted.exit_code == 1
    assert pasted.stderr.strip().splitlines() == [
        "error: no audit row #41, #42 (see `gpuaas audit list`); nothing undone"]
    for bad in ("abc", "0", "4x"):
        for args in (["undo", bad], ["incident", "--undo", bad]):
            result = CliRunner().invoke(app, args)
            assert result.exit_code == 2, result.output
            [line] = result.stderr.strip().splitlines()
            assert f"expected an audit id, a whole number from 1 to 9223372036854775807 (see gpuaas audit list), got {bad!r}" in line


def test_an_apply_whose_stop_may_have_landed_unseen_exits_1_and_says_so(
        pointed_at: EmbeddedCluster, prefect_harness: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stop's answer is lost (it landed) and the read-back is refused: the result is ``unknown``. A script must
    not read exit 0 and "Stopped 0 idle workloads" as nothing done: the object is stopped."""
    with lossy_proxy(pointed_at.api_url) as proxy:
        monkeypatch.setenv("GPUAAS_KUBECONFIG", str(proxy.kubeconfig(pointed_at.kubeconfig, tmp_path / "proxied")))
        proxy.drop_response("PATCH", then_refuse=1)  # the read-back GET is reset too
        result = CliRunner().invoke(app, ["reclaim", "--apply", "--format", "json"])
        out = json.loads(result.stdout)
        for d in out["decisions"]:  # as it was, for the next test: the stop did land
            if d["result"] == "unknown":
                assert CliRunner().invoke(app, ["undo", str(d["audit_id"])]).exit_code == 0
    assert result.exit_code == 1, result.output
    [unknown] = [d for d in out["decisions"] if d["result"] == "unknown"]
    assert out["headline"] == (
        "No idle workload stopped; 1 unknown (the stop's answer was lost and the "
        "read-back failed: it may have landed; the next run settles it from the object).")
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: 1 of {len(out['decisions'])} reclaims failed or unknown (#{unknown['audit_id']} unknown); "
        "see its row's reason")


@pytest.mark.parametrize("command", [["reclaim", "--apply"], ["rebalance", "--apply"], ["undo", "1"]])
def test_a_run_that_cannot_get_the_writes_exits_1_with_the_runs_own_line(
        command: list[str], pointed_at: EmbeddedCluster, prefect_harness: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The documented line, as the flow run's state message says it: not the lock's internal wording."""
    from datetime import UTC, datetime, timedelta

    from gpuaas.settings import load_settings
    from gpuaas.store import open_store
    from tasks.writes import LOCK

    monkeypatch.setenv("GPUAAS_WRITES_WAIT_SECONDS", "1")
    store = open_store(load_settings())
    try:
        assert store.acquire_lock(LOCK, "nightly-rebalance", timedelta(minutes=15))
        before = writes(pointed_at)
        if command[0] == "undo":  # an id the store holds, so that the undo gets as far as the writes
            assert CliRunner().invoke(app, ["reclaim"]).exit_code == 0
        busy = CliRunner().invoke(app, command)
    finally:
        store.release_lock(LOCK, "nightly-rebalance")
        store.close()
    assert busy.exit_code == 1, busy.output
    last, until = busy.stderr.splitlines()[-1], datetime.now(UTC) + timedelta(minutes=15)
    assert last.startswith("error: Another run is writing; nothing written: nightly-rebalance holds the "
                           "'cluster-writes' lock (waited 1 s); its lease runs to "), last
    ran_to = datetime.strptime(last.split("its lease runs to ")[1][:19], "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    assert abs((ran_to - until).total_seconds()) < 120, last  # the 15-minute lease taken above
    assert last.endswith(" UTC unless renewed, so a run killed holding it keeps it until then"), last
    assert writes(pointed_at) == before
