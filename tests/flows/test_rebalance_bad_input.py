"""``gpuaas rebalance`` on input a hostile review found unsafe: embedded cluster, Prefect harness, the real CLI.

Scenario: ``tests/actions/rebalance_scenario.py`` (cohort ``c``: team-b's 8 GPUs wait while team-a and
team-c hold spare quota). Covers: a tenant whose ``cluster_queues`` misspells its ClusterQueue (a change
freeze on it) makes an apply run write nothing, say which tenant, queue and fix in its headline and exit 1,
while a dry-run shows its plans with the same line as a warning; a ClusterQueue whose GPU quota is not a
whole number of GPUs (``7500m``) leaves its cohort without a plan, the quota named, and nothing written.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpuaas.actions import KubeWriter
from gpuaas.actions._quota_patches import gpu_nominal
from gpuaas.cli.app import app
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.settings import load_settings
from tests.actions.rebalance_scenario import NOMINAL, QUEUES, rebalance_cluster
from tests.scenarios import point_at

pytestmark = [pytest.mark.integration, pytest.mark.flow]
runner = CliRunner()
TYPO = ("tenant team-b names ClusterQueue team-b-qc, which the cluster lacks: its change freeze and guarantee would "
        "hold no queue; fix tenants[team-b].cluster_queues in policy.yaml")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with rebalance_cluster(tmp_path_factory.mktemp("rebalance-bad-input")) as running:
        yield running


@pytest.fixture()
def pointed_at(cluster: EmbeddedCluster, tmp_path: Path, pushgateway_url: str,
               monkeypatch: pytest.MonkeyPatch) -> Iterator[EmbeddedCluster]:
    """The fleet with a policy of tenant team-b under a change freeze; its queues' resourceGroups put back after."""
    now = datetime.now(UTC).replace(microsecond=0)
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump({
        "rebalance": {"max_step_percent": 100},
        "tenants": [{"name": "team-b", "cluster_queues": ["team-b-cq"], "guaranteed_gpus": 4}],
        "freezes": [{"name": "launch", "start": (now - timedelta(hours=1)).isoformat(),
                     "end": (now + timedelta(hours=1)).isoformat(), "tenants": ["team-b"]}]}))
    point_at(cluster, monkeypatch, data_dir=tmp_path / "data", pushgateway_url=pushgateway_url,
             policy_file=tmp_path / "policy.yaml")
    with KubeWriter(load_settings()) as w:
        groups = {q: w.get_cluster_scoped("ClusterQueue", q)["spec"]["resourceGroups"] for q in QUEUES}
    yield cluster
    with KubeWriter(load_settings()) as w:
        for queue in QUEUES:
            obj = w.get_cluster_scoped("ClusterQueue", queue)
            w.patch_cluster_scoped("ClusterQueue", queue, {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
                                                           "spec": {"resourceGroups": groups[queue]}})


def quotas() -> dict[str, Any]:
    with KubeWriter(load_settings()) as w:
        return {q: gpu_nominal(w.get_cluster_scoped("ClusterQueue", q), ["nvidia.com/gpu"])["h100"] for q in QUEUES}


def misspell_team_b(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    data = yaml.safe_load(policy.read_text())
    data["tenants"][0]["cluster_queues"] = ["team-b-qc"]
    policy.write_text(yaml.safe_dump(data))


def test_the_freeze_holds_team_b_when_its_queue_is_spelt_right(pointed_at: EmbeddedCluster,
                                                              prefect_harness: None) -> None:
    """The baseline the typo breaks: team-b-cq is frozen, so the apply moves nothing into it."""
    done = runner.invoke(app, ["rebalance", "--apply", "--cohort", "c", "--format", "json"])
    assert done.exit_code == 0, done.output
    result = json.loads(done.stdout)
    assert result["misnamed_queues"] == [] and result["refused"] is False
    assert quotas()["team-b-cq"] == NOMINAL["team-b-cq"]


def test_a_misspelt_queue_of_a_frozen_tenant_stops_the_apply_and_says_what_to_fix(
        pointed_at: EmbeddedCluster, prefect_harness: None, tmp_path: Path) -> None:
    misspell_team_b(tmp_path)
    done = runner.invoke(app, ["rebalance", "--apply", "--cohort", "c", "--format", "json"])
    assert done.exit_code == 1, done.output
    result = json.loads(done.stdout)
    assert result["headline"].startswith(f"Nothing applied: {TYPO}. ")
    assert result["refused"] is True and result["misnamed_queues"] == [TYPO] and result["mode"] == "dry-run"
    [c] = result["cohorts"]
    assert c["result"] == "planned" and c["moved_gpus"] > 0  # the plan is there, recorded, not written
    assert quotas() == NOMINAL

    dry = runner.invoke(app, ["rebalance", "--cohort", "c", "--format", "json"])
    assert dry.exit_code == 0, dry.output
    shown = json.loads(dry.stdout)
    assert shown["headline"].startswith(f"Warning: {TYPO}. Dry-run: ") and "--apply" not in shown["headline"]
    assert shown["refused"] is False and shown["cohorts"][0]["changes"]
    assert quotas() == NOMINAL


def test_a_quota_that_is_not_a_whole_number_of_gpus_leaves_its_cohort_unplanned(
        pointed_at: EmbeddedCluster, prefect_harness: None) -> None:
    with KubeWriter(load_settings()) as w:
        obj = w.get_cluster_scoped("ClusterQueue", "team-c-cq")
        groups = obj["spec"]["resourceGroups"]
        groups[0]["flavors"][0]["resources"][0]["nominalQuota"] = "7500m"
        w.patch_cluster_scoped("ClusterQueue", "team-c-cq", {
            "metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]}, "spec": {"resourceGroups": groups}})
    done = runner.invoke(app, ["rebalance", "--apply", "--cohort", "c", "--format", "json"])
    assert done.exit_code == 0, done.output
    [c] = json.loads(done.stdout)["cohorts"]
    assert c["result"] == "no plan" and c["changes"] == [] and c["moved_gpus"] == 0
    assert c["error"] == "team-c-cq h100 nominalQuota is 7500m, not a whole number of GPUs: not planned"
    after = quotas()
    assert after == {**NOMINAL, "team-c-cq": after["team-c-cq"]} and str(after["team-c-cq"]) == "7.5"
