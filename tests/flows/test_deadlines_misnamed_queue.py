"""The deadlines flow when a tenant under a change freeze is found by a ClusterQueue name the cluster lacks.

Scenario: ``tests/flows/deadline_scenario.py`` (cohort fc: holding ``fc-wide`` is what its plan takes). Tenant
forecast owns its Workloads through ``cluster_queues`` alone (no namespaces), so its freeze holds back their
holds only when that name is the queue's. Covers: spelt right, the freeze holds back every hold and the run
completes; misspelt (``forecast-qc``), an apply run writes no hold or demotion, its headline names the tenant,
the queue and the fix, and it ends Failed; a dry-run plans as before with the same line as a warning.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuaas.cluster.runner import EmbeddedCluster
from tests.actions.reclaim_scenario import writes
from tests.scenarios import point_at

pytestmark = [pytest.mark.integration, pytest.mark.flow]
TYPO = ("tenant forecast names ClusterQueue forecast-qc, which the cluster lacks: its change freeze would hold back "
        "no Workload queued there; fix tenants[forecast].cluster_queues in policy.yaml")


def frozen_forecast(cluster: EmbeddedCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, queue: str,
                    mode: str = "apply") -> None:
    wall = datetime.now(UTC).replace(microsecond=0)
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({
        "deadlines": {"mode": mode, "max_holds_per_run": 1, "release_margin_minutes": 30, "runtime_estimate_error": 1},
        "tenants": [{"name": "forecast", "cluster_queues": [queue]}],
        "freezes": [{"name": "launch", "start": (wall - timedelta(hours=1)).isoformat(),
                     "end": (wall + timedelta(hours=1)).isoformat(), "tenants": ["forecast"]}]}))
    point_at(cluster, monkeypatch, data_dir=tmp_path / "data", policy_file=policy)  # a store of its own


def run(cluster: EmbeddedCluster) -> tuple[bool, dict[str, Any]]:
    from flows import result_of
    from flows.deadlines import deadlines

    state = deadlines(at=cluster.clock.now(), return_state=True)
    return state.is_completed(), result_of(state.result(raise_on_failure=False))


def test_spelt_right_the_freeze_holds_back_every_hold(deadline_fleet: EmbeddedCluster, tmp_path: Path,
                                                      prefect_harness: None, monkeypatch: pytest.MonkeyPatch) -> None:
    frozen_forecast(deadline_fleet, tmp_path, monkeypatch, "forecast-cq")
    before = writes(deadline_fleet)
    completed, result = run(deadline_fleet)
    assert completed and result["mode"] == "apply" and result["misnamed_queues"] == []
    holds = [n for n in result["nudges"] if n["workload"].startswith("forecast/") and n["action"] in ("hold", "demote")]
    assert holds and {n["result"] for n in holds} == {"skipped"}
    assert writes(deadline_fleet) == before


def test_misspelt_an_apply_run_writes_no_hold_and_says_what_to_fix(deadline_fleet: EmbeddedCluster, tmp_path: Path,
                                                                   prefect_harness: None,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    frozen_forecast(deadline_fleet, tmp_path, monkeypatch, "forecast-qc")
    before = writes(deadline_fleet)
    completed, result = run(deadline_fleet)
    assert not completed  # Failed: the freeze is not what held the Workloads back, the refusal is
    assert result["headline"].startswith(f"No hold or demotion written: {TYPO}. ")
    assert result["refused"] is True and result["misnamed_queues"] == [TYPO]
    holds = [n for n in result["nudges"] if n["action"] in ("hold", "demote")]
    assert holds and all(n["result"] != "applied" for n in holds)
    assert writes(deadline_fleet) == before


def test_misspelt_a_dry_run_plans_as_before_and_warns(deadline_fleet: EmbeddedCluster, tmp_path: Path,
                                                      prefect_harness: None, monkeypatch: pytest.MonkeyPatch) -> None:
    frozen_forecast(deadline_fleet, tmp_path, monkeypatch, "forecast-qc", mode="dry-run")
    completed, result = run(deadline_fleet)
    assert completed and result["refused"] is False
    assert result["headline"].startswith(f"Warning: {TYPO}. ")
    assert any(n["action"] == "hold" and n["result"] == "planned" for n in result["nudges"])
