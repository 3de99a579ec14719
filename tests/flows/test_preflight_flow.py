"""The preflight flow in a Prefect run: Completed with its headline on a working setup, Failed on a broken one.

A broken setup fails none of the other flows (they decide nothing, every GPU workload unknown), so
this run's own state is what reaches the failure notification: it must end Failed, its message the
headline, its name the gist, each failed check in its log, the checks listed on its page, and the
failure notification sent.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuaas.cluster.runner import EmbeddedCluster
from tests.flows.conftest import Received
from tests.scenarios import point_at

pytestmark = [pytest.mark.integration, pytest.mark.flow]


def _run_page(flow_run_id: Any) -> Any:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, LogFilter, LogFilterFlowRunId
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=5)  # the run's log lines are sent in batches: send what is left now
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id])))
        run = client.read_flow_run(flow_run_id)
        logs = [log.message for log in client.read_logs(log_filter=LogFilter(
            flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))]
    return {a.key: a for a in found}, run, logs


def test_a_working_setup_completes_with_the_checks_on_the_run_page(
        reclaim_fleet: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch, prefect_harness: None) -> None:
    from flows.preflight import preflight

    point_at(reclaim_fleet, monkeypatch)
    state = preflight(return_state=True)
    assert state.is_completed(), state.message
    assert state.message == "Preflight: 12 checks: 7 ok, 3 warnings (permissions beyond need, admission policy, GPU telemetry), 2 skipped."
    artifacts, run, _ = _run_page(state.state_details.flow_run_id)
    page = artifacts["gpuaas-preflight"]
    assert page.description == state.message
    lines = str(page.data).splitlines()
    assert state.message not in str(page.data)  # the headline once: as the description, above the list
    assert [line.split("**")[1] for line in lines] == [
        "Kubernetes API and Kueue", "permissions", "permissions beyond need", "admission policy",
        "policy against the cluster", "accelerators and queues",
        "Prometheus", "Kueue metrics", "GPU telemetry", "OpenCost", "Pushgateway", "database"]
    assert lines[2].startswith("- **permissions beyond need** (warning): as embedded-admin: get secrets, create pods,")
    assert lines[3].startswith("- **admission policy** (warning): patch workloads.kueue.x-k8s.io, patch ")
    assert lines[5].startswith("- **accelerators and queues** (ok): no quota of or request for an accelerator but")
    assert lines[8].startswith("- **GPU telemetry** (warning): 2 of 17 GPU workloads have incomplete telemetry")
    assert run.name == "Preflight: 12 checks: 7 ok, 3 warnings, 2 skipped"


def test_telemetry_no_workload_can_use_fails_the_run_naming_what_to_set(
        reclaim_fleet: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch, prefect_harness: None,
        webhook: Received) -> None:
    from flows.preflight import preflight

    point_at(reclaim_fleet, monkeypatch, metrics__pod_labels='["container_pod"]')
    state = preflight(return_state=True)
    assert state.is_failed()
    assert state.message == ("Preflight: 12 checks: 7 ok, 2 warnings (permissions beyond need, admission policy), "
                             "1 failed (GPU telemetry), 2 skipped.")
    artifacts, run, logs = _run_page(state.state_details.flow_run_id)
    assert "set GPUAAS_METRICS__POD_LABELS" in artifacts["gpuaas-preflight"].data
    assert any(line.startswith("GPU telemetry: the ") and "set GPUAAS_METRICS__POD_LABELS" in line for line in logs)
    assert run.name == "Preflight: 12 checks: 7 ok, 2 warnings, 1 failed, 2 skipped"
    failure = state.result(raise_on_failure=False)  # what Prefect raises to a caller and logs: the headline
    assert type(failure).__name__ == "RunFailed" and str(failure) == state.message
    result = failure.result
    assert result["headline"] == state.message
    assert [c["check"] for c in result["checks"] if c["verdict"] == "failed"] == ["GPU telemetry"]
    # the failure notification fires, with the headline as what failed
    assert [(w["body"]["flow"], w["body"]["status"], w["body"]["what"]) for w in webhook] == [
        ("preflight", "failed", state.message)]
