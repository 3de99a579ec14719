"""Failure notifications: the Prefect automation file and the JSON webhook.

A collect run whose every source is unreachable fails; its on_failure hook POSTs the flow, the
run, what failed and a link to the run to a real HTTP receiver on 127.0.0.1. The degraded case (a
completed run that wrote nothing) is in ``test_write_concurrency.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from prefect.events.schemas.automations import AutomationCore

from tasks.notify import degraded_reason
from tests.flows.conftest import Received

ROOT = Path(__file__).resolve().parents[2]


def test_the_automation_file_is_what_prefect_automation_create_reads() -> None:
    data = yaml.safe_load((ROOT / "deployments" / "prefect" / "automations.yaml").read_text())
    automations = [AutomationCore.model_validate(a) for a in data["automations"]]
    failed, degraded = automations
    assert set(failed.trigger.expect) == {"prefect.flow-run.Failed", "prefect.flow-run.Crashed"}  # type: ignore[union-attr]
    assert set(degraded.trigger.expect) == {"gpuaas.flow-run.degraded"}  # type: ignore[union-attr]
    assert all(a.actions[0].type == "send-notification" for a in automations)


def test_degraded_reason_names_what_went_wrong() -> None:
    assert degraded_reason({"degraded": False, "decisions": []}) is None
    assert degraded_reason({"degraded": True, "snapshot_id": 7, "source_errors": {"opencost": "refused"}}) \
        == "degraded snapshot 7: opencost failed"
    failed = {"kind": "RayCluster", "namespace": "a", "name": "r", "result": "failed"}
    assert degraded_reason({"decisions": [failed, {**failed, "result": "applied"}]}) \
        == "1 actions failed (RayCluster a/r)"


def test_a_degraded_run_without_a_failed_source_or_a_snapshot_says_what_it_is() -> None:
    """A blind reclaim (most GPU workloads unknown: no source failed) and a cost report (no snapshot) with no GPU
    telemetry: the notification neither blames "a source" nor names "snapshot None"; it says the run's headline."""
    blind = "Degraded: 9 of 10 GPU workloads unknown (no GPU telemetry matched them); nothing reclaimed."
    reason = degraded_reason({"degraded": True, "snapshot_id": 7, "source_errors": {}, "decisions": [],
                              "headline": blind})
    assert reason == f"degraded snapshot 7: {blind}"
    cost = "Degraded: no GPU telemetry in Prometheus in the window. GPU-hours unknown in the 24 h window."
    reason = degraded_reason({"degraded": True, "source_errors": {}, "headline": cost})
    assert reason == f"degraded run: {cost}"
    assert degraded_reason({"degraded": True, "source_errors": {"opencost": "refused"}, "headline": cost}) \
        == "degraded run: opencost failed"


@pytest.mark.flow
def test_a_failed_run_posts_flow_run_cause_and_link(prefect_harness: None, webhook: Received,
                                                    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    from prefect.settings import PREFECT_UI_URL, temporary_settings

    from flows.collect import collect

    for name, value in {"PROMETHEUS_URL": "http://127.0.0.1:9", "OPENCOST_URL": "http://127.0.0.1:9",
                        "KUBECONFIG": str(tmp_path / "missing-kubeconfig"), "RETRIES": "0", "NVML": "off"}.items():
        monkeypatch.setenv(f"GPUAAS_{name}", value)
    with temporary_settings(updates={PREFECT_UI_URL: "http://127.0.0.1:4200"}):
        state = collect(return_state=True)
    assert state.is_failed()
    assert len(webhook) == 1 and webhook[0]["content_type"] == "application/json"
    body = webhook[0]["body"]
    run_id = str(state.state_details.flow_run_id)
    assert body["flow"] == "collect" and body["status"] == "failed" and body["flow_run_id"] == run_id
    assert body["flow_run"] and "source" in body["what"].lower()
    assert body["url"] == f"http://127.0.0.1:4200/runs/flow-run/{run_id}"
    assert "s3cret-hook-token" not in caplog.text
