"""prefect.yaml stays deployable: schema, entrypoints that load, parameters that match, valid schedules."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from prefect.cli.deploy._models import PrefectYamlModel
from prefect.client.schemas.schedules import CronSchedule
from prefect.flows import load_flow_from_entrypoint

ROOT = Path(__file__).resolve().parents[1]
DOC = yaml.safe_load((ROOT / "prefect.yaml").read_text())
DEPLOYMENTS = PrefectYamlModel.model_validate(DOC).deployments
ON_DEMAND = {"load_test": {"url": "http://127.0.0.1:8000/v1", "model": "m", "rates": [1, 2]}, "incident_review": {}}
"""Deployments that must never run on a schedule (a load test drives an endpoint to its limit), with
the parameters a person gives when starting one."""


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=[d.name for d in DEPLOYMENTS])
def test_deployment_entrypoint_loads_and_parameters_match(deployment: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    flow = load_flow_from_entrypoint(deployment.entrypoint, use_placeholder_flow=False)  # type: ignore[attr-defined]
    given = ON_DEMAND.get(deployment.name, {})  # type: ignore[attr-defined]
    flow.validate_parameters({**given, **(deployment.parameters or {})})  # type: ignore[attr-defined]
    if deployment.name in ON_DEMAND:  # type: ignore[attr-defined]
        assert not deployment.schedules, f"{deployment.name} must be on demand only"  # type: ignore[attr-defined]
        return
    assert deployment.schedules, f"{deployment.name} has no schedule"  # type: ignore[attr-defined]
    for schedule in deployment.schedules:  # type: ignore[attr-defined]
        if getattr(schedule, "cron", None):
            CronSchedule(cron=schedule.cron, timezone=schedule.timezone or "UTC")


def test_cost_report_runs_daily_over_one_day() -> None:
    """The day before, 00:00 to 00:00 UTC, run once OpenCost has priced its last minutes."""
    report = next(d for d in DEPLOYMENTS if d.name == "cost_report")
    assert [s.cron for s in report.schedules] == ["15 0 * * *"]  # type: ignore[union-attr]
    assert report.parameters == {"window": "1d", "whole_days": True}


def test_incident_review_is_on_demand_over_the_last_hour() -> None:
    review = next(d for d in DEPLOYMENTS if d.name == "incident_review")
    assert review.entrypoint == "flows/incident.py:incident_review" and not review.schedules
    assert review.parameters == {"start": "1h", "end": "now", "namespaces": [], "queues": [], "undo": []}


def test_collect_runs_every_five_minutes() -> None:
    collect = next(d for d in DEPLOYMENTS if d.name == "collect")
    assert [s.interval.total_seconds() for s in collect.schedules] == [300]  # type: ignore[union-attr]


@pytest.mark.flow
@pytest.mark.slow
def test_prefect_deploy_all_registers_the_schedules(prefect_harness: None, tmp_path: Path) -> None:
    """`prefect --no-prompt deploy --all` against a real Prefect server, as the README says to run it."""
    import os
    import subprocess
    import sys

    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL

    prefect = str(Path(sys.executable).with_name("prefect"))
    env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value()), "PREFECT_HOME": str(tmp_path)}
    env.pop("GPUAAS_PROJECT_DIR", None)
    for command in ([prefect, "work-pool", "create", "gpuaas", "--type", "process", "--overwrite"],
                    [prefect, "--no-prompt", "deploy", "--all"]):
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    with get_client(sync_client=True) as client:
        deployed = {d.name: d for d in client.read_deployments()}
        assert {"collect", "reclaim", "load_test", "cost_report", "incident_review"} <= set(deployed)
        assert deployed["load_test"].schedules == [] and deployed["incident_review"].schedules == []  # on demand only
        intervals = {name: [s.schedule.interval.total_seconds() for s in deployed[name].schedules]  # type: ignore[union-attr]
                     for name in ("collect", "reclaim")}
    assert intervals == {"collect": [300.0], "reclaim": [900.0]}
    _worker_run_with_a_missing_directory_says_why_in_the_run_log(env, tmp_path)


def _worker_run_with_a_missing_directory_says_why_in_the_run_log(env: dict[str, str], tmp_path: Path) -> None:
    """A real process worker runs the deployed pull step: a wrong GPUAAS_PROJECT_DIR is named in the run's log.

    Before, the run crashed with only "Process exited with status code: 1" in the UI.
    """
    import subprocess
    import sys
    import time

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    with get_client(sync_client=True) as client:
        deployment = client.read_deployment_by_name("collect/collect")
        # Nothing machine-specific was baked in: the stored step still names the variable.
        assert deployment.pull_steps == [{"tasks.pull.set_project_directory":
                                          {"directory": "{{ $GPUAAS_PROJECT_DIR }}"}}]
        run = client.create_flow_run_from_deployment(
            deployment.id, job_variables={"env": {"GPUAAS_PROJECT_DIR": "/opt/gpuaas-missing"}})
    prefect = str(Path(sys.executable).with_name("prefect"))
    worker = subprocess.run([prefect, "worker", "start", "--pool", "gpuaas", "--run-once"], cwd=tmp_path,
                            env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=240)
    assert worker.returncode == 0, worker.stdout[-2000:] + worker.stderr[-2000:]
    for broken in ("Logging error", "KeyError", "Formatting field not found"):  # the line is logged, not lost
        assert broken not in worker.stdout + worker.stderr, worker.stdout[-2000:] + worker.stderr[-2000:]
    with get_client(sync_client=True) as client:
        deadline = time.monotonic() + 90  # the run log arrives in batches, later on a loaded host
        while True:
            state = client.read_flow_run(run.id).state
            lines = [log.message for log in client.read_logs(
                log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run.id])))]
            if (state and state.is_final() and any("pull step failed" in m for m in lines)) \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    assert state is not None and state.type.value == "CRASHED", state  # the flow never loaded: Prefect's state
    why = [m for m in lines if "pull step failed" in m]
    assert why and "'/opt/gpuaas-missing' (from GPUAAS_PROJECT_DIR) does not exist" in why[0], lines


def test_rebalance_runs_nightly_at_two_in_a_stated_timezone() -> None:
    rebalance = next(d for d in DEPLOYMENTS if d.name == "rebalance")
    [schedule] = rebalance.schedules  # type: ignore[misc]
    assert schedule.cron == "0 2 * * *" and schedule.timezone  # type: ignore[union-attr]
    assert set(rebalance.parameters) == {"apply", "cohort", "history_days"}  # type: ignore[arg-type]
