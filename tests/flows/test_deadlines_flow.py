"""The deadline plan from the live cluster: embedded cluster, real Prometheus and Pushgateway, Prefect.

Scenario: ``tests/flows/deadline_scenario.py`` (cohort fc holds on its GPUs in the plan's order, not in
Kueue's; cohort rush needs 4 more). Covers the ``deadlines`` flow's pools and workload names, the metrics on the Pushgateway,
and ``gpuaas plan deadlines --from-cluster`` printing the same answer.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.policies.deadlines import HOLD_ANNOTATION
from tests.scenarios import point_at

pytestmark = [pytest.mark.integration, pytest.mark.flow]


@pytest.fixture(scope="module")
def cluster(deadline_fleet: EmbeddedCluster) -> EmbeddedCluster:
    return deadline_fleet  # one cluster for the plan and nudge tests: each leaves no hold behind


@pytest.fixture()
def pointed_at(cluster: EmbeddedCluster, tmp_path: Path, pushgateway_url: str,
               monkeypatch: pytest.MonkeyPatch) -> EmbeddedCluster:
    return point_at(cluster, monkeypatch, data_dir=tmp_path, pushgateway_url=pushgateway_url)


def _pools(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["cohort"]: p for p in result["pools"]}


def test_flow_plans_each_cohort_and_pushes_the_scale_signal(pointed_at: EmbeddedCluster, prefect_harness: None,
                                                            pushgateway_url: str) -> None:
    from flows.deadlines import deadlines

    state = deadlines(at=pointed_at.clock.now(), return_state=True)
    assert state.is_completed(), state.message
    pools = _pools(state.result())
    assert set(pools) == {"fc", "rush"}
    fc, rush = pools["fc"], pools["rush"]
    assert fc["feasible"] and fc["extra_gpus"] == {"h100": 0} and fc["exact"] and fc["at_risk"] == []
    assert fc["capacity_gpus"] == 4
    running = {s["name"] for s in fc["schedule"] if s["running"]}
    pending = {s["name"]: s for s in fc["schedule"] if not s["running"]}
    assert len(running) == 2 and len(pending) == 3 and all(n.startswith("forecast/raycluster-fc-") for n in running | set(pending))
    late = [s for name, s in pending.items() if "-fc-late-" in name]
    [wide] = [s for name, s in pending.items() if "-fc-wide-" in name]
    assert len(late) == 2 and all(s["start"] == pytest.approx(3000, abs=90) for s in late)  # when the running two end
    assert wide["start"] == pytest.approx(6600, abs=90)  # after them, though Kueue would admit it first
    # Kueue alone gives the wide job the four GPUs first and both late ones miss (the nudges flow holds it).
    assert (fc["plan_on_time"], fc["kueue_order_on_time"]) == (5, 3)
    assert rush["extra_gpus"] == {"h100": 4} and rush["exact"] and len(rush["at_risk"]) == 2
    assert state.result()["pushed_samples"] == 6

    metrics = [line for line in httpx.get(f"{pushgateway_url}/metrics").text.splitlines()
               if 'job="gpuaas_deadlines"' in line]
    def value(name: str, cohort: str) -> float:
        [line] = [m for m in metrics if m.startswith(name + "{") and f'cohort="{cohort}"' in m]
        assert 'flavor="h100"' in line
        return float(line.rsplit(" ", 1)[1])
    assert value("gpuaas_extra_gpus_needed", "rush") == 4 and value("gpuaas_extra_gpus_needed", "fc") == 0
    assert value("gpuaas_deadlines_at_risk", "rush") == 2 and value("gpuaas_deadlines_at_risk", "fc") == 0
    assert value("gpuaas_deadline_capacity_gpus", "rush") == 4


def test_cli_from_cluster_prints_the_same_answer(pointed_at: EmbeddedCluster, prefect_harness: None) -> None:
    from gpuaas.cli.app import app

    events = len(pointed_at.store.list("Event"))
    before = datetime.now(UTC)  # a plan from the command line is for now, the wall clock's: it lies between
    result = CliRunner().invoke(app, ["plan", "deadlines", "--from-cluster", "--format", "json"])
    after = datetime.now(UTC)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert "nudges" not in doc and "released" not in doc  # a plan holds nothing: no empty list that reads as "none"
    pools = _pools(doc)
    assert pools["rush"]["extra_gpus"] == {"h100": 4} and pools["fc"]["extra_gpus"] == {"h100": 0}
    table = CliRunner().invoke(app, ["plan", "deadlines", "--from-cluster"])
    assert table.exit_code == 0, table.output
    flat = " ".join(table.stdout.split())
    assert "cohort rush, flavor h100: 4 GPUs" in table.stdout and "Extra GPUs needed: 4 h100" in flat
    assert "RayCluster rush/" in table.stdout  # the object, as everywhere else (the Workload with --wide)
    assert "Kueue's own order, on the same GPUs and estimates, would meet 3 of 5 deadlines." in flat  # pool fc
    assert flat.count("Kueue's own order") == 2  # one line under each pool's table: fc's and rush's
    # What the flow in apply mode would write now, shown without writing it: the wide job of fc held until its
    # planned start less the margin (Kueue alone would admit it first; rush is short of GPUs: nothing to hold).
    [hold] = doc["would"]
    assert (hold["action"], hold["result"]) == ("hold", "planned") and "-fc-wide-" in hold["workload"]
    [wide] = [s for s in pools["fc"]["schedule"] if s["name"] == hold["workload"]]
    release = datetime.fromisoformat(hold["release_at"]) - timedelta(seconds=wide["start"]) + timedelta(minutes=30)
    assert before - timedelta(minutes=1) <= release <= after + timedelta(minutes=1)  # the start less the margin
    assert "Nothing was written. A deadlines run in apply mode would now write this:" in flat
    assert "hold RayCluster forecast/fc-wide reason: cohort fc, flavor h100: planned start in" in flat
    assert not [o for o in pointed_at.store.list("Workload") if HOLD_ANNOTATION in (o["metadata"].get("annotations") or {})]
    assert len(pointed_at.store.list("Event")) == events  # nothing written


def test_file_and_from_cluster_together_is_a_usage_error(tmp_path: Path) -> None:
    from gpuaas.cli.app import app

    result = CliRunner().invoke(app, ["plan", "deadlines", str(tmp_path / "x.yaml"), "--from-cluster"])
    assert result.exit_code == 2
    assert result.stderr == "error: give a FILE or --from-cluster, not both; see gpuaas plan deadlines --help\n"
