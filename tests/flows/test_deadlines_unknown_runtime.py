"""A running job with no run time, from the live cluster: its end is unknown in every pool, never "now".

Two cohorts of 4 H100, each running a 2-GPU RayCluster with neither ``gpuaas.io/expected-runtime`` nor a
maximum execution time, admitted 10 min before the plan, and a best-effort RayCluster of 4 GPUs (30 min,
no deadline) waiting behind it. Cohort ``due`` also runs a job with a run time and a deadline; cohort
``open`` has no deadline at all. Both pools must say the same: the job's end is unknown, and so is the
start of the work waiting for its GPUs, in the table and in the JSON (``null``), and in the flow's answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaas.cluster.runner import EmbeddedCluster
from tests.scenarios import embedded, point_at

pytestmark = [pytest.mark.integration, pytest.mark.flow]


def _ray(name: str, tenant: str, **spec: object) -> dict[str, object]:
    return {"name": name, "kind": "RayCluster", "tenant": tenant, "gpus_per_pod": 2, "submit_at": "110m",
            "utilisation": {"profile": "constant", "value": 0.8}, **spec}


SCENARIO = {
    "name": "unknown-runtime",
    "flavors": [{"name": "h100"}],
    "pools": [{"name": "h100", "count": 2, "gpus_per_node": 8, "flavor": "h100", "gpu_hourly_price": 3.0}],
    "tenants": [
        {"name": "open", "cohort": "open", "quotas": [{"flavor": "h100", "gpus": 4, "borrowing_limit": 0}]},
        {"name": "due", "cohort": "due", "quotas": [{"flavor": "h100", "gpus": 4, "borrowing_limit": 0}]},
    ],
    "workloads": [
        _ray("open-run", "open"),
        _ray("open-later", "open", gpus_per_pod=4, submit_at="115m", duration="30m", expected_runtime="30m"),
        _ray("due-run", "due"),
        _ray("due-job", "due", duration="1h", expected_runtime="1h", deadline="230m"),
        _ray("due-later", "due", gpus_per_pod=4, submit_at="115m", duration="30m", expected_runtime="30m"),
    ],
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with embedded(tmp_path_factory.mktemp("unknown-runtime"), SCENARIO, seed=3,
                  history=timedelta(hours=2)) as running:
        yield running


@pytest.fixture()
def pointed_at(cluster: EmbeddedCluster, tmp_path: Path, pushgateway_url: str,
               monkeypatch: pytest.MonkeyPatch) -> EmbeddedCluster:
    return point_at(cluster, monkeypatch, data_dir=tmp_path, pushgateway_url=pushgateway_url)


def _by_object(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``RayCluster open/open-run`` -> its schedule entry, over every pool."""
    names: dict[str, str] = doc["objects"]
    return {names[s["name"]]: s for pool in doc["pools"] for s in pool["schedule"]}


def _assert_unknown_in_both_pools(doc: dict[str, Any]) -> None:
    assert {p["cohort"] for p in doc["pools"]} == {"open", "due"}
    entries = _by_object(doc)
    for cohort in ("open", "due"):
        running, waiting = entries[f"RayCluster {cohort}/{cohort}-run"], entries[f"RayCluster {cohort}/{cohort}-later"]
        assert running["running"] and running["start"] < 0 and running["end"] is None
        assert (waiting["start"], waiting["end"]) == (None, None)
    known = entries["RayCluster due/due-job"]
    assert known["running"] and 0 < known["end"] < known["deadline"]  # a known run time keeps its end


def test_plan_from_cluster_says_the_end_is_unknown_in_every_pool(pointed_at: EmbeddedCluster,
                                                                  prefect_harness: None) -> None:
    from gpuaas.cli.app import app

    result = CliRunner().invoke(app, ["plan", "deadlines", "--from-cluster", "--format", "json"])
    assert result.exit_code == 0, result.output
    _assert_unknown_in_both_pools(json.loads(result.stdout))

    table = CliRunner().invoke(app, ["plan", "deadlines", "--from-cluster"], env={"COLUMNS": "220"})
    assert table.exit_code == 0, table.output
    rows = {cells[0]: cells for line in table.stdout.splitlines() if line.startswith("│")
            for cells in [[c.strip() for c in line.strip("│").split("│")]]}
    for cohort in ("open", "due"):
        running, waiting = rows[f"RayCluster {cohort}/{cohort}-run"], rows[f"RayCluster {cohort}/{cohort}-later"]
        assert running[3].startswith("-") and running[4:] == ["unknown", "-", "running, end unknown"]  # began ~10 min ago
        assert waiting[3:] == ["unknown", "unknown", "-", "best effort, start unknown"]
    assert rows["RayCluster due/due-job"][4].startswith("+") and rows["RayCluster due/due-job"][6] == "running"


def test_the_deadlines_flow_plans_and_audits_the_same(pointed_at: EmbeddedCluster, prefect_harness: None) -> None:
    """The flow itself (dry-run, nudges decided and audited): the same pools, and it completes."""
    from flows.deadlines import deadlines

    state = deadlines(at=pointed_at.clock.now(), return_state=True)
    assert state.is_completed(), state.message
    _assert_unknown_in_both_pools(state.result())
